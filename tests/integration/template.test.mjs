// `sandbox-mcp template build`: usage, the names it knows; and how serve takes care of the debian
// template when it is missing, cannot be built (a mirror on loopback that has no archive) or was
// built for another id layout. The real template: template_debian.test.mjs.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { until } from '../lib/runs.mjs';
import { chownSync, existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { startServer, rpc, cli, tempDir, removeDataDir } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const dirs = [];
function dir() {
  const d = tempDir('smcp-tmpl-');
  dirs.push(d);
  return d;
}
after(() => { for (const d of dirs) removeDataDir(d); });

function run(args) {
  const r = cli(args);
  assertNoSanitizerReport(r.stderr, `sandbox-mcp ${args.join(' ')}`);
  return r;
}

const EXEC = (command) => ({
  jsonrpc: '2.0', id: 1, method: 'tools/call',
  params: { name: 'container_exec', arguments: { command } },
});

test('the main usage lists `template build`; `template --help` prints its usage and exits 0', () => {
  assert.match(run(['--help']).stdout, /template build NAME \[--force\]/);
  const r = run(['template', '--help']);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^usage: sandbox-mcp template build NAME \[--force\]/);
  assert.match(r.stdout, /debian/);
});

test('`template` without a subcommand, or with an unknown one, exits 2', () => {
  const none = run(['template']);
  assert.equal(none.status, 2);
  assert.match(none.stderr, /expected 'build'/);
  const bad = run(['template', 'frob', 'debian']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown subcommand 'frob'/);
});

test('`template build` needs exactly one NAME and exits 2 otherwise', () => {
  const d = dir();
  for (const args of [['template', 'build'], ['template', 'build', 'debian', 'host']]) {
    const r = run([...args, '--data-dir', d]);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, /'template build' takes exactly one NAME/);
    assert.match(r.stderr, /usage: sandbox-mcp template build/);
  }
  const opt = run(['template', 'build', 'debian', '--label', 'x', '--data-dir', d]);
  assert.equal(opt.status, 2);
  assert.match(opt.stderr, /option '--label' does not apply here/);
  assert.ok(!existsSync(path.join(d, 'templates')), 'a usage error built nothing');
});

test('`template build nope` exits 1 naming the template and the known ones, building nothing', () => {
  const d = dir();
  const r = run(['template', 'build', 'nope', '--force', '--data-dir', d]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /^sandbox-mcp: unknown template 'nope' \(host or debian\)\n$/);
  assert.ok(!existsSync(path.join(d, 'templates')));
});

test('`template build host` exits 0 and explains that host needs no build', () => {
  const d = dir();
  const r = run(['template', 'build', 'host', '--data-dir', d]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /template host: nothing to build: it is assembled from the host when the first sandbox starts/);
  assert.ok(!existsSync(path.join(d, 'templates')));
});

// A mirror on loopback that has no Debian archive at all (suites: {name: status} answers
// dists/<name>/Release with that status; everything else 404). Records the paths asked for.
async function startMirror(suites = {}) {
  const paths = [];
  const server = http.createServer((req, res) => {
    paths.push(req.url);
    const m = /^\/debian\/dists\/([a-z]+)\/Release$/.exec(req.url);
    res.writeHead(m && suites[m[1]] ? suites[m[1]] : 404);
    res.end();
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/debian`, paths, close: () => server.close() };
}

// until() of tests/lib/runs.mjs, bounded for a hung server only
const waitFor = (what, pred) => until(pred, what, 300000);

const PING = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'container_ping', arguments: {} } };
const INIT = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'container_initialize', arguments: {} } };

test('without a debian template, serve builds it in the background, starts sandboxes on the host template meanwhile and says so, and retries a failed build with backoff', async () => {
  const mirror = await startMirror(); // no suite at all: the build fails at once
  const d = dir();
  const s = await startServer({
    dataDir: d,
    env: { SANDBOX_TEMPLATE: 'debian', SANDBOX_TEMPLATE_MIRROR: mirror.url, SANDBOX_TEMPLATE_RETRY_SECONDS: '1' },
  });
  try {
    // The default template is debian: the server took it up and found nothing to use yet.
    assert.match(s.stderr(), /sandbox runtime cgroup=\S+ template=debian new-sandboxes=host /);
    const init = await rpc(s, INIT);
    const out = init.body.result.structuredContent;
    assert.ok(!init.body.result.isError, init.text);
    assert.equal(out.template, 'host');
    assert.match(out.template_note, /^This sandbox runs on the host template.* The default template \(Debian with python3, pip, venv, numpy, pandas, matplotlib, scipy, git, gcc, make, curl, node, npm and pnpm\) (is being built|could not be built yet)/);
    assert.ok(init.body.result.content[0].text.includes(out.template_note), 'the note is in the text the model reads');
    // The first attempt fails (the mirror has neither trixie nor bookworm), and is retried.
    await waitFor('a second failed attempt', () => /build failed attempt=2 /.test(s.stderr()));
    assert.match(s.stderr(), /sandbox template debian build failed attempt=1 retry_s=1 log=\S+\/debian\.log: template 'debian': the Debian mirror 'http:\/\/127\.0\.0\.1:\d+\/debian' has neither trixie nor bookworm/);
    assert.match(s.stderr(), /build failed attempt=2 retry_s=2 /, 'the wait doubles');
    assert.ok(mirror.paths.includes('/debian/dists/trixie/Release'));
    const ping = await rpc(s, PING);
    const p = ping.body.result.structuredContent;
    assert.equal(p.template, 'host');
    assert.match(p.template_note, /could not be built yet \(attempt \d+: template 'debian': the Debian mirror .* has neither trixie nor bookworm\); the next attempt starts in \d+ s/);
    assert.match(ping.body.result.content[0].text, /\(template host\)\n\nThis sandbox runs on the host template/);
    // The sandbox works meanwhile, and nothing of a build is left behind.
    const r = await rpc(s, EXEC('echo ok'));
    assert.equal(r.body.result.structuredContent.stdout, 'ok\n');
    const left = readdirSync(path.join(d, 'templates')).filter((n) => n.startsWith('debian'));
    assert.deepEqual(left.filter((n) => n !== 'debian.lock' && n !== 'debian.log'), []);
    assert.match(readFileSync(path.join(d, 'templates', 'debian.log'), 'utf8'), /has neither trixie nor bookworm/);
  } finally {
    await s.stop();
    mirror.close();
  }
  assertNoSanitizerReport(s.stderr());
});

test('a mirror without trixie gets a bookworm build, said in the build log', async () => {
  const mirror = await startMirror({ bookworm: 200 });
  const d = dir();
  const s = await startServer({
    dataDir: d,
    env: { SANDBOX_TEMPLATE: 'debian', SANDBOX_TEMPLATE_MIRROR: mirror.url, SANDBOX_TEMPLATE_RETRY_SECONDS: '60' },
  });
  try {
    await waitFor('the failed attempt', () => /build failed attempt=1 /.test(s.stderr()));
    const log = readFileSync(path.join(d, 'templates', 'debian.log'), 'utf8');
    assert.match(log, /^template debian: the mirror 'http:\/\/127\.0\.0\.1:\d+\/debian' has no trixie: building bookworm instead$/m);
    assert.match(log, /^template debian: debootstrap bookworm \(minbase\) from http:\/\/127\.0\.0\.1:\d+\/debian$/m);
    // debootstrap found no Release file to trust: the build failed and removed its tree
    const left = readdirSync(path.join(d, 'templates')).filter((n) => n.startsWith('debian.building'));
    assert.deepEqual(left, []);
    const ping = await rpc(s, PING);
    assert.equal(ping.body.result.structuredContent.template, 'host');
  } finally {
    await s.stop();
    mirror.close();
  }
  assertNoSanitizerReport(s.stderr());
});

test('a debian template of the older id layout (parts owned by a shared id range) is not used: sandboxes start on host while it is rebuilt', async () => {
  const mirror = await startMirror();
  const d = dir();
  // Older servers handed the template's root to the one id range every sandbox shared.
  const rootfs = path.join(d, 'templates', 'debian', 'rootfs');
  mkdirSync(rootfs, { recursive: true });
  chownSync(rootfs, 524288, 524288);
  const s = await startServer({
    env: { SANDBOX_TEMPLATE: 'debian', SANDBOX_TEMPLATE_MIRROR: mirror.url, SANDBOX_TEMPLATE_RETRY_SECONDS: '60' },
    dataDir: d,
  });
  try {
    assert.match(s.stderr(), /sandbox template debian: template 'debian' was built for another id layout: run 'sandbox-mcp template build debian': rebuilding it/);
    const r = await rpc(s, EXEC('echo ok'));
    assert.equal(r.body.result.structuredContent.stdout, 'ok\n');
    const ping = await rpc(s, PING);
    assert.equal(ping.body.result.structuredContent.template, 'host');
  } finally {
    await s.stop();
    mirror.close();
  }
  assertNoSanitizerReport(s.stderr());
});

test('bad template settings stop serve with a message naming them', () => {
  for (const [env, msg] of [
    [{ SANDBOX_TEMPLATE: 'alpine' }, /SANDBOX_TEMPLATE 'alpine' is not host or debian/],
    [{ SANDBOX_TEMPLATE_DIR: 'relative/dir' }, /SANDBOX_TEMPLATE_DIR 'relative\/dir' is not an absolute path/],
    [{ SANDBOX_TEMPLATE_MIRROR: 'ftp://mirror.example/debian' }, /SANDBOX_TEMPLATE_MIRROR 'ftp:\/\/mirror\.example\/debian' is not an http:\/\/, https:\/\/ or file:\/\/\/ URL/],
    [{ SANDBOX_TEMPLATE_RETRY_SECONDS: '0' }, /SANDBOX_TEMPLATE_RETRY_SECONDS/],
    [{ SANDBOX_TEMPLATE_MIRROR: 'https://me:secret@mirror.example/debian' }, /SANDBOX_TEMPLATE_MIRROR must not carry a user or password; use a mirror that needs none\n/],
  ]) {
    const d = dir();
    const r = cli(['serve', '--listen', '127.0.0.1:0', '--data-dir', d], { env, timeout: 20000 });
    assert.equal(r.status, 2, `${JSON.stringify(env)}: ${r.stderr}`);
    assert.match(r.stderr, msg);
    assert.doesNotMatch(r.stderr, /me:secret/, 'a password in the mirror is not echoed');
    assertNoSanitizerReport(r.stderr);
  }
});
