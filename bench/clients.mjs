// Many clients: 1,000 MCP clients connected at once (10 for each of 100 users), each on its own
// keep-alive connection, each calling `container_exec` of `echo hi` once a second for 60 s, the
// calls of all clients spread evenly over the second. Reports calls, errors by kind, latency,
// and the server's CPU and memory meanwhile.
// Run: node bench/clients.mjs [--quick] [--workers N]   (as root; uses build/sandbox-mcp)
//
// The clients run in worker processes (child processes of this one, node:http, one http.Agent
// with one socket per client), so that the client side is measured apart from this process,
// which samples the server. Each worker reports its own CPU; the timer lag (how late a call left
// after its tick) shows whether the clients kept up. BENCH_VERBOSE=1 also prints each second's
// p99, timer lag, machine and server CPU, and the server's heap at the end.
import { fork } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { summarize, fmt, mcpClient, spawnTimes, writeHeadline } from './lib.mjs';

const PROTOCOL = '2025-06-18';
const COMMAND = 'echo hi';
const CALL_TIMEOUT_MS = 30000;
const now = () => performance.timeOrigin + performance.now(); // ms since the epoch, sub-ms

if (process.argv[2] === '--worker') worker();
else await main();

// ---- a worker process: its share of the clients ----

function worker() {
  process.on('message', async (msg) => {
    if (msg.type === 'setup') {
      const clients = msg.clients.map((c) => makeClient(msg.mcpUrl, c));
      const t0 = now();
      const init = await Promise.all(clients.map((c) => c.initialize()));
      process.send({ type: 'ready', initMs: now() - t0, initErrors: init.filter((e) => e).slice(0, 5),
        initFailed: init.filter((e) => e).length });
      process.once('message', async (go) => {
        const cpu0 = process.cpuUsage();
        await Promise.all(clients.map((c) => c.run(go.startAt, go.total, go.seconds)));
        const cpu = process.cpuUsage(cpu0);
        const errors = {}, lat = [], at = [], lag = [], lagAt = [];
        let calls = 0, missed = 0, reconnects = 0, late = 0;
        for (const c of clients) {
          calls += c.calls; missed += c.missed; reconnects += c.reconnects;
          for (const [k, v] of Object.entries(c.errors)) errors[k] = (errors[k] || 0) + v;
          lat.push(...c.lat); at.push(...c.at); lag.push(...c.lag); lagAt.push(...c.lagAt);
        }
        late = lag.filter((x) => x > 100).length;
        process.send({ type: 'done', calls, missed, reconnects, late, errors, lat, at, lag, lagAt,
          cpuMs: (cpu.user + cpu.system) / 1000 });
        for (const c of clients) c.close();
        // the parent says when it has the results (a large message may still be on its way)
        process.on('message', (m) => { if (m.type === 'bye') process.disconnect(); });
      });
      process.send({ type: 'armed' });
    }
  });
}

// One client: its own agent holding one keep-alive socket; initialize once, then a call at each
// of its ticks (its offset within the second, then every second) while the previous one has
// answered; a tick that comes while a call is still out is missed, and counted.
function makeClient(mcpUrl, { token, index }) {
  const url = new URL(mcpUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let id = 1, socket = null, headers = null;
  const c = { calls: 0, missed: 0, reconnects: 0, errors: {}, lat: [], at: [], lag: [], lagAt: [] };
  const count = (kind) => { c.errors[kind] = (c.errors[kind] || 0) + 1; };

  // POST one JSON-RPC message: resolves {status, contentType, text} or {error}
  function post(message) {
    const body = JSON.stringify(message);
    return new Promise((resolve) => {
      const req = http.request({
        host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent,
        headers: {
          'content-type': 'application/json', accept: 'application/json, text/event-stream',
          authorization: `Bearer ${token}`, 'content-length': Buffer.byteLength(body), ...headers,
        },
      }, (res) => {
        const chunks = [];
        res.on('data', (d) => chunks.push(d));
        res.on('end', () => resolve({ status: res.statusCode, contentType: res.headers['content-type'] || '',
          text: Buffer.concat(chunks).toString() }));
        res.on('error', (e) => resolve({ error: `connection ${e.code || e.message}` }));
      });
      req.setTimeout(CALL_TIMEOUT_MS, () => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })));
      req.on('socket', (s) => {
        if (socket && s !== socket) c.reconnects++;
        socket = s;
      });
      req.on('error', (e) => resolve({ error: `connection ${e.code || e.message}` }));
      req.end(body);
    });
  }

  function parse(r) {
    if (r.error) return { error: r.error };
    if (r.status !== 200) return { error: `HTTP ${r.status}` };
    let m;
    try {
      m = /text\/event-stream/.test(r.contentType)
        ? JSON.parse(r.text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).join(''))
        : JSON.parse(r.text);
    } catch { return { error: 'unparsable reply' }; }
    if (m.error) return { error: `JSON-RPC error ${m.error.code}: ${String(m.error.message).slice(0, 80)}` };
    return { result: m.result };
  }

  c.initialize = async () => {
    const r = parse(await post({ jsonrpc: '2.0', id: id++, method: 'initialize', params: {
      protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: `bench-client-${index}`, version: '1' } } }));
    if (r.error) return r.error;
    headers = { 'mcp-protocol-version': r.result.protocolVersion };
    const n = await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    if (n.error || n.status !== 202) return `notifications/initialized: ${n.error || `HTTP ${n.status}`}`;
    return null;
  };

  async function call() {
    const t0 = now();
    const r = parse(await post({ jsonrpc: '2.0', id: id++, method: 'tools/call',
      params: { name: 'container_exec', arguments: { command: COMMAND } } }));
    const ms = now() - t0;
    c.calls++;
    if (r.error) return count(r.error);
    const res = r.result;
    if (res.isError) {
      const text = (res.content || []).map((x) => x.text || '').join(' ');
      return count(`tool isError: ${text.slice(0, 80)}`);
    }
    const sc = res.structuredContent;
    if (!sc || sc.exit_code !== 0 || sc.stdout !== 'hi\n') return count(`wrong result: ${JSON.stringify(res).slice(0, 80)}`);
    c.lat.push(ms);
    c.at.push(t0);
  }

  c.run = async (startAt, total, seconds) => {
    const offset = (index * 1000) / total;
    const tick = (k) => startAt + offset + k * 1000;
    let k = 0;
    while (k < seconds) {
      const wait = tick(k) - now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      c.lag.push(Math.max(0, now() - tick(k))); // timers may fire a fraction of a millisecond early
      c.lagAt.push(tick(k));
      await call();
      // the next tick that has not begun yet
      let next = k + 1;
      while (next < seconds && tick(next) < now()) next++;
      c.missed += next - k - 1;
      k = next;
    }
  };
  c.close = () => agent.destroy();
  return c;
}

// ---- the main process: server, users, workers, sampling ----

async function main() {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
  const { startServer, addUser, cli } = await import('../tests/lib/server.mjs');

  const quick = process.argv.includes('--quick');
  const wi = process.argv.indexOf('--workers');
  const WORKERS = wi > 0 ? Number(process.argv[wi + 1]) : 2;
  const USERS = quick ? 10 : 100;
  const PER_USER = 10;
  const SECONDS = quick ? 10 : 60;
  const CLIENTS = USERS * PER_USER;
  const MiB = 2 ** 20;
  const out = [];
  const log = (s = '') => { out.push(s); console.log(s); };

  // What this load needs beyond the defaults, and why (said in the section too).
  const env = {
    SANDBOX_TEMPLATE: 'host',
    // 100 users' sandboxes running at once; the default capacity is 64, past which the least
    // recently used idle one is stopped and the next call starts it again
    SANDBOX_MAX_RUNNING: String(USERS + 16),
    // 100 images of the default 10 GiB could grow past the host's free disk, and the server then
    // stops idle sandboxes to make room; these sandboxes write nothing
    SANDBOX_DISK_MB: '256',
  };

  function procStat(pid) {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return { cpu: (Number(f[11]) + Number(f[12])) * 10, threads: Number(f[17]) }; // ms (USER_HZ 100)
  }
  function status(pid, key) {
    try {
      return Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${key}:\\s+(\\d+)`, 'm'))[1]) * 1024;
    } catch { return NaN; }
  }
  // whole machine: busy and total jiffies over all cores
  function machine() {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + f[4];
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  }
  // CPU of the sandboxes' inits with the commands they started and reaped (cutime, cstime), ms
  function initsCpu(pids) {
    let ms = 0;
    for (const p of pids) {
      try {
        const s = readFileSync(`/proc/${p}/stat`, 'utf8');
        const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
        ms += (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10;
      } catch { /* gone */ }
    }
    return ms;
  }
  const initPids = (dataDir) => cli(['sandbox', 'list', '--data-dir', dataDir]).stdout.split('\n').slice(1)
    .map((l) => Number(l.trim().split(/\s+/)[3])).filter((n) => n > 0);
  const running = (dataDir) => cli(['sandbox', 'list', '--data-dir', dataDir]).stdout.split('\n').slice(1)
    .filter((l) => l.trim()).length;
  const pct = (ms, wall) => `${((ms / wall) * 100).toFixed(0)}%`;
  const mib = (b) => (b / MiB).toFixed(1);

  const server = await startServer({ env });
  const workers = [];
  try {
    const pid = server.proc.pid;
    // users and tokens, made with the CLI as an operator would
    const tokens = [];
    for (let u = 0; u < USERS; u++) tokens.push(addUser(server, `bench${u}`));
    // warm up: every user's sandbox started, one call each, before the timed part
    const admin = mcpClient(server);
    const tw = performance.now();
    for (let u = 0; u < USERS; u++) await admin.call('container_exec', { command: 'true' }, tokens[u]);
    const warmMs = performance.now() - tw;
    admin.close();
    const sandboxesBefore = running(server.dataDir);
    const startsBefore = (server.stderr().match(/sandbox started /g) || []).length;
    const stderrBefore = server.stderr().length;
    const inits = initPids(server.dataDir);

    // clients: client i belongs to user i % USERS, so a user's ten are spread over the second
    const all = Array.from({ length: CLIENTS }, (_, i) => ({ token: tokens[i % USERS], index: i }));
    const self = fileURLToPath(import.meta.url);
    for (let w = 0; w < WORKERS; w++) {
      const p = fork(self, ['--worker'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
      workers.push({ p, clients: all.filter((_, i) => i % WORKERS === w) });
    }
    const next = (p, type) => new Promise((resolve, reject) => {
      const on = (m) => { if (m.type === type) { p.off('message', on); resolve(m); } };
      p.on('message', on);
      p.once('exit', (code) => reject(new Error(`client worker exited ${code} before '${type}'`)));
    });
    // what the machine does without this load (other programs; the server idle)
    const b0 = machine();
    await new Promise((r) => setTimeout(r, 2000));
    const b1 = machine();
    const baseBusy = ((b1.busy - b0.busy) / (b1.total - b0.total)) * cpus().length;
    const rssIdle = status(pid, 'VmRSS');
    const ti = performance.now();
    const ready = await Promise.all(workers.map((w) => {
      const r = next(w.p, 'ready');
      w.p.send({ type: 'setup', mcpUrl: server.mcpUrl, clients: w.clients });
      return r;
    }));
    const initWall = performance.now() - ti;
    const initFailed = ready.reduce((a, r) => a + r.initFailed, 0);
    if (initFailed) console.error('initialize failures:', ready.flatMap((r) => r.initErrors));
    await Promise.all(workers.map((w) => next(w.p, 'armed')));

    // the timed part
    const startAt = now() + 1000;
    const done = workers.map((w) => next(w.p, 'done'));
    for (const w of workers) w.p.send({ type: 'go', startAt, total: CLIENTS, seconds: SECONDS });
    await new Promise((r) => setTimeout(r, startAt - now()));
    const s0 = procStat(pid), m0 = machine(), i0 = initsCpu(inits), t0 = now();
    const rssStart = status(pid, 'VmRSS');
    let rssPeak = rssStart, threadsPeak = s0.threads;
    // each second: the machine's and the server's CPU, to tell a slow second on a busy machine
    // from one where the server itself held the calls up
    const perSecond = [];
    let last = { m: m0, s: s0.cpu, t: t0 }, n = 0;
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, status(pid, 'VmRSS'));
      const st = procStat(pid);
      threadsPeak = Math.max(threadsPeak, st.threads);
      if (++n % 4) return;
      const m = machine(), t = now();
      perSecond.push({ machine: ((m.busy - last.m.busy) / (m.total - last.m.total)) * cpus().length,
        server: (st.cpu - last.s) / (t - last.t) });
      last = { m, s: st.cpu, t };
    }, 250);
    // a probe beside the load: MCP ping, which the server answers without any sandbox, ten times
    // a second on a connection of its own; if it stays quick while calls are slow, the calls
    // are waiting on their commands, not on the server
    const probe = mcpClient(server);
    const pings = [];
    let probing = true;
    const prober = (async () => {
      while (probing) {
        const t = now();
        await probe.ping();
        pings.push(now() - t);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    // the run ends when the last tick of the last client is one second old
    await new Promise((r) => setTimeout(r, SECONDS * 1000));
    probing = false;
    await prober;
    probe.close();
    const ping = summarize(pings);
    const s1 = procStat(pid), m1 = machine(), i1 = initsCpu(inits), t1 = now();
    const results = await Promise.all(done);
    for (const w of workers) w.p.send({ type: 'bye' });
    clearInterval(sampler);
    const wall = t1 - t0;
    const rssEnd = status(pid, 'VmRSS');
    if (process.env.BENCH_VERBOSE) {
      const sm = readFileSync(`/proc/${pid}/smaps`, 'utf8').split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/);
      const heap = sm.find((x) => /\[heap\]/.test(x.split('\n')[0])) || '';
      console.error('heap', heap.match(/^Size:.*$/m)?.[0], heap.match(/^Rss:.*$/m)?.[0], 'VmData', mib(status(pid, 'VmData')), 'MiB');
    }
    const sandboxesAfter = running(server.dataDir);
    const startsDuring = (server.stderr().match(/sandbox started /g) || []).length - startsBefore;
    const bad = server.stderr().slice(stderrBefore).split('\n').filter((l) => /^\S+ (warn|error) |Sanitizer|runtime error/.test(l));

    const calls = results.reduce((a, r) => a + r.calls, 0);
    const missed = results.reduce((a, r) => a + r.missed, 0);
    const reconnects = results.reduce((a, r) => a + r.reconnects, 0);
    const errors = {};
    for (const r of results) for (const [k, v] of Object.entries(r.errors)) errors[k] = (errors[k] || 0) + v;
    const nErrors = Object.values(errors).reduce((a, b) => a + b, 0);
    const lat = summarize(results.flatMap((r) => r.lat));
    const lag = summarize(results.flatMap((r) => r.lag));
    // each second of the run on its own: a stall shows as one bad second among good ones
    const bySecond = Array.from({ length: SECONDS }, () => []);
    for (const r of results) r.at.forEach((t, i) => bySecond[Math.min(SECONDS - 1, Math.max(0, Math.floor((t - startAt) / 1000)))].push(r.lat[i]));
    const secondP99 = bySecond.map((x) => summarize(x).p99);
    const worst = secondP99.reduce((w, x, i) => (x > secondP99[w] ? i : w), 0);
    const lagBySecond = Array.from({ length: SECONDS }, () => []);
    for (const r of results) r.lagAt.forEach((t, i) => lagBySecond[Math.min(SECONDS - 1, Math.max(0, Math.floor((t - startAt) / 1000)))].push(r.lag[i]));
    const lagP99 = lagBySecond.map((x) => summarize(x).p99);
    // slow seconds (p99 over 100 ms) against the others: how busy the machine and the server were
    const slow = secondP99.map((x, i) => (x > 100 ? i : -1)).filter((i) => i >= 0 && perSecond[i]);
    const fast = secondP99.map((x, i) => (x <= 100 ? i : -1)).filter((i) => i >= 0 && perSecond[i]);
    const mean = (is, k) => is.reduce((a, i) => a + perSecond[i][k], 0) / Math.max(1, is.length);
    if (process.env.BENCH_VERBOSE) {
      console.error('machine busy by second:', perSecond.map((x) => (x.machine * 100).toFixed(0)).join(' '));
      console.error('server CPU by second:', perSecond.map((x) => (x.server * 100).toFixed(0)).join(' '));
      console.error('latency p99 by second:', secondP99.map((x) => fmt(x)).join(' '));
      console.error('timer lag p99 by second:', lagP99.map((x) => fmt(x)).join(' '));
    }
    const serverCpu = s1.cpu - s0.cpu;
    const clientCpu = results.map((r) => r.cpuMs);
    const machineBusy = ((m1.busy - m0.busy) / (m1.total - m0.total)) * cpus().length; // in cores
    const expected = CLIENTS * SECONDS;
    const rest = machineBusy * 1000 - (serverCpu + clientCpu.reduce((a, b) => a + b, 0) + (i1 - i0)) / (wall / 1000);
    // the floor: the same command started on the host, no sandbox, no server, timed in C
    const floor = summarize(await spawnTimes(['/bin/sh', '-c', COMMAND], quick ? 200 : 1000));

    log('## Many clients');
    log();
    log(`Machine: ${cpus().length} cores (${cpus()[0].model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB. Command: \`node bench/clients.mjs${quick ? ' --quick' : ''}\`.`);
    log(`Load: ${CLIENTS} MCP clients, ${PER_USER} for each of ${USERS} users, each on its own keep-alive connection (node:http, in ${WORKERS} client processes); each sends \`initialize\` and \`notifications/initialized\` once, then \`tools/call\` of \`container_exec\` with \`${COMMAND}\` once a second for ${SECONDS} s, the next call at its next tick after the previous one answered. The clients' ticks are spread evenly over the second. Every user's sandbox (host template) was started before the timed part.`);
    log(`Settings beyond the defaults: \`SANDBOX_MAX_RUNNING=${env.SANDBOX_MAX_RUNNING}\` (the default 64 is fewer than ${USERS} users' sandboxes: the least recently used idle one would be stopped and started again by its next call), \`SANDBOX_DISK_MB=${env.SANDBOX_DISK_MB}\` (chosen when admission was strict only, under which ${USERS} images of the default 10 GiB could not all run on this host's free disk; kept so that the figures compare with earlier runs). Nothing else: connection caps (\`MAX_CONNECTIONS\` 4096), per-user sandbox limits and the rest are the defaults.`);
    log();
    log('| what | value |');
    log('|---|---|');
    log(`| calls made (of ${expected} ticks) | ${calls}; ${missed} ticks missed (a call still out) |`);
    log(`| calls per second | ${(calls / (wall / 1000)).toFixed(0)} |`);
    log(`| errors | ${nErrors ? Object.entries(errors).map(([k, v]) => `${v} ${k}`).join('; ') : '0'} |`);
    log(`| initialize (all ${CLIENTS} clients at once) | ${fmt(initWall)} ms in all, ${initFailed} failed |`);
    log(`| latency p50 / p90 / p99 / max ms | ${fmt(lat.p50)} / ${fmt(lat.p90)} / ${fmt(lat.p99)} / ${fmt(lat.max)} |`);
    log(`| p99 of each second: median over the seconds / worst (second) ms | ${fmt(summarize(secondP99).p50)} / ${fmt(secondP99[worst])} (${worst + 1}) |`);
    log(`| seconds whose p99 was over 100 ms; machine busy / server CPU in them, and in the others | ${slow.length} of ${SECONDS}; ${(mean(slow, 'machine') * 100).toFixed(0)}% / ${(mean(slow, 'server') * 100).toFixed(0)}%, ${(mean(fast, 'machine') * 100).toFixed(0)}% / ${(mean(fast, 'server') * 100).toFixed(0)}% |`);
    log(`| MCP \`ping\` beside the load, ten a second on its own connection: p50 / p99 / max ms | ${fmt(ping.p50)} / ${fmt(ping.p99)} / ${fmt(ping.max)} |`);
    log(`| client timer lag p50 / p99 / max ms (a call leaving after its tick) | ${fmt(lag.p50)} / ${fmt(lag.p99)} / ${fmt(lag.max)} |`);
    log(`| connections opened again during the run | ${reconnects} |`);
    log(`| server CPU (utime + stime, % of one core) | ${pct(serverCpu, wall)} |`);
    log(`| client CPU, per process | ${clientCpu.map((x) => pct(x, wall)).join(', ')} |`);
    log(`| sandboxes' inits and the commands they ran (own and reaped children's CPU) | ${pct(i1 - i0, wall)} |`);
    log(`| the rest: kernel threads, this benchmark's own process, anything else on the machine | ${(rest / 10).toFixed(0)}% |`);
    log(`| whole machine busy (all processes and the kernel, of ${cpus().length * 100}%) | ${(machineBusy * 100).toFixed(0)}%; ${(baseBusy * 100).toFixed(0)}% in the 2 s before the clients started |`);
    log(`| server RSS MiB: idle / at the start / peak / end | ${mib(rssIdle)} / ${mib(rssStart)} / ${mib(rssPeak)} / ${mib(rssEnd)} |`);
    log(`| server threads (peak) | ${threadsPeak} |`);
    log(`| sandboxes running before / after; started during the run | ${sandboxesBefore} / ${sandboxesAfter}; ${startsDuring} |`);
    log(`| server warnings or errors logged from the clients' start to the end | ${bad.length} |`);
    log(`| warm-up: ${USERS} sandboxes started one after another | ${fmt(warmMs)} ms |`);
    log(`| floor: \`/bin/sh -c '${COMMAND}'\` started on the host after the run (no sandbox, no server; posix_spawn to waitpid in C), p50 / p99 ms | ${fmt(floor.p50)} / ${fmt(floor.p99)} |`);
    log();
    log('CPU figures are CPU time over the run\'s wall time (100% = one core). The server\'s is the server process alone: each command is started by its sandbox\'s init, and its CPU is counted with the inits.');
    log(`At ${fmt(floor.p50)} ms a process, ${CLIENTS} commands a second are about ${((floor.p50 * CLIENTS) / 10).toFixed(0)}% of one core before any server or sandbox is involved.`);
    if (bad.length) console.error(bad.slice(0, 20).join('\n'));

    writeHeadline([{ what: `${CLIENTS} MCP clients (${USERS} users), \`container_exec\` once a second each for ${SECONDS} s`,
      ours: `${calls} calls, ${nErrors} errors; p50 ${fmt(lat.p50)} ms, p99 ${fmt(lat.p99)} ms; server CPU ${pct(serverCpu, wall)}, RSS peak ${mib(rssPeak)} MiB`,
      peer: `floor: \`sh -c '${COMMAND}'\` on the host ${fmt(floor.p50)} ms a process; the machine was ${(machineBusy * 100).toFixed(0)}% busy of ${cpus().length * 100}%`,
      ratio: `${(calls / (wall / 1000)).toFixed(0)} calls/s of ${CLIENTS}`,
      target: `no errors: ${nErrors === 0 && calls > 0 ? 'met' : '**not met**'}` }]);
  } finally {
    for (const w of workers) if (w.p.exitCode === null) w.p.kill('SIGTERM');
    await server.stop();
  }
  if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
}
