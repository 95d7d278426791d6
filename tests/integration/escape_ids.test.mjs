// Escape attempts that lean on sandboxes sharing host ids: every sandbox maps its root to a host
// id range of its own (so a mount-namespace escape from one reaches no other tenant's files) and
// owns its user namespace through that range's root, not host root (so per-user kernel counts,
// such as inotify instances, are per sandbox and a sandbox cannot use up the server's).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { lchownSync, lstatSync, mkdtempSync, readdirSync, rmSync, watch, writeFileSync } from 'node:fs';
import path from 'node:path';

import { startServer, rpc, cli, tempDir, removeDataDir } from '../lib/server.mjs';

const RANGE = 65536;
const UID_BASE = 524288; // SANDBOX_UID_BASE's default
let nextId = 1;

async function tool(srv, name, args = {}, token = srv.token) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name, arguments: args } }, { token });
  assert.equal(r.status, 200, r.text);
  return r.body.result;
}

async function exec(srv, command, { token, env } = {}) {
  const res = await tool(srv, 'container_exec', { command, ...(env ? { env } : {}) }, token);
  assert.equal(res.isError, undefined, JSON.stringify(res));
  return res.structuredContent;
}

const both = (r) => `${r.stdout}${r.stderr}`;

function addUser(srv, name) {
  const add = cli(['user', 'add', name, '--data-dir', srv.dataDir]);
  assert.equal(add.status, 0, add.stderr);
  const tok = cli(['token', 'create', '--user', name, '--data-dir', srv.dataDir]);
  assert.equal(tok.status, 0, tok.stderr);
  return tok.stdout.trim();
}

// "0 <host start> <count>" from a sandbox's /proc/self/uid_map
async function hostRange(srv, token) {
  const r = await exec(srv, 'cat /proc/self/uid_map /proc/self/gid_map', { token });
  const lines = r.stdout.trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
  assert.equal(lines.length, 2, both(r));
  for (const [inside, , count] of lines) {
    assert.equal(inside, 0);
    assert.equal(count, RANGE);
  }
  assert.equal(lines[0][1], lines[1][1], 'uid and gid ranges agree');
  return lines[0][1];
}

describe('per-sandbox id ranges', () => {
  let srv, bob;
  before(async () => {
    srv = await startServer({ env: { SANDBOX_DISK_MB: '0' } });
    bob = addUser(srv, 'bob');
  });
  after(async () => { await srv?.stop(); });

  test("two users' sandboxes map root to disjoint host id ranges, neither the shared default", async () => {
    const a = await hostRange(srv);
    const b = await hostRange(srv, bob);
    assert.notEqual(a, b);
    assert.ok(Math.abs(a - b) >= RANGE, `ranges overlap: ${a} and ${b}`);
    // The range every sandbox shared before stays unused, so files left from then are no one's.
    for (const start of [a, b]) {
      assert.ok(start >= UID_BASE + RANGE, `range ${start} starts below the first slot`);
      assert.equal((start - UID_BASE) % RANGE, 0);
    }
    // On the host, each sandbox's files belong to its own range.
    const ping = await tool(srv, 'container_ping');
    const sbx = ping.structuredContent.sandbox_id;
    await exec(srv, 'echo mine > /workspace/owned && mkdir -p /etc/extra');
    const st = lstatSync(path.join(srv.dataDir, 'sandboxes', sbx, 'workspace', 'owned'));
    assert.equal(st.uid, a);
    assert.equal(st.gid, a);
  });

  test("root inside owns the template's files whatever its range", async () => {
    const r = await exec(srv, 'stat -c "%u %g" / /etc /etc/passwd /root && touch /etc/new && mkdir /opt/x && echo ok');
    assert.equal(r.exit_code, 0, both(r));
    assert.equal(r.stdout, '0 0\n0 0\n0 0\n0 0\nok\n');
  });

  test("one sandbox using up its inotify instances leaves other sandboxes' and the server's alone", async () => {
    // Sandbox A takes every inotify instance it can and keeps them.
    const hog = `
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 100000:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
open('/tmp/inotify-count', 'w').write(str(len(fds)))
time.sleep(600)
`;
    const start = await exec(srv, 'nohup python3 -c "$PY" >/dev/null 2>&1 & echo started', { env: { PY: hog } });
    assert.equal(start.stdout, 'started\n', both(start));
    let count = '';
    for (let i = 0; i < 200 && !count; i++) {
      const r = await exec(srv, 'cat /tmp/inotify-count 2>/dev/null || true');
      count = r.stdout.trim();
      if (!count) await new Promise((res) => setTimeout(res, 50));
    }
    assert.match(count, /^\d+$/, 'the hog never reported');
    assert.ok(Number(count) >= 64, `sandbox A got only ${count} instances`);

    // Sandbox B (another user) still gets one.
    const probe = 'import ctypes, os; fd = ctypes.CDLL(None, use_errno=True).inotify_init1(0); ' +
                  'print("ok" if fd >= 0 else os.strerror(ctypes.get_errno()))';
    const b = await exec(srv, 'python3 -c "$PY"', { token: bob, env: { PY: probe } });
    assert.equal(b.stdout.trim(), 'ok', both(b));

    // Host root (the server's uid, which the run engine's ingest watches with) still gets one.
    const dir = mkdtempSync(path.join(srv.dataDir, 'watch-'));
    writeFileSync(path.join(dir, 'f'), 'x');
    const w = watch(path.join(dir, 'f'));
    w.close();

    await exec(srv, 'pkill -f inotify-count; true');
  });
});

describe('files made under the shared range of older servers', () => {
  let dataDir;
  before(() => { dataDir = tempDir(); });
  after(() => { removeDataDir(dataDir); });

  // Move every id in [from, from + RANGE) of the tree at dir to the same offset from `to`.
  function shiftTree(dir, from, to) {
    const move = (p) => {
      const st = lstatSync(p);
      const id = (v) => (v >= from && v < from + RANGE ? v - from + to : v);
      lchownSync(p, id(st.uid), id(st.gid));
      if (st.isDirectory()) for (const e of readdirSync(p)) move(path.join(p, e));
    };
    move(dir);
  }

  test('follow their sandbox into its own range at its next start', async () => {
    let srv = await startServer({ dataDir, env: { SANDBOX_DISK_MB: '0' } });
    let sbx, start, token;
    try {
      token = srv.token;
      start = await hostRange(srv);
      const w = await exec(srv, 'mkdir -p /workspace/d && echo kept > /workspace/d/f && chown 1000:1000 /workspace/d/f ' +
                                '&& echo layer > /root/r && echo ok');
      assert.equal(w.stdout, 'ok\n', both(w));
      sbx = (await tool(srv, 'container_ping')).structuredContent.sandbox_id;
    } finally {
      await srv.stop();
    }
    assert.equal(cli(['sandbox', 'stop-all', '--data-dir', dataDir]).status, 0);
    // What an older server left: the sandbox's files in the one range all sandboxes shared,
    // and no range recorded for it.
    const dir = path.join(dataDir, 'sandboxes', sbx);
    shiftTree(path.join(dir, 'workspace'), start, UID_BASE);
    shiftTree(path.join(dir, 'upper'), start, UID_BASE);
    const sql = spawnSync('sqlite3', [path.join(dataDir, 'sandbox-mcp.db'),
      `UPDATE sandboxes SET id_slot = NULL WHERE id = '${sbx}'`], { encoding: 'utf8' });
    assert.equal(sql.status, 0, sql.stderr);
    assert.equal(lstatSync(path.join(dir, 'workspace', 'd', 'f')).uid, UID_BASE + 1000);

    srv = await startServer({ dataDir, env: { SANDBOX_DISK_MB: '0' } });
    try {
      srv.token = token;
      const now = await hostRange(srv);
      const r = await exec(srv, 'stat -c "%u %g" /workspace /workspace/d /workspace/d/f /root/r && ' +
                                'echo more >> /workspace/d/f && cat /workspace/d/f /root/r');
      assert.equal(r.exit_code, 0, both(r));
      assert.equal(r.stdout, '0 0\n0 0\n1000 1000\n0 0\nkept\nmore\nlayer\n');
      assert.equal(lstatSync(path.join(dir, 'workspace', 'd', 'f')).uid, now + 1000);
    } finally {
      await srv.stop();
    }
  });
});
