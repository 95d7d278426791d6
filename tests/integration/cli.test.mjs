// The command line: usage errors, users and tokens, migrations, first start, configuration files.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { BIN, startServer, rpc, cli, tempDir } from '../lib/server.mjs';
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

test('an OAuth, sign-in or notification setting out of range stops any command with exit 2, before the store is made', () => {
  for (const [k, v, range] of [['OAUTH_ACCESS_TTL', '5', '60 and 86400'], ['SIGNIN_TRUST_DAYS', '0', '1 and 3650'],
    ['SIGNIN_PASSWORD_MEMORY_MB', '18', '19 and 1024'],
    ['NOTIFY_RETRY_SECONDS', '0', '1 and 3600'], ['NOTIFY_VIEW_TOKEN', '2', '0 and 1']]) {
    const d = path.join(dir(), 'data');
    const r = cli(['user', 'list', '--data-dir', d, '--env-file', '/dev/null'], { env: { [k]: v } });
    assert.equal(r.status, 2, `${k}=${v}: ${r.stderr}`);
    assert.ok(r.stderr.includes(`sandbox-mcp: ${k} '${v}' is not a number between ${range}\n`), r.stderr);
    assert.equal(existsSync(d), false, `${k}=${v}: the data dir was made`);
    assertNoSanitizerReport(r.stderr);
  }
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

// ---------- passwords and sign-in links ----------

const hasScript = spawnSync('script', ['--version']).status === 0;

function sql(dataDir, query) {
  return execFileSync('sqlite3', [path.join(dataDir, 'sandbox-mcp.db'), query], { encoding: 'utf8' }).trim();
}

test('`user passwd` reads the password from stdin, stores only an Argon2id hash, and never shows it', () => {
  const d = dir();
  assert.equal(run(['user', 'add', 'bob', '--data-dir', d]).status, 0);
  const password = 'tr0ub4dor & 3 horses';
  const r = run(['user', 'passwd', 'bob', '--data-dir', d], { input: `${password}\n`, env: { LOG_LEVEL: 'debug' } });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout, 'password set for bob\n');
  assert.ok(!r.stderr.includes(password), r.stderr);
  const bytes = dbBytes(d);
  assert.ok(bytes.includes('$argon2id$'), 'an Argon2id hash is stored');
  assert.ok(!bytes.includes(password), 'the password is stored in plain text');
  // a line end from Windows is not part of the password, and a second one replaces the first;
  // each hash takes the memory SIGNIN_PASSWORD_MEMORY_MB says when it is made
  const hash = () => sql(d, "SELECT password_hash FROM users WHERE name = 'bob'");
  const again = run(['user', 'passwd', 'bob', '--data-dir', d], { input: 'another long one\r\n', env: { SIGNIN_PASSWORD_MEMORY_MB: '64' } });
  assert.equal(again.status, 0, again.stderr);
  if (hasSqlite3) {
    assert.match(hash(), /^\$argon2id\$v=19\$m=65536,t=2,p=1\$/);
    assert.ok(!dbBytes(d).includes('another long one'));
  }
  const small = run(['user', 'passwd', 'bob', '--data-dir', d], { input: 'a third long one\n', env: { SIGNIN_PASSWORD_MEMORY_MB: '19' } });
  assert.equal(small.status, 0, small.stderr);
  if (hasSqlite3) assert.match(hash(), /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
});

test('`user passwd` signs the user out of every browser session, and no one else', { skip: !hasSqlite3 && 'sqlite3 command line tool not installed' }, () => {
  const d = dir();
  assert.equal(run(['user', 'add', 'bob', '--data-dir', d]).status, 0);
  assert.equal(run(['user', 'add', 'carol', '--data-dir', d]).status, 0);
  const now = Date.now();
  sql(d, `INSERT INTO web_sessions SELECT hex(randomblob(32)), id, ${now}, 3600000, ${now}, ${now + 3600000} FROM users;` +
         `INSERT INTO web_sessions SELECT hex(randomblob(32)), id, ${now}, 3600000, ${now}, ${now + 3600000} FROM users WHERE name = 'bob'`);
  const r = run(['user', 'passwd', 'bob', '--data-dir', d], { input: 'correct horse battery\n' });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /signed bob out of 2 browser sessions/);
  assert.equal(sql(d, "SELECT u.name FROM web_sessions w JOIN users u ON u.id = w.user_id"), 'carol');
});

test('`user passwd` refuses a short, long or missing password, and an unknown user', () => {
  const d = dir();
  assert.equal(run(['user', 'add', 'bob', '--data-dir', d]).status, 0);
  const short = run(['user', 'passwd', 'bob', '--data-dir', d], { input: 'nine char\n' });
  assert.equal(short.status, 2);
  assert.match(short.stderr, /at least 10 characters/);
  assert.ok(!short.stderr.includes('nine char'));
  // ten characters, some of them two bytes long, are enough
  assert.equal(run(['user', 'passwd', 'bob', '--data-dir', d], { input: 'é'.repeat(10) }).status, 0);
  const long = run(['user', 'passwd', 'bob', '--data-dir', d], { input: `${'x'.repeat(1025)}\n` });
  assert.equal(long.status, 2);
  assert.match(long.stderr, /longer than 1024 bytes/);
  assert.equal(run(['user', 'passwd', 'bob', '--data-dir', d], { input: `${'x'.repeat(1024)}\n` }).status, 0);
  const none = run(['user', 'passwd', 'bob', '--data-dir', d], { input: '' });
  assert.equal(none.status, 2);
  assert.match(none.stderr, /no password on standard input/);
  const empty = run(['user', 'passwd', 'bob', '--data-dir', d], { input: '\n' });
  assert.equal(empty.status, 2);
  assert.match(empty.stderr, /at least 10 characters/);
  const nobody = run(['user', 'passwd', 'nobody', '--data-dir', d], { input: 'correct horse battery\n' });
  assert.equal(nobody.status, 1);
  assert.match(nobody.stderr, /no user named 'nobody'/);
  const noName = run(['user', 'passwd', '--data-dir', d]);
  assert.equal(noName.status, 2);
  assert.match(noName.stderr, /'user passwd' takes exactly one NAME/);
  // the password is never an argument
  const extra = run(['user', 'passwd', 'bob', 'correct horse battery', '--data-dir', d]);
  assert.equal(extra.status, 2);
  if (hasSqlite3)
    assert.equal(sql(d, "SELECT length(password_hash) > 0 FROM users WHERE name = 'bob'"), '1');
});

// Run `user passwd` on a terminal (script(1) gives it one), typing each answer once its prompt
// is there. Resolves with {code, out}: everything the terminal showed.
function passwdOnTty(dataDir, answers) {
  const command = `'${BIN}' user passwd bob --data-dir '${dataDir}'`;
  const p = spawn('script', ['-q', '-e', '-c', command, '/dev/null'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let next = 0;
  const feed = () => {
    const prompts = [/New password for bob: /g, /Repeat it: /g];
    if (next < answers.length && (out.match(prompts[next]) || []).length > 0) {
      p.stdin.write(`${answers[next]}\n`);
      next++;
    }
  };
  p.stdout.on('data', (b) => { out += b; feed(); });
  p.stderr.on('data', (b) => { out += b; });
  const timer = setTimeout(() => p.kill('SIGKILL'), 30000);
  return new Promise((resolve) => p.on('exit', (code) => { clearTimeout(timer); resolve({ code, out }); }));
}

test('`user passwd` on a terminal asks twice without echo', { skip: !hasScript && 'script(1) not installed' }, async () => {
  const d = dir();
  assert.equal(run(['user', 'add', 'bob', '--data-dir', d]).status, 0);
  const ok = await passwdOnTty(d, ['typed on a tty 1', 'typed on a tty 1']);
  assert.equal(ok.code, 0, ok.out);
  assert.match(ok.out, /New password for bob: [\s\S]*Repeat it: [\s\S]*password set for bob/);
  assert.ok(!ok.out.includes('typed on a tty'), `the password was echoed:\n${ok.out}`);
  assertNoSanitizerReport(ok.out);
  const differ = await passwdOnTty(d, ['typed on a tty 2', 'typed on a tty 3']);
  assert.equal(differ.code, 2, differ.out);
  assert.match(differ.out, /the two passwords differ; nothing was changed/);
  assert.ok(!differ.out.includes('typed on a tty'));
});

test('`user login-link` prints a one-time link under PUBLIC_URL; only its hash is stored', () => {
  const d = dir();
  assert.equal(run(['user', 'add', 'bob', '--data-dir', d]).status, 0);
  const r = run(['user', 'login-link', 'bob', '--data-dir', d], { env: { PUBLIC_URL: 'https://mcp.example.test/' } });
  assert.equal(r.status, 0, r.stderr);
  const m = /^https:\/\/mcp\.example\.test\/login\/link\?t=([A-Za-z0-9_-]{43})\n$/.exec(r.stdout);
  assert.ok(m, r.stdout);
  assert.match(r.stderr, /once, within 15 minutes/);
  assert.match(r.stderr, /one-time code field/);
  assert.doesNotMatch(r.stderr, /PUBLIC_URL is not set/);
  assert.ok(!dbBytes(d).includes(m[1]), 'the link is stored in plain text');
  if (hasSqlite3) {
    assert.equal(sql(d, 'SELECT count(*) FROM login_links'), '1');
    assert.equal(sql(d, 'SELECT expires_at - created_at FROM login_links'), String(15 * 60 * 1000));
  }
  // every link is new; --public-url and --ttl
  const two = run(['user', 'login-link', 'bob', '--ttl', '2h', '--public-url', 'http://10.0.0.5:8788', '--data-dir', d]);
  assert.equal(two.status, 0, two.stderr);
  assert.match(two.stdout, /^http:\/\/10\.0\.0\.5:8788\/login\/link\?t=[A-Za-z0-9_-]{43}\n$/);
  assert.ok(!two.stdout.includes(m[1]));
  assert.match(two.stderr, /within 2 hours/);
  // without PUBLIC_URL the link names the listen address, and says so
  const local = run(['user', 'login-link', 'bob', '--data-dir', d]);
  assert.match(local.stdout, /^http:\/\/127\.0\.0\.1:8788\/login\/link\?t=/);
  assert.match(local.stderr, /PUBLIC_URL is not set/);
});

test('`user login-link` refuses an unknown user and a bad --ttl', () => {
  const d = dir();
  assert.equal(run(['user', 'add', 'bob', '--data-dir', d]).status, 0);
  const nobody = run(['user', 'login-link', 'nobody', '--data-dir', d]);
  assert.equal(nobody.status, 1);
  assert.match(nobody.stderr, /no user named 'nobody'/);
  assert.equal(nobody.stdout, '');
  for (const ttl of ['25h', '0', 'soon', '-5m', '1d', '99999999999999999h']) {
    const r = run(['user', 'login-link', 'bob', '--ttl', ttl, '--data-dir', d]);
    assert.equal(r.status, 2, ttl);
    assert.match(r.stderr, /is not a duration between 1s and 24h/);
  }
  assert.equal(run(['user', 'login-link', 'bob', '--ttl', '24h', '--data-dir', d]).status, 0);
  const other = run(['user', 'add', 'carol', '--ttl', '1h', '--data-dir', d]);
  assert.equal(other.status, 2);
  assert.match(other.stderr, /--ttl applies to 'user login-link' only/);
});

test('`user --help` and the main usage name passwd and login-link', () => {
  const u = run(['user', '--help']);
  assert.equal(u.status, 0);
  assert.match(u.stdout, /user passwd NAME/);
  assert.match(u.stdout, /user login-link NAME \[--ttl DURATION\]/);
  const m = run(['--help']);
  assert.match(m.stdout, /user passwd NAME/);
  assert.match(m.stdout, /user login-link NAME/);
  const bad = run(['user', 'frob']);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown subcommand 'frob'/);
});

test('`user credential`: a token from stdin, sealed at rest, listed but never shown, argv refused', () => {
  const d = dir();
  assert.equal(run(['user', 'add', 'bob', '--data-dir', d]).status, 0);
  assert.equal(run(['user', 'add', 'eve', '--data-dir', d]).status, 0);
  const TOKEN = 'github_pat_11ABCDEFG0123456789_sealedAtRestTestToken';
  let r = run(['user', 'credential', 'set', 'bob', 'github', '--data-dir', d], { input: `${TOKEN}\n` });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /github credential of bob set/);
  assert.ok(!r.stdout.includes(TOKEN) && !r.stderr.includes(TOKEN));
  // the database never holds it in the clear; the key is the server's, private
  assert.ok(!dbBytes(d).includes(TOKEN), 'the token is stored in plain text');
  assert.ok(!dbBytes(d).includes('sealedAtRest'), 'part of the token is stored in plain text');
  const key = statSync(path.join(d, 'secrets', 'credentials.key'));
  assert.equal(key.mode & 0o777, 0o600);
  assert.equal(key.size, 32);
  if (hasSqlite3) assert.equal(sql(d, "SELECT count(*) FROM credentials WHERE service = 'github'"), '1');
  r = run(['user', 'credential', 'list', 'bob', '--data-dir', d]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^github +set \d{4}-\d\d-\d\dT/);
  assert.ok(!r.stdout.includes(TOKEN));
  assert.equal(run(['user', 'credential', 'list', 'eve', '--data-dir', d]).stdout, '');

  // a token on the command line is refused, and so are no token, a token with a space, one too
  // long, an unknown service and an unknown user, each changing nothing
  r = run(['user', 'credential', 'set', 'eve', 'github', TOKEN, '--data-dir', d]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /read from stdin, never from the command line/);
  assert.ok(!r.stderr.includes(TOKEN));
  r = run(['user', 'credential', 'set', 'eve', 'github', '--data-dir', d], { input: '' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /no token on standard input; nothing was changed/);
  r = run(['user', 'credential', 'set', 'eve', 'github', '--data-dir', d], { input: 'two words\n' });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /the token holds a space; nothing was changed/);
  for (const long of ['a'.repeat(256), 'a'.repeat(2000)]) {
    r = run(['user', 'credential', 'set', 'eve', 'github', '--data-dir', d], { input: `${long}\n` });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /the token is longer than 255 characters; nothing was changed/);
  }
  r = run(['user', 'credential', 'set', 'eve', 'gitlab', '--data-dir', d], { input: `${TOKEN}\n` });
  assert.equal(r.status, 2);
  assert.match(r.stderr, /unknown service 'gitlab'/);
  r = run(['user', 'credential', 'set', 'nobody', 'github', '--data-dir', d], { input: `${TOKEN}\n` });
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no user named 'nobody'/);
  assert.equal(run(['user', 'credential', 'list', 'eve', '--data-dir', d]).stdout, '');

  // set again replaces it; delete removes it, a second delete says there is none
  r = run(['user', 'credential', 'set', 'bob', 'github', '--data-dir', d], { input: 'ghs_installationToken42\r\n' });
  assert.equal(r.status, 0, r.stderr);
  if (hasSqlite3) assert.equal(sql(d, 'SELECT count(*) FROM credentials'), '1');
  assert.equal(run(['user', 'credential', 'delete', 'bob', 'github', '--data-dir', d]).status, 0);
  r = run(['user', 'credential', 'delete', 'bob', 'github', '--data-dir', d]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no github credential is set/);
});

test('serve makes the credentials key once, keeps it, and does not start with a file that is not a key', async () => {
  const d = dir();
  const key = path.join(d, 'secrets', 'credentials.key');
  let s = await startServer({ dataDir: d });
  await s.stop();
  assert.equal(statSync(key).mode & 0o777, 0o600);
  const made = readFileSync(key);
  assert.equal(made.length, 32);
  // the CLI seals with the key the server made, and a restart keeps it
  assert.equal(run(['user', 'credential', 'set', 'admin', 'github', '--data-dir', d], { input: 'ghp_keptKey\n' }).status, 0);
  assert.deepEqual(readFileSync(key), made);
  s = await startServer({ dataDir: d });
  await s.stop();
  assert.deepEqual(readFileSync(key), made);
  writeFileSync(key, 'short');
  await assert.rejects(startServer({ dataDir: d }), /credentials\.key' does not hold a key of 32 bytes/);
  assert.equal(readFileSync(key, 'utf8'), 'short', 'never replaced');
});
