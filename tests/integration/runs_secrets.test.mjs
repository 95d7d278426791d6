// A user's secrets for runs (src/store/user_secrets.c, src/runs/secrets.c): set with `user
// secret`, sealed at rest and never listed with their values; a run's setup sees every one that
// applies to its repository in its environment, its agent only those marked agent (a warm
// agent's server is replaced when they change); what the setup left running is gone before the
// agent starts; and no value reaches get_result, the timeline, the run page, the diff, a
// notification or the server's log. One server and one session; real OpenCode with a scripted
// fake upstream, whose requests carry the agent's tool results back to the test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, tempDir, removeDataDir, cli, dbDump, FIXTURE_BIN } from '../lib/server.mjs';
import { ok, finished } from '../lib/runs.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { startReceiver } from '../lib/notify-receiver.mjs';
import { CookieJar, request, forms, setPassword, signIn } from '../lib/oauth.mjs';
import { gitAsync } from '../lib/git.mjs';

const SETUP_ONLY = 'setup-only-9f3kq27xwv';
const AGENT_SEEN = 'agent-sees-4hz81mwpqe';
const AGENT_NEXT = 'agent-next-7tq2c0lzar';
const OTHER_REPO = 'other-repo-v93jdk2mso';
const sha = (s) => createHash('sha256').update(s).digest('hex');

let fake, router, server, scratch, repo, session, user, receiver, setOut = '';
const ENV = { NOTIFY_TEST_ALLOW_LOOPBACK: '1', NOTIFY_RETRY_SECONDS: '1' };

// `user secret` under the sanitized build; fill: the same by the release build, for the bulk of
// a test's setup (the secrets that bring a user up to a cap)
function secret(args, input) {
  return cli(['user', 'secret', ...args, '--data-dir', server.dataDir], { input, env: ENV });
}
function fill(args, input) {
  return cli(['user', 'secret', ...args, '--data-dir', server.dataDir], { input, env: ENV, bin: FIXTURE_BIN });
}

function sql(query) {
  const out = execFileSync('sqlite3', ['-json', path.join(server.dataDir, 'sandbox-mcp.db'), query],
    { encoding: 'utf8' });
  return out.trim() ? JSON.parse(out) : [];
}

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  receiver = await startReceiver();
  scratch = tempDir('smcp-secrets-');
  server = await startServer({ env: { ...ENV, ANTHROPIC_API_KEY: 'sk-ant-test-key',
    ANTHROPIC_BASE_URL: fake.url, RUNS_ALLOW_LOCAL_REPOS: '1' } });
  user = server.stderr().match(/store first-user user=(\S+)/)[1];
  const add = cli(['user', 'notify', 'add', user, 'webhook', `http://127.0.0.1:${receiver.port}/hook`,
    '--data-dir', server.dataDir], { env: ENV });
  assert.equal(add.status, 0, add.stderr);
  // a repository of its own (not on GitHub: only "*" secrets apply to it)
  repo = path.join(scratch, 'plum.git');
  const work = mkdtempSync(path.join(tmpdir(), 'smcp-secrets-work-'));
  await gitAsync(['init', '-q', '--bare', repo]);
  await gitAsync(['symbolic-ref', 'HEAD', 'refs/heads/main'], repo);
  await gitAsync(['init', '-q', '-b', 'main', work]);
  writeFileSync(path.join(work, 'README.md'), '# plum\n');
  await gitAsync(['add', '-A'], work);
  await gitAsync(['commit', '-q', '-m', 'Initial commit'], work);
  await gitAsync(['push', '-q', repo, 'main'], work);
  rmSync(work, { recursive: true, force: true });
  // the secrets every test reads (a value with its line end, as a pipe gives it)
  for (const [args, value] of [[['SETUP_ONLY_X'], `${SETUP_ONLY}\n`], [['AGENT_SEEN_X', '--agent'], AGENT_SEEN],
    [['OTHER_REPO_X', '--repos', 'acme/*,octo/web-*'], OTHER_REPO]]) {
    const r = secret(['set', user, ...args], value);
    assert.equal(r.status, 0, r.stderr);
    setOut += r.stdout;
  }
});

after(async () => {
  await server?.stop();
  if (server) removeDataDir(server.dataDir);
  await fake?.close();
  await receiver?.close?.();
  rmSync(scratch, { recursive: true, force: true });
});

test('user secret: names are checked, values come from stdin only, sealed, and never listed', () => {
  // (the three secrets the runs use were set in before())
  assert.match(setOut, /secret SETUP_ONLY_X of \S+ set for \* \(sealed; it is not shown again\)/);
  let r;
  for (const [name, re] of [['PATH', /sets itself or that the sandbox needs/],
    ['LD_PRELOAD', /begins like those the server sets/], ['SANDBOX_MCP_PROXY_TOKEN', /begins like/],
    ['OPENCODE_CONFIG_CONTENT', /begins like/], ['HTTPS_PROXY', /sets itself/],
    ['lower', /not an environment variable's/], ['9X', /not an environment variable's/],
    ['A'.repeat(65), /longer than 64/]]) {
    r = secret(['set', user, name], 'value-1234');
    assert.equal(r.status, 2, name);
    assert.match(r.stderr, re, name);
  }
  r = secret(['set', user, 'BAD_REPOS', '--repos', 'acme'], 'value-1234');
  assert.equal(r.status, 2);
  assert.match(r.stderr, /'acme' is not a repository pattern/);
  r = secret(['set', user, 'EMPTY_X'], '');
  assert.equal(r.status, 2);
  assert.match(r.stderr, /no value on standard input/);
  r = secret(['set', user, 'NUL_X'], 'ab\0cd');
  assert.equal(r.status, 2);
  assert.match(r.stderr, /NUL byte/);
  r = secret(['list', user]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /AGENT_SEEN_X\s+repos=\* agent=yes/);
  assert.match(r.stdout, /OTHER_REPO_X\s+repos=acme\/\* octo\/web-\* agent=no/);
  assert.match(r.stdout, /SETUP_ONLY_X\s+repos=\* agent=no/);
  for (const v of [SETUP_ONLY, AGENT_SEEN, OTHER_REPO]) {
    assert.ok(!r.stdout.includes(v), 'a listing never shows a value');
    assert.ok(!dbDump(server).includes(v), 'the database holds no value in the clear');
  }
  r = secret(['list', user, '--agent']);
  assert.equal(r.status, 2);
  r = secret(['delete', user, 'NOPE_X']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no secret 'NOPE_X' is set/);
});

test('the account page lists, adds and deletes secrets, never showing a value', async () => {
  const VALUE = 'page-value-+/=&%~!q8w7e6r5';
  setPassword(server, user, 'secrets page password 1');
  const jar = new CookieJar();
  assert.equal((await signIn(server, jar, { name: user, password: 'secrets page password 1' })).status, 303);
  const card = (html) => html.slice(html.indexOf('<section class="card" id="secrets">'));
  let page = await request(server, '/account', { jar });
  assert.equal(page.status, 200);
  assert.match(card(page.text), /<code>AGENT_SEEN_X<\/code><\/strong><br><span class="muted small">every repository · setup and agent/);
  assert.match(card(page.text), /<code>OTHER_REPO_X<\/code><\/strong><br><span class="muted small">acme\/\* octo\/web-\* · setup only/);
  for (const v of [SETUP_ONLY, AGENT_SEEN, OTHER_REPO]) assert.ok(!page.text.includes(v));
  const setForm = forms(page.text).find((f) => f.action === '/account/secret/set');
  assert.deepEqual(Object.keys(setForm.fields), ['csrf']);
  assert.deepEqual(setForm.inputs.sort(), ['agent', 'csrf', 'name', 'repos', 'value']);
  assert.match(card(page.text), /<input name="value" type="password" autocomplete="off"[^>]*>/);
  const send = async (action, form) => {
    const r = await request(server, `/account/secret/${action}`, { jar, form });
    assert.ok(!r.text.includes(VALUE) && !(r.headers.get('location') ?? '').includes(VALUE));
    return r;
  };
  // without the page's CSRF token nothing is done
  let r = await send('set', { name: 'PAGE_X', value: VALUE });
  assert.equal(r.status, 403);
  const csrf = setForm.fields.csrf;
  r = await send('set', { csrf, name: 'PATH', value: VALUE });
  assert.equal(r.status, 400);
  assert.match(card(r.text), /Not saved: the name is one the server sets itself/);
  r = await send('set', { csrf, name: 'PAGE_X', value: VALUE, repos: 'nope' });
  assert.equal(r.status, 400);
  assert.match(card(r.text), /is not a repository pattern/);
  r = await send('set', { csrf, name: 'PAGE_X', value: VALUE, repos: 'acme/site', agent: '1' });
  assert.equal(r.status, 303);
  assert.equal(r.location.pathname + r.location.search, '/account?done=secret-set');
  page = await request(server, r.location.pathname + r.location.search, { jar });
  assert.match(page.text, /The secret is saved\./);
  assert.match(card(page.text), /<code>PAGE_X<\/code><\/strong><br><span class="muted small">acme\/site · setup and agent/);
  assert.ok(!page.text.includes(VALUE));
  assert.match(secret(['list', user]).stdout, /PAGE_X\s+repos=acme\/site agent=yes size=26/);
  assert.ok(!dbDump(server).includes(VALUE));
  assert.ok(!server.stderr().includes(VALUE));
  const del = forms(page.text).find((f) => f.action === '/account/secret/delete' && f.fields.name === 'PAGE_X');
  r = await send('delete', del.fields);
  assert.equal(r.status, 303);
  assert.doesNotMatch(secret(['list', user]).stdout, /PAGE_X/);
  r = await send('delete', del.fields);
  assert.equal(r.status, 200);
  assert.match(r.text, /There was no such secret to delete\./);
});

test('user secret: the caps on a value, on the number of secrets and on their total size', () => {
  const name = 'capper';
  assert.equal(cli(['user', 'add', name, '--data-dir', server.dataDir]).status, 0);
  let r = secret(['set', name, 'BIG_X'], 'v'.repeat(16385));
  assert.equal(r.status, 2);
  assert.match(r.stderr, /the value is longer than 16384 bytes; nothing was changed/);
  for (let i = 0; i < 16; i++) {
    r = fill(['set', name, `FULL_${i}`], 'f'.repeat(16384));
    assert.equal(r.status, 0, r.stderr);
  }
  r = secret(['set', name, 'FULL_16'], 'ffff');
  assert.equal(r.status, 1);
  assert.match(r.stderr, /at most 262144 bytes of values in all/);
  // replacing one is counted without its old value
  r = secret(['set', name, 'FULL_0'], 'small');
  assert.equal(r.status, 0, r.stderr);
  for (let i = 1; i < 16; i++) assert.equal(fill(['delete', name, `FULL_${i}`]).status, 0);
  for (let i = 1; i < 100; i++) {
    r = fill(['set', name, `MANY_${i}`], `value-${i}`);
    assert.equal(r.status, 0, r.stderr);
  }
  r = secret(['set', name, 'MANY_100'], 'value-100');
  assert.equal(r.status, 1);
  assert.match(r.stderr, /a user keeps at most 100 secrets: delete one first/);
  r = secret(['set', name, 'MANY_1'], 'replaced');
  assert.equal(r.status, 0, r.stderr);
});

// A run of the session whose setup is setup and whose agent runs command with bash, then says
// text; returns its result, its events and what the agent's tool printed.
async function runWith(marker, setup, command, text = 'Done.') {
  const script = router.add(marker, [
    { tool: 'bash', input: { command, description: 'Look' } },
    { text },
  ]);
  const t0 = Date.now();
  const started = await ok(server, 'run_task', { task: `${marker}: look`, repository: repo,
    pull_request: 'none', setup, ...(session ? { session_id: session } : {}) });
  session = started.session_id;
  const r = await finished(server, started.run_id);
  // A run of seconds that took minutes (a continued run after a secret change once took ten,
  // and passed): the server's log, to show where it waited. No value of a secret is in it (the
  // first run's test checks the log).
  if (Date.now() - t0 > 60000)
    console.log(`${marker} took ${Math.round((Date.now() - t0) / 1000)} s; the server's log:\n`
      + server.stderr().split('\n').slice(-400).join('\n'));
  const evs = sql(`SELECT type, summary, raw FROM run_events WHERE run_id = '${started.run_id}' ORDER BY seq`);
  // this run's own tool results (a continued conversation carries the earlier runs' too)
  const ids = new Set(script.toolCalls.map((c) => c.id));
  const results = script.requests.flatMap((q) => toolResults(q.body))
    .filter((t) => ids.has(t.tool_use_id)).map((t) => t.text).join('\n');
  const diag = JSON.stringify({ r, evs: evs.map((e) => [e.type, e.summary]) }).slice(0, 4000);
  return { started, r, evs, results, diag };
}

const AGENT_CMD = 'echo "sees:$AGENT_SEEN_X"; echo "marker:$(cat /workspace/marker)"; ' +
  'echo "left:$(grep -l SETUP_ONLY_X= /proc/[0-9]*/environ 2>/dev/null | wc -l)"; env; ' +
  'echo "$AGENT_SEEN_X" > leak.txt';

test('setup sees the secrets, the agent only those marked, and no value leaves the run', async () => {
  // the setup checks its secrets without printing them (a digest), then prints one to be
  // redacted and leaves a process behind that holds the secrets in its environment
  const setup = 'printf %s "$SETUP_ONLY_X" | sha256sum | cut -c1-64 > /workspace/marker\n' +
    'test -z "$OTHER_REPO_X" && echo other-absent >> /workspace/marker\n' +
    'echo "setup says $SETUP_ONLY_X and $AGENT_SEEN_X"\n' +
    'sleep 100000 &\n';
  const { started, r, evs, results, diag } = await runWith('plum-one', setup, AGENT_CMD,
    `Done; it was ${AGENT_SEEN}.`);
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.setup.exit_status, 0, diag);
  // what the agent's tool printed went back to the model unredacted: the agent saw it
  assert.match(results, new RegExp(`sees:${AGENT_SEEN}`), results.slice(0, 3000));
  assert.ok(results.includes(`marker:${sha(SETUP_ONLY)}`), results.slice(0, 3000));
  assert.match(results, /other-absent/);
  assert.match(results, /left:0\b/, 'nothing of the setup outlived it');
  assert.ok(!results.includes(SETUP_ONLY), 'the agent does not see an unmarked secret');
  assert.ok(!results.includes('SETUP_ONLY_X'), 'not even its name');
  assert.ok(!results.includes(OTHER_REPO), 'nor one for other repositories');
  // and nothing the run keeps or shows has a value
  const end = evs.find((e) => e.type === 'setup_end');
  assert.match(JSON.parse(end.raw).output, /setup says \[redacted\]x+ and \[redacted\]x+/, diag);
  const page = await (await fetch(r.web_url)).text();
  const diff = sql(`SELECT diff FROM runs WHERE id = '${started.run_id}'`)[0].diff || '';
  assert.match(diff, /leak\.txt/, 'the diff has the file');
  const hook = await receiver.waitFor((q) => q.json?.run?.id === started.run_id ||
    q.body.includes(started.run_id), 'the run\'s notification');
  const kept = { result: JSON.stringify(r), events: JSON.stringify(evs), page, diff,
    notification: hook.map((q) => q.body).join('\n'), log: server.stderr() + server.stdout() };
  for (const [where, text] of Object.entries(kept))
    for (const v of [SETUP_ONLY, AGENT_SEEN])
      assert.ok(!text.includes(v), `${where} holds a secret's value`);
  assert.match(kept.result + kept.events, /\[redacted\]/);
});

test('a changed agent secret reaches the next run\'s agent, and one unmarked no longer does', async () => {
  let s = secret(['set', user, 'AGENT_SEEN_X', '--agent'], AGENT_NEXT);
  assert.equal(s.status, 0, s.stderr);
  let { r, results, diag } = await runWith('plum-two', 'true', 'echo "sees:$AGENT_SEEN_X"');
  assert.equal(r.status, 'succeeded', diag);
  assert.match(results, new RegExp(`sees:${AGENT_NEXT}`), results.slice(0, 2000));
  s = secret(['set', user, 'AGENT_SEEN_X'], AGENT_NEXT);
  assert.equal(s.status, 0, s.stderr);
  ({ r, results, diag } = await runWith('plum-three', 'true', 'echo "sees:$AGENT_SEEN_X."'));
  assert.equal(r.status, 'succeeded', diag);
  assert.match(results, /sees:\./, results.slice(0, 2000));
  assert.ok(!results.includes(AGENT_NEXT));
});
