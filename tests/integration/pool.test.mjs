// The warm pool (SANDBOX_POOL): sandboxes started before anyone asks, handed to a new user's first
// call and to container_initialize in place of a start. A pooled sandbox must be indistinguishable
// from one started for the caller, the pool must give way to users' sandboxes at capacity, and a
// restarted server must not adopt what an earlier one left unowned.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { until } from '../lib/runs.mjs';
import { existsSync, readlinkSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { startServer, rpc, cli, tempDir, removeDataDir } from '../lib/server.mjs';
import { PROBE } from '../lib/probe.mjs';

let nextId = 1;

async function tool(srv, name, args = {}, token = srv.token) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name, arguments: args } }, { token });
  const why = `${r.text}\n--- server log ---\n${srv.stderr().slice(-4000)}`;
  assert.equal(r.status, 200, why);
  assert.ok(r.body?.result, why);
  assert.equal(r.body.result.isError, undefined, why);
  return r.body.result.structuredContent;
}

function addUser(srv, name) {
  assert.equal(cli(['user', 'add', name, '--data-dir', srv.dataDir]).status, 0);
  return cli(['token', 'create', '--user', name, '--data-dir', srv.dataDir]).stdout.match(/smcp_\S+/)[0];
}

// Ids of pooled sandboxes the server has started, in order, from its log.
function pooledStarts(srv) {
  return [...srv.stderr().matchAll(/sandbox started sbx=(\S+) user=\(pool\)/g)].map((m) => m[1]);
}

// until() of tests/lib/runs.mjs, bounded for a hung server only
const waitFor = (what, pred) => until(pred, what, 120000);

const untilPool = (srv, n) => waitFor(`${n} pooled starts`, () => pooledStarts(srv).length >= n)
  .catch((e) => { throw new Error(`${e.message}\n--- server log ---\n${srv.stderr().slice(-6000)}`); });

// Sandboxes of 256 MiB: the default 10 GiB each, four at a time, would make the pool wait for
// disk room on a host with less free than that (the disk test below sets its own).
const SMALL = { SANDBOX_DISK_MB: '256' };


// A command sent to a sandbox's init as the server sends one (its control socket; stdin, stdout
// and stderr passed along): what the init answers.
function askInit(srv, id, command) {
  const py = `import os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
req = b"/\\0/bin/sh\\0-c\\0" + sys.argv[2].encode() + b"\\0\\0\\0"
null = os.open("/dev/null", os.O_RDWR)
s.sendmsg([struct.pack("=I", len(req))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", null, null, null))])
s.sendall(req)
s.settimeout(5)
print(s.recv(256).decode(), end="")`;
  const r = spawnSync('python3', ['-c', py, `${srv.dataDir}/sandboxes/${id}/control.sock`, command], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

test('a new user\'s first call takes a pooled sandbox, which is then replaced in the pool', async () => {
  const srv = await startServer({ env: { ...SMALL, SANDBOX_POOL: '2' } });
  try {
    await untilPool(srv, 2);
    const [a, b] = pooledStarts(srv);
    const r = await tool(srv, 'container_exec', { command: 'echo hi; readlink /proc/self/ns/net' });
    assert.equal(r.stdout.split('\n')[0], 'hi');
    assert.ok([a, b].includes(r.sandbox_id), `${r.sandbox_id} is not one of the pooled ${a}, ${b}:\n${srv.stderr()}`);
    await srv.waitLog(new RegExp(`sandbox assigned sbx=${r.sandbox_id} user=usr_\\S+ session=- from=pool`));
    // the pool is refilled: a third pooled start, and the taken one answers as the user's
    await untilPool(srv, 3);
    const ping = await tool(srv, 'container_ping');
    assert.equal(ping.sandbox_id, r.sandbox_id);
    assert.equal(ping.warm, true);
    // another user gets the other one, not the first user's
    const carol = addUser(srv, 'carol');
    const c = await tool(srv, 'container_exec', { command: 'readlink /proc/self/ns/net' }, carol);
    assert.notEqual(c.sandbox_id, r.sandbox_id);
    // each has a network namespace of its own, made at its hand-over, not the host's
    const host = readlinkSync('/proc/self/ns/net');
    const nets = [r.stdout.split('\n')[1], c.stdout.trim()];
    assert.match(nets[0], /^net:\[\d+\]$/);
    assert.notEqual(nets[0], nets[1]);
    assert.ok(!nets.includes(host), `${nets} includes the host's ${host}`);
    assert.ok(pooledStarts(srv).includes(c.sandbox_id), `${c.sandbox_id} was not pooled:\n${srv.stderr()}`);
  } finally {
    await srv.stop();
  }
});

test('a pooled sandbox is indistinguishable from one started for the caller', async () => {
  const cold = await startServer({ env: { ...SMALL, SANDBOX_POOL: '0' } });
  let coldView;
  try {
    const r = await tool(cold, 'container_exec', { command: PROBE });
    assert.equal(r.exit_code, 0, r.stderr);
    coldView = r.stdout;
    assert.doesNotMatch(cold.stderr(), /from=pool/);
  } finally {
    await cold.stop();
  }
  // three pooled: two handed over ahead (armed), the third waiting in the parked namespace
  const srv = await startServer({ env: { ...SMALL, SANDBOX_POOL: '3' } });
  try {
    await untilPool(srv, 3);
    const armedIds = () => [...srv.stderr().matchAll(/sandbox pool armed sbx=(\S+)/g)].map((m) => m[1]);
    await waitFor('two pooled sandboxes armed ahead', () => armedIds().length >= 2);
    const parked = pooledStarts(srv).filter((id) => !armedIds().includes(id));
    assert.equal(parked.length, 1, `${pooledStarts(srv)} / ${armedIds()}`);
    // before its hand-over its init runs nothing, not even what the server's socket asks for
    assert.match(askInit(srv, parked[0], 'echo ran > /tmp/ran'), /^the sandbox is not handed over yet: /);
    // a first call takes one handed over ahead, as it was made
    const first = await tool(srv, 'container_exec', { command: PROBE });
    assert.ok(armedIds().includes(first.sandbox_id), `${first.sandbox_id} was not armed ahead`);
    await srv.waitLog(new RegExp(`sandbox assigned sbx=${first.sandbox_id} `));
    assert.equal(first.stdout, coldView);
    // a user leaves files, a process and a full /tmp behind, then starts over from the pool
    const dirty = await tool(srv, 'container_exec', { command:
      'echo secret > /workspace/left; echo secret > /tmp/left; echo secret > /root/left; ' +
      'setsid sleep 1000 > /dev/null 2>&1 < /dev/null & cat /proc/self/uid_map' });
    const oldRange = dirty.stdout.trim().split(/\s+/)[1];
    await untilPool(srv, 2);
    const init = await tool(srv, 'container_initialize');
    assert.equal(init.warm, true);
    assert.notEqual(init.sandbox_id, first.sandbox_id);
    const after = await tool(srv, 'container_exec', { command: PROBE + '; echo "range:"; cat /proc/self/uid_map' });
    assert.equal(after.sandbox_id, init.sandbox_id);
    const [view, range] = after.stdout.split('range:\n');
    assert.equal(view, coldView);
    assert.notEqual(range.trim().split(/\s+/)[1], oldRange, 'the old id range is still in use');
    // the replaced sandbox is gone: its processes, cgroup, files and row
    await srv.waitLog(new RegExp(`sandbox stopped sbx=${first.sandbox_id} .*reason=initialize`));
    assert.equal(existsSync(`${srv.dataDir}/sandboxes/${first.sandbox_id}`), false);
    const list = cli(['sandbox', 'list', '--data-dir', srv.dataDir]).stdout;
    assert.doesNotMatch(list, new RegExp(first.sandbox_id));
  } finally {
    await srv.stop();
  }
});

test('the pool stays within capacity and gives way to a user\'s sandbox', async () => {
  const srv = await startServer({ env: { ...SMALL, SANDBOX_POOL: '2', SANDBOX_MAX_RUNNING: '2', SANDBOX_IDLE_SECONDS: '1' } });
  try {
    await untilPool(srv, 2);
    const r = await tool(srv, 'container_exec', { command: 'echo mine > /workspace/keep' });
    // at capacity (the user's and one pooled): no third pooled start while the user's runs
    await new Promise((res) => setTimeout(res, 500));
    assert.equal(pooledStarts(srv).length, 2);
    // idle-stopped, the user's sandbox makes room: the pool fills it
    await srv.waitLog(new RegExp(`sandbox stopped sbx=${r.sandbox_id} .*reason=idle`));
    await untilPool(srv, 3);
    // the user comes back at capacity: a pooled sandbox is stopped for theirs, and their files
    // are where they left them
    const pooledNow = pooledStarts(srv).filter((id) => id !== r.sandbox_id);
    const back = await tool(srv, 'container_exec', { command: 'cat /workspace/keep' });
    assert.equal(back.sandbox_id, r.sandbox_id);
    assert.equal(back.stdout, 'mine\n');
    const evicted = await srv.waitLog(/sandbox stopped sbx=(\S+) user=\S* reason=evicted/);
    assert.ok(pooledNow.includes(evicted[1]), `${evicted[1]} was not a pooled sandbox`);
  } finally {
    await srv.stop();
  }
});

test('a restarted server removes what the last one left unowned and fills its pool anew', async () => {
  const dataDir = tempDir();
  try {
    const srv = await startServer({ dataDir, env: { ...SMALL, SANDBOX_POOL: '2' } });
    await untilPool(srv, 2);
    const mine = (await tool(srv, 'container_exec', { command: 'echo x > /workspace/x' })).sandbox_id;
    await untilPool(srv, 3);
    const leftover = pooledStarts(srv).filter((id) => id !== mine);
    await waitFor('the refill', () => leftover.every((id) =>
      new RegExp(`sandbox started sbx=${id} .*ms=`).test(srv.stderr())));
    await srv.stop('SIGKILL');
    const next = await startServer({ dataDir, env: { ...SMALL, SANDBOX_POOL: '1' } });
    next.token = srv.token;
    try {
      await untilPool(next, 1);
      for (const id of leftover) {
        // running, or killed with it before its row said so: removed either way
        assert.match(next.stderr(), new RegExp(`sandbox removed sbx=${id} .*reason=unowned at start`));
        assert.equal(existsSync(`${dataDir}/sandboxes/${id}`), false, `${id} left files`);
      }
      assert.match(next.stderr(), new RegExp(`sandbox adopted sbx=${mine} `));
      const r = await tool(next, 'container_exec', { command: 'cat /workspace/x' });
      assert.equal(r.sandbox_id, mine);
      assert.equal(r.stdout, 'x\n');
      assert.ok(!leftover.includes(pooledStarts(next)[0]));
    } finally {
      await next.stop();
    }
  } finally {
    cli(['sandbox', 'stop-all', '--data-dir', dataDir]);
    removeDataDir(dataDir);
  }
});

test('the pool never takes disk room a user\'s sandbox would need: it stays short and says why', async () => {
  // room for one image of 64 MiB in all: the pool makes one and then waits
  const srv = await startServer({ env: { SANDBOX_POOL: '2', SANDBOX_DISK_MB: '64', SANDBOX_DISK_TOTAL_MB: '100' } });
  try {
    await untilPool(srv, 1);
    await srv.waitLog(/sandbox pool short size=2 have=1 reason="the sandboxes' disks would hold/);
    assert.equal(pooledStarts(srv).length, 1);
    // the one there is serves a user's first call
    const r = await tool(srv, 'container_exec', { command: 'echo ok' });
    assert.equal(r.stdout, 'ok\n');
    assert.equal(r.sandbox_id, pooledStarts(srv)[0]);
  } finally {
    await srv.stop();
  }
});
