// A session's OpenCode kept warm between runs (RUNS_AGENT_WARM_SECONDS): the runs of a session
// are handed to one `opencode serve` in its sandbox; a run with another configuration gets a new
// one; the server's token is honored only while a run of the sandbox runs; the server stops
// after its idle time, and a sandbox holding nothing else is idle. A boot of OpenCode costs
// seconds of CPU, so one session serves several of these where it can. Real OpenCode, scripted
// fake upstream (tests/lib/fake-anthropic.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import path from 'node:path';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { ok, finished, until, withServer } from '../lib/runs.mjs';

let fake, router;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
});

after(async () => {
  await fake.close();
});

const env = (more = {}) => ({ ANTHROPIC_API_KEY: 'sk-ant-test-key', ANTHROPIC_BASE_URL: fake.url, ...more });

// The warm server's pid in the session's sandbox ("" when there is none), and its keeper's.
async function warm(srv, sessionId) {
  const r = await ok(srv, 'container_exec', { session_id: sessionId,
    command: "echo $(pgrep -f '^/opt/agents/[^ ]* serve --port 8789') $(pgrep -x sandbox-keeper)" });
  const [server = '', keeper = ''] = r.stdout.trim().split(' ');
  return { server, keeper };
}

// The warm server's process state letter (ps STAT: "S" running or sleeping, "T" stopped).
async function serverState(srv, sessionId) {
  const r = await ok(srv, 'container_exec', { session_id: sessionId,
    command: "ps -o stat= -p $(pgrep -f '^/opt/agents/[^ ]* serve --port 8789')" });
  return r.stdout.trim();
}

// The warm server's token, as a process of the sandbox can read it, sent to the proxy.
const TOKEN_PROBE = 'pid=$(pgrep -f "^/opt/agents/[^ ]* serve --port 8789"); '
  + 'TOK=$(tr "\\0" "\\n" < /proc/$pid/environ | sed -n "s/^SANDBOX_MCP_PROXY_TOKEN=//p"); '
  + 'test -n "$TOK" || { echo no-token; exit 1; }; '
  + 'curl -s -m 10 -H "x-api-key: $TOK" -H "content-type: application/json" '
  + 'http://127.0.0.1:8788/proxy/anthropic/v1/messages -d "{}"';

// Whether the sandbox has something listening on the warm server's port (8789 = 0x2255).
async function listening(srv, sessionId) {
  const r = await ok(srv, 'container_exec', { session_id: sessionId,
    command: "awk '$2 == \"0100007F:2255\" && $4 == \"0A\"' /proc/net/tcp" });
  return r.stdout.trim() !== '';
}

test('a new session\'s OpenCode starts beside its setup and its first run uses it; the session\'s runs share it, whose token works only while a run runs', async () => {
  await withServer(env(), async (server) => {
    const s1 = router.add('warm-one-1', [{ text: 'First done.' }]);
    const r1 = await ok(server, 'run_task', { task: 'warm-one-1: say something',
      setup: 'until [ -f /workspace/warm-ahead-go ]; do sleep 0.1; done' });
    // the setup waits for a file only this test makes: what is seen until then is seen before
    // the agent's stage
    const ahead = await until(async () => {
      const w = await warm(server, r1.session_id);
      return w.server && w.keeper && (await listening(server, r1.session_id)) ? w : null;
    }, 'OpenCode listening in the sandbox while the setup runs', 300000);
    assert.equal(s1.requests.length, 0);
    assert.doesNotMatch(server.stderr(), new RegExp(` run agent started run=${r1.run_id}`));
    assert.match(server.stderr(), new RegExp(` run agent starting ahead run=${r1.run_id}`));
    await ok(server, 'container_exec', { session_id: r1.session_id, command: 'touch /workspace/warm-ahead-go' });
    const d1 = await finished(server, r1.run_id);
    assert.equal(d1.status, 'succeeded', JSON.stringify(d1));
    assert.equal(d1.result.summary, 'First done.');
    assert.equal(s1.remaining, 0);
    const first = await warm(server, r1.session_id);
    assert.match(first.server, /^\d+$/, 'the server stays after the run');
    assert.match(first.keeper, /^\d+$/);
    assert.deepEqual(first, ahead, 'the first run went to the server started ahead');

    // between runs the server is stopped (SIGSTOP), so that an idle session costs the host no
    // CPU; what it started would run on, and the next run continues it
    await until(async () => (await serverState(server, r1.session_id)).startsWith('T'),
      'the idle warm server is stopped between runs');

    // between runs its token opens nothing, although any process of the sandbox can read it
    const between = await ok(server, 'container_exec', { session_id: r1.session_id, command: TOKEN_PROBE });
    assert.match(between.stdout, /"no_run"/, JSON.stringify(between));
    assert.match(between.stdout, /honored only while one of its runs is running/);

    // the second run goes to the same server, and the conversation carries on
    const s2 = router.add('warm-one-2', [
      { tool: 'bash', input: { command: TOKEN_PROBE.replace('-d "{}"', '-d \'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"warm-probe"}]}\''),
        description: 'Probe the proxy' } },
      { text: 'Second done.' },
    ]);
    const probed = router.add('warm-probe', [{ text: 'probe answered' }]);
    const r2 = await ok(server, 'run_task', { task: 'warm-one-2: and again', session_id: r1.session_id });
    const d2 = await finished(server, r2.run_id);
    assert.equal(d2.status, 'succeeded', JSON.stringify(d2));
    assert.equal(d2.result.summary, 'Second done.');
    // while the run ran, the same token was honored: the probe reached the fake through the
    // proxy, with the real key in its place, and its answer came back
    assert.equal(probed.requests.length, 1);
    assert.equal(probed.requests[0].headers['x-api-key'], 'sk-ant-test-key');
    const probe = JSON.stringify(s2.requests[1].body.messages);
    assert.match(probe, /message_stop/, probe.slice(0, 2000));
    // the model saw the first run's conversation
    assert.match(JSON.stringify(s2.requests[0].body.messages), /First done\./);
    assert.deepEqual(await warm(server, r1.session_id), first, 'the same server served both runs');
    const started = server.stderr().split('\n').filter((l) => / run agent started /.test(l));
    assert.equal(started.length, 2);
    for (const l of started) assert.match(l, /warm=yes/);
    // the token is in no argument of any process (only in the server's environment)
    const args = await ok(server, 'container_exec', { session_id: r1.session_id,
      command: 'cat /proc/[0-9]*/cmdline | tr "\\0" " "' });
    assert.doesNotMatch(args.stdout, /eyJ/);
    assert.match(args.stdout, /serve --port 8789/);

    // a run with another model of the provider needs another configuration: a new server
    router.add('warm-one-3', [{ text: 'Third done.' }]);
    const r3 = await ok(server, 'run_task', { task: 'warm-one-3: once more', session_id: r1.session_id,
      model: 'anthropic/claude-opus-4-1' });
    const d3 = await finished(server, r3.run_id);
    assert.equal(d3.status, 'succeeded', JSON.stringify(d3));
    const third = await warm(server, r1.session_id);
    assert.match(third.server, /^\d+$/);
    assert.notEqual(third.server, first.server);
  });
});

test('the warm server stops after RUNS_AGENT_WARM_SECONDS', async () => {
  await withServer(env({ RUNS_AGENT_WARM_SECONDS: '2' }), async (server) => {
    router.add('warm-idle-1', [{ text: 'Done.' }]);
    const r = await ok(server, 'run_task', { task: 'warm-idle-1: go' });
    assert.equal((await finished(server, r.run_id)).status, 'succeeded');
    // the run went through a warm server (a per-run agent would leave none to stop) ...
    assert.match(server.stderr(), new RegExp(` run agent started run=${r.run_id} .*warm=yes`));
    // ... which is gone once idle for that long, and its keeper with it
    await until(async () => (await warm(server, r.session_id)).server === '', 'the warm server stopped');
    assert.equal((await warm(server, r.session_id)).keeper, '');
  });
});

test('code in the sandbox flooding the bridge\'s stdout and stderr: the host files stay within their caps', async () => {
  const EVENTS_MAX = 256 * 1024, LOG_MAX = 64 * 1024;
  await withServer(env({ RUNS_EVENTS_MAX_BYTES: String(EVENTS_MAX), RUNS_AGENT_LOG_MAX_BYTES: String(LOG_MAX) }),
    async (server) => {
      const s = router.add('warm-flood-1', [{ hold: true, text: 'Never sent.' }]);
      const r = await ok(server, 'run_task', { task: 'warm-flood-1: think' });
      await s.waitHeld();
      // the bridge's stdout and stderr are memory files any process of the sandbox may reopen;
      // stderr first: the stdout flood fails the run, which ends the bridge and its /proc entry
      const flood = await ok(server, 'container_exec', { session_id: r.session_id, command:
        'pid=$(pgrep -f "^sandbox-agent "); test -n "$pid" || exit 9; '
        + 'for fd in 2 1; do head -c 4194304 /dev/zero | tr "\\0" x >> /proc/$pid/fd/$fd; done; echo flooded' });
      assert.equal(flood.stdout, 'flooded\n', JSON.stringify(flood));
      const done = await finished(server, r.run_id);
      assert.equal(done.status, 'failed', JSON.stringify(done));
      assert.match(done.result.error, new RegExp(`exceeded ${EVENTS_MAX} bytes \\(RUNS_EVENTS_MAX_BYTES\\)`));
      const dir = path.join(server.dataDir, 'runs', r.run_id);
      const events = statSync(path.join(dir, 'events.jsonl')).size, log = statSync(path.join(dir, 'agent.log')).size;
      assert.ok(events <= EVENTS_MAX && events > EVENTS_MAX / 2, `events ${events}`);
      assert.ok(log <= LOG_MAX && log > LOG_MAX / 2, `log ${log}`);
      // the run was stopped: its keeper aborted the prompt, so the held request closed
      await until(() => s.aborted >= 1, 'the held request closed');
      // and the warm server, which the run's bridge started (the run had nothing to start it
      // ahead of), stays in the sandbox with its keeper
      const w = await warm(server, r.session_id);
      assert.match(w.server, /^\d+$/, JSON.stringify(w));
      assert.match(w.keeper, /^\d+$/);
      assert.doesNotMatch(server.stderr(), new RegExp(` run agent starting ahead run=${r.run_id}`));
    });
});

test('with RUNS_AGENT_WARM_SECONDS=0 each run starts its own OpenCode', async () => {
  await withServer(env({ RUNS_AGENT_WARM_SECONDS: '0' }), async (server) => {
    router.add('warm-off-1', [{ text: 'Done.' }]);
    const r = await ok(server, 'run_task', { task: 'warm-off-1: go' });
    assert.equal((await finished(server, r.run_id)).status, 'succeeded');
    assert.match(server.stderr(), / run agent started .*warm=no/);
    assert.deepEqual(await warm(server, r.session_id), { server: '', keeper: '' });
  });
});

// The run's sandbox is then left holding only its warm server (and keeper): with
// SANDBOX_IDLE_SECONDS short, it is stopped as idle. So the server the run had is looked at while
// the run waits for its model's answer, when the sandbox is not idle.
test('a setup that changes OpenCode\'s own configuration: the server started ahead is replaced; a sandbox holding only a warm server is idle', async () => {
  await withServer(env({ SANDBOX_IDLE_SECONDS: '2' }), async (server) => {
    const s = router.add('warm-stale-1', [{ hold: true, text: 'Stale done.' }]);
    const r = await ok(server, 'run_task', { task: 'warm-stale-1: say something',
      setup: 'until [ -f /workspace/warm-stale-go ]; do sleep 0.1; done; mkdir -p ~/.config/opencode; '
        + 'echo \'{"$schema": "https://opencode.ai/config.json"}\' > ~/.config/opencode/opencode.json' });
    const ahead = await until(async () => {
      const w = await warm(server, r.session_id);
      return w.server && w.keeper ? w : null;
    }, 'OpenCode started while the setup runs', 300000);
    await ok(server, 'container_exec', { session_id: r.session_id, command: 'touch /workspace/warm-stale-go' });
    await s.waitHeld();
    const serving = await warm(server, r.session_id);
    assert.match(serving.server, /^\d+$/);
    assert.notEqual(serving.server, ahead.server, 'the run had a server of the new configuration');
    assert.notEqual(serving.keeper, ahead.keeper);
    s.release();
    const d = await finished(server, r.run_id);
    assert.equal(d.status, 'succeeded', JSON.stringify(d));
    assert.equal(d.result.summary, 'Stale done.');
    assert.equal(s.remaining, 0);
    // its warm server is left, yet the sandbox is stopped as idle
    await until(() => / sandbox stopped .*reason=idle/.test(server.stderr()),
      `the sandbox stopped as idle:\n${server.stderr().slice(-3000)}`);
  });
});
