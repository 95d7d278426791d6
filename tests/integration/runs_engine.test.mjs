// The run engine's own rules: at most RUNS_MAX_RUNNING runs at once, first come first served,
// one run at a time per session; a session's workspace removed RUNS_RETENTION_DAYS after its
// last run; tokens blanked and oversized lines cut in what is stored. Real agents, scripted fake
// upstream (tests/lib/fake-anthropic.mjs): the token test starts OpenCode for its run
// (RUNS_AGENT_WARM_SECONDS=0), and sees its configuration seeded by the per-run wrapper; the
// others, which test the engine rather than an agent, run Codex (runs.codexEnv), the queue and
// oversized-line tests in one server's sessions.
import { test, describe, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { rpc, startServer, removeDataDir } from '../lib/server.mjs';
import { ok, finished, until, withServer, cancelUnfinished, codexEnv } from '../lib/runs.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';

let fake, router;
let nextId = 1;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
});

after(async () => {
  await fake.close();
});

async function call(srv, name, args) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });
  assert.equal(r.status, 200, r.text);
  return r.body.result;
}

function sql(srv, query) {
  const out = execFileSync('sqlite3', ['-json', path.join(srv.dataDir, 'sandbox-mcp.db'), query], { encoding: 'utf8' });
  return out.trim() ? JSON.parse(out) : [];
}

// An OpenCode process for each run (a session's runs share none).
const cold = () => ({ ANTHROPIC_API_KEY: 'sk-ant-test-key', ANTHROPIC_BASE_URL: fake.url,
  RUNS_AGENT_WARM_SECONDS: '0' });

test('a session whose retention passed loses its workspace; a new run in it is refused', async () => {
  // 0.00003 days is about 2.6 seconds
  await withServer({ ...codexEnv(fake.url), RUNS_RETENTION_DAYS: '0.00003' }, async (server) => {
    router.add('retain-5d2', [{ tool: 'write', input: { filePath: '/workspace/keep.txt', content: 'x\n' } },
      { text: 'Wrote it.' }]);
    const r = await ok(server, 'run_task', { task: 'retain-5d2' });
    const done = await finished(server, r.run_id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    const [sbx] = sql(server, `SELECT id FROM sandboxes WHERE session_id = '${r.session_id}'`);
    assert.ok(sbx, 'the session had a sandbox');
    const dir = path.join(server.dataDir, 'sandboxes', sbx.id);
    assert.ok(existsSync(path.join(dir, 'disk.img')));
    await until(() => sql(server, `SELECT cleaned_at FROM sessions WHERE id = '${r.session_id}'`)[0].cleaned_at,
      'the session is cleaned');
    assert.equal(existsSync(path.join(dir, 'disk.img')), false, 'the workspace image is gone');
    assert.equal(existsSync(path.join(server.dataDir, 'runs', r.run_id)), false, 'the run directory is gone');
    const again = await call(server, 'run_task', { task: 'retain-5d2 again', session_id: r.session_id });
    assert.equal(again.isError, true);
    assert.match(again.content[0].text, /expired/);
    // the run and its events stay
    const kept = await ok(server, 'get_result', { run_id: r.run_id });
    assert.equal(kept.status, 'succeeded');
    assert.ok(kept.event_count > 0);
  });
});

test('a token the agent prints is blanked in the stored events', async () => {
  await withServer(cold(), async (server) => {
    const s = router.add('echo-token-9a1', [
      { tool: 'bash', input: { command: 'printenv SANDBOX_MCP_PROXY_TOKEN', description: 'Show the token' } },
      { text: 'Shown.' },
    ]);
    const r = await ok(server, 'run_task', { task: 'echo-token-9a1' });
    const done = await finished(server, r.run_id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    // the agent really had a token: the model saw it in the tool's output
    const shown = JSON.stringify(s.requests[1].body.messages);
    assert.match(shown, /eyJ[\w-]+\.eyJ[\w-]+\.[\w-]+/);
    const raw = sql(server, `SELECT raw || summary AS t FROM run_events WHERE run_id = '${r.run_id}'`)
      .map((e) => e.t).join('\n');
    assert.match(raw, /\[redacted\]/);
    assert.doesNotMatch(raw, /eyJ[\w-]+\.eyJ[\w-]+\./);
    // OpenCode found its configuration seeded and installed nothing (no plugin, no npm cache)
    const look = await ok(server, 'container_exec', { session_id: r.session_id,
      command: 'ls -A /root/.config/opencode/node_modules | wc -l; test -e /root/.npm && echo npm-cache || echo no-npm-cache' });
    assert.equal(look.stdout, '0\nno-npm-cache\n', JSON.stringify(look));
  });
});

// The queue and the oversized line: one server (two runs at once) whose runs go on in three
// sessions made in before(). The tests go one at a time.
describe('in sessions made ahead', { concurrency: 1 }, () => {
  let server;
  const sessions = [];
  before(async () => {
    server = await startServer({ env: { ...codexEnv(fake.url), RUNS_MAX_RUNNING: '2' } });
    const made = [];
    for (const n of [1, 2, 3]) {
      router.add(`ahead-${n}-e07`, [{ text: 'Ready.' }]);
      made.push(await ok(server, 'run_task', { task: `ahead-${n}-e07` }));
    }
    for (const r of made) {
      const done = await finished(server, r.run_id);
      assert.equal(done.status, 'succeeded', JSON.stringify(done));
      sessions.push(r.session_id);
    }
  });
  after(async () => {
    await server?.stop();
    if (server) removeDataDir(server.dataDir);
  });
  // A test that failed half-way may leave runs of its own (held at the fake): cancelled, so that
  // the next test's runs do not wait behind them.
  afterEach(() => cancelUnfinished(server));

  test('runs wait for a slot in order, and a session runs one at a time', async () => {
    const a = router.add('queue-a-41c', [{ hold: true, text: 'A done.' }]);
    const b = router.add('queue-b-41c', [{ text: 'B done.' }]);
    const c = router.add('queue-c-41c', [{ hold: true, text: 'C done.' }]);
    const d = router.add('queue-d-41c', [{ text: 'D done.' }]);
    const ra = await ok(server, 'run_task', { task: 'queue-a-41c', session_id: sessions[0] });
    await a.waitHeld();
    // same session as A: waits although a slot is free
    const rb = await ok(server, 'run_task', { task: 'queue-b-41c', session_id: sessions[0] });
    const rc = await ok(server, 'run_task', { task: 'queue-c-41c', session_id: sessions[1] });
    await c.waitHeld();
    // a third session: both slots are taken by A and C
    const rd = await ok(server, 'run_task', { task: 'queue-d-41c', session_id: sessions[2] });
    for (const id of [rb.run_id, rd.run_id]) {
      const r = await ok(server, 'get_result', { run_id: id });
      assert.equal(r.status, 'queued', JSON.stringify(r));
      assert.equal(r.started_at, null);
    }
    assert.equal(b.requests.length + d.requests.length, 0);
    a.release();
    c.release();
    const results = {};
    for (const [k, r] of Object.entries({ a: ra, b: rb, c: rc, d: rd }))
      results[k] = await finished(server, r.run_id);
    for (const [k, r] of Object.entries(results))
      assert.equal(r.status, 'succeeded', `${k}: ${JSON.stringify(r)}`);
    assert.equal(results.b.result.summary, 'B done.');
    // B began only after A, its session's earlier run, had finished
    assert.ok(Date.parse(results.b.started_at) >= Date.parse(results.a.finished_at),
      `${results.b.started_at} < ${results.a.finished_at}`);
    assert.ok(Date.parse(results.d.started_at) >= Math.min(Date.parse(results.a.finished_at),
      Date.parse(results.c.finished_at)));
    // (its phases while running are transitions of their own)
    const waited = results.d.transitions.map((t) => t.status).filter((x, i, a) => x !== a[i - 1]);
    assert.deepEqual(waited, ['queued', 'running', 'succeeded']);
  });

  test('an event line over 1 MiB is stored as a stub, and the events after it as usual', async () => {
    const big = 'x'.repeat((1 << 20) + 4096);
    router.add('huge-text-c3e', [{ text: big }]);
    const r = await ok(server, 'run_task', { task: 'huge-text-c3e', session_id: sessions[0] });
    const done = await finished(server, r.run_id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done).slice(0, 2000));
    const types = sql(server, `SELECT type FROM run_events WHERE run_id = '${r.run_id}' ORDER BY seq`)
      .map((e) => e.type);
    // the turn: its start, the text too long to keep, its end (after what Codex tells of its
    // thread before the turn)
    assert.deepEqual(types.slice(types.indexOf('step_start')), ['step_start', 'oversized', 'step_finish'], types.join(','));
    const [{ n }] = sql(server, `SELECT max(length(raw)) AS n FROM run_events WHERE run_id = '${r.run_id}'`);
    assert.ok(n <= 16384, `raw kept: ${n}`);
  });
});
