// Shared helpers for the benchmarks: start the release binary, time calls, summarize.
import { execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function summarize(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99),
    min: s[0], max: s[s.length - 1] };
}

export async function timeIt(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

export function fmt(ms) {
  return ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);
}

// A lean MCP client for latency rows: node:http over one keep-alive connection. Node's `fetch`
// adds about half a millisecond of its own to every call; this keeps the client's share small,
// and every benchmark that uses it also reports an MCP `ping` through it, which is that share.
export function mcpClient(server) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const url = new URL(server.mcpUrl);
  let id = 1;
  function post(message, token = server.token) {
    const body = JSON.stringify({ jsonrpc: '2.0', id: id++, ...message });
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent,
        headers: {
          'content-type': 'application/json', accept: 'application/json, text/event-stream',
          authorization: `Bearer ${token}`, 'content-length': Buffer.byteLength(body),
        },
      }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
          resolve(JSON.parse(text));
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });
  }
  return {
    post,
    // tools/call; throws on a tool error, returns the result
    async call(name, args = {}, token) {
      const r = await post({ method: 'tools/call', params: { name, arguments: args } }, token);
      if (!r.result || r.result.isError) throw new Error(`${name}: ${JSON.stringify(r).slice(0, 300)}`);
      return r.result;
    },
    async ping() {
      const r = await post({ method: 'ping' });
      if (!r.result) throw new Error(`ping: ${JSON.stringify(r)}`);
    },
    close() { agent.destroy(); },
  };
}

// Run `argv` n times one after another with bench/spawntime.c (posix_spawn to waitpid, timed in
// C, so the peers carry no Node.js child_process overhead); resolves to the times in ms. Not
// spawnSync: a blocked event loop would miss the server closing an idle keep-alive connection.
export function spawnTimes(argv, n) {
  const bin = path.join(root, process.env.BUILD || 'build', 'spawntime');
  return new Promise((resolve, reject) => {
    execFile(bin, [String(n), ...argv], { encoding: 'utf8', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`spawntime ${argv.join(' ')}: ${stderr || err.message}`));
      else resolve(JSON.parse(stdout));
    });
  });
}

// The value of marker in seen (a Map a fake upstream fills as each run's first request comes),
// once it is there: polled every 2 ms, so the time read is the request's own, not the poll's.
export async function firstSeen(seen, marker, ms = 120000) {
  const t0 = Date.now();
  while (!seen.has(marker)) {
    if (Date.now() - t0 > ms) throw new Error(`no model request for ${marker} in ${ms} ms`);
    await new Promise((r) => setTimeout(r, 2));
  }
  return seen.get(marker);
}

// The rows this benchmark gives the headline table of docs/BENCHMARKS.md (bench/report.mjs):
// each {what, ours, peer, ratio, target}, already formatted. Written to $BENCH_HEADLINE.
export function writeHeadline(rows) {
  if (process.env.BENCH_HEADLINE) writeFileSync(process.env.BENCH_HEADLINE, JSON.stringify({ rows }, null, 1) + '\n');
}

// A free loopback port (for a peer that cannot be told to pick one itself and say which).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

export function nginxVersion() {
  const r = spawnSync('nginx', ['-v'], { encoding: 'utf8' });
  return r.error ? null : ((r.stderr || '').match(/nginx\/(\S+)/) || [])[1] || 'unknown';
}

// Start nginx (Debian's package) as a peer: one master and one worker process, in the
// foreground, with everything it writes kept in dir (a fresh temporary directory) and `http`
// as the body of its http block; ports are the loopback ports that block listens on. Resolves
// once every port accepts connections, to {proc, workerPid, stop(), errors()}.
export async function startNginx(dir, http, ports) {
  for (const d of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(path.join(dir, d), { recursive: true });
  // the worker runs as the bench's own user (nginx's default, nobody, could not read a
  // temporary directory); nginx ignores this, with a warning, when the bench is not root
  writeFileSync(path.join(dir, 'nginx.conf'), `user ${userInfo().username};
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
events { worker_connections 16384; }
http {
  access_log off;
  server_tokens off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  # wrk keeps its connections for the whole run; nginx's default closes one every 1,000 requests
  keepalive_requests 10000000;
  keepalive_timeout 300s;
${http}
}
`);
  const errorLog = path.join(dir, 'error.log');
  const proc = spawn('nginx', ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', errorLog],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  const errors = () => { try { return err + readFileSync(errorLog, 'utf8'); } catch { return err; } };
  const up = (port) => new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
    s.on('error', () => resolve(false));
  });
  let workerPid = NaN;
  for (let i = 0; ; i++) {
    if (proc.exitCode !== null) throw new Error(`nginx exited ${proc.exitCode}: ${errors()}`);
    try { workerPid = Number(readFileSync(`/proc/${proc.pid}/task/${proc.pid}/children`, 'utf8').trim().split(/\s+/)[0]); } catch { /* not yet */ }
    if (workerPid && (await Promise.all(ports.map(up))).every(Boolean)) break;
    if (i > 500) { proc.kill('SIGKILL'); throw new Error(`nginx did not start: ${errors()}`); }
    await new Promise((r) => setTimeout(r, 10));
  }
  return {
    proc, workerPid, errors,
    // SIGQUIT: a graceful stop, which waits for open connections; SIGTERM closes them at once
    stop: () => new Promise((resolve) => {
      if (proc.exitCode !== null) return resolve();
      proc.on('exit', () => resolve());
      proc.kill('SIGTERM');
    }),
  };
}

// A wrk script in dir: POST body (a JSON-RPC message) with the MCP headers; done() prints the
// counts and the whole latency histogram (microseconds:count), so that runs can be pooled
// exactly.
export function wrkScript(dir, body, protocol, token) {
  const file = path.join(dir, `wrk-${createHash('sha256').update(body + token).digest('hex').slice(0, 12)}.lua`);
  writeFileSync(file, `wrk.method = "POST"
wrk.body = [==[${body}]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "${protocol}"
wrk.headers["Authorization"] = "Bearer ${token}"
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout))
  local h = {}
  for i = 1, #latency do
    local v, c = latency(i)
    h[#h + 1] = string.format("%d:%d", v, c)
  end
  io.write("WRKHIST ", table.concat(h, ","), "\\n")
end
`);
  return file;
}

// wrk against a loopback /mcp URL: resolves to its counts and latency histogram.
export function runWrk(url, script, conns, seconds) {
  if (!/^http:\/\/127\.0\.0\.1:\d+\/mcp$/.test(url)) throw new Error(`not a loopback URL: ${url}`);
  const threads = Math.min(2, conns);
  return new Promise((resolve, reject) => {
    const p = spawn('wrk', ['-t', String(threads), '-c', String(conns), '-d', `${seconds}s`, '--timeout', '5s',
      '-s', script, url], { stdio: ['ignore', 'pipe', 'pipe'] });
    let so = '', se = '';
    p.stdout.on('data', (d) => { so += d; });
    p.stderr.on('data', (d) => { se += d; });
    const guard = setTimeout(() => p.kill('SIGKILL'), (seconds + 30) * 1000);
    p.on('error', reject);
    p.on('exit', (code) => {
      clearTimeout(guard);
      const m = so.match(/^WRKJSON (.*)$/m), h = so.match(/^WRKHIST (.*)$/m);
      if (code !== 0 || !m || !h) return reject(new Error(`wrk exited ${code}: ${se}${so.slice(0, 2000)}`));
      const r = JSON.parse(m[1]);
      r.hist = h[1] ? h[1].split(',').map((x) => x.split(':').map(Number)) : [];
      resolve(r);
    });
  });
}

// Pool several wrk runs against one server: requests over total time, percentiles of all latencies.
export function pool(runs) {
  const r = { requests: 0, duration_us: 0, cpu_s: 0, connect: 0, read: 0, write: 0, status: 0, timeout: 0 };
  const counts = new Map();
  for (const x of runs) {
    for (const k of Object.keys(r)) r[k] += x[k];
    for (const [v, c] of x.hist) counts.set(v, (counts.get(v) || 0) + c);
  }
  const hist = [...counts].sort((a, b) => a[0] - b[0]);
  const total = hist.reduce((a, [, c]) => a + c, 0);
  const pct = (p) => {
    let seen = 0;
    for (const [v, c] of hist) if ((seen += c) >= (p / 100) * total) return v;
    return NaN;
  };
  r.rps = r.requests / (r.duration_us / 1e6);
  r.cpu = r.cpu_s / (r.duration_us / 1e6);
  r.p50 = pct(50);
  r.p99 = pct(99);
  r.errors = r.connect + r.read + r.write + r.status + r.timeout;
  r.errorText = r.errors ? `${r.errors} (` + ['connect', 'read', 'write', 'status', 'timeout']
    .filter((k) => r[k]).map((k) => `${r[k]} ${k === 'status' ? 'non-2xx/3xx' : k}`).join(', ') + ')' : '0';
  return r;
}
