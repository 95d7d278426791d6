// The command line: usage errors, users and tokens, migrations, first start, configuration files.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { startServer, rpc, cli, tempDir } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const SERVER_INFO = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'server_info', arguments: {} } };

const dirs = [];
function dir(prefix = 'smcp-cli-') {
  const d = tempDir(prefix);
  dirs.push(d);
  return d;
}
after(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

// Run the CLI and require that it printed no sanitizer report.
function run(args, opts) {
  const r = cli(args, opts);
  assertNoSanitizerReport(r.stderr, `sandbox-mcp ${args.join(' ')}`);
  return r;
}

// Start `serve` expecting it to fail before it listens (a server that does listen is stopped and
// fails the test instead of hanging it). Returns {code, stderr}.
async function serveFailure(opts) {
  let s;
  try {
    s = await startServer(opts);
  } catch (e) {
    const m = /^server exited (\S+): ([\s\S]*)$/.exec(e.message);
    assert.ok(m, e.message);
    return { code: m[1] === 'null' ? null : Number(m[1]), stderr: m[2] };
  }
  await s.stop();
  assert.fail(`serve started although it should have failed:\n${s.stderr()}`);
}

// Every byte SQLite may hold for the database in dataDir.
function dbBytes(dataDir) {
  return ['', '-wal', '-shm', '-journal']
    .map((s) => path.join(dataDir, `sandbox-mcp.db${s}`))
    .filter((f) => existsSync(f))
    .map((f) => readFileSync(f).toString('latin1'))
    .join('\n');
}

const hasSqlite3 = spawnSync('sqlite3', ['-version']).status === 0;

// ---------- usage ----------

test('--version prints the version and exits 0', () => {
  const r = run(['--version']);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^sandbox-mcp \d+\.\d+\.\d+\S*\n$/);
});

test('--help prints the usage and exits 0; so does `serve --help`', () => {
  const r = run(['--help']);
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^usage: sandbox-mcp <command>/);
  assert.match(r.stdout, /token create --user NAME/);
  const s = run(['serve', '--help']);
  assert.equal(s.status, 0);
  assert.match(s.stdout, /usage: sandbox-mcp serve/);
});

test('no command or an unknown command exits 2', () => {
  const none = run([]);
  assert.equal(none.status, 2);
  assert.match(none.stderr, /usage:/);
  const r = run(['frobnicate']);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown command 'frobnicate'/);
});

test('`serve --bogus` exits 2 naming --bogus', async () => {
  const d = dir();
  const { code, stderr } = await serveFailure({ dataDir: d, args: ['--bogus'] });
  assert.equal(code, 2);
  assert.match(stderr, /--bogus/);
  assertNoSanitizerReport(stderr);
});

test('`serve --listen` without a value exits 2', async () => {
  const d = dir();
  const { code, stderr } = await serveFailure({ dataDir: d, args: ['--listen'] });
  assert.equal(code, 2);
  assert.match(stderr, /'--listen' needs a value/);
  assertNoSanitizerReport(stderr);
});

test('`serve` with a stray argument exits 2', async () => {
  const d = dir();
  const { code, stderr } = await serveFailure({ dataDir: d, args: ['extra'] });
  assert.equal(code, 2);
  assert.match(stderr, /unexpected argument 'extra'/);
});

test('`token create` without --user exits 2', () => {
  const d = dir();
  const r = run(['token', 'create', '--data-dir', d]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /--user/);
});

test('an option of another command exits 2 naming the option, not its value', () => {
  const d = dir();
  for (const args of [['--label', 'laptop'], ['--label=laptop']]) {
    const r = run(['user', 'add', 'bob', ...args, '--data-dir', d]);
    assert.equal(r.status, 2, args.join(' '));
    assert.match(r.stderr, /option '--label(=laptop)?' does not apply here/);
    assert.doesNotMatch(r.stderr, /option 'laptop'/);
  }
});

test('`user add` with an invalid name exits 2', () => {
  const d = dir();
  const r = run(['user', 'add', '--data-dir', d, 'bad name!'], { cwd: d });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /invalid user name 'bad name!'/);
});

// ---------- users and tokens ----------

test('`user add` creates a user once; a second add exits 1 with "already exists"', () => {
  const d = dir();
  const first = run(['user', 'add', '--data-dir', d, 'bob']);
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stdout, /created user bob \(usr_/);
  const again = run(['user', 'add', '--data-dir', d, 'bob']);
  assert.equal(again.status, 1);
  assert.match(again.stderr, /already exists/);
  const list = run(['user', 'list', '--data-dir', d]);
  assert.equal(list.status, 0);
  assert.equal(list.stdout.split('\n').filter((l) => /\sbob\s/.test(l)).length, 1);
});

test('options may follow the positional arguments, as the usage text shows', () => {
  // usage: "user add NAME [--data-dir DIR]" and "token revoke ID [--data-dir DIR]"
  const d = dir();
  const add = run(['user', 'add', 'zoe', '--data-dir', d]);
  assert.equal(add.status, 0, `user add NAME --data-dir DIR: ${add.stderr}`);
  const created = run(['token', 'create', '--user', 'zoe', '--data-dir', d]);
  assert.equal(created.status, 0, created.stderr);
  const id = /created token (tok_\S+)/.exec(created.stderr)[1];
  const revoke = run(['token', 'revoke', id, '--data-dir', d]);
  assert.equal(revoke.status, 0, `token revoke ID --data-dir DIR: ${revoke.stderr}`);
});

test('`token create` prints the token once; the database never holds it in plain text', () => {
  const d = dir();
  assert.equal(run(['user', 'add', '--data-dir', d, 'bob']).status, 0);
  const r = run(['token', 'create', '--user', 'bob', '--label', 'ci', '--data-dir', d]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^smcp_[A-Za-z0-9_-]{20,}\n$/);
  const token = r.stdout.trim();
  const id = /created token (tok_\S+) for user bob/.exec(r.stderr)?.[1];
  assert.ok(id, r.stderr);
  assert.ok(!r.stderr.includes(token), 'token on stderr');

  const bytes = dbBytes(d);
  assert.ok(bytes.includes(id), 'sanity: the token row is in the bytes searched');
  assert.ok(!bytes.includes(token), 'the plain token is stored in the database');
  assert.ok(!bytes.includes(token.slice(5)), 'the token body (without smcp_) is stored in the database');
});

test('`token list` shows id, user and prefix, never the full token', () => {
  const d = dir();
  assert.equal(run(['user', 'add', '--data-dir', d, 'bob']).status, 0);
  const token = run(['token', 'create', '--user', 'bob', '--label', 'laptop', '--data-dir', d]).stdout.trim();
  const r = run(['token', 'list', '--data-dir', d]);
  assert.equal(r.status, 0);
  const lines = r.stdout.trim().split('\n');
  assert.match(lines[0], /^ID\s+USER\s+PREFIX\s+STATE\s+CREATED\s+LAST USED\s+LABEL$/);
  assert.equal(lines.length, 2);
  const [id, user, prefix, state] = lines[1].split(/\s+/);
  assert.match(id, /^tok_/);
  assert.equal(user, 'bob');
  assert.ok(token.startsWith(prefix) && prefix.length >= 8 && prefix.length < token.length, `prefix ${prefix}`);
  assert.equal(state, 'active');
  assert.match(lines[1], /laptop$/);
  assert.ok(!r.stdout.includes(token));
  const byUser = run(['token', 'list', '--user', 'bob', '--data-dir', d]);
  assert.equal(byUser.status, 0);
  assert.match(byUser.stdout, new RegExp(id));
});

test('`token revoke` of an unknown id exits 1', () => {
  const d = dir();
  const r = run(['token', 'revoke', '--data-dir', d, 'tok_doesnotexist']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /tok_doesnotexist/);
});

// ---------- migrations ----------

test('`migrate` creates the database and prints the schema version', () => {
  const d = path.join(dir(), 'nested');
  const r = run(['migrate', '--data-dir', d]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^database schema is at version [1-9]\d*\n$/);
  assert.ok(existsSync(path.join(d, 'sandbox-mcp.db')));
  const again = run(['migrate', '--data-dir', d]);
  assert.equal(again.status, 0);
  assert.equal(again.stdout, r.stdout);
});

test('a database from a newer version (user_version 999) is refused by migrate and serve', { skip: !hasSqlite3 && 'sqlite3 command line tool not installed' }, async () => {
  const d = dir();
  assert.equal(run(['migrate', '--data-dir', d]).status, 0);
  execFileSync('sqlite3', [path.join(d, 'sandbox-mcp.db'), 'PRAGMA user_version = 999;']);

  const m = run(['migrate', '--data-dir', d]);
  assert.equal(m.status, 1);
  assert.match(m.stderr, /newer/);

  const { code, stderr } = await serveFailure({ dataDir: d });
  assert.match(stderr, /newer/);
  assert.equal(code, 1, stderr);
  assertNoSanitizerReport(stderr, 'serve');
});

// ---------- first start ----------

test('first start prints the token, the MCP URL and a client config; writes a 0600 secret', async () => {
  const d = dir();
  const publicUrl = 'http://mcp.example.test:8788';
  const s = await startServer({ dataDir: d, args: ['--public-url', publicUrl] });
  let secret;
  try {
    const out = s.stdout();
    assert.match(out, /Access token:\s+smcp_\S+/);
    assert.match(s.token, /^smcp_/);
    assert.match(out, /A first user was created: admin/);
    assert.ok(out.includes(`MCP endpoint:  ${publicUrl}/mcp`), out);
    const json = out.slice(out.indexOf('\n{\n') + 1, out.lastIndexOf('\n}\n') + 2);
    const config = JSON.parse(json);
    assert.equal(config.mcpServers.sandbox.type, 'http');
    assert.equal(config.mcpServers.sandbox.url, `${publicUrl}/mcp`);
    assert.equal(config.mcpServers.sandbox.headers.Authorization, `Bearer ${s.token}`);

    const file = path.join(d, 'secrets', 'proxy_jwt_secret');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.equal(statSync(path.join(d, 'secrets')).mode & 0o777, 0o700);
    secret = readFileSync(file, 'utf8');
    assert.match(secret, /^[0-9a-f]{64}$/);

    const r = await rpc(s, SERVER_INFO);
    assert.equal(r.body.result.structuredContent.user, 'admin');
  } finally {
    await s.stop();
  }

  // Second start on the same data directory: no new user, no new token, same secret.
  const s2 = await startServer({ dataDir: d, args: ['--public-url', publicUrl] });
  try {
    assert.ok(!/Access token/.test(s2.stdout()), s2.stdout());
    assert.equal(s2.token, null);
    assert.equal(readFileSync(path.join(d, 'secrets', 'proxy_jwt_secret'), 'utf8'), secret);
    const r = await rpc(s2, SERVER_INFO, { token: s.token });
    assert.equal(r.status, 200);
    assert.equal(r.body.result.structuredContent.user, 'admin');
    const users = run(['user', 'list', '--data-dir', d]);
    assert.equal(users.stdout.trim().split('\n').length, 2, users.stdout);
  } finally {
    await s2.stop();
  }
});

test('first start with an https PUBLIC_URL says how to add the server in Claude and ChatGPT', async () => {
  const publicUrl = 'https://mcp.example.test';
  const s = await startServer({ dataDir: dir(), args: ['--public-url', `${publicUrl}/`], env: { FIRST_USER: 'ada' } });
  try {
    const out = s.stdout();
    const i = out.indexOf('Claude and ChatGPT: add a connector with the URL\n');
    assert.ok(i > 0, out);
    const banner = out.slice(i);
    // The connector URL on a line of its own (a trailing slash in PUBLIC_URL is dropped).
    assert.ok(banner.includes(`\n  ${publicUrl}/mcp\n`), banner);
    assert.match(banner, /leave the OAuth\nclient id and secret empty, and sign in as ada /);
    assert.ok(banner.includes('\n  sandbox-mcp user passwd ada\n  sandbox-mcp user login-link ada\n'), banner);
    assert.match(banner, /docs\/DEPLOY\.md/);
    assert.ok(!out.includes('need a public https PUBLIC_URL'), out);
    // The token appears where it did before (the endpoint block and the client configuration),
    // never in the new lines or the log.
    assert.equal(out.split(s.token).length - 1, 2, out);
    assert.ok(!banner.includes(s.token), banner);
    assert.ok(!s.stderr().includes(s.token));
  } finally {
    await s.stop();
  }
});

test('first start with a plain http PUBLIC_URL points to docs/DEPLOY.md for Claude and ChatGPT', async () => {
  const s = await startServer({ dataDir: dir(), args: ['--public-url', 'http://mcp.example.test:8788'] });
  try {
    const out = s.stdout();
    assert.match(out, /\nClaude and ChatGPT need a public https PUBLIC_URL: see docs\/DEPLOY\.md\.\n/);
    assert.ok(!out.includes('add a connector'), out);
    assert.ok(!out.includes('user login-link'), out);
    assert.equal(out.split(s.token).length - 1, 2, out);
  } finally {
    await s.stop();
  }
});

test('without --public-url the printed MCP URL and links use the port actually bound', async () => {
  // With `--listen 127.0.0.1:0` the kernel picks the port; a URL with port 0 is unusable.
  const s = await startServer();
  try {
    assert.ok(s.stdout().includes(`MCP endpoint:  ${s.url}/mcp`), `server listens on ${s.url}; stdout:\n${s.stdout()}`);
    const res = await fetch(`${s.url}/sse`);
    assert.ok(res.headers.get('link').includes(`<${s.url}/mcp>`), `Link: ${res.headers.get('link')}`);
  } finally {
    await s.stop();
  }
});

// ---------- configuration files ----------

test('.dev.vars in the working directory is read (FIRST_USER=carol)', async () => {
  const cwd = dir();
  const d = dir();
  writeFileSync(path.join(cwd, '.dev.vars'), '# local settings\nFIRST_USER=carol\nLOG_LEVEL="info"  # comment\n');
  const s = await startServer({ cwd, dataDir: d });
  try {
    assert.match(s.stdout(), /A first user was created: carol/);
    const r = await rpc(s, SERVER_INFO);
    assert.equal(r.body.result.structuredContent.user, 'carol');
  } finally {
    await s.stop();
  }
});

test('the environment overrides .dev.vars', async () => {
  const cwd = dir();
  const d = dir();
  writeFileSync(path.join(cwd, '.dev.vars'), 'FIRST_USER=carol\n');
  const s = await startServer({ cwd, dataDir: d, env: { FIRST_USER: 'zed' } });
  try {
    assert.match(s.stdout(), /A first user was created: zed/);
  } finally {
    await s.stop();
  }
});

test('--env-file names another file; a missing one exits 1', async () => {
  const cwd = dir();
  const file = path.join(cwd, 'custom.env');
  writeFileSync(file, 'export FIRST_USER=frank\n');
  const d = dir();
  const s = await startServer({ cwd, dataDir: d, args: ['--env-file', file] });
  try {
    assert.match(s.stdout(), /A first user was created: frank/);
  } finally {
    await s.stop();
  }
  const missing = await serveFailure({ dataDir: dir(), args: ['--env-file', path.join(cwd, 'nope.env')] });
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /cannot open .*nope\.env/);
  const m = run(['migrate', '--data-dir', dir(), '--env-file', path.join(cwd, 'nope.env')]);
  assert.equal(m.status, 1);
});

test('a malformed .dev.vars line makes serve exit 1 naming the line number', async () => {
  const cwd = dir();
  writeFileSync(path.join(cwd, '.dev.vars'), 'FIRST_USER=carol\n\nthis line is not an assignment\n');
  const { code, stderr } = await serveFailure({ cwd, dataDir: dir() });
  assert.match(stderr, /line 3/);
  assert.equal(code, 1, stderr);
  assertNoSanitizerReport(stderr, 'serve');
});

test('an invalid LOG_LEVEL exits 2', () => {
  const r = cli(['migrate', '--data-dir', dir()], { env: { LOG_LEVEL: 'loud' } });
  assert.match(r.stderr, /LOG_LEVEL 'loud'/);
  assert.equal(r.status, 2, r.stderr);
  assertNoSanitizerReport(r.stderr);
});

// ---------- secrets stay out of logs ----------

test('neither the proxy secret nor the first token appear in the server log', async () => {
  const d = dir();
  const s = await startServer({ dataDir: d, env: { LOG_LEVEL: 'debug' } });
  let secret;
  try {
    secret = readFileSync(path.join(d, 'secrets', 'proxy_jwt_secret'), 'utf8');
    assert.equal((await rpc(s, SERVER_INFO)).status, 200);
    assert.equal((await rpc(s, SERVER_INFO, { token: `${s.token}x` })).status, 401);
    await fetch(`${s.mcpUrl}?access_token=${s.token}`, { method: 'POST' });
  } finally {
    await s.stop();
  }
  const log = s.stderr();
  assert.match(log, /http request/, 'debug logging was on');
  assert.ok(!log.includes(secret), 'PROXY_JWT_SECRET in the log');
  assert.ok(!log.includes(s.token), 'first token in the log');
  assert.ok(!log.includes(s.token.slice(5)), 'first token body in the log');
});

test('a PROXY_JWT_SECRET from the environment appears in neither stdout nor stderr', async () => {
  const secret = `env-secret-${'q'.repeat(48)}`;
  const s = await startServer({ dataDir: dir(), env: { PROXY_JWT_SECRET: secret, LOG_LEVEL: 'debug' } });
  try {
    assert.equal((await rpc(s, SERVER_INFO)).status, 200);
  } finally {
    await s.stop();
  }
  assert.ok(!s.stderr().includes(secret));
  assert.ok(!s.stdout().includes(secret));
});
