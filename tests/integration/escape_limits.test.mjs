// Limits fail closed: a host without cgroup memory and pids limits gets no sandboxes (a sandbox
// without them could exhaust the host) unless the operator says so, and then the server says
// at every start that limits are off.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';

import { startServer, rpc, cli, tempDir } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

let nextId = 1;
async function tool(srv, name, args = {}) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });
  assert.equal(r.status, 200, r.text);
  return r.body.result;
}
const text = (res) => (res.content || []).map((c) => c.text || '').join('');

describe('sandboxes without cgroup limits', () => {
  const dirs = [];
  after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

  function emptyRoot() {
    const d = tempDir('smcp-cgroot-');
    dirs.push(d);
    return d;
  }

  test('are refused, with the reason and the setting that allows them, while other tools work', async () => {
    const srv = await startServer({ env: { SANDBOX_CGROUP_ROOT: emptyRoot() } });
    try {
      const res = await tool(srv, 'container_exec', { command: 'echo should-not-run' });
      assert.equal(res.isError, true, JSON.stringify(res));
      assert.match(text(res), /need memory and process limits/);
      assert.match(text(res), /SANDBOX_ALLOW_UNLIMITED=1/);
      assert.doesNotMatch(JSON.stringify(res), /should-not-run\\n/);
      const info = await tool(srv, 'server_info');
      assert.equal(info.isError, undefined, JSON.stringify(info));
    } finally {
      await srv.stop();
    }
    assertNoSanitizerReport(srv.stderr());
  });

  test('start when the operator allows it, and the log says limits are off at every start', async () => {
    const env = { SANDBOX_CGROUP_ROOT: emptyRoot(), SANDBOX_ALLOW_UNLIMITED: '1', SANDBOX_DISK_MB: '0' };
    const dataDir = tempDir();
    dirs.push(dataDir);
    let token;
    for (let i = 0; i < 2; i++) {
      const srv = await startServer({ env, dataDir });
      try {
        token = srv.token = srv.token || token;
        const res = await tool(srv, 'container_exec', { command: 'echo ran' });
        assert.equal(res.isError, undefined, JSON.stringify(res));
        assert.equal(res.structuredContent.stdout, 'ran\n');
        assert.match(srv.stderr(), /sandbox runtime cgroup=none /);
        assert.match(srv.stderr(), /warn sandbox limits off: .*SANDBOX_ALLOW_UNLIMITED=1/);
      } finally {
        await srv.stop();
      }
      cli(['sandbox', 'stop-all', '--data-dir', dataDir]);
    }
  });

  test('under cgroup v1, a memory controller without the pids controller is not enough', async (t) => {
    const root = emptyRoot();
    const memory = path.join(root, 'memory');
    mkdirSync(memory);
    const m = spawnSync('mount', ['-t', 'cgroup', '-o', 'memory', 'cgroup', memory], { encoding: 'utf8' });
    if (m.status !== 0) {
      t.skip(`this host cannot mount the cgroup v1 memory controller: ${m.stderr.trim()}`);
      return;
    }
    try {
      const srv = await startServer({ env: { SANDBOX_CGROUP_ROOT: root } });
      try {
        const res = await tool(srv, 'container_exec', { command: 'true' });
        assert.equal(res.isError, true, JSON.stringify(res));
        assert.match(text(res), /cgroup v1 memory and pids controllers/);
      } finally {
        await srv.stop();
      }
    } finally {
      spawnSync('umount', [memory]);
    }
  });
});
