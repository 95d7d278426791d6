// One user cannot take the server from the others: per-user limits on running sandboxes, on
// concurrent and waiting runs, and on the disk their sandboxes' images commit, and (strict
// admission) no new image when the images already made could outgrow the host's free space; thin
// admission is disk_full.test.mjs's. The runs are the real Codex's (runs.codexEnv) against the
// scripted fake upstream (tests/lib/fake-anthropic.mjs).
import { test, describe, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';

import { startServer, cli, removeDataDir } from '../lib/server.mjs';
import { call, ok, finished, until, cancelUnfinished, TERMINAL, codexEnv } from '../lib/runs.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';

let fake, router;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
});
after(async () => { await fake.close(); });

const text = (res) => (res.content || []).map((c) => c.text || '').join('');

// A background process that keeps the sandbox busy, and the command that ends it and waits until
// it is reaped: a sandbox counts as busy while any process of it is left, a killed one included,
// and the next step needs it idle. By its pid, not its name: the background child may not have
// become `sleep` yet when the stop comes, and a stop by name would then miss it.
const SLEEP = 'nohup sleep 300 >/dev/null 2>&1 & echo $! > /tmp/bg.pid;';
const STOP_SLEEP = 'p=$(cat /tmp/bg.pid); kill $p; while kill -0 $p 2>/dev/null; do sleep 0.05; done';

function addUser(srv, name) {
  assert.equal(cli(['user', 'add', name, '--data-dir', srv.dataDir]).status, 0);
  const tok = cli(['token', 'create', '--user', name, '--data-dir', srv.dataDir]);
  assert.equal(tok.status, 0, tok.stderr);
  return tok.stdout.trim();
}

async function withServer(env, fn) {
  const srv = await startServer({ env: { ...codexEnv(fake.url), ...env } });
  try {
    return await fn(srv, addUser(srv, 'bob'));
  } finally {
    await srv.stop();
    removeDataDir(srv.dataDir);
  }
}

test("a user at their running-sandbox limit waits for their own sandboxes, not for everyone's", async () => {
  await withServer({ SANDBOX_MAX_RUNNING: '2', SANDBOX_MAX_RUNNING_PER_USER: '1', SANDBOX_DISK_MB: '0' },
    async (srv, bob) => {
      // The first user's own sandbox is busy with a process of theirs.
      const busy = await ok(srv, 'container_exec', { command: `${SLEEP} echo started` });
      assert.equal(busy.stdout, 'started\n');
      const s = router.add('fair-sbx-7a1', [{ text: 'Done.' }]);
      const run = await ok(srv, 'run_task', { task: 'fair-sbx-7a1' });
      // Their run's session sandbox would be their second: it waits, and its agent never starts.
      // The phase says so once the engine has been refused the sandbox and put the run back.
      const waiting = await until(async () => {
        const r = await ok(srv, 'get_result', { run_id: run.run_id });
        return (TERMINAL.has(r.status) || /^waiting for a sandbox/.test(r.phase?.detail ?? '')) && r;
      }, 'the run waits for a sandbox', 60000);
      assert.ok(['queued', 'running'].includes(waiting.status), JSON.stringify(waiting));
      // and says it is their own limit, not the server's
      assert.match(waiting.phase.detail, /^waiting for a sandbox: you have 1 sandbox running \(your own and your runs' sessions\), the most one user may have/);
      assert.doesNotMatch(waiting.phase.detail, /capacity|retry/);
      assert.equal(s.requests.length, 0);
      // The server's second slot is still there for another user.
      const other = await ok(srv, 'container_exec', { command: 'echo bob' }, bob);
      assert.equal(other.stdout, 'bob\n');
      // Once their own sandbox is idle, it makes way for their run.
      await ok(srv, 'container_exec', { command: STOP_SLEEP });
      const done = await finished(srv, run.run_id);
      assert.equal(done.status, 'succeeded', JSON.stringify(done));
    });
});

// The limits on runs, on one server for both tests: two runs at once, one running and one
// waiting per user. Their runs go on in sessions made in before(), two of the first user's and
// one of the other's, so on warm agents (every new session boots one, seconds of CPU); a run
// waits for its own session's earlier run, so a run that must wait for a limit goes to a session
// of its user's that is idle. The tests go one at a time.
describe('run limits', { concurrency: 1 }, () => {
  let srv, bob;
  const sessions = {};
  before(async () => {
    srv = await startServer({ env: { ...codexEnv(fake.url),
      RUNS_MAX_RUNNING: '2', RUNS_MAX_RUNNING_PER_USER: '1', RUNS_MAX_QUEUED_PER_USER: '1', SANDBOX_DISK_MB: '0' } });
    bob = addUser(srv, 'bob');
    const made = [];
    for (const [name, token] of [['mine', srv.token], ['mine2', srv.token], ['bobs', bob]]) {
      router.add(`fair-session-${name}-6f4`, [{ text: 'Ready.' }]);
      made.push([name, token, await ok(srv, 'run_task', { task: `fair-session-${name}-6f4` }, token)]);
    }
    for (const [name, token, r] of made) {
      const done = await finished(srv, r.run_id, token);
      assert.equal(done.status, 'succeeded', JSON.stringify(done));
      sessions[name] = r.session_id;
    }
  });
  after(async () => {
    await srv?.stop();
    if (srv) removeDataDir(srv.dataDir);
  });
  // A test that failed half-way may leave runs of its own (held at the fake): cancelled, so that
  // the next test's runs do not wait behind them.
  afterEach(async () => {
    for (const token of [srv.token, bob]) await cancelUnfinished(srv, { token });
  });

  test("one user's runs past their limit wait while another user's run starts", async () => {
    const a1 = router.add('fair-run-a1-3c9', [{ hold: true, text: 'A1 done.' }]);
    const a2 = router.add('fair-run-a2-3c9', [{ text: 'A2 done.' }]);
    const b1 = router.add('fair-run-b1-3c9', [{ hold: true, text: 'B1 done.' }]);
    const ra1 = await ok(srv, 'run_task', { task: 'fair-run-a1-3c9', session_id: sessions.mine });
    await a1.waitHeld();
    // in their other session, idle: nothing but their limit holds it back
    const ra2 = await ok(srv, 'run_task', { task: 'fair-run-a2-3c9', session_id: sessions.mine2 });
    const rb1 = await ok(srv, 'run_task', { task: 'fair-run-b1-3c9', session_id: sessions.bobs }, bob);
    // Submitted last, the other user's run gets the free slot; the first user's second waits.
    await until(async () => (await ok(srv, 'get_result', { run_id: rb1.run_id }, bob)).status === 'running',
      "the other user's run is running", 60000);
    const second = await ok(srv, 'get_result', { run_id: ra2.run_id });
    assert.equal(second.status, 'queued', JSON.stringify(second));
    assert.equal(a2.requests.length, 0);
    await b1.waitHeld();
    a1.release();
    b1.release();
    for (const [r, token] of [[ra1], [ra2], [rb1, bob]])
      assert.equal((await finished(srv, r.run_id, token)).status, 'succeeded');
  });

  test("a user's waiting runs are capped, with an error that says what to do", async () => {
    const held = router.add('fair-queue-1-8e2', [{ hold: true, text: 'One.' }]);
    router.add('fair-queue-2-8e2', [{ text: 'Two.' }]);
    router.add('fair-queue-b-8e2', [{ hold: true, text: 'Never sent.' }]);
    const r1 = await ok(srv, 'run_task', { task: 'fair-queue-1-8e2', session_id: sessions.mine });
    await held.waitHeld();
    // waits: its user has a run running, the most they may have
    const r2 = await ok(srv, 'run_task', { task: 'fair-queue-2-8e2', session_id: sessions.mine2 });
    const r3 = await call(srv, 'run_task', { task: 'fair-queue-3-8e2' });
    assert.equal(r3.isError, true, JSON.stringify(r3));
    assert.match(text(r3), /runs waiting to start, the most one user may have/);
    assert.match(text(r3), /cancel_run/);
    // Another user's queue is their own.
    const other = await ok(srv, 'run_task', { task: 'fair-queue-b-8e2', session_id: sessions.bobs }, bob);
    await ok(srv, 'cancel_run', { run_id: other.run_id }, bob);
    held.release();
    for (const r of [r1, r2]) assert.equal((await finished(srv, r.run_id)).status, 'succeeded');
  });
});

test("a user's sandboxes' disks are capped (what they hold, and may grow into while running); the run that would pass the cap fails saying why", async () => {
  await withServer({ SANDBOX_DISK_MB: '64', SANDBOX_DISK_PER_USER_MB: '100' }, async (srv, bob) => {
    // Their own sandbox is busy, so it cannot be stopped to give its room back.
    const own = await ok(srv, 'container_exec', { command: `${SLEEP} echo mine` });
    assert.equal(own.stdout, 'mine\n');
    router.add('fair-disk-5b0', [{ text: 'Done.' }]);
    const run = await ok(srv, 'run_task', { task: 'fair-disk-5b0' });
    const done = await finished(srv, run.run_id);
    assert.equal(done.status, 'failed', JSON.stringify(done));
    assert.match(JSON.stringify(done), /your sandboxes' disks would hold up to \d+ MiB with this one running, more than the 100 MiB one user may have/);
    // The cap is per user.
    const other = await ok(srv, 'container_exec', { command: 'echo bob' }, bob);
    assert.equal(other.stdout, 'bob\n');
    // Once their own sandbox is idle, it is stopped (its files stay) to make room for the run.
    await ok(srv, 'container_exec', { command: STOP_SLEEP });
    const again = await ok(srv, 'run_task', { task: 'fair-disk-5b0 again' });
    const second = await finished(srv, again.run_id);
    assert.equal(second.status, 'succeeded', `${JSON.stringify(second)}\n--- server log ---\n${srv.stderr().slice(-6000)}`);
    await srv.waitLog(/sandbox stopped sbx=\S+ user=\S+ reason=evicted \(disk room\)/);
  });
});

test('the disks of all sandboxes are capped by SANDBOX_DISK_TOTAL_MB; idle sandboxes make room', async () => {
  await withServer({ SANDBOX_DISK_MB: '64', SANDBOX_DISK_TOTAL_MB: '100' }, async (srv, bob) => {
    const busy = await ok(srv, 'container_exec', { command: `${SLEEP} echo mine` });
    assert.equal(busy.stdout, 'mine\n');
    const refused = await call(srv, 'container_exec', { command: 'echo bob' }, bob);
    assert.equal(refused.isError, true, JSON.stringify(refused));
    assert.match(text(refused), /SANDBOX_DISK_TOTAL_MB/);
    await ok(srv, 'container_exec', { command: `${STOP_SLEEP}; echo kept > /workspace/kept` });
    assert.equal((await ok(srv, 'container_exec', { command: 'echo bob' }, bob)).stdout, 'bob\n');
    await srv.waitLog(/reason=evicted \(disk room\)/);
    // The stopped sandbox kept its files, and starts again in its turn (the other, idle now,
    // making room).
    assert.equal((await ok(srv, 'container_exec', { command: 'cat /workspace/kept' })).stdout, 'kept\n');
  });
});

test("strict admission: a sandbox whose sparse image could outgrow the host's free space does not start", async () => {
  const { bavail, bsize } = statfsSync(tmpdir());
  const mb = Math.ceil((bavail * bsize * 1.5) / (1 << 20));
  await withServer({ SANDBOX_DISK_MB: String(mb), SANDBOX_DISK_PER_USER_MB: '0', SANDBOX_DISK_ADMIT: 'strict' }, async (srv) => {
    const refused = await call(srv, 'container_exec', { command: 'echo too-big' });
    assert.equal(refused.isError, true, JSON.stringify(refused));
    assert.match(text(refused), /would overcommit it/);
    assert.match(text(refused), /SANDBOX_DISK_TOTAL_MB/);
  });
});
