// Each agent's run start and memory: for OpenCode, Claude Code and Codex, the time from sending
// run_task to the fake upstream receiving the run's first model request through the server's
// proxy, for a run in a new session (its sandbox from the warm pool) and for a later run in the
// same session; beside it the same CLI started directly on the host against the same fake, timed
// the same way (its floor). Then each agent's memory: the resident set of its processes while
// its first model request is held (working), and for OpenCode, the one agent kept between runs,
// once the run has ended (idle); it bounds how many runs a node holds.
// Run: node bench/agents.mjs [--quick]   (as root; uses build/sandbox-mcp and the agents that
// `make deps-npm` installs; loopback only)
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { summarize, fmt, mcpClient, writeHeadline, firstSeen } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer } = await import('../tests/lib/server.mjs');
const { startFake, userTexts, sendReply } = await import('../tests/lib/fake-anthropic.mjs');
const { responsesEvents } = await import('../tests/lib/fake-openai.mjs');

const quick = process.argv.includes('--quick');
const N = quick ? 3 : 8; // runs per case, after one that warms the case
const AGENTS = {
  opencode: { model: 'anthropic/claude-sonnet-4-5',
    bin: path.join(root, 'src/runs/opencode/node_modules/opencode-ai/bin/opencode.exe'), match: '/opt/agents/opencode/' },
  'claude-code': { model: 'anthropic/claude-sonnet-4-5',
    bin: path.join(root, 'src/runs/claude-code/node_modules/@anthropic-ai/claude-code/bin/claude.exe'), match: '/opt/agents/claude-code/' },
  codex: { model: 'openai/gpt-5-codex',
    bin: path.join(root, 'src/runs/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex'), match: '/opt/agents/codex/' },
};
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };

// --- the fake upstream: both wires; notes each run's first request, answers at once with a
// short final text, or holds the request of a marker in `hold` until released ---
const first = new Map(); // marker -> perf time
const hold = new Map();  // marker -> {release, held}
const fake = await startFake((req, res, raw) => {
  const perf = performance.now();
  let body = {};
  try { body = JSON.parse(raw); } catch { /* not JSON */ }
  // the task of the run being served: the newest user text
  const m = userTexts(body).map((t) => t.match(/\bmark-[a-z0-9-]+\b/)?.[0]).find(Boolean);
  if (m && !first.has(m)) first.set(m, perf);
  const answer = () => {
    if (req.url.includes('/responses')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const e of responsesEvents({ text: 'Done.', usage: { input_tokens: 10, output_tokens: 2 } })) res.write(e);
      res.end();
    } else {
      sendReply(res, { blocks: [{ type: 'text', text: 'Done.' }], input_tokens: 10, output_tokens: 2, model: body.model });
    }
  };
  const h = m && hold.get(m);
  if (h && !h.held) {
    h.held = true;
    h.gate.then(answer);
    h.arrived();
  } else {
    answer();
  }
});
const firstRequest = (marker) => firstSeen(first, marker);

let seq = 0;
const server = await startServer({ env: {
  ANTHROPIC_API_KEY: 'sk-ant-bench', ANTHROPIC_BASE_URL: fake.url, OPENAI_API_KEY: 'sk-bench', OPENAI_BASE_URL: fake.url,
  RUN_DEFAULT_MODEL: AGENTS.opencode.model, SANDBOX_POOL: '2', RUNS_AGENT_POOL: '1' } });
const mcp = mcpClient(server);

async function waitEnd(runId) {
  for (;;) {
    const r = (await mcp.call('get_result', { run_id: runId, wait_seconds: 30 })).structuredContent;
    if (['succeeded', 'failed', 'cancelled'].includes(r.status)) return r;
  }
}

// One run: the time to its first model request; session: continue it (else a new one)
async function runOnce(agent, session) {
  const marker = `mark-${agent}-${++seq}`;
  const sent = performance.now();
  const started = (await mcp.call('run_task', { task: `${marker}: reply with the word done`, agent,
    model: AGENTS[agent].model, ...(session ? { session_id: session } : {}) })).structuredContent;
  // its first request, or its end without one (which says why)
  const ended = waitEnd(started.run_id);
  const got = await Promise.race([firstRequest(marker), ended.then((r) => {
    if (!first.has(marker)) throw new Error(`${agent} run ${started.run_id} ended without a request: ${JSON.stringify(r.result)} ${r.status_reason}`);
    return first.get(marker);
  })]);
  const end = await ended;
  if (end.status !== 'succeeded') throw new Error(`${agent} run ${started.run_id}: ${JSON.stringify(end.result)}`);
  return { ms: got - sent, session: started.session_id };
}

// The resident set of the processes of the session's sandbox (its cgroup is named by its id)
// whose command line names the agent's program, and their children, in MiB, seen from the host.
async function agentRss(match, session) {
  const sbx = (await mcp.call('container_ping', { session_id: session })).structuredContent.sandbox_id;
  const procs = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const rss = Number((readFileSync(`/proc/${d}/status`, 'utf8').match(/VmRSS:\s+(\d+)/) || [0, 0])[1]);
      if (readFileSync(`/proc/${d}/cgroup`, 'utf8').includes(sbx)) procs.set(Number(d), { cmd, ppid, rss });
    } catch { /* gone */ }
  }
  const mine = new Set([...procs].filter(([, p]) => p.cmd.includes(match)).map(([pid]) => pid));
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, p] of procs) if (!mine.has(pid) && mine.has(p.ppid)) { mine.add(pid); grew = true; }
  }
  return [...mine].reduce((s, pid) => s + procs.get(pid).rss, 0) / 1024;
}

// Memory while the agent works: its first request held at the fake until sampled
async function workingRss(agent, session) {
  const marker = `mark-${agent}-${++seq}`;
  let release, arrived;
  const gate = new Promise((r) => { release = r; });
  const there = new Promise((r) => { arrived = r; });
  hold.set(marker, { gate, arrived, held: false });
  const started = (await mcp.call('run_task', { task: `${marker}: reply with the word done`, agent,
    model: AGENTS[agent].model, ...(session ? { session_id: session } : {}) })).structuredContent;
  await there;
  await new Promise((r) => setTimeout(r, 500)); // settled: its boot is over, the request is out
  const rss = await agentRss(AGENTS[agent].match, started.session_id);
  release();
  await waitEnd(started.run_id);
  return rss;
}

// --- the floor: each CLI started on the host, pointed at the same fake ---
const scratch = mkdtempSync(path.join(tmpdir(), 'smcp-bench-agents-'));
const home = path.join(scratch, 'home'), work = path.join(scratch, 'work');
mkdirSync(work, { recursive: true });
{
  const c = path.join(home, '.config/opencode'), p = '{"dependencies":{"@opencode-ai/plugin":"*"}}';
  mkdirSync(path.join(c, 'node_modules'), { recursive: true });
  writeFileSync(path.join(c, 'package.json'), `${p}\n`);
  writeFileSync(path.join(c, 'package-lock.json'), `{"packages":{"":${p}}}\n`);
}
const base = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, LANG: 'C.UTF-8' };
const DIRECT = {
  opencode: () => [['run', '--format', 'json', '--thinking', '--model', AGENTS.opencode.model], { ...base,
    OPENCODE_CONFIG_CONTENT: JSON.stringify({ autoupdate: false, share: 'disabled', snapshot: false,
      enabled_providers: ['anthropic'], provider: { anthropic: { npm: '@ai-sdk/anthropic',
        options: { baseURL: `${fake.url}/v1`, apiKey: 'sk-bench' }, models: { 'claude-sonnet-4-5': {} } } },
      permission: { edit: 'allow', bash: 'allow' } }),
    OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_SHARE: '1' }],
  'claude-code': () => [['-p', '--output-format', 'stream-json', '--verbose', '--dangerously-skip-permissions',
    '--model', 'claude-sonnet-4-5'], { ...base, IS_SANDBOX: '1', ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: 'sk-bench',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1', DISABLE_TELEMETRY: '1' }],
  codex: () => [['exec', '--json', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox',
    '--disable', 'plugins', '-c', 'analytics.enabled=false', '-c', 'model_provider="b"', '-c',
    `model_providers.b={name="b",base_url="${fake.url}/v1",env_key="B_KEY",wire_api="responses"}`,
    '-m', 'gpt-5-codex', '-'], { ...base, B_KEY: 'sk-bench' }],
};
async function direct(agent) {
  const marker = `mark-${agent}-direct-${++seq}`;
  const [args, env] = DIRECT[agent]();
  const sent = performance.now();
  const child = spawn(AGENTS[agent].bin, args, { cwd: work, env, stdio: ['pipe', 'ignore', 'ignore'] });
  const exited = new Promise((r) => child.on('close', r));
  child.stdin.end(`${marker}: reply with the word done`);
  const got = await firstRequest(marker);
  await exited;
  return got - sent;
}

const rows = [];
try {
  for (const agent of Object.keys(AGENTS)) {
    const warmup = await runOnce(agent); // the first run of each kind, not counted
    const fresh = [], later = [], floor = [];
    for (let i = 0; i < N; i++) {
      fresh.push((await runOnce(agent)).ms);
      await new Promise((r) => setTimeout(r, 3000)); // the pool fills again
    }
    for (let i = 0; i < N; i++) later.push((await runOnce(agent, warmup.session)).ms);
    await direct(agent);
    for (let i = 0; i < N; i++) floor.push(await direct(agent));
    const working = await workingRss(agent, warmup.session);
    // idle: what stays in the session's sandbox once its run has ended (only OpenCode is kept)
    await new Promise((r) => setTimeout(r, 1000));
    const idle = await agentRss(AGENTS[agent].match, warmup.session);
    rows.push({ agent, fresh: summarize(fresh), later: summarize(later), floor: summarize(floor), working, idle });
  }
} finally {
  mcp.close();
  await server.stop();
  await fake.close();
  rmSync(scratch, { recursive: true, force: true });
}

log('## Agents (`node bench/agents.mjs`)');
log('');
log(`Machine: ${cpus().length} × ${cpus()[0].model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB. From sending \`run_task\` to the fake upstream receiving the run's first model request through the server's proxy, one run at a time (${N} each, after one not counted): a run in a new session (its sandbox from the warm pool; for OpenCode, its agent booted ahead in the pool), and a later run in the same session (OpenCode's server kept warm in it; Claude Code and Codex start a process of their own for every run). Beside them, the same CLI started directly on the host against the same fake (its floor). Memory: the resident set of the agent's processes, summed, while its first request is held at the fake (working), and once its run has ended (idle: only OpenCode stays).`);
log('');
log('| agent | new session p50 | later run p50 | CLI on the host p50 (floor) | later / floor | working RSS | idle RSS |');
log('|---|---|---|---|---|---|---|');
for (const r of rows)
  log(`| ${r.agent} | ${fmt(r.fresh.p50)} ms | ${fmt(r.later.p50)} ms | ${fmt(r.floor.p50)} ms | ${(r.later.p50 / r.floor.p50).toFixed(2)}x | ${r.working.toFixed(0)} MiB | ${r.idle ? `${r.idle.toFixed(0)} MiB` : 'none kept'} |`);
log('');
log(`Command: \`node bench/agents.mjs${quick ? ' --quick' : ''}\``);
writeHeadline(rows.map((r) => ({ what: `${r.agent}: run_task to its first model request, a later run`,
  ours: `${fmt(r.later.p50)} ms`, peer: `its CLI started directly: ${fmt(r.floor.p50)} ms`,
  ratio: `${(r.later.p50 / r.floor.p50).toFixed(2)}x`, target: 'at the floor' })));
if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
