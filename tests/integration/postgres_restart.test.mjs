// PostgreSQL restarted under a server's load (src/store/db_pg.c): while the database is down every
// call is answered (with the reason when it needs the store) and /healthz says degraded; a run at
// work goes on (its agent's token, checked before, is honoured while its revocation cannot be
// looked up) and its events wait in its event file; once the database is back, the server
// reconnects by itself, the run ends with every event stored exactly once, and new work runs.
// The cluster is this file's own (tests/lib/pg.sh), so that stopping it touches no other suite.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const pgsh = path.join(root, 'tests', 'lib', 'pg.sh');
const pgDir = `/var/tmp/smcp-pg-restart-${process.pid}`;
const pgUrl = execFileSync('sh', [pgsh, 'start', pgDir], { encoding: 'utf8' }).trim();
process.on('exit', () => spawnSync('sh', [pgsh, 'stop', pgDir]));
process.env.SANDBOX_MCP_TEST_STORE = 'postgres';
process.env.SANDBOX_MCP_TEST_DATABASE_URL = pgUrl;
const { startServer, rpc, sqlRowsAsync } = await import('../lib/server.mjs');
const runs = await import('../lib/runs.mjs');
const { startFake, agentRouter } = await import('../lib/fake-anthropic.mjs');
const { assertNoSanitizerReport } = await import('../lib/http.mjs');

const pg = (cmd) => execFileSync('sh', [pgsh, cmd, pgDir], { encoding: 'utf8' });
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
  assertNoSanitizerReport(stderr);
});

const health = async () => {
  const r = await fetch(`${server.url}/healthz`);
  return { status: r.status, body: await r.json() };
};

// One tools/call as a client makes it: {ok, text} once answered, whatever the answer.
async function attempt(name, args) {
  const r = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
  const res = r.body?.result;
  return { ok: r.status === 200 && res && !res.isError, text: r.text };
}

test('PostgreSQL restarted under load: calls are answered while it is down, /healthz says degraded, and once it is back the server carries on by itself; a run at work ends with each event once', async () => {
  // a run at work: its first step done, its second held at the model
  const script = router.add('pgr-1', [
    { tool: 'bash', input: { command: 'echo one > /workspace/one', description: 'First file' } },
    { hold: true, tool: 'bash', input: { command: 'echo two > /workspace/two', description: 'Second file' } },
    { text: 'Both files written.' },
  ]);
  const started = await runs.ok(server, 'run_task', { task: 'pgr-1: write two files' });
  await script.waitHeld();
  assert.equal((await health()).status, 200);
  // clients at work beside it: commands in a sandbox and tool lists, each waiting for its answer
  await runs.ok(server, 'container_exec', { command: 'true' });
  let stop = false;
  const answers = [];
  const load = [0, 1, 2, 3].map(async (i) => {
    while (!stop) {
      const t = Date.now();
      const a = i % 2
        ? await attempt('container_exec', { command: `echo ${i}` })
        : await rpc(server, { jsonrpc: '2.0', id: 2, method: 'tools/list' })
          .then((r) => ({ ok: r.status === 200 && !!r.body?.result?.tools, text: r.text }));
      answers.push({ ...a, t });
    }
  });
  await runs.until(() => answers.filter((a) => a.ok).length >= 8, 'the load under way');

  pg('down');
  const down = Date.now();
  // the server says it has lost its database
  const h = await runs.until(async () => { const x = await health(); return x.status === 503 && x; }, 'healthz degraded');
  assert.equal(h.body.status, 'degraded');
  assert.equal(h.body.database, false);
  // the run's agent goes on meanwhile: its next request reaches the model through the proxy
  script.release();
  await script.waitDone();
  // ... and ends while the database is still away (the init writes its exit status)
  const statusFile = path.join(server.dataDir, 'runs', started.run_id, 'status');
  await runs.until(() => existsSync(statusFile) && /^exit /.test(readFileSync(statusFile, 'utf8')), 'the agent ended');
  // calls that need the store are answered with the reason, not left hanging
  const call = await attempt('list_runs', {});
  assert.equal(call.ok, false, call.text);
  assert.match(call.text, /PostgreSQL|database/i, call.text);
  await runs.until(() => answers.some((a) => a.t > down), 'an answer while the database is down');

  pg('up');
  const up = Date.now();
  const back = await runs.until(async () => { const x = await health(); return x.status === 200 && x; }, 'healthz ok again', 120000);
  assert.equal(back.body.status, 'ok');
  // every client's calls succeed again, with no restart of the server (each of its connections to
  // the database comes back by itself, within its backoff)
  await runs.until(() => {
    const last = answers.slice(-16);
    return last.length === 16 && last.every((a) => a.t > up && a.ok);
  }, 'every call succeeding again', 120000);
  stop = true;
  await Promise.all(load);

  // the run ends succeeded, its files written, each of its events stored once
  const r = await runs.until(async () => {
    const x = await runs.ok(server, 'get_result', { run_id: started.run_id, wait_seconds: 5 });
    return x.status !== 'running' && x.status !== 'queued' && x;
  }, 'the run ended', 120000);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
  assert.equal(r.result.summary, 'Both files written.');
  const ls = await runs.ok(server, 'container_exec', { session_id: started.session_id, command: 'cat /workspace/one /workspace/two' });
  assert.equal(ls.stdout, 'one\ntwo\n');
  const events = await sqlRowsAsync(server, `SELECT seq, type, raw FROM run_events WHERE run_id = '${started.run_id}' ORDER BY seq`);
  const count = await sqlRowsAsync(server, `SELECT event_count FROM runs WHERE id = '${started.run_id}'`);
  assert.equal(count[0].event_count, events.length);
  assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i + 1));
  const raws = events.filter((e) => e.raw).map((e) => e.raw);
  assert.equal(new Set(raws).size, raws.length, 'an event stored twice');
  assert.equal(events.filter((e) => e.type === 'tool' || e.type === 'tool_use').length >= 2 || events.length >= 4, true,
    JSON.stringify(events.map((e) => e.type)));
  // one run, as submitted; and new work runs
  assert.equal((await runs.ok(server, 'list_runs', {})).runs.length, 1);
  const next = router.add('pgr-2', [{ text: 'Again.' }]);
  const again = await runs.ok(server, 'run_task', { task: 'pgr-2: once more', session_id: started.session_id });
  assert.equal((await runs.finished(server, again.run_id)).status, 'succeeded');
  assert.equal(next.requests.length, 1);
  // the server said what happened, once each way, and that the run's end waited for it
  const log = server.stderr();
  assert.match(log, /database unreachable/);
  assert.match(log, /database reachable again/);
  assert.match(log, new RegExp(`run end waits for the store run=${started.run_id}`));
});
