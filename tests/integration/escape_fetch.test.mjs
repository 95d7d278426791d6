// What the server fetches on a user's behalf, and the operator's credentials and keys:
//  - a run's repository is cloned only from public addresses, unless the operator's FETCH_ALLOW
//    names more, checked on the resolved address (a trap listener counts connections);
//  - GITHUB_TOKEN serves only the repositories on GITHUB_REPOS, for clones and the proxy, and a
//    run's proxy token opens its own repository only;
//  - the host template carries no private keys and no git system configuration;
//  - view tokens and proxy tokens are signed with keys of their own.
// Everything here connects to loopback listeners the test opens itself; whether an address is
// public is the business of the policy's unit tests (tests/unit/test_egress.c). The agent is
// Codex (runs.codexEnv), which starts in well under a second: what is tested is the fetch, the
// same for every agent.
import { test, describe, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startServer, rpc, cli, tempDir } from '../lib/server.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { bareRepo, startGitServer } from '../lib/git.mjs';
import { cancelUnfinished, codexEnv } from '../lib/runs.mjs';

const GH_TOKEN = 'ghp_operator_token_for_listed_repos_only';
const GH_AUTH = `Basic ${Buffer.from(`x-access-token:${GH_TOKEN}`).toString('base64')}`;
const LEAK = 'internal-secret-banner-5e1f';
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

let fake, router, server, trap, gitsrv, scratch, session, noRepo, noRepoRun;
let nextId = 1;

// A listener that counts connections and never answers.
async function startTrap(host = '127.0.0.1') {
  const t = { connections: 0 };
  t.server = net.createServer((sock) => { t.connections++; sock.destroy(); });
  await new Promise((r) => t.server.listen(0, host, r));
  t.port = t.server.address().port;
  return t;
}

// The git server's answers of its own: /acme/leaky.git a protocol error whose text must not reach
// the user, /acme/moved.git a redirect to `moved`.
function gitRoutes(moved) {
  return (req, res, u) => {
    if (u.pathname.startsWith('/acme/moved.git/')) {
      res.writeHead(302, { location: `${moved}${u.pathname.replace('/acme/moved.git', '/acme/widget.git')}${u.search}` });
      res.end();
      return true;
    }
    if (u.pathname.startsWith('/acme/leaky.git/')) {
      const pkt = (s) => `${(s.length + 4).toString(16).padStart(4, '0')}${s}`;
      res.writeHead(200, { 'content-type': 'application/x-git-upload-pack-advertisement' });
      res.end(`${pkt('# service=git-upload-pack\n')}0000${pkt(`ERR ${LEAK}\n`)}`);
      return true;
    }
    return false;
  };
}

async function tool(name, args = {}) {
  const r = await rpc(server, { jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name, arguments: args } });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.body && r.body.result, r.text);
  return r.body.result;
}

const text = (res) => (res.content || []).map((c) => c.text || '').join('');

async function runTask(args) {
  const res = await tool('run_task', args);
  assert.equal(res.isError, undefined, `run_task ${JSON.stringify(args)}: ${text(res)}`);
  return res.structuredContent;
}

async function refusedTask(args, re) {
  const res = await tool('run_task', args);
  assert.equal(res.isError, true, `run_task ${args.repository} was not refused: ${text(res)}`);
  assert.match(text(res), re);
  return text(res);
}

// What a run's agent reads at the proxy's git service with its token: acme/widget and
// acme/gizmo are on GITHUB_REPOS, other/secret is not.
const PROBE = 'for p in acme/widget acme/gizmo other/secret; do '
  + 'curl -s -o /dev/null -w "$p=%{http_code} " -u "x:$SANDBOX_MCP_PROXY_TOKEN" '
  + '"http://127.0.0.1:8788/proxy/github/$p.git/info/refs?service=git-upload-pack"; done';
const probed = (s) => toolResults(s.requests[1].body).at(-1).text.trim();

async function waitRun(runId) {
  for (;;) {
    const res = await tool('get_result', { run_id: runId, wait_seconds: 30 });
    const r = res.structuredContent;
    assert.ok(r, text(res));
    if (TERMINAL.has(r.status)) return r;
  }
}

before(async () => {
  scratch = tempDir('smcp-fetch-');
  // bare repositories under git/, each with one commit on main
  for (const rel of ['acme/widget', 'acme/gadget', 'acme/gizmo', 'other/thing', 'other/secret', 'plain'])
    await bareRepo(path.join(scratch, 'git', `${rel}.git`), { readme: `# ${rel}\n`, message: `${rel} initial` });
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  trap = await startTrap();
  gitsrv = await startGitServer(path.join(scratch, 'git'), { route: gitRoutes(`http://127.0.0.1:${trap.port}`) });
  // The git server stands in for GitHub (GITHUB_BASE_URL) and is the one loopback port the
  // operator allows; the trap's port is not.
  server = await startServer({ env: {
    ...codexEnv(fake.url),
    GITHUB_TOKEN: GH_TOKEN, GITHUB_BASE_URL: gitsrv.url, GITHUB_REPOS: 'acme/*',
    FETCH_ALLOW: `127.0.0.1:${gitsrv.port}`,
  } });
  // The session the runs' tests go on in (see describe('runs')), made by a run without a
  // repository, whose agent probes what its token opens at the proxy.
  noRepo = router.add('fetch-proxy-none', [
    { tool: 'bash', input: { command: PROBE, description: 'Probe' } }, { text: 'Probed.' }]);
  const first = await runTask({ task: 'fetch-proxy-none: x' });
  noRepoRun = await waitRun(first.run_id);
  session = first.session_id;
});

after(async () => {
  if (process.env.SHOW_STDERR) console.log(server?.stderr());
  await server?.stop();
  await fake?.close();
  await gitsrv?.close();
  await new Promise((r) => trap?.server.close(r));
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// The ids of the user's runs, newest first.
async function runIds() {
  const runs = await tool('list_runs', { limit: 100 });
  assert.equal(runs.structuredContent.has_more, false, text(runs));
  return runs.structuredContent.runs.map((r) => r.run_id);
}

test('a repository on a loopback address is refused at run_task, and nothing connects', async () => {
  const had = await runIds();
  await refusedTask({ task: 'x', repository: `https://127.0.0.1:${trap.port}/acme/widget.git` },
    /cannot clone .*: 127\.0\.0\.1 is a loopback address, which this server does not fetch from; an operator may allow it with FETCH_ALLOW/);
  await refusedTask({ task: 'x', repository: `https://[::1]:${trap.port}/acme/widget.git` },
    /::1 is a loopback address/);
  await refusedTask({ task: 'x', repository: `https://[::ffff:127.0.0.1]:${trap.port}/a/b.git` },
    /127\.0\.0\.1 is a loopback address/);
  // allowed, but on another port only
  await refusedTask({ task: 'x', repository: `http://127.0.0.1:${trap.port}/acme/widget.git` },
    /loopback address/);
  // Refused before a run was written: the user's runs are the ones they had before these calls
  // (the test's user is the server's only one), so no clone is queued that could connect later.
  assert.deepEqual(await runIds(), had);
  assert.equal(trap.connections, 0);
});

test('a name that resolves to a loopback address fails the run before git connects', async () => {
  const started = await runTask({ task: 'fetch-localhost: x', repository: `https://localhost:${trap.port}/acme/widget.git` });
  const r = await waitRun(started.run_id);
  assert.equal(r.status, 'failed', JSON.stringify(r));
  assert.match(r.result.error,
    /cannot clone '.*': 'localhost' resolves to (127\.0\.0\.1|::1), a loopback address, which this server does not fetch from; an operator may allow it with FETCH_ALLOW/);
  assert.equal(trap.connections, 0);
});

test('file://, ssh://, git://, ext:: and scp-style repositories are refused', async () => {
  const own = await startTrap(); // this test's own count
  for (const repository of [
    `file://${path.join(scratch, 'git', 'plain.git')}`,
    path.join(scratch, 'git', 'plain.git'),
    `ssh://git@127.0.0.1:${own.port}/acme/widget.git`,
    `git@127.0.0.1:acme/widget.git`,
    `git://127.0.0.1:${own.port}/acme/widget.git`,
    'ext::true',
  ])
    await refusedTask({ task: 'x', repository }, /https:\/\/|local repositories/);
  await new Promise((r) => own.server.close(r));
  assert.equal(own.connections, 0);
});

// The runs that need an agent go on in one session, made in before(), so in one sandbox (every
// new session starts one). A run that needs a repository names it (a run without
// one works where the session's newest run did), and none asks for a pull request (a session
// delivering to one repository's branch takes no run of another). The tests go one at a time,
// so that each has the session to itself and its runs go in the order it asks for them.
describe('runs', { concurrency: 1 }, () => {
  const inSession = (args) => runTask({ ...args, pull_request: 'none', session_id: session });
  // A test that failed half-way may leave a run of its own in the session: cancelled, so that
  // the next test's runs do not wait behind it.
  afterEach(() => cancelUnfinished(server, { session }));

  test('with FETCH_ALLOW the local repository clones; git\'s own words stay out of the error', async () => {
    const s = router.add('fetch-allowed', [
      { tool: 'bash', input: { command: 'cat README.md', description: 'Read' } },
      { text: 'Read it.' },
    ]);
    const ok = await inSession({ task: 'fetch-allowed: read', repository: `${gitsrv.url}/plain.git` });
    // in the same session (its sandbox and agent), after the first run
    const leaky = await inSession({ task: 'fetch-leaky: read', repository: `${gitsrv.url}/acme/leaky.git` });
    const r = await waitRun(ok.run_id);
    assert.equal(r.status, 'succeeded', JSON.stringify(r, null, 1));
    assert.equal(toolResults(s.requests[1].body).at(-1).text.trim(), '# plain');
    const l = await waitRun(leaky.run_id);
    assert.equal(l.status, 'failed', JSON.stringify(l));
    assert.ok(gitsrv.seen('/acme/leaky.git/').length >= 1, 'the leaky server was asked');
    assert.match(l.result.error, /^cannot clone '.*leaky\.git': /);
    assert.ok(!JSON.stringify(l).includes(LEAK), JSON.stringify(l));
  });

  test('a redirect is not followed', async () => {
    const started = await runTask({ task: 'fetch-moved: x', repository: `${gitsrv.url}/acme/moved.git` });
    const r = await waitRun(started.run_id);
    assert.equal(r.status, 'failed', JSON.stringify(r));
    assert.ok(gitsrv.seen('/acme/moved.git/').length >= 1);
    assert.match(r.result.error, /^cannot clone '.*moved\.git': .*redirect/);
    assert.equal(trap.connections, 0);
  });

  test('GITHUB_TOKEN is sent for a repository on GITHUB_REPOS and not for one outside it', async () => {
    router.add('fetch-listed', [{ text: 'Fine.' }]);
    router.add('fetch-unlisted', [{ text: 'Fine.' }]);
    const a = await inSession({ task: 'fetch-listed: x', repository: `${gitsrv.url}/acme/gadget.git` });
    const b = await inSession({ task: 'fetch-unlisted: x', repository: `${gitsrv.url}/other/thing.git` });
    assert.equal((await waitRun(a.run_id)).status, 'succeeded');
    assert.equal((await waitRun(b.run_id)).status, 'succeeded');
    const listed = gitsrv.seen('/acme/gadget.git/');
    const unlisted = gitsrv.seen('/other/thing.git/');
    assert.ok(listed.length >= 1 && unlisted.length >= 1, JSON.stringify(gitsrv.requests));
    for (const q of listed) assert.equal(q.auth, GH_AUTH, q.url);
    for (const q of unlisted) assert.equal(q.auth, null, q.url);
  });

  test('a run\'s proxy token opens its own repository through the proxy and no other', async () => {
    const own = router.add('fetch-proxy-own', [
      { tool: 'bash', input: { command: PROBE, description: 'Probe' } }, { text: 'Probed.' }]);
    // a run without a repository (the session's first, made in before()): its token opens none
    assert.equal(noRepoRun.status, 'succeeded', JSON.stringify(noRepoRun));
    assert.equal(probed(noRepo), 'acme/widget=403 acme/gizmo=403 other/secret=403');
    // a run of acme/widget, in the same session and sandbox: its token opens that one only
    const a = await inSession({ task: 'fetch-proxy-own: x', repository: `${gitsrv.url}/acme/widget.git` });
    assert.equal((await waitRun(a.run_id)).status, 'succeeded');
    assert.equal(probed(own), 'acme/widget=200 acme/gizmo=403 other/secret=403');
    // nothing but the run's own repository reached the upstream
    assert.equal(gitsrv.seen('/acme/gizmo.git/').length, 0);
    assert.equal(gitsrv.seen('/other/secret.git/').length, 0);
  });


  test('view tokens and proxy tokens are signed with keys of their own, not the secret', async () => {
    const secret = readFileSync(path.join(server.dataDir, 'secrets', 'proxy_jwt_secret'), 'utf8').trim();
    const hmac = (key, msg) => crypto.createHmac('sha256', key).update(msg).digest();
    const derived = (purpose) => hmac(secret, `sandbox-mcp ${purpose}`);
    router.add('fetch-view', [{ text: 'Fine.' }]);
    const run = await inSession({ task: 'fetch-view: x' });
    const t = new URL(run.web_url).searchParams.get('t');
    const view = (key) => hmac(key, `sandbox-mcp view\0run\0${run.run_id}\0${0}`).subarray(0, 18).toString('base64url');
    assert.notEqual(t, view(secret), 'the view token is an HMAC under the bare secret');
    assert.equal(t, view(derived('view-token v1')));
    await waitRun(run.run_id);

    // a real proxy token, and the same claims signed with the secret and with the view key
    const r = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--data-dir', server.dataDir]);
    assert.equal(r.status, 0, r.stderr);
    const real = r.stdout.trim();
    const [h, p] = real.split('.');
    const resign = (key) => `${h}.${p}.${hmac(key, `${h}.${p}`).toString('base64url')}`;
    const call = (token) => fetch(`${server.url}/proxy/anthropic/v1/messages`, { method: 'POST',
      headers: { 'x-api-key': token, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-fake', max_tokens: 5, messages: [] }) });
    assert.notEqual((await call(real)).status, 401); // through to the fake model
    for (const key of [Buffer.from(secret), derived('view-token v1')]) {
      const res = await call(resign(key));
      assert.equal(res.status, 401);
      assert.equal((await res.json()).code, 'invalid_token');
    }
  });
});

test('an operator\'s proxy token reaches only the repositories on GITHUB_REPOS', async () => {
  const r = cli(['proxy-token', '--user', 'admin', '--services', 'github', '--data-dir', server.dataDir]);
  assert.equal(r.status, 0, r.stderr);
  const auth = `Basic ${Buffer.from(`x:${r.stdout.trim()}`).toString('base64')}`;
  const get = (p) => fetch(`${server.url}/proxy/github/${p}/info/refs?service=git-upload-pack`,
    { headers: { authorization: auth } });
  const listed = await get('acme/widget.git');
  assert.equal(listed.status, 200, await listed.text());
  const unlisted = await get('other/secret.git');
  assert.equal(unlisted.status, 403);
  assert.equal((await unlisted.json()).code, 'repository_not_allowed');
  assert.equal(gitsrv.seen('/other/secret.git/').length, 0);
});

test('the sandbox\'s /etc has public CA certificates but no private keys and no git configuration', async () => {
  const res = await tool('container_exec', { command:
    'test -e /etc/ssl/private && echo has-private; test -e /etc/gitconfig && echo has-gitconfig; '
    + 'test -s /etc/ssl/certs/ca-certificates.crt && echo has-cas; ls /etc/ssl' });
  const out = res.structuredContent?.stdout ?? text(res);
  assert.doesNotMatch(out, /has-private|has-gitconfig|\bprivate\b/);
  assert.match(out, /has-cas/);
});
