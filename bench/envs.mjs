// Environment snapshots: how soon a new session can run a command that needs the repository's
// dependencies. The repository (tests/lib/deps_repo.mjs) installs 24 npm packages with `npm ci`
// and 6 wheels with `pip install` in its .sandbox-mcp/setup.sh, from local registries reached
// through the egress proxy. Each run is `run_task` in a new session; the fake model's first reply
// has the agent's bash tool run `npm test && python3 check.py`, and the run is timed from sending
// `run_task` to the model's first request, and to the tool's result (its output checked) arriving
// in the second. Without snapshots (`ENV_CACHE_MB=0`, the setup runs every time) and from a
// snapshot (one warm-up session, not counted, takes it); and the peer: the same steps by hand
// in a fresh sandbox with the container_* tools. Also the disk a snapshot takes and the time to
// take one.
// Run: node bench/envs.mjs [--quick]   (as root; uses build/sandbox-mcp and the OpenCode that
// `make deps-npm` installs; loopback only)
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { summarize, fmt, mcpClient, writeHeadline } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer } = await import('../tests/lib/server.mjs');
const { startFake, agentRouter, userTexts, toolResults, isTitleRequest } = await import('../tests/lib/fake-anthropic.mjs');
const { gitHttpBackend } = await import('../tests/lib/git.mjs');
const { startDepsRegistries, depsRepo, CHECK, TEST_COMMAND, HOST, NPM_COUNT, PY_COUNT } =
  await import('../tests/lib/deps_repo.mjs');

const quick = process.argv.includes('--quick');
const N = quick ? 3 : 10; // runs per case
const MODEL = 'anthropic/claude-sonnet-4-5';
const OPENCODE = path.join(root, 'src/runs/opencode/node_modules/opencode-ai/bin/opencode.exe');
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };
const load = loadavg()[0];

// --- the fake upstream: the agent's scripts, and when each run's first request and its tool's
// result arrive ---
const router = agentRouter();
const seen = new Map(); // marker -> {first, result, text} (performance.now(), wall clock)
const fake = await startFake((req, res, raw) => {
  const perf = performance.now(), wall = Date.now();
  let body = {};
  try { body = JSON.parse(raw); } catch { /* not JSON */ }
  const m = !isTitleRequest(body) && (userTexts(body).at(-1) || '').match(/\bmark-[a-z0-9-]+\b/);
  if (m) {
    const s = seen.get(m[0]) ?? {};
    if (!s.first) s.first = { perf, wall };
    const results = toolResults(body);
    if (results.length && !s.result) { s.result = { perf, wall }; s.text = results.map((t) => t.text).join('\n'); }
    seen.set(m[0], s);
  }
  router(req, res, raw);
});

const scratch = mkdtempSync(path.join(tmpdir(), 'smcp-bench-envs-'));
const deps = await startDepsRegistries();
const repo = await depsRepo(scratch, deps);
// the same repository over plain HTTP on HOST, for the peer's `git clone` in the sandbox
const gitSrv = http.createServer((req, res) => gitHttpBackend(req, res, scratch));
await new Promise((r) => gitSrv.listen(0, HOST, r));
const gitUrl = `http://${HOST}:${gitSrv.address().port}/${path.basename(repo)}`;

const baseEnv = { ANTHROPIC_API_KEY: 'sk-bench', ANTHROPIC_BASE_URL: fake.url, RUNS_ALLOW_LOCAL_REPOS: '1',
  RUN_DEFAULT_MODEL: MODEL, OPENCODE_BIN: OPENCODE, SANDBOX_MAX_RUNNING: '3',
  SANDBOX_NETWORK: 'allowlist', SANDBOX_NETWORK_DEFAULTS: '0',
  SANDBOX_NETWORK_ADDRS: `${deps.addrs},${HOST}:${gitSrv.address().port}` };
let server, client;
const call = async (name, args) => {
  const r = await client.call(name, args);
  if (r.isError) throw new Error(`${name}: ${JSON.stringify(r).slice(0, 800)}`);
  return r.structuredContent;
};
async function waitEnd(runId) {
  for (;;) {
    const r = await call('get_result', { run_id: runId, wait_seconds: 30 });
    if (['succeeded', 'failed', 'cancelled'].includes(r.status)) return r;
  }
}
const sql = (query) => {
  const o = execFileSync('sqlite3', ['-json', path.join(server.dataDir, 'sandbox-mcp.db'), query], { encoding: 'utf8' });
  return o.trim() ? JSON.parse(o) : [];
};
// The server's log lines of one run, with their times (ms since the epoch).
function runLog(runId, sbx) {
  const lines = [];
  for (const line of server.stderr().split('\n')) {
    if (!line.includes(runId) && !(sbx && line.includes(`sbx=${sbx} `) && / sandbox (started|assigned) /.test(line))) continue;
    lines.push({ t: Date.parse(line.slice(0, line.indexOf(' '))), text: line.slice(line.indexOf(' ') + 1) });
  }
  return lines;
}

let seq = 0;
// One run in a new session: its times in ms from sending run_task.
async function timedRun() {
  const marker = `mark-${++seq}-${Date.now().toString(36)}`;
  router.add(marker, [{ tool: 'bash', input: { command: TEST_COMMAND, description: 'Run the tests' } }, { text: 'Done.' }]);
  const sentWall = Date.now(), sent = performance.now();
  const r = await call('run_task', { task: `${marker}: run the tests`, repository: repo, pull_request: 'none' });
  const end = await waitEnd(r.run_id);
  const s = seen.get(marker);
  if (end.status !== 'succeeded' || !s?.result || !s.text.includes(CHECK))
    throw new Error(`run ${r.run_id} ${end.status}: ${JSON.stringify({ end, s }).slice(0, 1500)}`);
  const evs = sql(`SELECT type, raw FROM run_events WHERE run_id = '${r.run_id}' ORDER BY seq`);
  const saved = evs.find((e) => e.type === 'env_saved');
  const sbx = (server.stderr().match(new RegExp(`run sandbox ready run=${r.run_id} sbx=(\\S+)`)) || [])[1];
  return { run: r.run_id, sentWall, first: s.first.perf - sent, result: s.result.perf - sent,
    firstWall: s.first.wall, resultWall: s.result.wall, restored: evs.some((e) => e.type === 'env_restored'),
    saved: saved ? JSON.parse(saved.raw) : null, setup: end.setup, log: runLog(r.run_id, sbx) };
}

// a. no snapshots: the setup runs in every new session
server = await startServer({ env: { ...baseEnv, ENV_CACHE_MB: '0' } });
client = mcpClient(server);
const cold = [];
for (let i = 0; i < N; i++) cold.push(await timedRun());

// c. the peer, on the same server: by hand in a fresh sandbox (container_initialize starts the
// user's sandbox over), each step one container_exec
const peer = [];
for (let i = 0; i < N; i++) {
  const steps = {};
  const t0 = performance.now();
  const step = async (what, name, args) => {
    const s = performance.now();
    const r = await call(name, args);
    steps[what] = performance.now() - s;
    if (name === 'container_exec' && r.exit_code !== 0) throw new Error(`${what}: ${JSON.stringify(r).slice(0, 1500)}`);
    return r;
  };
  const exec = (what, command) => step(what, 'container_exec', { command, timeout_ms: 300000 });
  await step('container_initialize', 'container_initialize', {});
  await exec('clone', `git clone -q ${gitUrl} /workspace/deps`);
  await exec('npm ci', 'cd /workspace/deps && npm ci');
  await exec('pip install', `cd /workspace/deps && python3 -m pip install -q --disable-pip-version-check --no-cache-dir --index-url ${deps.py.url} --target .pydeps -r requirements.txt`);
  const t = await exec('test', `cd /workspace/deps && ${TEST_COMMAND}`);
  if (!t.stdout.includes(CHECK)) throw new Error(`peer test: ${JSON.stringify(t)}`);
  peer.push({ total: performance.now() - t0, ready: performance.now() - t0 - steps.test, steps });
}
client.close();
await server.stop();

// b. from the snapshot: the warm-up session's setup takes it
server = await startServer({ env: baseEnv });
client = mcpClient(server);
const warm = await timedRun();
if (!warm.saved) throw new Error(`the warm-up run saved no snapshot: ${JSON.stringify(warm.log)}`);
const snap = warm.saved.snapshot;
const [row] = sql(`SELECT bytes FROM envs WHERE id = '${snap}'`);
const du = Number(execFileSync('du', ['-sk', path.join(server.dataDir, 'envs', snap)], { encoding: 'utf8' }).split('\t')[0]) * 1024;
const fromSnap = [];
for (let i = 0; i < N; i++) {
  const r = await timedRun();
  if (!r.restored) throw new Error(`run ${r.run} did not start from the snapshot`);
  fromSnap.push(r);
}
const takes = [warm.saved.duration_ms];
client.close();
await server.stop();

// b2. from the snapshot with its sandbox kept ready in the pool (RUNS_ENV_POOL): started on the
// snapshot and its OpenCode readied for the repository's directory before run_task; each run
// waits until the pool has the next one ready, as a user's next session would find it. Each
// run's session keeps its sandbox (and its OpenCode) running, and the pool never stops a user's
// sandbox to make room, so this case has a slot for each run besides the pool's two.
server = await startServer({ env: { ...baseEnv, SANDBOX_POOL: '1', RUNS_AGENT_POOL: '1', RUNS_ENV_POOL: '1', SANDBOX_DISK_MB: '2048',
  SANDBOX_MAX_RUNNING: String(N + 4) } });
client = mcpClient(server);
const warm2 = await timedRun();
if (!warm2.saved) throw new Error('the second warm-up run saved no snapshot');
const envReady = () => {
  const log = server.stderr();
  const ids = [...log.matchAll(new RegExp(`run agent booting in the pool sbx=(\\S+) model=\\S+ env=${warm2.saved.snapshot} `, 'g'))].map((m) => m[1]);
  return ids.filter((id) => log.includes(`sandbox pool prepared sbx=${id} ready=yes`)).length;
};
const pooledSnap = [];
for (let i = 0; i < N; i++) {
  for (const t0 = Date.now(); envReady() < i + 1;) {
    if (Date.now() - t0 > 120000)
      throw new Error(`the pool had no sandbox on the snapshot ready for run ${i + 1} after 2 minutes; the server's log ends:\n${server.stderr().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const r = await timedRun();
  if (!r.restored) throw new Error(`run ${r.run} did not start from the snapshot`);
  if (!new RegExp(`sandbox assigned sbx=\\S+ user=\\S+ session=\\S+ from=pool template=\\S+ env=${warm2.saved.snapshot} prepared=yes`).test(r.log.map((l) => l.text).join('\n')))
    throw new Error(`run ${r.run} did not take the pooled sandbox`);
  pooledSnap.push(r);
}
client.close();
await server.stop();
await deps.close();
await fake.close();
gitSrv.close();
rmSync(scratch, { recursive: true, force: true });

// --- report ---
const S = (xs) => summarize(xs);
const p50 = (xs) => { const v = xs.filter((x) => !Number.isNaN(x)); return v.length ? summarize(v).p50 : NaN; };
const f = (ms) => (Number.isNaN(ms) ? '–' : fmt(ms));
// A run's steps by the server's log, each as ms since run_task was sent.
function steps(r) {
  const at = (re) => { const l = r.log.find((x) => re.test(x.text)); return l ? l.t - r.sentWall : NaN; };
  const started = at(/ sandbox started /); // before run_task: the pool's
  return { stored: at(/ run queued /), started: started < 0 ? NaN : started, sandbox: at(/ run sandbox ready /),
    cloned: at(/reason="unpacking/), setupStart: at(/ run setup started /), setupEnd: at(/ run setup ended /),
    taken: at(/ run snapshot taken /), spawned: at(/ run agent started /),
    first: r.firstWall - r.sentWall, result: r.resultWall - r.sentWall };
}
if (process.env.SHOW_LOG) for (const r of [cold[0], warm, fromSnap[0]])
  console.log(r.run, r.log.map((l) => `${l.t - r.sentWall} ${l.text}`).join('\n  '));
const coldS = S(cold.map((r) => r.result)), snapS = S(fromSnap.map((r) => r.result)), peerS = S(peer.map((p) => p.total));
const coldF = S(cold.map((r) => r.first)), snapF = S(fromSnap.map((r) => r.first));
const poolS = S(pooledSnap.map((r) => r.result)), poolF = S(pooledSnap.map((r) => r.first));
// the workspace ready, its dependencies in place: the agent spawned (the peer: before its test)
const coldR = S(cold.map((r) => steps(r).spawned)), snapR = S(fromSnap.map((r) => steps(r).spawned));
const poolR = S(pooledSnap.map((r) => steps(r).spawned));
const peerR = S(peer.map((p) => p.ready));
log('## Environment snapshots (`node bench/envs.mjs`)');
log();
log(`Machine: ${cpus().length} × ${cpus()[0].model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, load average ${load.toFixed(1)} at the start. A repository whose \`.sandbox-mcp/setup.sh\` runs \`npm ci\` (${NPM_COUNT} packages from its package-lock.json, some depending on others) and \`pip install --target .pydeps -r requirements.txt\` (${PY_COUNT} wheels), from local registries on ${HOST} reached through the egress proxy. Each run is \`run_task\` in a new session (a new sandbox, a new OpenCode); the fake model's first reply has the agent's bash tool run \`${TEST_COMMAND}\`, which needs every dependency; timed from sending \`run_task\` to the workspace being ready (the agent spawned, by the server's log), to the model's first request, and to the tool's result (its output checked) reaching the model. The peer: the same steps by hand in a fresh sandbox with the container_* tools (\`container_initialize\`, then \`container_exec\`: \`git clone\` over HTTP, \`npm ci\`, \`pip install\`, the test), timed from the first call (ready: before the test). One at a time, ${N} of each.`);
log();
log('| what | runs | workspace ready with its dependencies p50 ms | first model request p50 ms | the dependency-needing command\'s result p50 ms | p90 ms | min ms |');
log('|---|---|---|---|---|---|---|');
log(`| no snapshots (\`ENV_CACHE_MB=0\`): the setup runs | ${coldS.n} | ${fmt(coldR.p50)} | ${fmt(coldF.p50)} | ${fmt(coldS.p50)} | ${fmt(coldS.p90)} | ${fmt(coldS.min)} |`);
log(`| from the snapshot (only maintenance.sh would run; this repository has none) | ${snapS.n} | ${fmt(snapR.p50)} | ${fmt(snapF.p50)} | ${fmt(snapS.p50)} | ${fmt(snapS.p90)} | ${fmt(snapS.min)} |`);
log(`| from the snapshot, its sandbox and OpenCode ready in the pool (\`RUNS_ENV_POOL=1\`) | ${poolS.n} | ${fmt(poolR.p50)} | ${fmt(poolF.p50)} | ${fmt(poolS.p50)} | ${fmt(poolS.p90)} | ${fmt(poolS.min)} |`);
log(`| peer: by hand with container_* tools in a fresh sandbox | ${peerS.n} | ${fmt(peerR.p50)} | – | ${fmt(peerS.p50)} | ${fmt(peerS.p90)} | ${fmt(peerS.min)} |`);
log();
log(`The peer's steps (p50 ms): ${Object.keys(peer[0].steps).map((k) => `${k} ${fmt(p50(peer.map((p) => p.steps[k])))}`).join(', ')}.`);
log();
log(`A snapshot: ${(row.bytes / 2 ** 20).toFixed(2)} MiB by the envs table (the files' sizes), ${(du / 2 ** 20).toFixed(1)} MiB on disk (\`du\` of \`DATA_DIR/envs/<id>\`, whole blocks: its writable layer, with npm's cache in /root, and its workspace, with node_modules and .pydeps), ${warm.saved.files ?? '?'} files; taken in ${fmt(takes[0])} ms (the \`env_saved\` event's \`duration_ms\`).`);
log();
log('Where the time goes, by the server\'s log (ms timestamps; p50 of each step, ms since `run_task` was sent):');
log();
log('| what | run stored | sandbox started | sandbox ready | clone unpacked | setup | snapshot taken | agent spawned | first model request | command\'s result |');
log('|---|---|---|---|---|---|---|---|---|---|');
for (const [name, runs] of [['no snapshots', cold], ['the warm-up run (takes the snapshot)', [warm]], ['from the snapshot', fromSnap], ['from the snapshot, ready in the pool', pooledSnap]]) {
  const st = runs.map(steps);
  const g = (k) => f(p50(st.map((x) => x[k])));
  const setup = p50(st.map((x) => x.setupEnd - x.setupStart));
  log(`| ${name} | ${g('stored')} | ${g('started')} | ${g('sandbox')} | ${g('cloned')} | ${f(setup)} | ${g('taken')} | ${g('spawned')} | ${g('first')} | ${g('result')} |`);
}
log();
const spawnToFirst = p50(fromSnap.map((r) => { const s = steps(r); return s.first - s.spawned; }));
const firstToResult = p50(fromSnap.map((r) => r.result - r.first));
log(`From the snapshot, p50: the server's part (to the agent spawned, the workspace ready) ${f(snapR.p50)} ms, OpenCode's start to its first request ${f(spawnToFirst)} ms, the first request to the command's result (the model's reply, the bash tool, \`npm test\` and python) ${f(firstToResult)} ms.`);
const ratio = coldR.p50 / snapR.p50, poolRatio = coldS.p50 / poolS.p50;
log();
log(`From the snapshot with its sandbox and OpenCode ready in the pool, p50: the first model request ${f(poolF.p50)} ms and the command's result ${f(poolS.p50)} ms after \`run_task\` (${poolRatio.toFixed(1)}x faster than without snapshots).`);
writeHeadline([
  { what: 'Environment snapshots: a new session\'s workspace ready with its dependencies (24 npm + 6 pip packages); and to a command that needs them',
    ours: `ready ${fmt(snapR.p50)} ms from the snapshot, ${fmt(coldR.p50)} ms without (setup every time); the command's result ${fmt(snapS.p50)} / ${fmt(coldS.p50)} ms (OpenCode's start ${f(spawnToFirst)} ms); snapshot ${(row.bytes / 2 ** 20).toFixed(2)} MiB (${(du / 2 ** 20).toFixed(1)} MiB on disk), taken in ${fmt(takes[0])} ms`,
    peer: `by hand with container_* tools: ready ${fmt(peerR.p50)} ms, the command's result ${fmt(peerS.p50)} ms`,
    ratio: `${ratio.toFixed(1)}x faster to ready than without`,
    target: `under 1 s to ready: ${snapR.p50 < 1000 ? 'met' : '**not met**'}, 10x: ${ratio >= 10 ? 'met' : '**not met**'}; to the command's result: with the pool's sandbox on the snapshot (\`RUNS_ENV_POOL\`) ${fmt(poolS.p50)} ms, under 1 s ${poolS.p50 < 1000 ? 'met' : '**not met**'}, ${poolRatio.toFixed(1)}x (10x ${poolRatio >= 10 ? 'met' : '**not met**'}); without it ${fmt(snapS.p50)} ms (OpenCode's start ${f(spawnToFirst)} ms of it)` },
]);
if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
