// Proxy benchmarks: latency the proxy adds over calling the (fake) upstream directly, beside the
// latency nginx adds as a reverse proxy in front of the same upstream; time to the first streamed
// byte; and 10,000 streams held open at once with the memory they cost.
// Run: node bench/proxy.mjs [--quick]   (uses build/sandbox-mcp and nginx; all traffic on loopback)
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import http2 from 'node:http2';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { summarize, timeIt, fmt, writeHeadline, freePort, startNginx, nginxVersion } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, cli } = await import('../tests/lib/server.mjs');
const { makeCA } = await import('../tests/lib/tls.mjs');
// undici (installed for the tests by `make deps`) lets the client hold 10,000+ connections.
const { Agent, setGlobalDispatcher } = await import(path.join(root, 'tests', 'node_modules', 'undici', 'index.js'));

const NGINX = nginxVersion();
if (!NGINX) {
  console.error('proxy bench: nginx not found (Debian package `nginx`; `make bench` installs it)');
  process.exit(1);
}
const quick = process.argv.includes('--quick');
const N = quick ? 300 : 3000;
const WANT_STREAMS = quick ? 1000 : 10000;
const OPENING = 500; // streams being opened at once: the server's listen backlog is 1,024
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };
const headline = [];
const row = (name, s) => log(`| ${name} | ${s.n} | ${fmt(s.p50)} | ${fmt(s.p99)} | ${fmt(s.min)} |`);
const rss = (pid) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m)[1]) * 1024;
const fds = (pid) => readdirSync(`/proc/${pid}/fd`).length;

// Every held stream costs the proxy two descriptors (the client's connection and its own to the
// upstream). The server raises its soft limit to the hard one; where the hard limit is too low
// and this process may raise it (CAP_SYS_RESOURCE), the server is started with a higher one.
// Otherwise the run holds as many streams as the hard limit leaves room for, and says so.
const hardNofile = Number(readFileSync('/proc/self/limits', 'utf8').match(/^Max open files\s+\S+\s+(\S+)/m)[1]);
const spare = 512; // the server's own files, listeners, the store, idle upstream connections
const need = 2 * WANT_STREAMS + spare;
let wrap = [], STREAMS = WANT_STREAMS, serverNofile = hardNofile;
if (hardNofile < need) {
  if (spawnSync('prlimit', [`--nofile=${need}:${need}`, 'true']).status === 0) {
    wrap = ['prlimit', `--nofile=${need}:${need}`, '--'];
    serverNofile = need;
  } else {
    STREAMS = Math.floor((hardNofile - spare) / 2 / 100) * 100;
  }
}
setGlobalDispatcher(new Agent({ connections: STREAMS + 1000, pipelining: 1, keepAliveTimeout: 60000 }));

// The upstream, in a process of its own (bench/peers/anthropic.mjs), driven by lines on stdin.
const up = spawn(process.execPath, [path.join(root, 'bench', 'peers', 'anthropic.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
const lines = createInterface({ input: up.stdout })[Symbol.asyncIterator]();
const upstreamUrl = (await lines.next()).value.match(/^listening (\S+)/)[1];
async function upstream(cmd) {
  up.stdin.write(`${cmd}\n`);
  const { value } = await lines.next();
  return Number(value.split(' ')[1]);
}

// The server may hold the streams: MAX_CONNECTIONS (4,096 by default) is the only cap between a
// client and the proxy that 10,000 connections from one address reach.
const server = await startServer({ wrap, env: { ANTHROPIC_BASE_URL: upstreamUrl, ANTHROPIC_API_KEY: 'sk-bench',
  MAX_CONNECTIONS: String(STREAMS + 1000) } });
const token = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--ttl', '1h', '--data-dir', server.dataDir]).stdout.trim();

// nginx as the reverse proxy people would put there instead: keep-alive connections to the
// upstream, no buffering (each chunk is passed on as it arrives, as ours does), the key set in a
// header as ours swaps it in.
const work = mkdtempSync(path.join(tmpdir(), 'proxy-bench-'));
const nginxPort = await freePort();
const nginxDir = path.join(work, 'nginx');
mkdirSync(nginxDir);
const nginx = await startNginx(nginxDir, `  upstream fake {
    server ${new URL(upstreamUrl).host};
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${nginxPort};
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header x-api-key sk-bench;
      proxy_buffering off;
    }
  }`, [nginxPort]);

const headers = { 'content-type': 'application/json', 'x-api-key': token, 'anthropic-version': '2023-06-01' };
const req = (base, body) => fetch(`${base}/v1/messages`, { method: 'POST', headers, body });
const direct = upstreamUrl, proxied = `${server.url}/proxy/anthropic`, viaNginx = `http://127.0.0.1:${nginxPort}`;

const HOLD = JSON.stringify({ hold: true, stream: true });

// Holds n streams through the server with process id pid, opened OPENING at a time by
// openOne(i), which resolves {ok: true, later(), ended()} once the reply's status is 200 and the
// upstream's first event has arrived (later() then resolves whether a later event came, ended()
// whether the stream ended cleanly), or {ok: false, why}. The upstream then says how many it
// holds, sends each a ping event, and ends them all.
async function holdStreams(pid, n, openOne) {
  await new Promise((r) => setTimeout(r, 500));
  const rss0 = rss(pid), fds0 = fds(pid);
  const t0 = performance.now();
  const streams = [];
  let next = 0;
  await Promise.all(Array.from({ length: OPENING }, async () => {
    while (next < n) streams.push(await openOne(next++));
  }));
  const openMs = performance.now() - t0;
  const live = streams.filter((x) => x.ok);
  const bad = streams.find((x) => !x.ok);
  if (bad) console.error(`${n - live.length} streams failed to open, e.g. ${bad.why}`);
  const held = await upstream('held');
  await new Promise((r) => setTimeout(r, 500));
  const rss1 = rss(pid), fds1 = fds(pid);
  await upstream('ping');
  const pinged = (await Promise.all(live.map((x) => x.later()))).filter(Boolean).length;
  await upstream('end');
  const ended = (await Promise.all(live.map((x) => x.ended()))).filter(Boolean).length;
  return { ok: live.length, held, pinged, ended, openMs, fds: fds1 - fds0, rss: rss1 - rss0,
    perStream: (rss1 - rss0) / n / 1024, all: live.length === n && held === n && pinged === n && ended === n };
}

// The same held streams over HTTP/2, which the server speaks over TLS: each connection carries up
// to 16 at once (the server's limit per connection), so the server holds one descriptor per
// stream for its upstream and one per 16 for the clients, and the client a few hundred.
async function heldOverHttp2(n) {
  const PER_CONN = 16;
  const ca = makeCA();
  const cert = ca.issue('proxy-bench');
  const srv = await startServer({ wrap, tls: { cert: cert.certFile, key: cert.keyFile, ca: ca.caFile },
    env: { ANTHROPIC_BASE_URL: upstreamUrl, ANTHROPIC_API_KEY: 'sk-bench' } });
  const tok = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--ttl', '1h', '--data-dir', srv.dataDir]).stdout.trim();
  const sessions = [];
  const open = (i) => new Promise((resolve) => {
    const k = Math.floor(i / PER_CONN);
    if (!sessions[k]) sessions[k] = http2.connect(srv.url, { ca: ca.ca }).on('error', () => {});
    const st = sessions[k].request({ ':method': 'POST', ':path': '/proxy/anthropic/v1/messages',
      'content-type': 'application/json', 'x-api-key': tok, 'anthropic-version': '2023-06-01' });
    // Node may hand over the first data before it emits the response's headers: the stream is
    // open once it has both
    let status = 0, chunks = 0, wake = null;
    const closed = new Promise((r) => st.on('close', r));
    const later = () => new Promise((r) => { if (chunks > 1 || st.closed) r(chunks > 1); else wake = () => r(chunks > 1); });
    const ended = async () => { await closed; return !st.rstCode; };
    const check = () => { if (status && chunks) resolve(status === 200 ? { ok: true, later, ended } : { ok: false, why: `status ${status}` }); };
    st.on('response', (h) => { status = h[':status']; check(); });
    st.on('data', () => { chunks++; wake?.(); check(); });
    st.on('error', (e) => resolve({ ok: false, why: e.message }));
    st.on('close', () => { wake?.(); resolve({ ok: false, why: `closed: status ${status}, reset ${st.rstCode}` }); });
    st.end(HOLD);
  });
  try {
    const h = await holdStreams(srv.proc.pid, n, open);
    log('Over HTTP/2 (TLS, as the server speaks it), the same streams, 16 on each connection:');
    log();
    log('| concurrent streams | connections | opened with first event | held at the upstream | received a later event | ended cleanly | time to open all | server descriptors held | server RSS held | per stream |');
    log('|---|---|---|---|---|---|---|---|---|---|');
    log(`| ${n} | ${sessions.length} | ${h.ok} | ${h.held} | ${h.pinged} | ${h.ended} | ${h.openMs.toFixed(0)} ms | ${h.fds} | ${(h.rss / 2 ** 20).toFixed(1)} MiB | ${h.perStream.toFixed(1)} KiB |`);
    log();
    return { ...h, conns: sessions.length };
  } finally {
    for (const session of sessions) session.destroy();
    await srv.stop();
    ca.remove();
  }
}

try {
  log('## Proxy');
  log();
  log(`Machine: ${cpus().length} cores (${cpus()[0].model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB. Command: \`node bench/proxy.mjs${quick ? ' --quick' : ''}\`.`);
  log('Upstream: the fake Anthropic Messages API of the tests (`bench/peers/anthropic.mjs`), a Node.js process of its own. Client: Node.js `fetch` (undici), keep-alive.');
  log(`Peers: the same upstream called directly by the same client, and through nginx ${NGINX} (Debian's package, one worker) as a reverse proxy: keep-alive to the upstream, \`proxy_buffering off\`, the key set in a header. Requests go to the three in turn, round after round.`);
  log();
  log('| what | requests | p50 ms | p99 ms | min ms |');
  log('|---|---|---|---|---|');
  const body = JSON.stringify({ model: 'claude-fake', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
  for (let i = 0; i < 200; i++) for (const base of [direct, proxied, viaNginx]) await (await req(base, body)).text();
  const d = [], p = [], n = [];
  for (let i = 0; i < N; i++) {
    d.push(await timeIt(async () => (await req(direct, body)).text()));
    p.push(await timeIt(async () => (await req(proxied, body)).text()));
    n.push(await timeIt(async () => (await req(viaNginx, body)).text()));
  }
  const ds = summarize(d), ps = summarize(p), ns = summarize(n);
  row('plain reply, directly to the upstream', ds);
  row('plain reply through the proxy (token check, key swap, its HTTP/1.1 client)', ps);
  row('plain reply through nginx (peer)', ns);
  const sbody = JSON.stringify({ model: 'claude-fake', stream: true, max_tokens: 16, messages: [] });
  const ttfb = async (base) => {
    const t0 = performance.now();
    const res = await req(base, sbody);
    const reader = res.body.getReader();
    await reader.read();
    const t = performance.now() - t0;
    while (!(await reader.read()).done);
    return t;
  };
  const fd = [], fp = [], fn = [];
  for (let i = 0; i < Math.min(N, 1000); i++) { fd.push(await ttfb(direct)); fp.push(await ttfb(proxied)); fn.push(await ttfb(viaNginx)); }
  const first = { direct: summarize(fd), proxy: summarize(fp), nginx: summarize(fn) };
  row('streamed reply, first byte, directly', first.direct);
  row('streamed reply, first byte, through the proxy', first.proxy);
  row('streamed reply, first byte, through nginx (peer)', first.nginx);
  log();
  const addPlain = ps.p50 - ds.p50, addFirst = first.proxy.p50 - first.direct.p50;
  const ngxPlain = ns.p50 - ds.p50, ngxFirst = first.nginx.p50 - first.direct.p50;
  log('| added latency (p50 through minus p50 direct, same run) | plain reply | first streamed byte |');
  log('|---|---|---|');
  log(`| sandbox-mcp proxy | ${addPlain.toFixed(3)} ms | ${addFirst.toFixed(3)} ms |`);
  log(`| nginx reverse proxy | ${ngxPlain.toFixed(3)} ms | ${ngxFirst.toFixed(3)} ms |`);
  log();
  const noMore = [addPlain <= ngxPlain, addFirst <= ngxFirst];
  log(`Target, no more added latency than nginx's: ${noMore.every(Boolean) ? 'met for both' : noMore.some(Boolean) ? `**met for the ${noMore[0] ? 'plain reply' : 'first streamed byte'} only**` : '**not met**'}.`);
  headline.push({ what: 'proxy, added latency: plain reply / first streamed byte', ours: `${addPlain.toFixed(2)} ms / ${addFirst.toFixed(2)} ms`,
    peer: `nginx reverse proxy: ${ngxPlain.toFixed(2)} ms / ${ngxFirst.toFixed(2)} ms (the upstream directly: ${fmt(ds.p50)} / ${fmt(first.direct.p50)} ms)`,
    target: `no more than nginx's: ${noMore.every(Boolean) ? 'met' : noMore.some(Boolean) ? '**met for one of the two**' : '**not met**'}; ` +
      `under 0.5 ms: ${Math.max(addPlain, addFirst) < 0.5 ? 'met' : addPlain < 0.5 || addFirst < 0.5 ? '**met for one of the two**' : '**not met**'}` });
  log();

  // Many streams at once: each the upstream's first event, then held until the bench lets go.
  const h = await holdStreams(server.proc.pid, STREAMS, async () => {
    try {
      const res = await req(proxied, HOLD);
      const reader = res.body.getReader();
      const ev = await reader.read();
      if (res.status !== 200 || ev.done) return { ok: false, why: `status ${res.status}` };
      return { ok: true, later: async () => !(await reader.read()).done,
        ended: async () => { while (!(await reader.read()).done); return true; } };
    } catch (e) {
      return { ok: false, why: e.cause?.message || e.message };
    }
  });
  log('| concurrent streams | opened with first event | held at the upstream | received a later event | ended cleanly | time to open all | server descriptors held | server RSS held | per stream |');
  log('|---|---|---|---|---|---|---|---|---|');
  log(`| ${STREAMS} | ${h.ok} | ${h.held} | ${h.pinged} | ${h.ended} | ${h.openMs.toFixed(0)} ms | ${h.fds} | ${(h.rss / 2 ** 20).toFixed(1)} MiB | ${h.perStream.toFixed(1)} KiB |`);
  log();
  log(`Each held stream is a client connection, an upstream connection through the proxy's HTTP/1.1 client and their buffers; nothing else is kept per stream. ` +
    `The client opens ${OPENING} at a time. The server ran with MAX_CONNECTIONS=${STREAMS + 1000} (the default, 4,096, is for a public server) and a descriptor limit of ${serverNofile}.` +
    (STREAMS < WANT_STREAMS && !quick ? ` **This machine's hard descriptor limit (${hardNofile}) leaves room for ${STREAMS} streams, not ${WANT_STREAMS}**: each takes two descriptors, and raising the hard limit needs CAP_SYS_RESOURCE, which this run lacks.` : ''));
  log();
  const h2 = await heldOverHttp2(WANT_STREAMS);
  headline.push({ what: 'proxy, concurrent streams held', ours: `HTTP/1.1: ${h.ended} of ${STREAMS} held to the end, ${h.perStream.toFixed(1)} KiB server RSS each; ` +
      `HTTP/2: ${h2.ended} of ${WANT_STREAMS} on ${h2.conns} connections, ${h2.perStream.toFixed(1)} KiB each`,
    target: quick ? `a quick run holds ${WANT_STREAMS}` : `10,000 concurrent streams: ${h2.all ? `met over HTTP/2${h.all && STREAMS < WANT_STREAMS ? `; over HTTP/1.1 the descriptor limit (${hardNofile}) allows ${STREAMS}, all held` : ''}` : '**not met**'}` });
  writeHeadline(headline);
  const bad = server.stderr().split('\n').filter((l) => /^\S+ (warn|error) |Sanitizer|runtime error/.test(l) && !/disk-room|default-model/.test(l));
  if (bad.length) console.error(`server warnings:\n${bad.slice(0, 20).join('\n')}`);
  if (nginx.errors().trim()) console.error(`nginx errors:\n${nginx.errors().slice(0, 2000)}`);
} finally {
  await server.stop();
  await nginx.stop();
  up.stdin.end();
  rmSync(work, { recursive: true, force: true });
}

if (process.env.BENCH_OUT) {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
}
