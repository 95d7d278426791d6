// The debian template for real: `template build debian` runs debootstrap, apt and npm (minutes,
// root and the network), a second build finds it up to date, and a server started with
// SANDBOX_TEMPLATE=debian runs python3, node, pnpm and git inside a sandbox on it.
// Runs only with SANDBOX_MCP_SLOW_TESTS=1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

import { BIN, startServer, rpc, tempDir, removeDataDir } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const skip = process.env.SANDBOX_MCP_SLOW_TESTS !== '1'
  ? 'slow (builds the debian template with debootstrap, minutes and the network): set SANDBOX_MCP_SLOW_TESTS=1'
  : process.getuid() !== 0 ? 'building a template needs root' : false;

// Run the CLI to completion; its output can run to megabytes, more than spawnSync keeps.
function cliAsync(args) {
  return new Promise((resolve) => {
    const env = { ...process.env };
    for (const k of Object.keys(env)) if (k.startsWith('SANDBOX_') || k === 'DATA_DIR') delete env[k];
    const p = spawn(BIN, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

const EXEC = (command) => ({
  jsonrpc: '2.0', id: 1, method: 'tools/call',
  params: { name: 'container_exec', arguments: { command, timeout_ms: 120000 } },
});

test('template build debian: built, verified, kept when up to date, and usable by serve', { skip, timeout: 45 * 60 * 1000 }, async (t) => {
  const dataDir = tempDir('smcp-debian-');
  t.after(() => removeDataDir(dataDir));
  const tmpl = path.join(dataDir, 'templates', 'debian');
  const rootfs = path.join(tmpl, 'rootfs');

  const t0 = Date.now();
  const built = await cliAsync(['template', 'build', 'debian', '--data-dir', dataDir]);
  const seconds = Math.round((Date.now() - t0) / 1000);
  assertNoSanitizerReport(built.stderr);
  assert.equal(built.status, 0, built.stderr.slice(-4000));
  t.diagnostic(`build took ${seconds} s: ${/template debian: built in .*/.exec(built.stderr)?.[0]}`);
  assert.match(built.stderr, /^template debian: debootstrap bookworm \(minbase\) from http/m);
  assert.match(built.stderr, /^ {2}debootstrap: I: Base system installed successfully\.$/m);
  assert.match(built.stderr, /^template debian: npm install --global pnpm@/m);
  for (const tool of ['python3 -c', 'pip3 --version', 'git --version', 'gcc --version',
    'node --version', 'npm --version', 'pnpm --version'])
    assert.match(built.stderr, new RegExp(`^template debian: ok ${tool}`, 'm'));

  // What serve takes as the lower layer, and nothing of the build left beside it.
  assert.match(readFileSync(path.join(tmpl, 'recipe'), 'utf8'), /^[0-9a-f]{64}\nrecipe debian-template-/);
  assert.ok(existsSync(path.join(rootfs, 'usr', 'local', 'bin', 'pnpm')));
  assert.equal(readFileSync(path.join(rootfs, 'etc', 'hostname'), 'utf8'), 'sandbox\n');
  assert.equal(readFileSync(path.join(rootfs, 'etc', 'resolv.conf'), 'utf8'), '');
  // Plain ids: each sandbox mounts the tree idmapped into its own range.
  for (const d of ['', 'root', 'etc', 'etc/passwd', 'home', 'tmp', 'workspace', 'var/tmp', 'usr',
    'usr/bin/python3', 'usr/local/bin'])
    assert.equal(statSync(path.join(rootfs, d)).uid, 0, `owner of /${d}`);
  const left = (await import('node:fs')).readdirSync(path.dirname(tmpl));
  assert.deepEqual(left.filter((n) => n !== 'debian.lock').sort(), ['debian']);

  const again = await cliAsync(['template', 'build', 'debian', '--data-dir', dataDir]);
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stderr, /^template debian: up to date in '.*' \(recipe [0-9a-f]{16}\)$/m);
  assert.doesNotMatch(again.stderr, /debootstrap/);

  const server = await startServer({ env: { SANDBOX_TEMPLATE: 'debian' }, dataDir });
  try {
    const r = await rpc(server, EXEC('python3 --version && node --version && pnpm --version && git --version'));
    assert.equal(r.status, 200, r.text);
    const out = r.body.result.structuredContent;
    assert.equal(out.exit_code, 0, JSON.stringify(out));
    assert.match(out.stdout, /^Python 3\.11\.\d+\nv18\.\d+\.\d+\n\d+\.\d+\.\d+\ngit version 2\.\d+/);

    // Root inside owns the whole tree through the idmapped template: it edits /etc, builds in
    // /workspace and installs into /usr, all in the sandbox's own layer; the template is unchanged.
    const w = await rpc(server, EXEC(
      'cat /etc/hostname && echo x >> /etc/hosts && printf "int main(){return 0;}" > /workspace/a.c && ' +
      'gcc -o /workspace/a /workspace/a.c && /workspace/a && echo built && ' +
      '(touch /usr/bin/nope 2>/dev/null && echo usr-writable || echo usr-read-only)'));
    const wo = w.body.result.structuredContent;
    assert.equal(wo.exit_code, 0, JSON.stringify(wo));
    assert.equal(wo.stdout, 'sandbox\nbuilt\nusr-writable\n');
    assert.ok(!existsSync(path.join(rootfs, 'usr', 'bin', 'nope')));
  } finally {
    await server.stop();
  }
  assertNoSanitizerReport(server.stderr());
});
