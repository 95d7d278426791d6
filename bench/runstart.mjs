// How long a run takes to reach the model: from sending run_task to the fake Anthropic upstream
// receiving the run's first request (through the server's LLM proxy), with the session's sandbox
// already running and its OpenCode warm (the session's first run, not counted, started both), and
// where that time goes by the server's own log. Then runs each in a new session (the sandbox from
// the pool, OpenCode booted for the session: started as soon as the run has its sandbox, beside
// the clone), without and with a repository to clone. Beside it: OpenCode started for each run
// (RUNS_AGENT_WARM_SECONDS=0); the floor of that, the same `opencode run` started directly on the
// host against the same fake, timed the same way; and the server's part alone, with a stub agent
// (sh and curl) in OpenCode's place.
// Run: node bench/runstart.mjs [--quick]   (as root; uses build/sandbox-mcp and the OpenCode
// that `make deps-npm` installs; loopback only; RUNSTART_ONLY=new: the new-session rows only,
// RUNSTART_ONLY=setup: only the one with a setup;
// RUNSTART_BEFORE=<binary>: those rows also for that build, by turns with this one)
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { summarize, fmt, mcpClient, writeHeadline, firstSeen } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer } = await import('../tests/lib/server.mjs');
const { startFake, userTexts, sendReply } = await import('../tests/lib/fake-anthropic.mjs');

const quick = process.argv.includes('--quick');
const N = quick ? 5 : 20;        // runs per case, after the one that warms the session
const N_CLONE = quick ? 3 : 10;  // runs that clone (each clones a repository of its own)
const N_COLD = quick ? 3 : 8;    // runs that start OpenCode of their own
const N_NEW = quick ? 3 : 8;     // runs each in a new session (with and without a clone)
const N_SETUP = quick ? 2 : 4;   // runs each in a new session with a clone and a setup
const FLOOR = quick ? 4 : 10;    // direct starts of OpenCode, after one to warm its home
const MODEL = 'anthropic/claude-sonnet-4-5';
const OPENCODE = path.join(root, 'src/runs/opencode/node_modules/opencode-ai/bin/opencode.exe');
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };

// --- the fake upstream: notes when each run's first request arrives, and answers every
// request (the title request too) with a short final text, so each run ends at once ---
const first = new Map(); // marker -> {perf, wall}
const fake = await startFake((req, res, raw) => {
  const perf = performance.now(), wall = Date.now();
  let body = {};
  try { body = JSON.parse(raw); } catch { /* not JSON */ }
  const m = (userTexts(body)[0] || '').match(/\bmark-[a-z0-9-]+\b/);
  if (m && !first.has(m[0])) first.set(m[0], { perf, wall });
  sendReply(res, { blocks: [{ type: 'text', text: 'Done.' }], input_tokens: 10, output_tokens: 2, model: body.model });
});
const firstRequest = (marker) => firstSeen(first, marker);

// --- local repositories, cloned over file:// as the tests do ---
const scratch = mkdtempSync(path.join(tmpdir(), 'smcp-bench-runstart-'));
const gitEnv = { ...process.env, GIT_AUTHOR_NAME: 'Bench', GIT_AUTHOR_EMAIL: 'bench@example.com',
  GIT_COMMITTER_NAME: 'Bench', GIT_COMMITTER_EMAIL: 'bench@example.com' };
function git(args, cwd) {
  const r = spawnSync('git', args, { cwd, env: gitEnv, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
}
// A bare repository with one commit of a few small files.
function bareRepo(name) {
  const bare = path.join(scratch, `${name}.git`), work = path.join(scratch, `${name}-work`);
  git(['init', '-q', '--bare', '-b', 'main', bare]);
  git(['init', '-q', '-b', 'main', work]);
  for (let i = 0; i < 20; i++) writeFileSync(path.join(work, `file${i}.txt`), `line ${i}\n`.repeat(50));
  git(['add', '-A'], work);
  git(['commit', '-q', '-m', 'Initial commit'], work);
  git(['push', '-q', bare, 'main'], work);
  rmSync(work, { recursive: true, force: true });
  return bare;
}

let server = await startServer({ env: { ANTHROPIC_API_KEY: 'sk-bench', ANTHROPIC_BASE_URL: fake.url,
  RUNS_ALLOW_LOCAL_REPOS: '1', RUN_DEFAULT_MODEL: MODEL, OPENCODE_BIN: OPENCODE } });
let client = mcpClient(server);
const call = async (name, args) => (await client.call(name, args)).structuredContent;
async function waitEnd(runId) {
  for (;;) {
    const r = await call('get_result', { run_id: runId, wait_seconds: 30 });
    if (['succeeded', 'failed', 'cancelled'].includes(r.status)) return r;
  }
}

// The server's log lines of one run, with their times (ms since the epoch).
function runLog(runId) {
  const lines = [];
  for (const line of server.stderr().split('\n')) {
    if (!line.includes(runId)) continue;
    const t = Date.parse(line.slice(0, line.indexOf(' ')));
    lines.push({ t, text: line.slice(line.indexOf(' ') + 1) });
  }
  return lines;
}

let seq = 0;
// One run: returns its times, each in ms from sending run_task.
async function timedRun(args, { any = false } = {}) {
  const marker = `mark-${++seq}-${Date.now().toString(36)}`;
  const sentWall = Date.now(), sent = performance.now();
  const r = await call('run_task', { ...args, task: `${marker}: reply with the word done` });
  const returned = performance.now() - sent;
  const end = await waitEnd(r.run_id);
  if ((end.status !== 'succeeded' && !any) || !first.has(marker))
    throw new Error(`run ${r.run_id} ${end.status}: ${JSON.stringify(end).slice(0, 600)}`);
  const got = first.get(marker);
  return { run: r.run_id, session: r.session_id, returned, total: got.perf - sent, sentWall, firstWall: got.wall, log: runLog(r.run_id) };
}

const cases = [];
async function runCase(name, warm, each, n = N, opts) {
  const w = await timedRun(warm, opts);
  const runs = [];
  for (let i = 0; i < n; i++) runs.push(await timedRun(each(w.session, i), opts));
  cases.push({ name, warm: w, runs });
}
// Runs each in a new session (a sandbox from the pool, and its OpenCode booted for it), after
// one not counted, by turns on each of `sides` (servers); a pause before each lets the pool fill
// again, as between users' calls.
let sides = [];
async function newSessionCase(name, each, n = N_NEW) {
  const per = sides.map(() => ({ runs: [] }));
  const use = (k) => { server = sides[k].server; client = sides[k].client; };
  for (let k = 0; k < sides.length; k++) { use(k); per[k].warm = await timedRun(each(-1, k)); }
  for (let i = 0; i < n; i++) {
    for (let k = 0; k < sides.length; k++) {
      await (sides[k].ready ? sides[k].ready() : new Promise((r) => setTimeout(r, 3000)));
      use(k);
      per[k].runs.push(await timedRun(each(i, k)));
    }
  }
  sides.forEach((side, k) => cases.push({ name: `${name}${side.label}`, warm: per[k].warm, runs: per[k].runs }));
}
// "new": the new-session rows only; "setup": only those with a setup; "pool": only the agents
// booted in the pool against those booted for the run
const only = process.env.RUNSTART_ONLY || '';
const repo = bareRepo('kept');
if (only !== 'new' && only !== 'setup' && only !== 'pool') {
await runCase('no repository', {}, (session) => ({ session_id: session }));
await runCase('repository already in the workspace', { repository: repo }, (session) => ({ session_id: session }));
const fresh = Array.from({ length: N_CLONE }, (_, i) => bareRepo(`fresh${i}`));
await runCase('a repository new to the workspace (cloned)', { repository: repo }, (session, i) => ({ session_id: session, repository: fresh[i] }), N_CLONE);
}
client.close();
await server.stop();

// --- new sessions: the sandbox from the pool, OpenCode booted for the session (the server
// starts it as soon as the run has its sandbox, beside the clone) ---
// RUNSTART_BEFORE names another build of the server to compare with, its runs taking turns with
// this one's so that both meet the same load.
const newEnv = { ANTHROPIC_API_KEY: 'sk-bench', ANTHROPIC_BASE_URL: fake.url,
  RUNS_ALLOW_LOCAL_REPOS: '1', RUN_DEFAULT_MODEL: MODEL, OPENCODE_BIN: OPENCODE,
  SANDBOX_MAX_RUNNING_PER_USER: '64', SANDBOX_DISK_PER_USER_MB: '0' };
if (only === 'pool') {
  // a warm pool of 2 on both servers; on one, one of them has OpenCode booted and readied for
  // /workspace before any run (RUNS_AGENT_POOL=1), and each run waits until the next is ready
  // (small sandbox disks, as the pool counts room: the sessions of earlier runs stay running)
  const poolEnv = { ...newEnv, SANDBOX_POOL: '2', SANDBOX_DISK_MB: '1024' };
  const ready = (srv, n) => async () => {
    for (;;) {
      const have = srv.stderr().match(/sandbox pool prepared sbx=\S+ ready=yes/g)?.length ?? 0;
      if (have >= n.want) { n.want++; return; }
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const booted = await startServer({ env: { ...poolEnv, RUNS_AGENT_POOL: '0' } });
  const pooled = await startServer({ env: { ...poolEnv, RUNS_AGENT_POOL: '1' } });
  sides = [{ label: ', OpenCode booted for the run', server: booted },
    { label: ', OpenCode booted in the pool (`RUNS_AGENT_POOL=1`)', server: pooled, ready: ready(pooled, { want: 1 }) }];
  for (const side of sides) side.client = mcpClient(side.server);
  // the uncounted first run of each side waits for its pool too
  for (const side of sides) if (side.ready) await side.ready();
  await newSessionCase('new session, no repository', () => ({}));
  for (const side of sides) { side.client.close(); await side.server.stop(); }
  sides = [];
}
if (only !== 'pool') {
if (process.env.RUNSTART_BEFORE)
  sides.push({ label: ' (before)', server: await startServer({ env: newEnv,
    wrap: ['/bin/sh', '-c', 'shift; exec "$0" "$@"', path.resolve(process.env.RUNSTART_BEFORE)] }) });
sides.push({ label: '', server: await startServer({ env: newEnv }) });
for (const side of sides) side.client = mcpClient(side.server);
const freshNew = Array.from({ length: (N_NEW + 1) * sides.length }, (_, i) => bareRepo(`new${i}`));
if (only !== 'setup') {
  await newSessionCase('new session, no repository', () => ({}));
  await newSessionCase('new session, a repository (cloned)', (i, k) => ({ repository: freshNew[(i + 1) * sides.length + k] }));
}
// a setup of 5 s standing for a dependency install: the agent's boot goes beside it
await newSessionCase('new session, a repository (cloned) and a 5 s setup',
  (i, k) => ({ repository: freshNew[(i + 1) * sides.length + k], setup: 'sleep 5' }), N_SETUP);
for (const side of sides) { side.client.close(); await side.server.stop(); }
}

let floor = null;
if (only !== 'new' && only !== 'setup' && only !== 'pool') {
// --- OpenCode started for each run, as before it was kept warm ---
server = await startServer({ env: { ANTHROPIC_API_KEY: 'sk-bench', ANTHROPIC_BASE_URL: fake.url,
  RUNS_ALLOW_LOCAL_REPOS: '1', RUN_DEFAULT_MODEL: MODEL, OPENCODE_BIN: OPENCODE, RUNS_AGENT_WARM_SECONDS: '0' } });
client = mcpClient(server);
await runCase('OpenCode started for the run (`RUNS_AGENT_WARM_SECONDS=0`), repository already in the workspace',
  { repository: repo }, (session) => ({ session_id: session }), N_COLD);
client.close();
await server.stop();

// --- the server's part with an agent that starts at once: a stub in OpenCode's place that
// sends one request to the proxy with curl, the way OpenCode would ---
const stubDir = mkdtempSync(path.join(scratch, 'agent-'));
writeFileSync(path.join(stubDir, 'opencode'), `#!/bin/sh
task=$(cat)
exec curl -s -o /dev/null -H "x-api-key: $SANDBOX_MCP_PROXY_TOKEN" -H 'anthropic-version: 2023-06-01' \\
  -H 'content-type: application/json' \\
  --data-binary "{\\"model\\":\\"claude-sonnet-4-5\\",\\"max_tokens\\":16,\\"messages\\":[{\\"role\\":\\"user\\",\\"content\\":\\"$task\\"}]}" \\
  http://127.0.0.1:8788/proxy/anthropic/v1/messages
`, { mode: 0o755 });
chmodSync(stubDir, 0o755); // it is the sandbox's /opt/agents
server = await startServer({ env: { ANTHROPIC_API_KEY: 'sk-bench', ANTHROPIC_BASE_URL: fake.url,
  RUNS_ALLOW_LOCAL_REPOS: '1', RUN_DEFAULT_MODEL: MODEL, OPENCODE_BIN: path.join(stubDir, 'opencode'),
  RUNS_AGENT_WARM_SECONDS: '0' } });
client = mcpClient(server);
await runCase('stub agent (curl), no repository', {}, (session) => ({ session_id: session }), N, { any: true });
await runCase('stub agent (curl), repository already in the workspace', { repository: repo }, (session) => ({ session_id: session }), N, { any: true });
client.close();
await server.stop();

// --- the floor: the agent's own start, the same command on the host against the same fake ---
const home = mkdtempSync(path.join(scratch, 'home-'));
const work = mkdtempSync(path.join(scratch, 'work-'));
{
  // as the run's wrapper seeds it, so that OpenCode installs no plugin
  const c = path.join(home, '.config/opencode'), p = '{"dependencies":{"@opencode-ai/plugin":"*"}}';
  mkdirSync(path.join(c, 'node_modules'), { recursive: true });
  writeFileSync(path.join(c, 'package.json'), `${p}\n`);
  writeFileSync(path.join(c, 'package-lock.json'), `{"packages":{"":${p}}}\n`);
}
const config = JSON.stringify({ $schema: 'https://opencode.ai/config.json', autoupdate: false, share: 'disabled',
  enabled_providers: ['anthropic'], provider: { anthropic: { npm: '@ai-sdk/anthropic',
    options: { baseURL: `${fake.url}/v1`, apiKey: '{env:SANDBOX_MCP_PROXY_TOKEN}' }, models: { 'claude-sonnet-4-5': {} } } },
  permission: { edit: 'allow', bash: 'allow', webfetch: 'allow', external_directory: 'allow', doom_loop: 'allow' } });
async function floorRun() {
  const marker = `mark-floor-${++seq}`;
  const sent = performance.now();
  const child = spawn(OPENCODE, ['run', '--format', 'json', '--thinking', '--model', MODEL], {
    cwd: work, stdio: ['pipe', 'ignore', 'ignore'],
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8', OPENCODE_CONFIG_CONTENT: config,
      SANDBOX_MCP_PROXY_TOKEN: 'sk-bench', OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_AUTOUPDATE: '1',
      OPENCODE_DISABLE_SHARE: '1', OPENCODE_DISABLE_LSP_DOWNLOAD: '1' } });
  const exited = new Promise((r) => child.on('close', r));
  child.stdin.end(`${marker}: reply with the word done`);
  const got = await firstRequest(marker);
  await exited;
  return got.perf - sent;
}
await floorRun();
const floorTimes = [];
for (let i = 0; i < FLOOR; i++) floorTimes.push(await floorRun());
floor = summarize(floorTimes);
}
await fake.close();
rmSync(scratch, { recursive: true, force: true });

// --- report ---
// A run's steps by the server's log: stored (queued), sandbox ready, clone done (the unpacking
// starts), agent spawned; and the fake's first request. Each as ms since run_task was sent.
function steps(r) {
  const at = (re) => { const l = r.log.find((x) => re.test(x.text)); return l ? l.t - r.sentWall : NaN; };
  return { stored: at(/ run queued /), sandbox: at(/ run sandbox ready /), cloned: at(/reason="unpacking/),
    spawned: at(/ run agent started /), first: r.firstWall - r.sentWall };
}
const p50 = (xs) => { const v = xs.filter((x) => !Number.isNaN(x)); return v.length ? summarize(v).p50 : NaN; };
const f = (ms) => (Number.isNaN(ms) ? '–' : fmt(ms));
if (process.env.SHOW_LOG) for (const c of cases) for (const r of [c.warm, ...c.runs.slice(0, 2)])
  console.log(r.run, r.log.map((l) => `${l.t - r.sentWall} ${l.text}`).join('\n  '));
log(`## Run start (\`node bench/runstart.mjs\`)`);
log();
log(`Machine: ${cpus().length} × ${cpus()[0].model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB. From sending \`run_task\` to the fake upstream receiving the run's first model request through the server's proxy, one run at a time, each on a session whose sandbox is already running and whose OpenCode is warm (the session's first run, not counted, started both); then each run in a new session (its sandbox from the warm pool, its OpenCode booted for it; 3 s between runs for the pool to fill again); then OpenCode started for each run, as with \`RUNS_AGENT_WARM_SECONDS=0\`, whose floor is OpenCode started directly on the host with the same arguments and configuration, pointed at the same fake.`);
log();
log('| what | runs | p50 ms | p90 ms | min ms |');
log('|---|---|---|---|---|');
for (const c of cases) {
  const s = summarize(c.runs.map((r) => r.total));
  log(`| ${c.name} | ${s.n} | ${fmt(s.p50)} | ${fmt(s.p90)} | ${fmt(s.min)} |`);
}
if (floor) log(`| floor: the same \`opencode run\` started on the host | ${floor.n} | ${fmt(floor.p50)} | ${fmt(floor.p90)} | ${fmt(floor.min)} |`);
log();
log('Where the time goes, by the server\'s log (ms timestamps; p50 of each step over the runs of the row):');
log();
log('| what | `run_task` returned | run stored | sandbox ready | clone | workspace ready, agent spawned | agent start to first request | server\'s part (send to spawn) |');
log('|---|---|---|---|---|---|---|---|');
for (const c of cases) {
  const st = c.runs.map(steps);
  const stored = p50(st.map((x) => x.stored)), sandbox = p50(st.map((x) => x.sandbox - x.stored));
  const clone = p50(st.map((x) => x.cloned - x.sandbox));
  const spawn = p50(st.map((x) => x.spawned - (Number.isNaN(x.cloned) ? x.sandbox : x.cloned)));
  log(`| ${c.name} | ${fmt(p50(c.runs.map((r) => r.returned)))} | ${f(stored)} | ${f(sandbox)} | ${f(clone)} | ${f(spawn)} | ${f(p50(st.map((x) => x.first - x.spawned)))} | ${f(p50(st.map((x) => x.spawned)))} |`);
}
if (floor) {
const none = summarize(cases[0].runs.map((r) => r.total)), kept = summarize(cases[1].runs.map((r) => r.total));
const cold = summarize(cases.find((c) => c.name.startsWith('OpenCode started')).runs.map((r) => r.total));
const stub = summarize(cases.find((c) => c.name.startsWith('stub agent (curl), repository')).runs.map((r) => r.total));
const serverPart = p50(cases[1].runs.map((r) => steps(r).spawned));
writeHeadline([
  { what: 'Run start: `run_task` to the first model request, session warm (no repository / repository in place)',
    ours: `${fmt(none.p50)} / ${fmt(kept.p50)} ms (server's part ${fmt(serverPart)} ms; OpenCode started for the run ${fmt(cold.p50)} ms; with a stub agent ${fmt(stub.p50)} ms)`,
    peer: `\`opencode run\` started directly: ${fmt(floor.p50)} ms`, ratio: `${(kept.p50 / floor.p50).toFixed(2)}x`,
    target: `under 150 ms: ${kept.p50 < 150 ? 'met' : '**not met**'}` },
]);
}
if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
