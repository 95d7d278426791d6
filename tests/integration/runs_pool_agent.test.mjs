// Agents booted before run_task (RUNS_AGENT_POOL): a pooled sandbox gets OpenCode started and
// readied for /workspace before anyone owns it; a run's new session takes that sandbox, and its
// bridge finds the server serving. The pool also keeps a sandbox on each recently used
// environment snapshot (RUNS_ENV_POOL), its agent readied for the repository's directory, for the
// next new session of that snapshot's user and repository only. The pooled server's key is the sandbox's own (nothing is
// minted before the hand-over): refused while no run of the sandbox runs, on any other listener,
// and on the server's own. A container_* caller never gets a prepared sandbox. Real OpenCode,
// scripted fake upstream (tests/lib/fake-anthropic.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startFake, agentRouter, userTexts, toolResults, toolNames } from '../lib/fake-anthropic.mjs';
import { ok, finished, until } from '../lib/runs.mjs';
import { startServer, removeDataDir, addUserAsync, tempDir } from '../lib/server.mjs';
import { repoWithFiles } from '../lib/git.mjs';

let fake, router, srv, scratch;

// The pooled server's process, key and the pid of its keeper, as a process of the sandbox sees them.
const PROBE = 'pid=$(pgrep -f "^/opt/agents/[^ ]* serve --port 8789"); '
  + 'KEY=$(tr "\\0" "\\n" < /proc/$pid/environ | sed -n "s/^SANDBOX_MCP_PROXY_TOKEN=//p"); '
  + 'echo "$pid $KEY"';
const askProxy = (key, where = 'http://127.0.0.1:8788') =>
  `curl -s -m 10 -H "x-api-key: ${key}" -H "content-type: application/json" ` +
  `${where}/proxy/anthropic/v1/messages -d '{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"pool-probe"}]}'`;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  srv = await startServer({ env: {
    ANTHROPIC_API_KEY: 'sk-ant-test-key', ANTHROPIC_BASE_URL: fake.url,
    SANDBOX_POOL: '2', RUNS_AGENT_POOL: '1', RUNS_ENV_POOL: '1', RUNS_ALLOW_LOCAL_REPOS: '1',
    // each sandbox's disk as the pool counts it: small, so that a busy host still has room
    SANDBOX_DISK_MB: '1024',
  } });
  scratch = tempDir('smcp-poolenv-');
  // the pooled agent's warm-up prompt reaches the proxy, which refuses it (no run is running),
  // and once the warm-up has ended the sandbox may be handed over
  await srv.waitLog(/sandbox pool prepared sbx=\S+ ready=yes/, 300000);
  assert.match(srv.stderr(), /proxy refused a pooled agent sbx=\S+ reason=no_run/);
});

after(async () => {
  await srv?.stop();
  if (srv) removeDataDir(srv.dataDir);
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  await fake.close();
});

test('a new session takes the pooled sandbox whose agent is booted, and its run is handed to it', async () => {
  const pooled = srv.stderr().match(/run agent booting in the pool sbx=(\S+)/)[1];
  const seen = fake.requests.length;
  // the agent booted before the run has the server's own tools too (it listed them with the
  // sandbox's key, no run working then), and its call with that key reaches the run's question
  const s = router.add('pool-run-1', [
    (body) => {
      const name = toolNames(body).find((n) => n.endsWith('ask_user'));
      return name ? { tool: name, input: { question: 'Anyone?' } } : { text: `no ask_user among ${toolNames(body)}` };
    },
    { text: 'Pooled done.' },
  ]);
  const r = await ok(srv, 'run_task', { task: 'pool-run-1: say something', question_timeout_minutes: 0.05 });
  const d = await finished(srv, r.run_id);
  assert.equal(d.status, 'succeeded', JSON.stringify(d));
  assert.equal(d.result.summary, 'Pooled done.');
  assert.equal(s.remaining, 0);
  assert.match(toolResults(s.requests.at(-1).body).at(-1).text, /No answer came within 1 minutes/);
  await srv.waitLog(new RegExp(`sandbox assigned sbx=${pooled} user=\\S+ session=${r.session_id} from=pool .*prepared=yes`));

  // the server the run spoke to is the one booted in the pool: its key is the sandbox's, not a
  // token minted for the run
  const p = await ok(srv, 'container_exec', { session_id: r.session_id, command: PROBE });
  const [pid, key] = p.stdout.trim().split(' ');
  assert.match(pid, /^\d+$/, p.stdout);
  assert.match(key, /^smcp-sbx-[0-9a-f]{64}$/);
  // the upstream saw the real key, never the sandbox's, and nothing of the warm-up
  const texts = (q) => userTexts(JSON.parse(q.body || '{}'));
  assert.ok(fake.requests.slice(seen).some((q) => texts(q).some((t) => t.includes('pool-run-1'))));
  for (const q of fake.requests) {
    assert.equal(q.headers['x-api-key'], 'sk-ant-test-key');
    assert.ok(!texts(q).some((t) => t.includes('Reply with OK.')), 'the warm-up never reaches the upstream');
  }
  const log = readFileSync(path.join(srv.dataDir, 'runs', r.run_id, 'agent.log'), 'utf8');
  assert.doesNotMatch(log, /smcp-sbx-/);

  // between runs the key opens nothing, although any process of the sandbox can read it
  const between = await ok(srv, 'container_exec', { session_id: r.session_id, command: askProxy(key) });
  assert.match(between.stdout, /"no_run"/, between.stdout);
  // on the server's own listener it is no token at all
  const main = await fetch(`${srv.url}/proxy/anthropic/v1/messages`, { method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: '{}' });
  assert.equal(main.status, 401);
  assert.equal((await main.json()).code, 'invalid_token');
  // nor does it open another sandbox's listener: the test of environment snapshots below, which
  // has a second pooled sandbox, tries that
});

test('a container_* caller never gets a sandbox prepared for runs', async () => {
  // the pool refills with a prepared sandbox first; a container user's first call then takes the
  // unprepared one, which runs no agent
  await until(() => srv.stderr().match(/sandbox pool prepared sbx=\S+ ready=yes/g)?.length >= 2,
    'the pool prepares another sandbox for runs', 300000);
  const r = await ok(srv, 'container_exec', { command: 'pgrep -f "^/opt/agents/[^ ]* serve" || echo none' });
  assert.equal(r.stdout.trim(), 'none');
  const sbx = srv.stderr().match(/sandbox assigned sbx=\S+ user=\S+ session=- from=pool template=\S+ env=- prepared=(\w+)/);
  assert.ok(sbx, 'the container user got a pooled sandbox');
  assert.equal(sbx[1], 'no');
});

const repoWith = (name, files) => repoWithFiles(path.join(scratch, `${name}.git`), files);

test('a new session on an environment snapshot takes a sandbox started on it, its agent readied there; never another user, on whose listener its key opens nothing', async () => {
  const repo = await repoWith('envpool', {
    '.sandbox-mcp/setup.sh': 'mkdir -p node_modules/dep && echo installed > node_modules/dep/index.txt\n',
    'package.json': '{"name":"envpool"}\n' });
  const look = 'cat node_modules/dep/index.txt; pwd';
  // a new session's run whose agent runs these commands, then look
  const run = async (marker, token = srv.token, commands = []) => {
    const s = router.add(marker, [...[...commands, look].map((command) =>
      ({ tool: 'bash', input: { command, description: 'Look' } })), { text: 'Done.' }]);
    const r = await ok(srv, 'run_task', { task: `${marker}: look`, repository: repo, pull_request: 'none' }, token);
    const d = await finished(srv, r.run_id, token);
    assert.equal(d.status, 'succeeded', JSON.stringify(d));
    assert.equal(s.remaining, 0);
    return { r, d, out: s.requests.flatMap((q) => toolResults(q.body)).map((t) => t.text).join('\n') };
  };
  // the first session sets up and saves the environment; the pool then starts a sandbox on it
  const first = await run('poolenv-1');
  const env = srv.stderr().match(new RegExp(`run snapshot taken run=${first.r.run_id} env=(\\S+)`))[1];
  const booting = new RegExp(`run agent booting in the pool sbx=(\\S+) model=\\S+ env=${env} dir=/workspace/envpool`);
  await srv.waitLog(booting, 300000);
  const sbx = srv.stderr().match(booting)[1];
  await srv.waitLog(new RegExp(`sandbox pool prepared sbx=${sbx} ready=yes`), 300000);

  // the owner's next new session takes it: the dependencies are there, no setup ran, and the
  // server the run spoke to is the one booted in the pool
  const next = await run('poolenv-2');
  await srv.waitLog(new RegExp(`sandbox assigned sbx=${sbx} user=\\S+ session=${next.r.session_id} from=pool template=\\S+ env=${env} prepared=yes`));
  assert.match(next.out, /installed/);
  assert.match(next.out, /\/workspace\/envpool/);
  assert.equal(next.d.setup?.source ?? null, null, JSON.stringify(next.d.setup));
  const p = await ok(srv, 'container_exec', { session_id: next.r.session_id, command: PROBE });
  const key = p.stdout.trim().split(' ')[1] ?? '';
  assert.match(key, /^smcp-sbx-[0-9a-f]{64}$/);

  // another user on the same repository never gets a sandbox on it (a snapshot is per user
  // here): the pool's next one on the owner's snapshot is not bob's
  const bob = await addUserAsync(srv, 'bob');
  // and a pooled sandbox's key is refused on another sandbox's listener, even while a run of that
  // sandbox runs: bob's run asks its own listener with the key of the owner's
  const other = await run('poolenv-bob', bob, [askProxy(key)]);
  assert.match(other.out, /"invalid_token"/, other.out);
  assert.match(other.out, /not this sandbox's agent key/);
  assert.ok(!fake.requests.some((q) => userTexts(JSON.parse(q.body || '{}')).some((t) => t === 'pool-probe')),
    'a key of another sandbox never reaches the upstream');
  assert.match(other.out, /installed/);
  assert.equal(other.d.setup?.source, '.sandbox-mcp/setup.sh', JSON.stringify(other.d.setup));
  assert.doesNotMatch(srv.stderr(), new RegExp(`sandbox assigned sbx=\\S+ user=\\S+ session=${other.r.session_id} from=pool template=\\S+ env=${env}`));
});
