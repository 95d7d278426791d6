// Several nodes: `tools/list` and `run_task` throughput through nginx in front of one node and in
// front of three, all sharing one PostgreSQL database (a cluster of its own, fsync on), on this
// one machine. tools/list is answered by whichever node gets it; run_task makes a session on the
// node that gets a client's first call, and the client's later runs in it are forwarded there by
// the others. The runs find no agent program and fail at once, so only taking them is measured.
// Run: node bench/cluster.mjs [--quick]   (uses build/sandbox-mcp, wrk, nginx, postgresql)
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fmt, writeHeadline, wrkScript, runWrk, pool, mcpClient } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const pgDir = `/var/tmp/smcp-bench-pg-${process.pid}`;
const pgsh = path.join(root, 'tests', 'lib', 'pg.sh');
const started = spawnSync('sh', [pgsh, 'start', pgDir, 'durable'], { encoding: 'utf8' });
if (started.status !== 0) { console.error(`cluster bench: ${started.stderr}`); process.exit(1); }
process.env.SANDBOX_MCP_TEST_DATABASE_URL = started.stdout.trim();
process.on('exit', () => spawnSync('sh', [pgsh, 'stop', pgDir]));
const { startCluster, startBalancer } = await import('../tests/lib/cluster.mjs');

const quick = process.argv.includes('--quick');
const SECONDS = quick ? 3 : 6;
const CLIENTS = 16;
const TASKS = quick ? 15 : 40; // run_task calls per client
const PROTOCOL = '2025-06-18';
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };
const work = mkdtempSync(path.join(tmpdir(), 'smcp-bench-cluster-'));

async function measure(n) {
  const c = await startCluster(n, { env: { OPENCODE_BIN: '/nonexistent/opencode', ANTHROPIC_API_KEY: 'sk-bench',
    RUNS_MAX_QUEUED_PER_USER: '100000', NODE_HEARTBEAT_SECONDS: '5', NODE_LOST_SECONDS: '30' } });
  const lb = await startBalancer(c.nodes.map((x) => x.url.replace('http://', '')));
  try {
    const rows = {};
    const script = wrkScript(work, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), PROTOCOL, c.token);
    await runWrk(lb.mcpUrl, script, 16, 1);
    for (const conns of [16, 256]) rows[`tools/list ${conns}`] = pool([await runWrk(lb.mcpUrl, script, conns, SECONDS)]);
    // run_task: CLIENTS clients at once, each with a session of its own (made by its first call)
    const clients = Array.from({ length: CLIENTS }, () => mcpClient({ mcpUrl: lb.mcpUrl, token: c.token }));
    const sessions = await Promise.all(clients.map(async (cl) => (await cl.call('run_task', { task: 'bench: first' })).structuredContent.session_id));
    const t0 = performance.now();
    await Promise.all(clients.map(async (cl, i) => {
      for (let k = 0; k < TASKS; k++) await cl.call('run_task', { task: `bench: run ${k}`, session_id: sessions[i] });
    }));
    const ms = performance.now() - t0;
    rows.run_task = { rps: (CLIENTS * TASKS) / (ms / 1000), ms };
    for (const cl of clients) cl.close();
    const where = c.nodes.map((x) => (x.stderr().match(/run queued run=/g) || []).length);
    rows.spread = where;
    return rows;
  } finally {
    await lb.stop();
    await c.stop();
  }
}

const one = await measure(1);
const three = await measure(3);
rmSync(work, { recursive: true, force: true });

log('## Several nodes (`node bench/cluster.mjs`)');
log();
log(`Machine: ${cpus().length} × ${cpus()[0].model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB. Each case: nginx (one worker, round-robin) in front of the nodes, every node and the balancer and PostgreSQL 15 (fsync on, commits not waiting for it, as the server's SQLite) on this one machine. \`tools/list\`: wrk, ${SECONDS} s per row. \`run_task\`: ${CLIENTS} clients at once, each ${TASKS} runs in a session of its own; the session lives on the node that took its first call, and the others forward its runs there.`);
log();
log('| what | one node | three nodes | three / one |');
log('|---|---|---|---|');
for (const conns of [16, 256]) {
  const a = one[`tools/list ${conns}`], b = three[`tools/list ${conns}`];
  log(`| \`tools/list\`, ${conns} connections: requests/s (p50 / p99 ms) | ${a.rps.toFixed(0)} (${fmt(a.p50 / 1000)} / ${fmt(a.p99 / 1000)}) | ${b.rps.toFixed(0)} (${fmt(b.p50 / 1000)} / ${fmt(b.p99 / 1000)}) | ${(b.rps / a.rps).toFixed(2)}x |`);
  if (a.errors || b.errors) log(`|  errors | ${a.errorText} | ${b.errorText} | |`);
}
log(`| \`run_task\`: runs taken per second | ${one.run_task.rps.toFixed(0)} | ${three.run_task.rps.toFixed(0)} | ${(three.run_task.rps / one.run_task.rps).toFixed(2)}x |`);
log(`| runs queued on each node | ${one.spread.join(' / ')} | ${three.spread.join(' / ')} | |`);
log();
log(`On ${cpus().length} cores three nodes share the same CPUs as one, so this measures what spreading costs (the balancer's choice, a forward for two calls in three), not what it gains; on machines of their own each node adds its cores.`);
writeHeadline([
  { what: '`tools/list` through nginx, 256 connections: 1 node / 3 nodes (one machine)', ours: `${one['tools/list 256'].rps.toFixed(0)} / ${three['tools/list 256'].rps.toFixed(0)} requests/s`,
    peer: 'the same, one node', ratio: `${(three['tools/list 256'].rps / one['tools/list 256'].rps).toFixed(2)}x` },
  { what: '`run_task` through nginx, 16 clients: 1 node / 3 nodes (one machine)', ours: `${one.run_task.rps.toFixed(0)} / ${three.run_task.rps.toFixed(0)} runs/s`,
    peer: 'the same, one node', ratio: `${(three.run_task.rps / one.run_task.rps).toFixed(2)}x` },
]);
if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
