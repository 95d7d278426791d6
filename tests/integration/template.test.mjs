// `sandbox-mcp template build`: usage, the names it knows, and how serve reports a debian
// template that is missing or built for another uid base. Building the debian template itself
// takes minutes: template_debian.test.mjs does it when SANDBOX_MCP_SLOW_TESTS=1.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { chownSync, existsSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';

import { startServer, rpc, cli, tempDir } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const dirs = [];
function dir() {
  const d = tempDir('smcp-tmpl-');
  dirs.push(d);
  return d;
}
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

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

test('serve with SANDBOX_TEMPLATE=debian before it is built tells the caller how to build it', async () => {
  const s = await startServer({ env: { SANDBOX_TEMPLATE: 'debian' } });
  try {
    const r = await rpc(s, EXEC('true'));
    assert.equal(r.status, 200);
    assert.equal(r.body.result.isError, true);
    assert.match(r.body.result.content[0].text,
      /template 'debian' is not built: run 'sandbox-mcp template build debian'/);
  } finally {
    await s.stop();
  }
  assertNoSanitizerReport(s.stderr());
});

test('serve refuses a debian template of the older id layout (parts owned by a shared id range)', async () => {
  const d = dir();
  // Older servers handed the template's root to the one id range every sandbox shared.
  const rootfs = path.join(d, 'templates', 'debian', 'rootfs');
  mkdirSync(rootfs, { recursive: true });
  chownSync(rootfs, 524288, 524288);
  const s = await startServer({ env: { SANDBOX_TEMPLATE: 'debian' }, dataDir: d });
  try {
    const r = await rpc(s, EXEC('true'));
    assert.equal(r.body.result.isError, true);
    assert.match(r.body.result.content[0].text,
      /template 'debian' was built for another id layout: run 'sandbox-mcp template build debian'/);
  } finally {
    await s.stop();
  }
  assertNoSanitizerReport(s.stderr());
});
