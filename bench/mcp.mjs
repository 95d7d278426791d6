// MCP endpoint benchmarks: throughput and latency of `tools/list` and `ping` over POST /mcp under
// wrk at 1, 16 and 256 keep-alive connections, against the official TypeScript SDK's stateless
// Streamable HTTP server (bench/peers/sdk-server.mjs) serving the same tool list on the same
// machine, and against nginx with one worker serving our exact reply bytes as a static file: the
// most an HTTP server does for these requests on this machine, the ceiling.
// Run: node bench/mcp.mjs [--quick]   (uses build/sandbox-mcp, wrk and nginx; all on loopback)
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { fileURLToPath } from 'node:url';
import { fmt, writeHeadline, freePort, startNginx, nginxVersion, wrkScript, runWrk, pool } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, rpc } = await import('../tests/lib/server.mjs');

const quick = process.argv.includes('--quick');
const DURATION = quick ? 4 : 8;           // seconds per server per case, as two runs of half that
const WARMUP = quick ? 1 : 2;             // seconds of untimed load per server before the runs
const CONNS = [1, 16, 256];
const CEILING_CONNS = [16, 256]; // the target against nginx; at one connection both mostly wait on wrk
const METHODS = ['tools/list', 'ping'];
const PROTOCOL = '2025-06-18';
const PEER_TOKEN = 'bench-sdk-peer-token';
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };
const MiB = 2 ** 20;

if (spawnSync('wrk', ['--version'], { encoding: 'utf8' }).error) {
  console.error('mcp bench: wrk not found (Debian package `wrk`; `make bench` installs it)');
  process.exit(1);
}
const NGINX = nginxVersion();
if (!NGINX) {
  console.error('mcp bench: nginx not found (Debian package `nginx`; `make bench` installs it)');
  process.exit(1);
}

function procStatus(pid, key) {
  try {
    return Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${key}:\\s+(\\d+)`, 'm'))[1]) * 1024;
  } catch { return NaN; }
}
// CPU time (user + system, all threads) of a process, in seconds.
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}
const rss = (pid) => procStatus(pid, 'VmRSS');
const hwm = (pid) => procStatus(pid, 'VmHWM');
const mib = (b) => (b / MiB).toFixed(1);

const body = (method) => JSON.stringify({ jsonrpc: '2.0', id: 1, method });
const work = mkdtempSync(path.join(tmpdir(), 'mcp-bench-'));

// The peer: reads the token and the tool list on stdin, prints its URL.
async function startPeer(tools) {
  const proc = spawn(process.execPath, [path.join(root, 'bench', 'peers', 'sdk-server.mjs')],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  proc.stdin.end(JSON.stringify({ token: PEER_TOKEN, tools }));
  const url = await new Promise((resolve, reject) => {
    let so = '';
    proc.stdout.on('data', (d) => { so += d; const m = so.match(/listening (\S+)/); if (m) resolve(m[1]); });
    proc.on('exit', (code) => reject(new Error(`sdk peer exited ${code}: ${err}`)));
  });
  return { url, mcpUrl: `${url}/mcp`, proc, stderr: () => err };
}

// nginx serving our replies (the bytes of `replies`, by method) as static files, each method on a
// port of its own since nginx does not read request bodies. A static file answers POST with 405;
// `error_page 405 =200 $uri` serves the file instead (an internal redirect, as a GET). One worker,
// keep-alive, no access log, the file's descriptor cached open, and sendfile with tcp_nopush as
// Debian's own configuration has them (measured faster here than copying the file).
async function startNginxPeer(replies) {
  const dir = path.join(work, 'nginx');
  mkdirSync(dir);
  const ports = {};
  let servers = '';
  for (const [method, text] of Object.entries(replies)) {
    const file = path.join(dir, `${method.replace('/', '-')}.json`);
    writeFileSync(file, text);
    ports[method] = await freePort();
    servers += `  server {
    listen 127.0.0.1:${ports[method]};
    location = /mcp { alias ${file}; error_page 405 =200 $uri; }
  }
`;
  }
  const n = await startNginx(dir, `  types { } default_type application/json;
  sendfile on;
  tcp_nopush on;
  open_file_cache max=16 inactive=1h;
  open_file_cache_valid 1h;
${servers}`, Object.values(ports));
  return { ...n, url: (method) => `http://127.0.0.1:${ports[method]}/mcp` };
}

// One request by hand: status 200, a JSON body with a result.
async function check(target, method, token) {
  const r = await rpc(target, JSON.parse(body(method)), { token, headers: { 'mcp-protocol-version': PROTOCOL } });
  if (r.status !== 200 || !r.body || r.body.id !== 1 || !r.body.result || !/application\/json/.test(r.headers.get('content-type')))
    throw new Error(`${method} on ${target.mcpUrl}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.body.result;
}

const server = await startServer();
let peer, nginx;
try {
  const ours = { name: 'sandbox-mcp', url: () => server.mcpUrl, token: server.token, pid: server.proc.pid };
  const tools = (await check(server, 'tools/list', server.token)).tools;
  await check(server, 'ping', server.token);
  peer = await startPeer(tools);
  const sdk = { name: 'TypeScript SDK 1.32.2', url: () => peer.mcpUrl, token: PEER_TOKEN, pid: peer.proc.pid };
  for (const m of METHODS) {
    const a = await check(server, m, server.token), b = await check(peer, m, PEER_TOKEN);
    if (!isDeepStrictEqual(a, b)) throw new Error(`${m}: the peer's result differs from ours`);
  }
  const unauth = await rpc(peer, JSON.parse(body('ping')), { token: 'wrong' });
  if (unauth.status !== 401) throw new Error(`peer answered ${unauth.status} to a wrong token`);

  // nginx gets the exact bytes our server answers (wrk's requests all carry id 1), and must give
  // them back to a POST with status 200 and the same content type.
  const replies = {};
  for (const m of METHODS)
    replies[m] = (await rpc(server, JSON.parse(body(m)), { headers: { 'mcp-protocol-version': PROTOCOL } })).text;
  nginx = await startNginxPeer(replies);
  const ngx = { name: `nginx ${NGINX}`, url: nginx.url, token: 'bench-nginx', pid: nginx.workerPid };
  for (const m of METHODS) {
    const r = await rpc({ mcpUrl: ngx.url(m) }, JSON.parse(body(m)), { token: ngx.token });
    if (r.status !== 200 || r.text !== replies[m] || r.headers.get('content-type') !== 'application/json')
      throw new Error(`nginx ${m}: ${r.status} ${r.headers.get('content-type')} ${r.text.slice(0, 200)}`);
  }
  const servers = [ours, sdk, ngx];

  const idle = { ours: rss(ours.pid), sdk: rss(sdk.pid) };
  const threads = procStatus(ours.pid, 'Threads') / 1024;
  for (const t of servers) await runWrk(t.url('tools/list'), wrkScript(work, body('tools/list'), PROTOCOL, t.token), 16, WARMUP);

  // Each server gets two half-length runs per case, in the order ours, SDK, nginx, nginx, SDK,
  // ours, so that a change in the machine's speed during a case weighs on all sides alike.
  const results = {};
  for (const method of METHODS) {
    for (const c of CONNS) {
      const runs = new Map(servers.map((t) => [t, []]));
      for (const t of [...servers, ...[...servers].reverse()]) {
        await new Promise((r) => setTimeout(r, 500)); // let the previous server settle (GC, closing)
        const cpu0 = cpuSeconds(t.pid);
        const r = await runWrk(t.url(method), wrkScript(work, body(method), PROTOCOL, t.token), c, DURATION / 2);
        r.cpu_s = cpuSeconds(t.pid) - cpu0;
        runs.get(t).push(r);
      }
      for (const t of servers) {
        const r = results[`${method} ${c} ${t.name}`] = pool(runs.get(t));
        console.error(`  ${method} c=${c} ${t.name}: ${r.rps.toFixed(0)} req/s p50 ${fmt(r.p50 / 1000)} ms p99 ${fmt(r.p99 / 1000)} ms errors ${r.errorText} cpu ${(r.cpu * 100).toFixed(0)}%` +
          ` (halves ${runs.get(t).map((x) => (x.requests / (x.duration_us / 1e6)).toFixed(0)).join(', ')} req/s)`);
      }
    }
  }
  const after = { ours: rss(ours.pid), sdk: rss(sdk.pid), oursPeak: hwm(ours.pid), sdkPeak: hwm(sdk.pid) };
  // Still answering correctly after the load?
  for (const m of METHODS) { await check(server, m, server.token); await check(peer, m, PEER_TOKEN); }
  const nginxRss = rss(ngx.pid);

  log('## MCP endpoint');
  log();
  log(`Machine: ${cpus().length} cores (${cpus()[0].model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB. Command: \`node bench/mcp.mjs${quick ? ' --quick' : ''}\`.`);
  log(`Load: wrk, keep-alive connections, 1 thread for 1 connection and 2 otherwise; POST /mcp with a Bearer token and MCP-Protocol-Version ${PROTOCOL}.`);
  log(`Each server gets ${DURATION} s per case, as two ${DURATION / 2} s runs in the order ours, SDK, nginx, nginx, SDK, ours, pooled. wrk counts only requests answered within a run (5 s timeout), which understates long tails.`);
  log(`sandbox-mcp serves /mcp from ${threads} thread${threads === 1 ? '' : 's'} (one event loop), like the Node.js peer's one JavaScript thread; wrk shares the same ${cpus().length} cores.`);
  log('Server CPU is the CPU time the server process used during the run over its length (100% = one core).');
  log(`Peer: the official TypeScript SDK (1.32.2) stateless Streamable HTTP server on node:http (Node.js ${process.version}), a new \`Server\` and transport per request, JSON responses, same tool list, same Bearer check.`);
  log(`Ceiling: nginx ${NGINX} (Debian's package), one worker process, answering the POST with our exact reply bytes (${replies['tools/list'].length} for \`tools/list\`, ${replies.ping.length} for \`ping\`) from a static file: no token check, no JSON-RPC. Its CPU is its worker's.`);
  log();
  for (const method of METHODS) {
    log(`### \`${method}\``);
    log();
    log('| connections | server | requests/s | p50 ms | p99 ms | server CPU | errors |');
    log('|---|---|---|---|---|---|---|');
    for (const c of CONNS) for (const t of servers) {
      const r = results[`${method} ${c} ${t.name}`];
      log(`| ${c} | ${t.name} | ${r.rps.toFixed(0)} | ${fmt(r.p50 / 1000)} | ${fmt(r.p99 / 1000)} | ${(r.cpu * 100).toFixed(0)}% | ${r.errorText} |`);
    }
    log();
  }
  log('| ratio of requests/s | ' + CONNS.map((c) => `${c} conn`).join(' | ') + ' |');
  log('|---|' + CONNS.map(() => '---|').join(''));
  const ratios = [], ceiling = [];
  const down = (x) => (Math.floor(x * 10) / 10).toFixed(1); // rounded down, so 9.96 never reads as 10
  const pct = (x) => `${Math.floor(x * 100)}%`;
  for (const method of METHODS) {
    const rs = CONNS.map((c) => results[`${method} ${c} ${ours.name}`].rps / results[`${method} ${c} ${sdk.name}`].rps);
    rs.forEach((x, i) => ratios.push({ method, c: CONNS[i], x }));
    log(`| \`${method}\` ours / SDK | ${rs.map((x) => `${down(x)}x`).join(' | ')} |`);
  }
  for (const method of METHODS) {
    const rs = CONNS.map((c) => results[`${method} ${c} ${ours.name}`].rps / results[`${method} ${c} ${ngx.name}`].rps);
    rs.forEach((x, i) => { if (CEILING_CONNS.includes(CONNS[i])) ceiling.push({ method, c: CONNS[i], x }); });
    log(`| \`${method}\` ours / nginx | ${rs.map(pct).join(' | ')} |`);
  }
  log();
  // Where ours is under 10x the SDK, the ceiling of that case: nginx answering the same bytes
  // from a static file. At one connection a request waits on wrk and on the kernel's wake-ups
  // more than on either server, and where even nginx is under 10x the SDK the target is out of
  // reach on this machine: say so, with how near ours comes to the ceiling.
  const outOfReach = (method) => CONNS.filter((c) => results[`${method} ${c} ${ours.name}`].rps / results[`${method} ${c} ${sdk.name}`].rps < 10 &&
    results[`${method} ${c} ${ngx.name}`].rps / results[`${method} ${c} ${sdk.name}`].rps < 10)
    .map((c) => `; at ${c} connection${c > 1 ? 's' : ''} out of reach here: nginx, static file, is ${down(results[`${method} ${c} ${ngx.name}`].rps / results[`${method} ${c} ${sdk.name}`].rps)}x the SDK, and ours ${pct(results[`${method} ${c} ${ours.name}`].rps / results[`${method} ${c} ${ngx.name}`].rps)} of nginx`).join('');
  const headline = METHODS.map((method) => {
    const r = (c, t) => results[`${method} ${c} ${t.name}`].rps;
    const xs = CONNS.map((c) => r(c, ours) / r(c, sdk));
    return { what: `\`${method}\` requests/s at ${CONNS.join(' / ')} connections`,
      ours: CONNS.map((c) => r(c, ours).toFixed(0)).join(' / '),
      peer: `TypeScript SDK server: ${CONNS.map((c) => r(c, sdk).toFixed(0)).join(' / ')}`,
      ratio: xs.map((x) => `${down(x)}x`).join(' / '),
      target: `10x: ${xs.every((x) => x >= 10) ? 'met' : `**met in ${xs.filter((x) => x >= 10).length} of ${xs.length}**`}${outOfReach(method)}` };
  });
  for (const method of METHODS) {
    const xs = CEILING_CONNS.map((c) => results[`${method} ${c} ${ours.name}`].rps / results[`${method} ${c} ${ngx.name}`].rps);
    headline.push({ what: `\`${method}\` requests/s at ${CEILING_CONNS.join(' / ')} connections, against the ceiling`,
      ours: CEILING_CONNS.map((c) => results[`${method} ${c} ${ours.name}`].rps.toFixed(0)).join(' / '),
      peer: `nginx, static file, one worker: ${CEILING_CONNS.map((c) => results[`${method} ${c} ${ngx.name}`].rps.toFixed(0)).join(' / ')}`,
      ratio: xs.map(pct).join(' / ') + ' of nginx',
      target: `at least 50% of nginx: ${xs.every((x) => x >= 0.5) ? 'met' : `**met in ${xs.filter((x) => x >= 0.5).length} of ${xs.length}**`}` });
  }
  const missed = ratios.filter((r) => r.x < 10);
  log(`Target, at least 10x the SDK's throughput: ${missed.length ? `**not met** in ${missed.length} of ${ratios.length} cases (` +
    missed.map((r) => `\`${r.method}\` at ${r.c}: ${down(r.x)}x`).join(', ') + ')' : `met in all ${ratios.length} cases`}.`);
  const under = ceiling.filter((r) => r.x < 0.5);
  log(`Target, at least 50% of nginx's throughput at ${CEILING_CONNS.join(' and ')} connections: ${under.length ? `**not met** in ${under.length} of ${ceiling.length} cases (` +
    under.map((r) => `\`${r.method}\` at ${r.c}: ${pct(r.x)}`).join(', ') + ')' : `met in all ${ceiling.length} cases`}.`);
  log();
  log(`Server RSS: ${mib(idle.ours)} MiB idle, ${mib(after.ours)} MiB after the load (peak ${mib(after.oursPeak)} MiB). ` +
    `SDK peer RSS: ${mib(idle.sdk)} MiB idle, ${mib(after.sdk)} MiB after (peak ${mib(after.sdkPeak)} MiB). nginx worker RSS after: ${mib(nginxRss)} MiB.`);
  headline.push({ what: 'MCP server memory (RSS) idle / after all the load', ours: `${mib(idle.ours)} / ${mib(after.ours)} MiB`,
    peer: `TypeScript SDK server: ${mib(idle.sdk)} / ${mib(after.sdk)} MiB`, ratio: `${(after.ours / after.sdk).toFixed(2)}x after the load` });
  writeHeadline(headline);
  const errors = Object.values(results).reduce((a, r) => a + r.errors, 0);
  const bad = server.stderr().split('\n').filter((l) => /^\S+ (warn|error) |Sanitizer|runtime error/.test(l));
  log(`Errors under load (connect, read, write, timeouts, non-2xx/3xx): ${errors}. Server stderr warnings or errors: ${bad.length}.`);
  if (bad.length) console.error(bad.slice(0, 20).join('\n'));
  if (peer.stderr().trim()) console.error(`sdk peer stderr:\n${peer.stderr().slice(0, 2000)}`);
  if (nginx.errors().trim()) console.error(`nginx errors:\n${nginx.errors().slice(0, 2000)}`);
} finally {
  if (peer && peer.proc.exitCode === null) peer.proc.kill('SIGTERM');
  if (nginx) await nginx.stop();
  await server.stop();
  rmSync(work, { recursive: true, force: true });
}

if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
