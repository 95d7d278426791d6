// Bearer-token authentication on POST /mcp, and tokens managed with the CLI while the server runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rpc, cli } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const PING = { jsonrpc: '2.0', id: 1, method: 'ping' };
const SERVER_INFO = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'server_info', arguments: {} } };

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

// Run a CLI command against the running server's data dir; options go before positional
// arguments (see cli.test.mjs for the documented order).
function run(args) {
  const r = cli([...args.slice(0, 2), '--data-dir', server.dataDir, ...args.slice(2)]);
  assertNoSanitizerReport(r.stderr, `sandbox-mcp ${args.join(' ')}`);
  return r;
}

function tokenRows() {
  const r = run(['token', 'list']);
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split('\n').slice(1).map((l) => {
    const [id, user, prefix, state] = l.split(/\s+/);
    return { id, user, prefix, state, line: l };
  });
}

test('the first token works', async () => {
  const r = await rpc(server, PING);
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, { jsonrpc: '2.0', id: 1, result: {} });
});

test('no Authorization header: 401 with a Bearer challenge', async () => {
  const r = await rpc(server, PING, { token: null });
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer /);
  assert.equal(r.body.code, 'unauthorized');
});

test('a non-Bearer Authorization scheme: 401', async () => {
  const r = await rpc(server, PING, { token: null, headers: { authorization: `Basic ${Buffer.from('admin:x').toString('base64')}` } });
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer /);
});

test('a wrong token: 401 with error="invalid_token"', async () => {
  for (const token of ['smcp_wrong', `${server.token}x`, server.token.slice(0, -1)]) {
    const r = await rpc(server, PING, { token });
    assert.equal(r.status, 401, token);
    assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer .*error="invalid_token"/);
  }
});

test('a token in the URL (?access_token=) is refused with 401 even with a valid header', async () => {
  const res = await fetch(`${server.mcpUrl}?access_token=${encodeURIComponent(server.token)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token}` },
    body: JSON.stringify(PING),
  });
  assert.equal(res.status, 401);
  assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer /);
  const body = await res.json();
  assert.match(body.error, /URL/);
});

test('a token created with `token create --user NAME` authenticates as that user', async () => {
  const add = run(['user', 'add', 'dana']);
  assert.equal(add.status, 0, add.stderr);
  const created = run(['token', 'create', '--user', 'dana', '--label', 'laptop']);
  assert.equal(created.status, 0, created.stderr);
  const token = created.stdout.trim();
  assert.match(token, /^smcp_[A-Za-z0-9_-]{20,}$/);

  const r = await rpc(server, SERVER_INFO, { token });
  assert.equal(r.status, 200);
  assert.equal(r.body.result.structuredContent.user, 'dana');
  const admin = await rpc(server, SERVER_INFO);
  assert.equal(admin.body.result.structuredContent.user, 'admin');
});

test('a token revoked with `token revoke` while the server runs gets 401', async () => {
  const add = run(['user', 'add', 'erin']);
  assert.equal(add.status, 0, add.stderr);
  const created = run(['token', 'create', '--user', 'erin']);
  assert.equal(created.status, 0, created.stderr);
  const token = created.stdout.trim();
  assert.equal((await rpc(server, PING, { token })).status, 200);

  const row = tokenRows().find((t) => t.user === 'erin');
  assert.ok(row, 'erin has a token in `token list`');
  assert.equal(row.state, 'active');
  assert.ok(token.startsWith(row.prefix), `prefix ${row.prefix} of ${token}`);

  const revoked = run(['token', 'revoke', row.id]);
  assert.equal(revoked.status, 0, revoked.stderr);
  assert.match(revoked.stdout, new RegExp(`revoked token ${row.id}`));

  const r = await rpc(server, PING, { token });
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
  assert.equal(tokenRows().find((t) => t.id === row.id).state, 'revoked');
  // Other tokens are unaffected.
  assert.equal((await rpc(server, PING)).status, 200);
});

test('`token list` shows id, user and prefix but never a full token', () => {
  const r = run(['token', 'list']);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^ID\s+USER\s+PREFIX\s+STATE/);
  assert.ok(!r.stdout.includes(server.token), 'full first token printed');
  const first = tokenRows().find((t) => t.user === 'admin');
  assert.match(first.id, /^tok_/);
  assert.ok(server.token.startsWith(first.prefix));
  assert.ok(first.prefix.length < server.token.length / 2, `prefix ${first.prefix} is short`);
});

test('the server is still running and logged no sanitizer report', () => {
  assert.equal(server.proc.exitCode, null, server.stderr());
  assertNoSanitizerReport(server.stderr(), 'server');
});
