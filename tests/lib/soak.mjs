// A soak: one server under a steady mixed load for a while, sampled at an interval, and the slope
// of each sample. Used by `make soak` (bench/soak.mjs, an hour by default) and, for a few
// minutes, by tests/integration/soak.test.mjs, which keeps the harness working.
//
// The load: MCP clients of several users (tools/list, commands, file writes and reads), a steady
// stream of runs of the real OpenCode (or Codex) against the scripted model, each a follow-up in one of a few
// sessions on a repository of the fake GitHub, so that every run pushes and comments on its pull
// request; downloads through the egress proxy from a local server; OAuth refresh-token grants and
// calls with what they give; and a user whose sandbox is left idle until it stops, then used
// again. Every sample reads the server's /metrics (resident memory, descriptors, threads, the
// event loop's lag), the store's size and its WAL, and the data directory's disk use.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { startServer, rpc, cli, addUserAsync, FIXTURE_BIN } from './server.mjs';
import * as runs from './runs.mjs';
import { startFake, agentRouter } from './fake-anthropic.mjs';
import { startFakeGitHub } from './fake-github.mjs';
import { allowLocalhost } from './registries.mjs';
import { setPassword, obtainTokens, tokenRequest } from './oauth.mjs';

const GH_TOKEN = 'github_pat_11SOAKtestTOKEN_owner0123456789abcdef';
const METRICS_TOKEN = 'soak-metrics-token-0123456789';
const DOWNLOAD = Buffer.alloc(1 << 20, 's'); // what each download fetches

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The least-squares slope of ys over xs, and its standard error.
export function slope(xs, ys) {
  const n = xs.length;
  if (n < 3) return { slope: 0, se: Infinity };
  const mx = xs.reduce((a, b) => a + b, 0) / n, my = ys.reduce((a, b) => a + b, 0) / n;
  let sxx = 0, sxy = 0;
  for (let i = 0; i < n; i++) { sxx += (xs[i] - mx) ** 2; sxy += (xs[i] - mx) * (ys[i] - my); }
  const b = sxx ? sxy / sxx : 0;
  let sse = 0;
  for (let i = 0; i < n; i++) sse += (ys[i] - (my + b * (xs[i] - mx))) ** 2;
  return { slope: b, se: sxx ? Math.sqrt(sse / (n - 2) / sxx) : Infinity };
}

// What each sample holds, how it is shown, and the growth over the measured span that still
// counts as flat: within noise (twice the slope's standard error) or under the bound.
export const METRICS = [
  { key: 'rss', name: 'resident memory', unit: 'MiB', scale: 1 / 1048576, bound: (m) => Math.max(0.05 * m, 16 << 20) },
  { key: 'fds', name: 'descriptors', unit: '', scale: 1, bound: (m) => Math.max(0.05 * m, 16) },
  { key: 'threads', name: 'threads', unit: '', scale: 1, bound: () => 2 },
  { key: 'lag', name: 'loop lag (max)', unit: 'ms', scale: 1000, bound: () => 0.25 },
  { key: 'wal', name: 'store WAL', unit: 'MiB', scale: 1 / 1048576, bound: () => 8 << 20 },
  // kept by design (every run's events, its page, its workspace until retention): shown per run
  { key: 'store', name: 'store', unit: 'MiB', scale: 1 / 1048576, kept: true },
  { key: 'disk', name: 'data dir on disk', unit: 'MiB', scale: 1 / 1048576, kept: true },
];

// The slopes of samples after the warm-up (the first fifth), per minute, and whether each is
// flat; the metrics kept by design are given per run instead.
export function slopes(samples, runsDone) {
  const from = Math.floor(samples.length / 5);
  const s = samples.slice(from);
  const xs = s.map((x) => x.t / 60000);
  const span = xs.length > 1 ? xs[xs.length - 1] - xs[0] : 0;
  const runsIn = (s.at(-1)?.runs ?? 0) - (s[0]?.runs ?? 0);
  return METRICS.map((m) => {
    const ys = s.map((x) => x[m.key]);
    const mean = ys.reduce((a, b) => a + b, 0) / (ys.length || 1);
    const { slope: b, se } = slope(xs, ys);
    const growth = b * span;
    const row = { key: m.key, name: m.name, unit: m.unit, mean: mean * m.scale, perMinute: b * m.scale,
      growth: growth * m.scale, first: (ys[0] ?? 0) * m.scale, last: (ys.at(-1) ?? 0) * m.scale };
    if (m.kept) return { ...row, kept: true, perRun: runsIn ? (growth / runsIn) * m.scale : 0 };
    const bound = m.bound(mean);
    return { ...row, bound: bound * m.scale, flat: growth <= bound || b <= 2 * se };
  });
}

function metricValue(text, name) {
  const m = text.match(new RegExp(`^${name} ([0-9.e+-]+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

// du -sk: blocks in use, so sparse disk images count what they hold
// du's total even when a file went away while it walked the directory (a live server's
// temporary files do): it says so and exits 1, and its total stands.
function diskUse(dir) {
  const r = spawnSync('du', ['-sk', dir], { encoding: 'utf8' });
  const kib = /^(\d+)\t/.exec(r.stdout || '');
  return kib ? Number(kib[1]) * 1024 : NaN;
}

const size = (f) => (existsSync(f) ? statSync(f).size : 0);

// Set the soak up: {sampleSeconds, clients, users, runGapMs, idleSeconds, thinkMs, log}. Resolves
// with {server, baseline (a sample before any load), load(minutes), sample(), stop()}; each load()
// runs the whole load for that long and resolves with {samples, errors, counts}, all kept across
// loads. errors holds every call that failed, with its answer.
// agent 'codex' has the runs made by Codex instead of OpenCode (runs.codexEnv): the short form's,
// which checks the server rather than the agent.
export async function startSoak({ sampleSeconds = 60, clients = 200, users = 8, runGapMs = 5000,
  idleSeconds = 30, thinkMs = 1000, diskMb = 1024, agent = 'opencode', log = () => {} } = {}) {
  const errors = [];
  const counts = { list: 0, exec: 0, write: 0, read: 0, runs: 0, delivered: 0, downloads: 0, refreshes: 0, comebacks: 0 };
  const fail = (what, detail) => { errors.push({ what, detail: String(detail).slice(0, 600), at: new Date().toISOString() }); };

  const fake = await startFake();
  const router = agentRouter();
  fake.handle(router);
  const gh = await startFakeGitHub({ tokens: [GH_TOKEN], repos: { 'soak/app': { files: { 'README.md': '# app\n' } } } });
  const files = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': DOWNLOAD.length });
    res.end(DOWNLOAD);
  });
  await new Promise((r) => files.listen(0, '127.0.0.1', r));
  const { allow, addrs } = await allowLocalhost([files.address().port]);
  const server = await startServer({ env: {
    ANTHROPIC_API_KEY: 'sk-ant-soak', ANTHROPIC_BASE_URL: fake.url,
    ...(agent === 'codex' ? runs.codexEnv(fake.url) : {}),
    GITHUB_BASE_URL: gh.url, GITHUB_API_URL: gh.api, FETCH_ALLOW: `127.0.0.1:${gh.port}`,
    METRICS_TOKEN, SANDBOX_IDLE_SECONDS: String(idleSeconds), SANDBOX_DISK_MB: String(diskMb),
    SANDBOX_NETWORK: 'allowlist', SANDBOX_NETWORK_DEFAULTS: '0', SANDBOX_NETWORK_ALLOW: allow, SANDBOX_NETWORK_ADDRS: addrs,
    // At rest every sandbox is stopped, so that what the server holds then compares between
    // loads: standby sandboxes would stay, as many as the last load's idle stops left.
    SANDBOX_STANDBY: '0',
  } });
  const cred = cli(['user', 'credential', 'set', 'admin', 'github', '--data-dir', server.dataDir], { input: `${GH_TOKEN}\n`,
    bin: FIXTURE_BIN });
  if (cred.status !== 0) throw new Error(`credential: ${cred.stderr}`);
  setPassword(server, 'admin', 'soak-password-0123');
  const tokens = [server.token];
  for (let i = 1; i < users; i++) tokens.push(await addUserAsync(server, `soak${i}`));
  const idleToken = await addUserAsync(server, 'soakidle');
  if (tokens.some((t) => !t) || !idleToken) throw new Error('soak: a user without a token');

  const t0 = Date.now();
  let end = 0;
  let stopping = false;
  const going = () => !stopping && Date.now() < end;

  async function tool(token, name, args, what) {
    try {
      const r = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }, { token });
      if (r.status !== 200 || !r.body?.result || r.body.result.isError) { fail(what, r.text); return null; }
      return r.body.result.structuredContent ?? r.body.result;
    } catch (e) { fail(what, e.message); return null; }
  }

  // MCP clients: each a user's, one call after another with a pause
  const client = async (i) => {
    const token = tokens[i % tokens.length];
    const file = `/workspace/soak-${i}.txt`;
    await sleep(Math.random() * thinkMs);
    for (let n = 0; going(); n++) {
      switch (n % 4) {
      case 0: {
        const r = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { token }).catch((e) => ({ text: e.message }));
        if (r.status === 200 && r.body?.result?.tools?.length) counts.list++; else fail('tools/list', r.text);
        break;
      }
      case 1:
        if (await tool(token, 'container_exec', { command: `echo ${i}-${n} | sha256sum | cut -c1-8` }, 'container_exec')) counts.exec++;
        break;
      case 2:
        if (await tool(token, 'container_file_write', { path: file, content: `client ${i} call ${n}\n` }, 'container_file_write')) counts.write++;
        break;
      default: {
        const r = await tool(token, 'container_file_read', { path: file }, 'container_file_read');
        if (r) counts.read++;
      }
      }
      await sleep(thinkMs * (0.5 + Math.random()));
    }
  };

  // a steady stream of runs: follow-ups in a few sessions, each pushed and commented on
  const sessions = [null, null, null];
  let runNo = 0; // across loads: each run's key and change are its own
  const runStream = async () => {
    for (let n = runNo++; going(); n = runNo++) {
      const key = `soak-${n}`;
      router.add(key, [
        { tool: 'bash', input: { command: `echo ${n} > /workspace/app/run-${n % 5}.txt && git add -A && git -c user.name=Agent -c user.email=a@x commit -qm "Run ${n}"`, description: 'Commit' } },
        { text: `Run ${n} done.` },
      ]);
      const slot = n % sessions.length;
      const started = await tool(server.token, 'run_task', { task: `${key}: change a file`, repository: gh.repoUrl('soak/app'),
        ...(sessions[slot] ? { session_id: sessions[slot] } : {}) }, 'run_task');
      if (!started) { await sleep(runGapMs); continue; }
      sessions[slot] = started.session_id;
      let r;
      for (;;) {
        r = await tool(server.token, 'get_result', { run_id: started.run_id, wait_seconds: 30 }, 'get_result');
        if (!r || runs.TERMINAL.has(r.status)) break;
      }
      if (r) {
        counts.runs++;
        if (r.status !== 'succeeded') fail('run', JSON.stringify(r).slice(0, 600));
        else if (r.delivery?.status !== 'delivered') fail('delivery', JSON.stringify(r.delivery));
        else counts.delivered++;
      }
      await sleep(runGapMs);
    }
  };

  // downloads through the egress proxy, by one user's sandbox
  const downloads = async () => {
    const url = `http://localhost:${files.address().port}/file`;
    while (going()) {
      const r = await tool(tokens[1 % tokens.length], 'container_exec',
        { command: `curl -sSf --noproxy '' -x http://127.0.0.1:3128 --max-time 60 -o /dev/null -w '%{size_download}' ${url}` }, 'download');
      if (r && r.exit_code === 0 && r.stdout === String(DOWNLOAD.length)) counts.downloads++;
      else if (r) fail('download', JSON.stringify(r).slice(0, 300));
      await sleep(thinkMs);
    }
  };

  // OAuth: a client's refresh-token grants, each new access token used at once
  const refreshes = async () => {
    let t, clientId;
    try {
      const o = await obtainTokens(server, { password: 'soak-password-0123' });
      t = o.tokens;
      clientId = o.client.client_id;
    } catch (e) { fail('oauth', e.message); return; }
    while (going()) {
      const r = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: t.refresh_token, client_id: clientId });
      if (r.status !== 200) { fail('refresh', r.text); break; }
      t = { ...t, ...r.body };
      const l = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { token: t.access_token });
      if (l.status === 200) counts.refreshes++; else fail('refreshed token', l.text);
      await sleep(thinkMs * 5);
    }
  };

  // a sandbox left idle until it stops, then used again
  const idle = async () => {
    while (going()) {
      if (await tool(idleToken, 'container_exec', { command: 'cat /workspace/mark 2>/dev/null; date +%s > /workspace/mark' }, 'idle comeback')) counts.comebacks++;
      const until = Date.now() + (idleSeconds + 5) * 1000;
      while (going() && Date.now() < until) await sleep(500);
    }
  };

  const samples = [];
  const dbFile = path.join(server.dataDir, 'sandbox-mcp.db');
  const sample = async () => {
    const m = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }).then((r) => r.text()).catch(() => '');
    const s = { t: Date.now() - t0, rss: metricValue(m, 'process_resident_memory_bytes'), fds: metricValue(m, 'process_open_fds'),
      threads: metricValue(m, 'process_threads'), lag: metricValue(m, 'sandbox_mcp_loop_lag_seconds'),
      store: size(dbFile), wal: size(`${dbFile}-wal`), disk: diskUse(server.dataDir), runs: counts.runs,
      sandboxes: metricValue(m, 'sandbox_mcp_sandboxes_running') };
    samples.push(s);
    log(s, counts);
  };
  // before the load: the lag since the start is not the steady state's (this first scrape resets
  // it), and what the server holds idle is what it should come back to
  await sample();
  const baseline = samples.pop();

  const load = async (minutes) => {
    end = Date.now() + minutes * 60000;
    stopping = false;
    const work = [
      ...[...Array(clients).keys()].map(client),
      runStream(), downloads(), refreshes(), idle(),
    ];
    while (Date.now() < end) {
      await sleep(Math.min(sampleSeconds * 1000, Math.max(0, end - Date.now())));
      await sample();
    }
    stopping = true;
    await Promise.all(work);
    return { samples, errors, counts };
  };
  const stop = async () => {
    await server.stop();
    await new Promise((r) => { files.closeAllConnections(); files.close(r); });
    await gh.close();
    await fake.close();
  };
  return { server, baseline, load, sample: async () => { await sample(); return samples.pop(); }, stop };
}

// The soak in one go: startSoak(opts), one load of opts.minutes; resolves with
// {baseline, samples, errors, counts, slopes, server, stop()}.
export async function soak(opts = {}) {
  const s = await startSoak(opts);
  const r = await s.load(opts.minutes ?? 60);
  return { ...r, baseline: s.baseline, slopes: slopes(r.samples, r.counts.runs), server: s.server, stop: s.stop };
}
