// Start the real sandbox-mcp binary on a random loopback port with a temporary data dir.
import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Agent, fetch as undiciFetch } from 'undici';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BIN = process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'asan', 'sandbox-mcp');

// The binary that prepares and clears a test's state (a user and their token, the sandboxes of a
// data dir stopped). tests/run.sh names the release build that `make test` builds from the same
// tree beside the sanitized one: a sanitized command costs ten times the CPU of the command
// itself (about 0.1 s, most of it page faults), and the suites run hundreds of them. The
// commands themselves are tested on the sanitized binary (cli.test.mjs, and every test that
// calls cli()). A test file run alone uses BIN for these too.
export const FIXTURE_BIN = process.env.SANDBOX_MCP_FIXTURE_BIN || BIN;

// Run a CLI command to completion (input: what it reads on stdin; or until timeout ms, then
// SIGTERM); returns {status, stdout, stderr}.
export function cli(args, { env = {}, cwd, input, timeout, bin = BIN } = {}) {
  const at = args.indexOf('--data-dir');
  const r = spawnSync(bin, args, {
    encoding: 'utf8',
    cwd,
    input,
    env: serverEnv(at >= 0 ? args[at + 1] : null, env),
    timeout,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

// cli() without blocking the event loop, for tests that run beside others (describe with
// concurrency): a synchronous child process would stop their requests half-sent.
export function cliAsync(args, { env = {}, cwd, input, timeout, bin = BIN } = {}) {
  const at = args.indexOf('--data-dir');
  return new Promise((resolve) => {
    const p = spawn(bin, args, { cwd, timeout, stdio: ['pipe', 'pipe', 'pipe'],
      env: serverEnv(at >= 0 ? args[at + 1] : null, env) });
    let stdout = '', stderr = '';
    p.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    p.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
    p.on('close', (status) => resolve({ status, stdout, stderr }));
    p.stdin.on('error', () => {});
    p.stdin.end(input);
  });
}

// The store of the server (and command lines) of dataDir. SQLite in the directory unless this
// run of the suites is on PostgreSQL (tests/run.sh sets SANDBOX_MCP_TEST_STORE=postgres and the
// URL of the cluster it started): then a schema of the shared database named after the
// directory, so that a server started again on the same directory finds what the last one kept.
// The PostgreSQL cluster tests/run.sh started (SANDBOX_MCP_TEST_DATABASE_URL); a test file run on
// its own starts one of its own (tests/lib/pg.sh), stopped when it exits.
let ownPg = null;
export function pgUrl() {
  if (process.env.SANDBOX_MCP_TEST_DATABASE_URL) return process.env.SANDBOX_MCP_TEST_DATABASE_URL;
  if (!ownPg) {
    const dir = `/var/tmp/smcp-pg-test-${process.pid}`;
    const pgsh = path.join(root, 'tests', 'lib', 'pg.sh');
    ownPg = execFileSync('sh', [pgsh, 'start', dir], { encoding: 'utf8' }).trim();
    process.on('exit', () => spawnSync('sh', [pgsh, 'stop', dir]));
  }
  return ownPg;
}
const PG_URL = process.env.SANDBOX_MCP_TEST_STORE === 'postgres' ? pgUrl() : null;
// whether this file's servers keep their stores on PostgreSQL
export const ON_POSTGRES = PG_URL !== null;
const schemas = new Set();
function pgSchema(dataDir) {
  return `srv_${Buffer.from(path.basename(path.resolve(dataDir))).toString('hex')}`;
}
export function storeEnv(dataDir) {
  if (!PG_URL || !dataDir) return {};
  const schema = pgSchema(dataDir);
  if (!schemas.has(schema)) {
    execFileSync('psql', ['-qX', '-v', 'ON_ERROR_STOP=1', '-c', `SET client_min_messages = warning; CREATE SCHEMA IF NOT EXISTS ${schema}`, PG_URL]);
    schemas.add(schema);
  }
  return { DATABASE_URL: `${PG_URL}&options=-csearch_path%3D${schema}` };
}
function dropSchema(dataDir) {
  if (!PG_URL || !dataDir) return;
  const schema = pgSchema(dataDir);
  spawnSync('psql', ['-qX', '-c', `SET client_min_messages = warning; DROP SCHEMA IF EXISTS ${schema} CASCADE`, PG_URL]);
  schemas.delete(schema);
}

// What a server or command of dataDir runs with: the clean environment, its store, and the
// test's own settings. Sandboxes on the host template share one templates directory (TEMPLATES_DIR,
// where the debian template is too), as the servers of one machine may: the host template is
// assembled once per recipe rather than on each server's new data dir (some 800 files: /etc's
// certificates and alternatives), which the suites did hundreds of times. A test that sets
// another template, or its own directory, keeps the directory of its data dir. Password hashes
// take the least memory a server allows (SIGNIN_PASSWORD_MEMORY_MB, OWASP's floor for Argon2id):
// the suites set and check hundreds of passwords, each a third of the CPU of one at the default
// 64 MiB, which is tested where hashes are made (test_password, cli.test.mjs).
function serverEnv(dataDir, env) {
  const shared = (env.SANDBOX_TEMPLATE ?? 'host') === 'host' && !('SANDBOX_TEMPLATE_DIR' in env);
  return { ...cleanEnv(), ...storeEnv(dataDir), ...(shared ? { SANDBOX_TEMPLATE_DIR: TEMPLATES_DIR } : {}),
    SIGNIN_PASSWORD_MEMORY_MB: '19', ...env };
}

// The environment minus configuration keys the host may happen to have set.
function cleanEnv() {
  const env = { ...process.env };
  for (const k of ['LISTEN', 'DATA_DIR', 'PUBLIC_URL', 'ALLOWED_ORIGINS', 'PROXY_JWT_SECRET',
                   'ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'OPENROUTER_API_KEY', 'GITHUB_TOKEN', 'LOG_LEVEL',
                   'MAX_REQUEST_BYTES', 'REPLY_MAX_BYTES', 'SHUTDOWN_GRACE_SECONDS', 'FIRST_USER', 'GITHUB_REPOS',
                   'GITHUB_BASE_URL', 'FETCH_ALLOW', 'TLS_CERT', 'TLS_KEY', 'PROXY_PROVIDERS_DIR', 'DATABASE_URL',
                   'TRUSTED_PROXIES'])
    delete env[k];
  for (const k of Object.keys(env))
    if (['SANDBOX_', 'EXEC_', 'OAUTH_', 'PREAUTH_', 'SIGNIN_', 'NAME_LOOKUP', 'PROXY_PUSH_', 'NOTIFY_', 'CONFORMANCE_']
      .some((p) => k.startsWith(p)) || k === 'FILE_MAX_BYTES' || k === 'CLUSTER_NONCE_CACHE')
    delete env[k];
  // No test may send a packet off this machine: sandboxes get no network unless a test asks for
  // it (and then only to loopback addresses it names in SANDBOX_NETWORK_ADDRS).
  env.SANDBOX_NETWORK = 'none';
  // Nor build the debian template from Debian's mirror: sandboxes start on the host template
  // unless a test asks for the shared debian one (debianTemplate()).
  env.SANDBOX_TEMPLATE = 'host';
  // Nor keep a warm pool, whose starts would run beside every test's own work and change what
  // the tests that count sandboxes see: the tests of the pool, and the SDK suite, ask for one.
  env.SANDBOX_POOL = '0';
  // Nor boot an agent in a pooled sandbox (each a few seconds of CPU) where a test keeps a pool
  // for something else: the tests of pooled agents ask for them.
  env.RUNS_AGENT_POOL = '0';
  env.ASAN_OPTIONS = env.ASAN_OPTIONS || 'detect_leaks=1:abort_on_error=1';
  env.UBSAN_OPTIONS = env.UBSAN_OPTIONS || 'print_stacktrace=1:halt_on_error=1';
  return env;
}

// The debian template, built once per `make test` (tests/run.sh starts the build as the suites
// begin) into a directory shared by every test and kept between runs on the same machine. The
// build waits for one under way and only verifies an up-to-date tree; run on its own, a test
// builds it here (minutes; Debian's mirror and the npm registry, as installing packages does).
// Resolves to the environment that gives a server the template.
export const TEMPLATES_DIR = process.env.SANDBOX_MCP_TEST_TEMPLATES || '/var/tmp/sandbox-mcp-templates-test';
let debianReady = null;
export function debianTemplate() {
  debianReady ??= new Promise((resolve, reject) => {
    const env = { ...cleanEnv(), SANDBOX_TEMPLATE_DIR: TEMPLATES_DIR };
    delete env.SANDBOX_TEMPLATE;
    const p = spawn(BIN, ['template', 'build', 'debian', '--data-dir', TEMPLATES_DIR, '--env-file', '/dev/null'],
      { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => { err = (err + d).slice(-8000); });
    p.on('close', (code) => {
      if (code === 0) resolve({ SANDBOX_TEMPLATE: 'debian', SANDBOX_TEMPLATE_DIR: TEMPLATES_DIR });
      else reject(new Error(`template build debian exited ${code}:\n${err}`));
    });
  });
  return debianReady;
}

export function tempDir(prefix = 'smcp-') {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

// Sandboxes outlive the server by design: stop them and unmount their disks, then remove dir.
export function removeDataDir(dir) {
  cli(['sandbox', 'stop-all', '--data-dir', dir], { bin: FIXTURE_BIN });
  rmSync(dir, { recursive: true, force: true });
  dropSchema(dir);
}

// Start `sandbox-mcp serve`. Resolves once it listens, with
// {url, mcpUrl, token, dataDir, proc, stdout(), stderr(), waitLog(re), stop(signal), fetch(url, init)}.
// The server's log and its replies come on different descriptors, so a line it logged before
// answering may reach the test after the answer: waitLog(re) waits for it.
// wrap: a command that execs the server, e.g. ['prlimit', '--nofile=1024:', '--'].
// tls: {cert, key, ca} (file paths) serves HTTPS: url is https://, and fetch() (which rpc() uses)
// trusts ca; h2: true has fetch() offer HTTP/2 as well.
export async function startServer({ args = [], env = {}, dataDir, cwd, relative, wrap = [], tls } = {}) {
  const ownDir = !dataDir;
  dataDir = dataDir || tempDir();
  // relative: pass this path (relative to cwd) as --data-dir instead of the absolute one
  const argv = ['serve', '--listen', '127.0.0.1:0', '--data-dir', relative || dataDir, ...args];
  if (tls) argv.push('--tls-cert', tls.cert, '--tls-key', tls.key);
  const proc = spawn(wrap.length ? wrap[0] : BIN, wrap.length ? [...wrap.slice(1), BIN, ...argv] : argv, {
    cwd: cwd || dataDir,
    env: serverEnv(dataDir, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '', err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  // A spawn failure (e.g. ENOENT while the binary is being rebuilt) emits 'error' and no 'exit';
  // without this the wait for "http listening" below would poll forever.
  const exited = new Promise((resolve) => {
    proc.on('exit', (code, signal) => resolve({ code, signal }));
    proc.on('error', (e) => { err += `spawn ${BIN}: ${e.message}\n`; resolve({ code: null, signal: null }); });
  });
  // ...and its output read to the end
  const closed = new Promise((resolve) => proc.on('close', resolve));
  const addr = await new Promise((resolve, reject) => {
    const timer = setInterval(() => {
      // Ready once "serve start" is logged; on a first start also once the banner with the
      // token has arrived (stdout and stderr are separate pipes: either may be read first).
      const m = err.match(/http listening addr=(\S+)/);
      const banner = !/store first-user /.test(err) || /Access token:\s+\S+\n/.test(out);
      if (m && /serve start /.test(err) && banner) { clearInterval(timer); resolve(m[1]); }
    }, 10);
    exited.then(({ code }) => { clearInterval(timer); reject(new Error(`server exited ${code}: ${err}`)); });
  }).catch((e) => {
    if (ownDir) removeDataDir(dataDir); // a server that did not start leaves no directory behind
    throw e;
  });
  // A server that ends unasked (not by stop(), nor by a signal the test sent) says so on the
  // test's stderr, with the end of its log: what a later wait for it would only time out on.
  let asked = false;
  closed.then(() => {
    if (asked || proc.signalCode === 'SIGKILL' || proc.signalCode === 'SIGTERM') return;
    process.stderr.write(`server ${addr} ended unasked: code=${proc.exitCode} signal=${proc.signalCode}\n--- its log ---\n${err.slice(-6000)}\n`);
  });
  const url = `${tls ? 'https' : 'http'}://${addr}`;
  const tokenMatch = out.match(/Access token:\s+(\S+)/);
  // A connection left idle for a second is closed by the client, well before the server's
  // keep-alive (h2o's 10 s) closes it: a test process starved of the CPU on a loaded machine reads
  // an answer seconds after the server sent it, and with undici's 4 s the server's close could
  // meet the next request on that connection ("other side closed", or a reset).
  const agent = new Agent({ keepAliveTimeout: 1000, keepAliveMaxTimeout: 1000,
    ...(tls ? { connect: { ca: readFileSync(tls.ca) }, allowH2: !!tls.h2 } : {}) });
  return {
    url,
    mcpUrl: `${url}/mcp`,
    ca: tls ? readFileSync(tls.ca, 'utf8') : null,
    agent,
    fetch: (u, init = {}) => undiciFetch(u, { ...init, dispatcher: agent }),
    token: tokenMatch ? tokenMatch[1] : null,
    dataDir,
    proc,
    exited,
    stdout: () => out,
    stderr: () => err,
    // what the log matches as it arrives; at the server's exit, or past ms (a bound for a
    // server that hangs, far beyond any wait a loaded machine makes), an error with the log
    waitLog(re, ms = 120000) {
      return new Promise((resolve, reject) => {
        const done = (f, v) => { clearTimeout(timer); proc.stderr.off('data', look); f(v); };
        const fail = (why) => done(reject, new Error(`${why}: ${re}\n--- server log ---\n${err.slice(-6000)}`));
        // the listener below runs after the one above has added d to err
        const look = () => { const m = err.match(re); if (m) done(resolve, m); };
        const timer = setTimeout(() => fail(`not logged within ${ms} ms`), ms);
        proc.stderr.on('data', look);
        closed.then(() => { look(); fail('the server exited without logging'); });
        look();
      });
    },
    // keep: leave the data directory for the test to read (and remove) even when it is the
    // server's own
    async stop(signal = 'SIGTERM', { keep = false } = {}) {
      asked = true;
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const r = await exited;
      await agent?.destroy();
      if (ownDir && !keep) removeDataDir(dataDir);
      return r;
    },
  };
}

// POST a JSON-RPC message to /mcp. Returns {status, headers, body (parsed JSON or null), text}.
export async function rpc(server, message, { headers = {}, token = server.token } = {}) {
  const res = await (server.fetch || fetch)(server.mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...headers,
    },
    body: typeof message === 'string' ? message : JSON.stringify(message),
  });
  const text = await res.text();
  let body = null;
  try { body = JSON.parse(text); } catch { /* SSE or empty */ }
  return { status: res.status, headers: res.headers, body, text };
}

// Parse an SSE body into the JSON messages of its data lines.
export function sseMessages(text) {
  return text.split(/\n\n/).map((ev) => ev.split('\n').filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim()).join('')).filter(Boolean).map((d) => JSON.parse(d));
}

// Add user name to srv's data dir with a token of its own; returns the token.
export function addUser(srv, name) {
  const add = cli(['user', 'add', name, '--data-dir', srv.dataDir], { bin: FIXTURE_BIN });
  if (add.status !== 0) throw new Error(`user add ${name}: ${add.stderr}`);
  const tok = cli(['token', 'create', '--user', name, '--data-dir', srv.dataDir], { bin: FIXTURE_BIN });
  if (tok.status !== 0) throw new Error(`token create ${name}: ${tok.stderr}`);
  return tok.stdout.match(/smcp_\S+/)[0];
}

// addUser() without blocking the event loop (cliAsync).
export async function addUserAsync(srv, name) {
  const add = await cliAsync(['user', 'add', name, '--data-dir', srv.dataDir], { bin: FIXTURE_BIN });
  if (add.status !== 0) throw new Error(`user add ${name}: ${add.stderr}`);
  const tok = await cliAsync(['token', 'create', '--user', name, '--data-dir', srv.dataDir], { bin: FIXTURE_BIN });
  if (tok.status !== 0) throw new Error(`token create ${name}: ${tok.stderr}`);
  return tok.stdout.match(/smcp_\S+/)[0];
}

// SQL for a blob column's bytes as hex text, in the dialect of this run's stores.
export const sqlHex = (col) => (PG_URL ? `upper(encode(${col}, 'hex'))` : `hex(${col})`);

// Everything srv's database holds, as text: the SQLite file and its WAL byte for byte, or on
// PostgreSQL a data dump of the server's schema. For checks that a secret is not stored.
export function dbDump(srvOrDir) {
  const dir = typeof srvOrDir === 'string' ? srvOrDir : srvOrDir.dataDir;
  const { DATABASE_URL } = storeEnv(dir);
  if (DATABASE_URL)
    return execFileSync('pg_dump', ['--data-only', `--schema=${pgSchema(dir)}`, PG_URL], { encoding: 'latin1', maxBuffer: 256 << 20 });
  return ['sandbox-mcp.db', 'sandbox-mcp.db-wal'].map((f) => {
    try { return readFileSync(path.join(dir, f)).toString('latin1'); } catch { return ''; }
  }).join('');
}

// The rows query gives on srv's database, as objects (sqlite3 -json, or psql's json_agg on
// PostgreSQL: bigint columns come back as numbers either way).
export function sqlRows(srv, query) {
  const [cmd, args] = sqlCommand(srv, query);
  const out = execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 << 20 });
  return out.trim() ? JSON.parse(out) : [];
}

function sqlCommand(srv, query) {
  const { DATABASE_URL } = storeEnv(srv.dataDir);
  return DATABASE_URL
    ? ['psql', ['-qAtX', '-v', 'ON_ERROR_STOP=1', '-c', `WITH r AS (${query}) SELECT coalesce(json_agg(r), '[]') FROM r`, DATABASE_URL]]
    : ['sqlite3', ['-json', '-cmd', '.timeout 5000', path.join(srv.dataDir, 'sandbox-mcp.db'), query]];
}

// sqlRows() without blocking the event loop.
export async function sqlRowsAsync(srv, query) {
  const [cmd, args] = sqlCommand(srv, query);
  const out = await new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8', maxBuffer: 256 << 20 },
      (e, stdout, stderr) => (e ? reject(new Error(`${cmd}: ${stderr || e.message}`)) : resolve(stdout)));
  });
  return out.trim() ? JSON.parse(out) : [];
}
