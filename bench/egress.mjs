// Egress proxy benchmarks: a large download through a sandbox's egress proxy (127.0.0.1:3128
// inside it) against the same download on the host with no proxy, and the time to the first byte
// of a small https request (CONNECT, TLS end to end) through it against the same request direct;
// tinyproxy (Debian's package) on the host is the peer forward proxy. The upstream is Node.js
// (bench/peers/upstream.mjs) on loopback, the client curl.
// HAProxy in TCP mode (Debian's package) is the production relay it is held to: a plain relay to
// one address, which does less than a forward proxy (no request to read, no policy), so the
// floor of what relaying costs.
// Run: node bench/egress.mjs [--quick]   (as root; uses build/sandbox-mcp, curl, tinyproxy, haproxy)
import { execFile, spawn, spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarize, fmt, mcpClient, writeHeadline } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, tempDir } = await import('../tests/lib/server.mjs');
const { makeCA } = await import('../tests/lib/tls.mjs');

const quick = process.argv.includes('--quick');
const MiB = 2 ** 20, GiB = 2 ** 30;
const SIZE = quick ? 256 * MiB : GiB;
const ROUNDS = quick ? 2 : 5;               // downloads of SIZE per path, interleaved
const BATCHES = quick ? 6 : 30, BATCH = 10; // first-byte requests per path: BATCHES x BATCH
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };
const MB = (bytesPerSecond) => bytesPerSecond / 1e6;

if (spawnSync('tinyproxy', ['-v'], { encoding: 'utf8' }).error) {
  console.error('egress bench: tinyproxy not found (Debian package `tinyproxy`; `make bench` installs it)');
  process.exit(1);
}

// CPU time (user + system) of a process, in seconds.
function cpuSeconds(pid) {
  if (typeof tinyExit === 'string' && pid === tiny.pid) throw new Error(tinyExit);
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8', maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

// The upstream, in a process of its own.
const ca = makeCA();
const leaf = ca.issue('upstream');
const upstream = spawn(process.execPath, [path.join(root, 'bench', 'peers', 'upstream.mjs')], { stdio: ['pipe', 'pipe', 'inherit'] });
upstream.stdin.end(JSON.stringify({ cert: leaf.cert, key: leaf.key }));
const [httpPort, httpsPort] = await new Promise((resolve, reject) => {
  let text = '';
  upstream.stdout.on('data', (d) => {
    text += d;
    const m = text.match(/listening http=(\d+) https=(\d+)/);
    if (m) resolve([Number(m[1]), Number(m[2])]);
  });
  upstream.on('exit', (code) => reject(new Error(`upstream exited ${code}`)));
});

// The peer: tinyproxy on the host, allowed to CONNECT to the upstream's ports.
const tinyDir = tempDir('smcp-tinyproxy-');
// below the ephemeral ports, which the proxy bench's many connections may leave in TIME_WAIT
const tinyPort = 20000 + Math.floor(Math.random() * 12000);
writeFileSync(path.join(tinyDir, 'tinyproxy.conf'), [
  `Port ${tinyPort}`, 'Listen 127.0.0.1', 'Timeout 600', 'MaxClients 100', 'LogLevel Error',
  'Allow 127.0.0.1', `ConnectPort ${httpPort}`, `ConnectPort ${httpsPort}`, ''].join('\n'));
const tiny = spawn('tinyproxy', ['-d', '-c', path.join(tinyDir, 'tinyproxy.conf')], { stdio: 'ignore' });
const tinyVersion = spawnSync('tinyproxy', ['-v'], { encoding: 'utf8' }).stdout.trim();
let tinyExit = null;
tiny.on('exit', (code, signal) => { tinyExit = `tinyproxy exited (${signal || code}) on port ${tinyPort}`; });

// The production relay: HAProxy in TCP mode on the host, one frontend to each upstream port.
let haproxy = null, haExit = null;
const haPort = tinyPort + 1, haHttpsPort = tinyPort + 2;
const haVersion = (spawnSync('haproxy', ['-v'], { encoding: 'utf8' }).stdout || '').split('\n')[0].replace(/ - https.*/, '').replace(/ version /, ' ').replace(/ [0-9]{4}\/[0-9]{2}\/[0-9]{2}$/, '');
if (haVersion) {
  writeFileSync(path.join(tinyDir, 'haproxy.cfg'), [
    'global', '  maxconn 1000', 'defaults', '  mode tcp', '  timeout connect 5s', '  timeout client 600s', '  timeout server 600s',
    'frontend http', `  bind 127.0.0.1:${haPort}`, '  default_backend http',
    'frontend https', `  bind 127.0.0.1:${haHttpsPort}`, '  default_backend https',
    'backend http', `  server up 127.0.0.1:${httpPort}`, 'backend https', `  server up 127.0.0.1:${httpsPort}`, ''].join('\n'));
  haproxy = spawn('haproxy', ['-db', '-f', path.join(tinyDir, 'haproxy.cfg')], { stdio: 'ignore' });
  haproxy.on('exit', (code, signal) => { haExit = `haproxy exited (${signal || code})`; });
}

// Ours twice: without a cap for the comparison, and with the default cap (SANDBOX_EGRESS_RATE
// unset) for one figure.
const addrs = `127.0.0.1:${httpPort},127.0.0.1:${httpsPort}`;
const uncapped = await startServer({ env: { SANDBOX_NETWORK: 'public', SANDBOX_NETWORK_ADDRS: addrs, SANDBOX_EGRESS_RATE: '0' } });
const capped = await startServer({ env: { SANDBOX_NETWORK: 'public', SANDBOX_NETWORK_ADDRS: addrs } });
const client = mcpClient(uncapped), cappedClient = mcpClient(capped);

async function sandboxSh(c, command) {
  const r = (await c.call('container_exec', { command, timeout_ms: 600000 })).structuredContent;
  if (r.exit_code !== 0) throw new Error(`${command}: exit ${r.exit_code}: ${r.stderr}`);
  return r.stdout;
}

const bigUrl = `http://127.0.0.1:${httpPort}/big?n=${SIZE}`;
const W = '%{size_download} %{speed_download}';
const OURS = "--noproxy '' -x http://127.0.0.1:3128";
// one download; resolves to bytes a second as curl measured it
function parse(text) {
  const [size, speed] = text.trim().split(' ').map(Number);
  if (size !== SIZE) throw new Error(`downloaded ${size} bytes, not ${SIZE}`);
  return speed;
}
const download = {
  direct: async () => parse(await run('curl', ['-sS', '-o', '/dev/null', '-w', W, bigUrl])),
  ours: async (c = client) => parse(await sandboxSh(c, `curl -sS ${OURS} -o /dev/null -w '${W}' '${bigUrl}'`)),
  tiny: async () => parse(await run('curl', ['-sS', '-x', `http://127.0.0.1:${tinyPort}`, '-o', '/dev/null', '-w', W, bigUrl])),
  haproxy: async () => {
    if (haExit) throw new Error(haExit);
    return parse(await run('curl', ['-sS', '-o', '/dev/null', '-w', W, `http://127.0.0.1:${haPort}/big?n=${SIZE}`]));
  },
};

try {
  await sandboxSh(client, 'true');
  await sandboxSh(cappedClient, 'true');
  await run('curl', ['-sS', '-o', '/dev/null', `http://127.0.0.1:${httpPort}/small`]); // upstream warm

  // Throughput, the three paths interleaved round by round.
  const speeds = { direct: [], ours: [], tiny: [], haproxy: [] };
  const cpu = { ours: 0, tiny: 0, haproxy: 0 };
  for (let round = 0; round < ROUNDS; round++) {
    speeds.direct.push(await download.direct());
    let c0 = cpuSeconds(uncapped.proc.pid);
    speeds.ours.push(await download.ours());
    cpu.ours += cpuSeconds(uncapped.proc.pid) - c0;
    c0 = cpuSeconds(tiny.pid);
    speeds.tiny.push(await download.tiny());
    cpu.tiny += cpuSeconds(tiny.pid) - c0;
    if (haproxy) {
      c0 = cpuSeconds(haproxy.pid);
      speeds.haproxy.push(await download.haproxy());
      cpu.haproxy += cpuSeconds(haproxy.pid) - c0;
    }
  }
  if (!haproxy) delete speeds.haproxy;
  const cappedSpeed = await download.ours(cappedClient);
  const s = Object.fromEntries(Object.entries(speeds).map(([k, v]) => [k, summarize(v)]));
  const gib = (ROUNDS * SIZE) / GiB;

  // Time to the first byte of a small https request: curl's time_starttransfer, which through a
  // proxy includes connecting to it and its CONNECT answer; batches interleaved.
  await client.call('container_file_write', { path: '/workspace/ca.pem', content: ca.ca });
  const smallUrl = `https://127.0.0.1:${httpsPort}/small`;
  const loop = (proxy, caFile) => `for i in $(seq ${BATCH}); do curl -sS ${proxy} --cacert ${caFile} -o /dev/null -w '%{time_starttransfer}\\n' ${smallUrl}; done`;
  const ms = (text) => text.trim().split('\n').map((x) => Number(x) * 1000);
  const first = { direct: [], ours: [], tiny: [] };
  if (haproxy) first.haproxy = [];
  const haLoop = `for i in $(seq ${BATCH}); do curl -sS --connect-to 127.0.0.1:${httpsPort}:127.0.0.1:${haHttpsPort} --cacert ${ca.caFile} -o /dev/null -w '%{time_starttransfer}\\n' ${smallUrl}; done`;
  for (let b = 0; b < BATCHES; b++) {
    first.direct.push(...ms(await run('sh', ['-c', loop('', ca.caFile)])));
    first.ours.push(...ms(await sandboxSh(client, loop(OURS, '/workspace/ca.pem'))));
    first.tiny.push(...ms(await run('sh', ['-c', loop(`-x http://127.0.0.1:${tinyPort}`, ca.caFile)])));
    if (haproxy) first.haproxy.push(...ms(await run('sh', ['-c', haLoop])));
  }
  const f = Object.fromEntries(Object.entries(first).map(([k, v]) => [k, summarize(v)]));

  const ratio = s.ours.p50 / s.direct.p50;
  const added = f.ours.p50 - f.direct.p50, tinyAdded = f.tiny.p50 - f.direct.p50;
  log('## Egress proxy');
  log();
  log(`Machine: ${cpus().length} cores (${cpus()[0].model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB. Command: \`node bench/egress.mjs${quick ? ' --quick' : ''}\` (release build, loopback only).`);
  log(`Upstream: Node.js ${process.version} (\`bench/peers/upstream.mjs\`, one preallocated 1 MiB buffer written again and again; HTTPS with a throwaway certificate). Client: curl, inside a sandbox through its egress proxy, or on the host.`);
  log(`Peer: ${tinyVersion} on the host, the same requests through it. Ours runs with \`SANDBOX_EGRESS_RATE=0\` (no cap) unless the row says otherwise.`);
  log();
  log(`| ${SIZE / MiB} MiB download, plain HTTP | runs | MB/s p50 | min | max | proxy CPU s per GiB |`);
  log('|---|---|---|---|---|---|');
  const speedRow = (what, x, cpuPerGiB = '') => log(`| ${what} | ${x.n} | ${MB(x.p50).toFixed(0)} | ${MB(x.min).toFixed(0)} | ${MB(x.max).toFixed(0)} | ${cpuPerGiB} |`);
  speedRow('direct: curl on the host to the upstream, no proxy (floor)', s.direct);
  speedRow('ours: curl in a sandbox through its egress proxy', s.ours, (cpu.ours / gib).toFixed(2));
  speedRow(`peer: curl on the host through ${tinyVersion}`, s.tiny, (cpu.tiny / gib).toFixed(2));
  if (s.haproxy) speedRow(`peer: curl on the host through ${haVersion}, TCP mode (a relay to one address, no proxy protocol)`, s.haproxy, (cpu.haproxy / gib).toFixed(2));
  log(`| ours with the default cap (\`SANDBOX_EGRESS_RATE\` unset: 100 MiB/s = 104.9 MB/s) | 1 | ${MB(cappedSpeed).toFixed(0)} |  |  |  |`);
  log();
  const haText = s.haproxy ? `, ${(s.ours.p50 / s.haproxy.p50).toFixed(2)}x HAProxy (CPU per GiB ${(cpu.ours / Math.max(cpu.haproxy, 1e-9)).toFixed(2)}x its)` : '';
  log(`Ratio (p50, same run): ours is ${(ratio * 100).toFixed(0)}% of direct and ${(s.ours.p50 / s.tiny.p50).toFixed(1)}x tinyproxy${haText}. MB = 10^6 bytes; curl's own measure (\`%{speed_download}\`). Proxy CPU is the CPU time the proxy process used during its downloads (ours: the whole server), per GiB relayed.`);
  log();
  log('| first byte of a small https request (new connection, TLS) | requests | p50 ms | p99 ms | min ms |');
  log('|---|---|---|---|---|');
  const firstRow = (what, x) => log(`| ${what} | ${x.n} | ${fmt(x.p50)} | ${fmt(x.p99)} | ${fmt(x.min)} |`);
  firstRow('direct: curl on the host (floor)', f.direct);
  firstRow('ours: curl in a sandbox, CONNECT through its egress proxy', f.ours);
  firstRow(`peer: curl on the host, CONNECT through ${tinyVersion}`, f.tiny);
  if (f.haproxy) firstRow(`peer: curl on the host through ${haVersion}, TCP mode`, f.haproxy);
  log();
  log(`Added time to the first byte (p50 through the proxy minus p50 direct, same run): ours ${added.toFixed(3)} ms, tinyproxy ${tinyAdded.toFixed(3)} ms.`);
  writeHeadline([
    { what: `egress proxy, ${SIZE / MiB} MiB download (no cap) / with the default cap`, ours: `${MB(s.ours.p50).toFixed(0)} MB/s / ${MB(cappedSpeed).toFixed(0)} MB/s`,
      peer: `direct, no proxy: ${MB(s.direct.p50).toFixed(0)} MB/s; tinyproxy: ${MB(s.tiny.p50).toFixed(0)} MB/s${s.haproxy ? `; HAProxy (TCP): ${MB(s.haproxy.p50).toFixed(0)} MB/s, ${(cpu.haproxy / gib).toFixed(2)} CPU s per GiB` : ''}`,
      ratio: `${(ratio * 100).toFixed(0)}% of direct, ${(s.ours.p50 / s.tiny.p50).toFixed(1)}x tinyproxy${haText}; ours ${(cpu.ours / gib).toFixed(2)} CPU s per GiB`,
      target: s.haproxy ? `at least HAProxy's speed with at most its CPU per GiB: ${s.ours.p50 >= s.haproxy.p50 && cpu.ours <= cpu.haproxy ? 'met' : '**not met**'}`
        : `at least 80% of direct: ${ratio >= 0.8 ? 'met' : '**not met**'}` },
    { what: 'egress proxy, added time to the first byte of a small https request', ours: `${added.toFixed(2)} ms`,
      peer: `tinyproxy: ${tinyAdded.toFixed(2)} ms (direct: ${fmt(f.direct.p50)} ms)`,
      target: `under 1 ms: ${added < 1 ? 'met' : '**not met**'}` },
  ]);
} finally {
  client.close();
  cappedClient.close();
  await uncapped.stop();
  await capped.stop();
  tiny.kill();
  haproxy?.kill();
  rmSync(tinyDir, { recursive: true, force: true });
  upstream.kill();
  ca.remove();
}

if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
