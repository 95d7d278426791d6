// The debian template for real, the one `make test` builds once and shares (debianTemplate()):
// serve takes it at once and verifies it, its tools run inside a sandbox, root changes it only in
// the sandbox's own layer; and a tree that fails its checks, or whose recipe changed, is handled
// as the seed's snapshot is (not used, or kept while a rebuild runs). Rebuilds here go to a
// mirror on loopback that has nothing, so they fail at once and touch no network.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { until } from '../lib/runs.mjs';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { startServer, rpc, tempDir, removeDataDir, debianTemplate, TEMPLATES_DIR } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const EXEC = (command) => ({
  jsonrpc: '2.0', id: 1, method: 'tools/call',
  params: { name: 'container_exec', arguments: { command, timeout_ms: 120000 } },
});
const PING = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'container_ping', arguments: {} } };

// until() of tests/lib/runs.mjs, bounded for a hung server only
const waitFor = (what, pred) => until(pred, what, 300000);

let env;
let mirror;
before(async () => {
  env = await debianTemplate();
  mirror = http.createServer((req, res) => { res.writeHead(404); res.end(); });
  await new Promise((r) => mirror.listen(0, '127.0.0.1', r));
});
after(() => mirror?.close());

test('serve takes the debian template at once and verifies it; its toolset runs in a sandbox, and root changes it only in the sandbox\'s layer', async () => {
  const rootfs = path.join(TEMPLATES_DIR, 'debian', 'rootfs');
  const recipe = readFileSync(path.join(TEMPLATES_DIR, 'debian', 'recipe'), 'utf8');
  assert.match(recipe, /^[0-9a-f]{64}\nrecipe debian-template-\d+\n/);
  const suite = /^suite (\w+)$/m.exec(recipe)[1];
  const server = await startServer({ env });
  try {
    assert.match(server.stderr(), /sandbox runtime cgroup=\S+ template=debian new-sandboxes=debian /);
    await waitFor('the verification', () => /sandbox template debian ready verified/.test(server.stderr()));
    const ping = await rpc(server, PING);
    assert.equal(ping.body.result.structuredContent.template, 'debian');
    assert.equal(ping.body.result.structuredContent.template_note, undefined);

    const r = await rpc(server, EXEC(
      'python3 --version && node --version && pnpm --version && git --version && gcc --version | head -n 1 && ' +
      'python3 -c "import numpy, pandas, scipy, matplotlib; print(numpy.__name__, pandas.__name__, scipy.__name__, matplotlib.get_backend())" && ' +
      '. /etc/os-release && echo "$VERSION_CODENAME"'));
    const out = r.body.result.structuredContent;
    assert.equal(out.exit_code, 0, JSON.stringify(out));
    const want = suite === 'trixie' ? /^Python 3\.13\.\d+\nv20\.\d+\.\d+\n/ : /^Python 3\.11\.\d+\nv18\.\d+\.\d+\n/;
    assert.match(out.stdout, want);
    assert.match(out.stdout, /\n\d+\.\d+\.\d+\ngit version 2\.\d+[^\n]*\ngcc [^\n]+\nnumpy pandas scipy agg\n/i);
    assert.match(out.stdout, new RegExp(`\\n${suite}\\n$`));

    // Root inside owns the whole tree through the idmapped template: it edits /etc, builds in
    // /workspace and writes into /usr, all in the sandbox's own layer; the shared tree is unchanged.
    const w = await rpc(server, EXEC(
      'cat /etc/hostname && echo x >> /etc/hosts && printf "int main(){return 0;}" > /workspace/a.c && ' +
      'gcc -o /workspace/a /workspace/a.c && /workspace/a && echo built && ' +
      '(touch /usr/bin/smcp-test-nope 2>/dev/null && echo usr-writable || echo usr-read-only)'));
    const wo = w.body.result.structuredContent;
    assert.equal(wo.exit_code, 0, JSON.stringify(wo));
    assert.equal(wo.stdout, 'sandbox\nbuilt\nusr-writable\n');
    assert.throws(() => statSync(path.join(rootfs, 'usr', 'bin', 'smcp-test-nope')));
    assert.doesNotMatch(readFileSync(path.join(rootfs, 'etc', 'hosts'), 'utf8'), /^x$/m);
  } finally {
    await server.stop();
  }
  assertNoSanitizerReport(server.stderr());
});

// A template directory whose debian tree is the shared one, without touching the original: bound
// read-only (sandboxes can start on it: an idmapped mount needs a plain filesystem below), or
// seen through an overlay (overlay: true) that a test may break. mount() puts it in place, for a
// test that starts without one. Returns {dir, rootfs, base, mount, cleanup}.
function overlayTemplate({ mounted = true, overlay = false } = {}) {
  const base = tempDir('smcp-tmpl-ovl-');
  const dir = path.join(base, 'templates');
  const rootfs = path.join(dir, 'debian', 'rootfs');
  for (const d of [dir, path.join(base, 'data'), path.join(base, 'upper'), path.join(base, 'work')]) mkdirSync(d, { recursive: true });
  const t = {
    dir, rootfs, base,
    mount() {
      // the recipe first: a build that finds the tree checks it against the recipe
      mkdirSync(rootfs, { recursive: true });
      copyFileSync(path.join(TEMPLATES_DIR, 'debian', 'recipe'), path.join(dir, 'debian', 'recipe'));
      const shared = path.join(TEMPLATES_DIR, 'debian', 'rootfs');
      if (overlay) {
        execFileSync('mount', ['-t', 'overlay', 'overlay', '-o',
          `lowerdir=${shared},upperdir=${path.join(base, 'upper')},workdir=${path.join(base, 'work')}`, rootfs]);
      } else {
        execFileSync('mount', ['--bind', shared, rootfs]);
        execFileSync('mount', ['-o', 'remount,bind,ro', rootfs]);
      }
    },
    cleanup() {
      removeDataDir(path.join(base, 'data')); // its sandboxes stopped first
      try { execFileSync('umount', [rootfs]); } catch { /* not mounted */ }
      rmSync(base, { recursive: true, force: true });
    },
  };
  if (mounted) t.mount();
  return t;
}

test('once the template is ready, new and re-initialized sandboxes get it; a running one keeps the host template and is told how to move', async () => {
  const t = overlayTemplate({ mounted: false });
  let server;
  try {
    server = await startServer({
      dataDir: path.join(t.base, 'data'),
      env: { ...env, SANDBOX_TEMPLATE_DIR: t.dir, SANDBOX_TEMPLATE_RETRY_SECONDS: '2',
             SANDBOX_TEMPLATE_MIRROR: `http://127.0.0.1:${mirror.address().port}/debian` },
    });
    // No tree: the first attempt fails against the empty mirror; the sandbox runs on host.
    await waitFor('the failed first attempt', () => /build failed attempt=1 /.test(server.stderr()));
    const first = await rpc(server, EXEC('test -e /usr/bin/pnpm && echo has-pnpm || echo no-pnpm'));
    assert.equal(first.body.result.structuredContent.exit_code, 0);
    let ping = await rpc(server, PING);
    assert.equal(ping.body.result.structuredContent.template, 'host');
    // The tree arrives (as a build would leave it); the next attempt finds it and verifies it.
    t.mount();
    await waitFor('the template to be ready', () => /sandbox template debian ready verified/.test(server.stderr()));
    assert.match(server.stderr(), /sandbox template new-sandboxes=debian/);
    ping = await rpc(server, PING);
    assert.equal(ping.body.result.structuredContent.template, 'host', 'a running sandbox keeps its template');
    assert.match(ping.body.result.structuredContent.template_note,
      /The default template \(Debian with .*\) is ready: container_initialize moves this sandbox onto it/);
    const init = await rpc(server, { jsonrpc: '2.0', id: 5, method: 'tools/call',
      params: { name: 'container_initialize', arguments: {} } });
    assert.equal(init.body.result.structuredContent.template, 'debian', init.text);
    assert.equal(init.body.result.structuredContent.template_note, undefined);
    const r = await rpc(server, EXEC('test -e /usr/bin/pnpm -o -e /usr/local/bin/pnpm && echo has-pnpm'));
    assert.equal(r.body.result.structuredContent.stdout, 'has-pnpm\n');
  } finally {
    await server?.stop();
    t.cleanup();
  }
  assertNoSanitizerReport(server.stderr());
});

test('a debian tree whose tools no longer run is not used: new sandboxes start on the host template while it is rebuilt', async () => {
  const t = overlayTemplate({ overlay: true });
  let server;
  try {
    unlinkSync(path.join(t.rootfs, 'usr', 'bin', 'git')); // a whiteout in the overlay only
    server = await startServer({
      dataDir: path.join(t.base, 'data'),
      env: { ...env, SANDBOX_TEMPLATE_DIR: t.dir, SANDBOX_TEMPLATE_RETRY_SECONDS: '60',
             SANDBOX_TEMPLATE_MIRROR: `http://127.0.0.1:${mirror.address().port}/debian` },
    });
    await waitFor('the failed verification', () => /sandbox template debian unusable: /.test(server.stderr()));
    assert.match(server.stderr(), /sandbox template debian unusable: check 'git --version' failed: .*: new sandboxes start on the host template until it is rebuilt/);
    await waitFor('the failed rebuild', () => /build failed attempt=1 /.test(server.stderr()));
    const ping = await rpc(server, PING);
    assert.equal(ping.body.result.structuredContent.template, 'host');
    assert.match(ping.body.result.structuredContent.template_note, /could not be built yet \(attempt 1: /);
    // the tree in place stays as it was (a failed build replaces nothing)
    assert.match(readFileSync(path.join(t.rootfs, 'etc', 'os-release'), 'utf8'), /Debian/);
  } finally {
    await server?.stop();
    t.cleanup();
  }
  assertNoSanitizerReport(server.stderr());
});

test('a debian tree of an older recipe is kept in use while the new one is built', async () => {
  const t = overlayTemplate();
  let server;
  try {
    const recipe = path.join(t.dir, 'debian', 'recipe');
    writeFileSync(recipe, readFileSync(recipe, 'utf8').replace(/^[0-9a-f]{64}/, '0'.repeat(64)));
    server = await startServer({
      dataDir: path.join(t.base, 'data'),
      env: { ...env, SANDBOX_TEMPLATE_DIR: t.dir, SANDBOX_TEMPLATE_RETRY_SECONDS: '60',
             SANDBOX_TEMPLATE_MIRROR: `http://127.0.0.1:${mirror.address().port}/debian` },
    });
    await waitFor('the rebuild to start and fail', () => /build failed attempt=1 /.test(server.stderr()));
    assert.match(server.stderr(), /sandbox template debian rebuilding: the recipe changed/);
    assert.doesNotMatch(server.stderr(), /unusable/);
    const ping = await rpc(server, PING);
    assert.equal(ping.body.result.structuredContent.template, 'debian');
  } finally {
    await server?.stop();
    t.cleanup();
  }
  assertNoSanitizerReport(server.stderr());
});
