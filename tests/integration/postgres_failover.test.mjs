// A PostgreSQL failover under a server's load: a primary and its synchronous streaming replica,
// managed by Patroni with etcd (tests/lib/patroni.mjs), and a server whose DATABASE_URL names both
// hosts with target_session_attrs=read-write. The primary's whole node is killed; Patroni promotes
// the replica once the leader's key expires; the server, which connects again by itself, finds
// the new primary through the same URL. A run in flight ends with each of its events once, the
// runs finished before the failover are all there as they were, and new work runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startPatroni } from '../lib/patroni.mjs';

const cluster = await startPatroni();
process.env.SANDBOX_MCP_TEST_STORE = 'postgres';
process.env.SANDBOX_MCP_TEST_DATABASE_URL = cluster.url;
const { startServer, rpc, sqlRowsAsync } = await import('../lib/server.mjs');
const runs = await import('../lib/runs.mjs');
const { startFake, agentRouter } = await import('../lib/fake-anthropic.mjs');
const { assertNoSanitizerReport } = await import('../lib/http.mjs');

let fake, router, server;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  server = await startServer({ env: runs.codexEnv(fake.url) });
});

after(async () => {
  const stderr = server?.stderr() ?? '';
  await server?.stop();
  await fake?.close();
  await cluster.stop();
  assertNoSanitizerReport(stderr);
});

async function attempt(name, args) {
  const r = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
  const res = r.body?.result;
  return { ok: r.status === 200 && res && !res.isError, text: r.text };
}

const eventsOf = (id) => sqlRowsAsync(server, `SELECT seq, type, raw FROM run_events WHERE run_id = '${id}' ORDER BY seq`);

test('the primary\'s node killed under load: the server follows the promoted replica through its multi-host URL, a run in flight ends with each event once, and nothing committed before is lost', async () => {
  assert.equal(await cluster.primary(), 'n1');
  // work committed before the failover: runs that ended, each with its events
  const done = [];
  for (let i = 0; i < 3; i++) {
    router.add(`pgf-done-${i}`, [
      { tool: 'bash', input: { command: `echo ${i} > /workspace/done-${i}`, description: 'Write' } },
      { text: `Done ${i}.` },
    ]);
    const s = await runs.ok(server, 'run_task', { task: `pgf-done-${i}: write` });
    const r = await runs.finished(server, s.run_id);
    assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 1500));
    done.push({ id: s.run_id, events: (await eventsOf(s.run_id)).length, summary: r.result.summary });
  }
  // a run at work, held at the model
  const script = router.add('pgf-live', [
    { tool: 'bash', input: { command: 'echo one > /workspace/one', description: 'First file' } },
    { hold: true, tool: 'bash', input: { command: 'echo two > /workspace/two', description: 'Second file' } },
    { text: 'Both files written.' },
  ]);
  const live = await runs.ok(server, 'run_task', { task: 'pgf-live: write two files' });
  await script.waitHeld();
  // clients at work beside it
  let stop = false;
  const answers = [];
  const load = [0, 1, 2, 3].map(async (i) => {
    while (!stop) {
      const t = Date.now();
      const a = i % 2 ? await attempt('container_exec', { command: `echo ${i}` }) : await attempt('list_runs', {});
      answers.push({ ...a, t });
    }
  });
  await runs.until(() => answers.filter((a) => a.ok).length >= 8, 'the load under way');

  cluster.kill('n1');
  const killed = Date.now();
  await runs.until(async () => (await cluster.primary()) === 'n2', 'n2 promoted', 120000);
  script.release();
  // the server carries on against the new primary, without a restart
  await runs.until(async () => {
    const h = await fetch(`${server.url}/healthz`);
    return h.status === 200 && (await h.json()).database === true;
  }, 'healthz ok on the new primary', 120000);
  await runs.until(() => {
    const last = answers.slice(-16);
    return last.length === 16 && last.every((a) => a.t > killed && a.ok);
  }, 'every call succeeding again', 120000);
  stop = true;
  await Promise.all(load);

  // the run in flight ends succeeded, each of its events stored once
  const r = await runs.until(async () => {
    const x = await runs.ok(server, 'get_result', { run_id: live.run_id, wait_seconds: 5 });
    return x.status !== 'running' && x.status !== 'queued' && x;
  }, 'the live run ended', 120000);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
  assert.equal(r.result.summary, 'Both files written.');
  const events = await eventsOf(live.run_id);
  assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i + 1));
  const raws = events.filter((e) => e.raw).map((e) => e.raw);
  assert.equal(new Set(raws).size, raws.length, 'an event stored twice');
  const [count] = await sqlRowsAsync(server, `SELECT event_count FROM runs WHERE id = '${live.run_id}'`);
  assert.equal(Number(count.event_count), events.length);
  // what was committed before the failover is all there, as it was
  for (const d of done) {
    const x = await runs.ok(server, 'get_result', { run_id: d.id });
    assert.equal(x.status, 'succeeded');
    assert.equal(x.result.summary, d.summary);
    assert.equal((await eventsOf(d.id)).length, d.events);
  }
  assert.equal((await runs.ok(server, 'list_runs', {})).runs.length, 4);
  // and new work runs
  const next = router.add('pgf-after', [{ text: 'After.' }]);
  const again = await runs.ok(server, 'run_task', { task: 'pgf-after: once more', session_id: live.session_id });
  assert.equal((await runs.finished(server, again.run_id)).status, 'succeeded');
  assert.equal(next.requests.length, 1);
  assert.match(server.stderr(), /database unreachable/);
  assert.match(server.stderr(), /database reachable again/);
});
