// Standby (SANDBOX_STANDBY): a sandbox stopped for being idle is started again in the background
// and kept for its owner, whose next call takes it in place of a start. To its owner it must be
// a stopped sandbox started afresh: nothing of what ran before, its files kept, the same policy
// and network as a cold start; and it must never take what a running sandbox needs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { startServer, cli, addUser, tempDir, removeDataDir } from '../lib/server.mjs';
import { call as tool, until } from '../lib/runs.mjs';
import { PROBE } from '../lib/probe.mjs';

const count = (srv, re) => (srv.stderr().match(new RegExp(re.source, 'g')) || []).length;
const BASE = { SANDBOX_DISK_MB: '256', SANDBOX_POOL: '0', SANDBOX_IDLE_SECONDS: '1' };
// What a user leaves behind before the idle stop: a file in the workspace, one in /tmp, a
// process that ends before the stop (a running one would keep the sandbox from being idle).
const LEAVE = 'echo kept > /workspace/left; echo gone > /tmp/left; echo gone > /root/left';

// The sandbox after its idle stop, as its owner's next call finds it.
async function afterIdle(env) {
  const srv = await startServer({ env: { ...BASE, ...env } });
  try {
    const left = await tool(srv, 'container_exec', { command: LEAVE });
    assert.equal(left.structuredContent.exit_code, 0, JSON.stringify(left));
    const id = left.structuredContent.sandbox_id;
    // a file tool's worker stays with the sandbox and must not keep it from being idle
    const wrote = await tool(srv, 'container_file_write', { path: '/workspace/written', content: 'kept' });
    assert.equal(wrote.isError, undefined, JSON.stringify(wrote));
    await srv.waitLog(new RegExp(`sandbox stopped sbx=${id} .*reason=idle`));
    if (env.SANDBOX_STANDBY !== '0') {
      await srv.waitLog(new RegExp(`sandbox standby ready sbx=${id} `));
      // to its owner and the operator it is stopped: `sandbox list` shows the running ones
      const list = cli(['sandbox', 'list', '--data-dir', srv.dataDir]).stdout;
      assert.doesNotMatch(list, new RegExp(id), list);
    }
    const r = await tool(srv, 'container_exec', { command: PROBE });
    assert.equal(r.structuredContent.exit_code, 0, r.structuredContent.stderr);
    assert.equal(r.structuredContent.sandbox_id, id);
    const from = srv.stderr().match(new RegExp(`sandbox started sbx=${id} [^\\n]*`, 'g')).at(-1);
    return { view: r.structuredContent.stdout, from, srv };
  } finally {
    await srv.stop();
  }
}

test('the next call after an idle stop takes the standby sandbox, as a cold start would make it', async () => {
  const cold = await afterIdle({ SANDBOX_STANDBY: '0' });
  assert.doesNotMatch(cold.from, /from=standby/);
  assert.doesNotMatch(cold.srv.stderr(), /standby/);
  const warm = await afterIdle({});
  assert.match(warm.from, /from=standby/, warm.srv.stderr());
  // the same processes, files (the workspace's kept, /tmp and /root's gone), ids, mounts,
  // environment, limits, policy and network
  assert.equal(warm.view, cold.view);
  assert.match(warm.view, /\nleft\n/);
});

test('standby is capped and gives way to a start at capacity', async () => {
  const srv = await startServer({ env: { ...BASE, SANDBOX_STANDBY: '1', SANDBOX_MAX_RUNNING: '2' } });
  try {
    const carol = addUser(srv, 'carol');
    const a = (await tool(srv, 'container_exec', { command: 'true' })).structuredContent.sandbox_id;
    await srv.waitLog(new RegExp(`sandbox standby ready sbx=${a} `));
    // a second idle stop while one is kept: none, and the log says why
    const c = (await tool(srv, 'container_exec', { command: 'true' }, carol)).structuredContent.sandbox_id;
    await srv.waitLog(new RegExp(`sandbox standby none sbx=${c} .*reason="SANDBOX_STANDBY reached"`));
    assert.equal(count(srv, /standby ready/), 1);
    // carol's busy sandbox and the standby fill both slots: dave's start stops the standby
    const busy = await tool(srv, 'container_exec', { command: 'setsid sleep 600 > /dev/null 2>&1 < /dev/null &' }, carol);
    assert.equal(busy.structuredContent.exit_code, 0);
    const dave = addUser(srv, 'dave');
    const d = await tool(srv, 'container_exec', { command: 'true' }, dave);
    assert.equal(d.isError, undefined, JSON.stringify(d));
    await srv.waitLog(new RegExp(`sandbox stopped sbx=${a} .*reason=evicted`));
    // its owner's next call starts it as before
    await tool(srv, 'container_exec', { command: 'pkill sleep; true' }, carol);
    const again = await tool(srv, 'container_exec', { command: 'true' });
    assert.equal(again.structuredContent.sandbox_id, a, JSON.stringify(again));
  } finally {
    await srv.stop();
  }
});

test('a restarted server stops the standby sandbox it finds, and the next call starts it', async () => {
  const dataDir = tempDir();
  try {
    const srv = await startServer({ dataDir, env: BASE });
    const id = (await tool(srv, 'container_exec', { command: 'echo x > /workspace/x' })).structuredContent.sandbox_id;
    const [, pid] = await srv.waitLog(new RegExp(`sandbox standby ready sbx=${id} user=\\S+ pid=(\\d+)`));
    await srv.stop();
    // sandboxes outlive the server; this one is stopped to its owner, so the next server
    // adopts nothing and ends it
    assert.ok(existsSync(`/proc/${pid}`), `standby init ${pid} died with the server`);
    const next = await startServer({ dataDir, env: BASE });
    next.token = srv.token;
    try {
      await until(() => !existsSync(`/proc/${pid}`), `standby init ${pid} ended by the new server`, 60000);
      assert.doesNotMatch(next.stderr(), new RegExp(`sandbox adopted sbx=${id} `));
      const r = await tool(next, 'container_exec', { command: 'cat /workspace/x' });
      assert.equal(r.structuredContent.sandbox_id, id);
      assert.equal(r.structuredContent.stdout, 'x\n');
      assert.match(next.stderr(), new RegExp(`sandbox started sbx=${id} .*ms=`));
      assert.doesNotMatch(next.stderr(), /from=standby/);
    } finally {
      await next.stop();
    }
  } finally {
    cli(['sandbox', 'stop-all', '--data-dir', dataDir]);
    removeDataDir(dataDir);
  }
});
