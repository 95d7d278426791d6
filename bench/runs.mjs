// Runs benchmarks: how long run_task takes to return, and get_result and list_runs with a large
// store (1,000,000 runs by default) behind them, each beside MCP `ping` over the same client as
// the floor of a round trip; on SQLite and again on PostgreSQL. The runs are written straight into
// the database (a recursive insert, generate_series on PostgreSQL), so they are rows like any
// other; run_task's runs go to one session and fail at once for want of an agent program, so
// nothing but the return path is measured.
// Run: node bench/runs.mjs [--quick]   (uses build/sandbox-mcp, the sqlite3 CLI and postgresql)
import { spawnSync } from 'node:child_process';
import { writeFileSync, mkdtempSync, statSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarize, timeIt, fmt, mcpClient, writeHeadline } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, removeDataDir } = await import('../tests/lib/server.mjs');

const quick = process.argv.includes('--quick');
const RUNS = quick ? 100000 : 1000000;
const SESSIONS = 1000;
const CALLS = quick ? 300 : 1000;
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };

// The seed, in each store's dialect: RUNS runs over SESSIONS sessions of the first user, one run
// in ten failed or cancelled, three events for one run in a hundred.
const SQLITE_SEED = `
PRAGMA journal_mode = WAL;
BEGIN;
INSERT INTO sessions(id, user_id, agent, created_at, last_run_at)
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${SESSIONS})
  SELECT printf('ses_bench%06d', i), (SELECT id FROM users LIMIT 1), 'opencode', 0, 0 FROM n;
INSERT INTO runs(id, user_id, session_id, status, status_reason, task, title, model, agent,
                 timeout_ms, created_at, started_at, finished_at, success, summary, event_count,
                 input_tokens, output_tokens)
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${RUNS})
  SELECT printf('run_bench%07d', i), (SELECT id FROM users LIMIT 1),
         printf('ses_bench%06d', i % ${SESSIONS} + 1),
         CASE i % 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'cancelled' ELSE 'succeeded' END,
         'the agent finished', 'Refactor the parser and add tests for case ' || i, 'case ' || i,
         'anthropic/claude-sonnet-4-5', 'opencode', 3000000, 1000000 + i, 1000000 + i,
         1000100 + i, 1, 'Done: case ' || i, 3, 1200, 300 FROM n;
INSERT INTO run_transitions(run_id, at, status, reason)
  SELECT id, created_at, 'queued', 'accepted' FROM runs;
INSERT INTO run_events(run_id, seq, time, type, summary, raw)
  WITH RECURSIVE s(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM s WHERE k < 3)
  SELECT r.id, s.k, r.created_at + s.k, 'text', 'event ' || s.k, '{"type":"text"}'
  FROM runs r, s WHERE r.n % 100 = 0;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
`;
const PG_SEED = `
SET client_min_messages = warning;
BEGIN;
INSERT INTO sessions(id, user_id, agent, created_at, last_run_at)
  SELECT 'ses_bench' || lpad(i::text, 6, '0'), (SELECT id FROM users LIMIT 1), 'opencode', 0, 0
  FROM generate_series(1, ${SESSIONS}) i;
INSERT INTO runs(id, user_id, session_id, status, status_reason, task, title, model, agent,
                 timeout_ms, created_at, started_at, finished_at, success, summary, event_count,
                 input_tokens, output_tokens)
  SELECT 'run_bench' || lpad(i::text, 7, '0'), (SELECT id FROM users LIMIT 1),
         'ses_bench' || lpad((i % ${SESSIONS} + 1)::text, 6, '0'),
         CASE i % 10 WHEN 0 THEN 'failed' WHEN 1 THEN 'cancelled' ELSE 'succeeded' END,
         'the agent finished', 'Refactor the parser and add tests for case ' || i, 'case ' || i,
         'anthropic/claude-sonnet-4-5', 'opencode', 3000000, 1000000 + i, 1000000 + i,
         1000100 + i, 1, 'Done: case ' || i, 3, 1200, 300 FROM generate_series(1, ${RUNS}) i;
INSERT INTO run_transitions(run_id, at, status, reason)
  SELECT id, created_at, 'queued', 'accepted' FROM runs;
INSERT INTO run_events(run_id, seq, time, type, summary, raw)
  SELECT r.id, k, r.created_at + k, 'text', 'event ' || k, '{"type":"text"}'
  FROM runs r, generate_series(1, 3) k WHERE r.n % 100 = 0;
COMMIT;
VACUUM ANALYZE;
`;

// One store: seed it, then time each call. Returns {rows, seedMs, sizeMiB}.
async function bench(kind) {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'smcp-bench-runs-'));
  let pgDir = null, dbEnv = {};
  if (kind === 'postgres') {
    pgDir = `/var/tmp/smcp-bench-pg-${process.pid}`;
    const pg = spawnSync('sh', [path.join(root, 'tests', 'lib', 'pg.sh'), 'start', pgDir, 'durable'], { encoding: 'utf8' });
    if (pg.status !== 0) { console.error(pg.stderr); process.exit(1); }
    dbEnv = { DATABASE_URL: pg.stdout.trim() };
  }
  const env = { OPENCODE_BIN: '/nonexistent/opencode', ...dbEnv };
  let server = await startServer({ dataDir, env });
  const token = server.token;
  await server.stop('SIGTERM', { keep: true });
  const t0 = Date.now();
  const seed = kind === 'postgres'
    ? spawnSync('psql', ['-qX', '-v', 'ON_ERROR_STOP=1', dbEnv.DATABASE_URL], { encoding: 'utf8', input: PG_SEED })
    : spawnSync('sqlite3', [path.join(dataDir, 'sandbox-mcp.db')], { encoding: 'utf8', input: SQLITE_SEED });
  if (seed.status !== 0) { console.error(seed.stderr); process.exit(1); }
  const seedMs = Date.now() - t0;
  const sizeMiB = kind === 'postgres'
    ? Number(spawnSync('psql', ['-qAtX', '-c', 'SELECT pg_database_size(current_database())', dbEnv.DATABASE_URL], { encoding: 'utf8' }).stdout) / 2 ** 20
    : statSync(path.join(dataDir, 'sandbox-mcp.db')).size / 2 ** 20;

  // One user queues every measured run_task: lift the per-user cap on waiting runs for it.
  server = await startServer({ dataDir, env: { ...env, ANTHROPIC_API_KEY: 'sk-bench', RUNS_MAX_QUEUED_PER_USER: '100000' } });
  server.token = token;
  const client = mcpClient(server);
  const call = async (name, args) => (await client.call(name, args)).structuredContent;
  async function measure(fn, n = CALLS) {
    for (let i = 0; i < 20; i++) await fn(i); // warm up
    const samples = [];
    for (let i = 0; i < n; i++) samples.push(await timeIt(() => fn(i)));
    return summarize(samples);
  }
  const pick = (i) => `run_bench${String(((i * 7919) % RUNS) + 1).padStart(7, '0')}`;

  const rows = [];
  rows.push(['floor: MCP `ping`, same client', await measure(() => client.ping())]);
  rows.push(['`get_result` of a random run', await measure((i) => call('get_result', { run_id: pick(i) }))]);
  rows.push(['`list_runs` first page (10)', await measure(() => call('list_runs', {}))]);
  rows.push(['`list_runs` limit 100', await measure(() => call('list_runs', { limit: 100 }))]);
  rows.push(['`list_runs` status failed', await measure(() => call('list_runs', { status: 'failed' }))]);
  rows.push(['`list_runs` of one session', await measure((i) => call('list_runs', { session_id: `ses_bench${String((i % SESSIONS) + 1).padStart(6, '0')}` }))]);
  // a cursor as list_runs makes them: the id of a page's last run (here the middle one), encoded
  const deep = Buffer.from(`run_bench${String(Math.floor(RUNS / 2)).padStart(7, '0')}`).toString('base64url');
  if (!(await call('list_runs', { cursor: deep })).runs?.length) throw new Error(`cursor ${deep} gave no page`);
  rows.push(['`list_runs` page at the middle (cursor)', await measure(() => call('list_runs', { cursor: deep }))]);
  // run_task: each queues a run in one session (the engine starts it, finds no agent, fails it)
  const first = await call('run_task', { task: 'bench: warm up' });
  const session = first.session_id;
  rows.push(['`run_task` (returns once the run is stored and queued)', await measure(() => call('run_task', { task: 'bench: measure the return', session_id: session }), quick ? 100 : 300)]);
  client.close();
  await server.stop('SIGTERM', { keep: true });
  removeDataDir(dataDir);
  if (pgDir) spawnSync('sh', [path.join(root, 'tests', 'lib', 'pg.sh'), 'stop', pgDir]);
  return { rows, seedMs, sizeMiB };
}

const lite = await bench('sqlite');
const pg = await bench('postgres');
const rows = lite.rows;
const seedMs = lite.seedMs, dbMiB = lite.sizeMiB;

log(`## Runs (\`node bench/runs.mjs\`)`);
log();
log(`Machine: ${cpus().length} × ${cpus()[0].model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB. Store: ${RUNS.toLocaleString('en')} runs in ${SESSIONS} sessions (${dbMiB.toFixed(0)} MiB, seeded in ${(seedMs / 1000).toFixed(0)} s). One client (node:http, one keep-alive connection), one request at a time.`);
log();
log('| what | calls | p50 ms | p90 ms | p99 ms | min ms | PostgreSQL p50 ms | p99 ms |');
log('|---|---|---|---|---|---|---|---|');
for (const [i, [what, s]] of rows.entries()) {
  const q = pg.rows[i][1];
  log(`| ${what} | ${s.n} | ${fmt(s.p50)} | ${fmt(s.p90)} | ${fmt(s.p99)} | ${fmt(s.min)} | ${fmt(q.p50)} | ${fmt(q.p99)} |`);
}
log();
log(`The PostgreSQL columns: the same calls against the same ${RUNS.toLocaleString('en')} runs in PostgreSQL 15 (\`DATABASE_URL\`; a cluster of its own on a unix socket, fsync on, commits not waiting for it, as the server's SQLite in WAL with synchronous=NORMAL; ${pg.sizeMiB.toFixed(0)} MiB, seeded in ${(pg.seedMs / 1000).toFixed(0)} s), one node.`);
const get = (prefix) => rows.find(([what]) => what.startsWith(prefix))[1];
const ping = get('floor'), task = get('`run_task`'), result = get('`get_result`'), firstPage = get('`list_runs` first'), hundred = get('`list_runs` limit 100');
const store = `${RUNS.toLocaleString('en')} runs stored`;
const pgGet = (prefix) => pg.rows.find(([what]) => what.startsWith(prefix))[1];
const pgResult = pgGet('`get_result`'), pgFirst = pgGet('`list_runs` first'), pgTask = pgGet('`run_task`');
writeHeadline([
  { what: `\`get_result\` / \`list_runs\` first page / \`run_task\`, ${store}, on PostgreSQL`, ours: `${fmt(pgResult.p50)} / ${fmt(pgFirst.p50)} / ${fmt(pgTask.p50)} ms`,
    peer: `the same on SQLite: ${fmt(result.p50)} / ${fmt(firstPage.p50)} / ${fmt(task.p50)} ms`,
    ratio: `${(pgResult.p50 / result.p50).toFixed(1)}x / ${(pgFirst.p50 / firstPage.p50).toFixed(1)}x / ${(pgTask.p50 / task.p50).toFixed(1)}x` },
  { what: `\`run_task\` return, ${store}`, ours: `${fmt(task.p50)} ms (p99 ${fmt(task.p99)})`, peer: `MCP \`ping\`, same client: ${fmt(ping.p50)} ms`,
    ratio: `${(task.p50 / ping.p50).toFixed(1)}x a ping`, target: `well under 100 ms: ${task.p50 < 100 ? 'met' : '**not met**'}` },
  { what: `\`get_result\` / \`list_runs\` first page / 100-run page, ${store}`, ours: `${fmt(result.p50)} / ${fmt(firstPage.p50)} / ${fmt(hundred.p50)} ms`,
    peer: `MCP \`ping\`, same client: ${fmt(ping.p50)} ms`, ratio: `${(result.p50 / ping.p50).toFixed(1)}x / ${(firstPage.p50 / ping.p50).toFixed(1)}x / ${(hundred.p50 / ping.p50).toFixed(1)}x a ping` },
]);
if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
