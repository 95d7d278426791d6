// Sandbox benchmarks: container_exec latency through /mcp, cold start, initialize, density,
// and the same work done by bubblewrap and unshare on the same machine.
// Run: node bench/sandbox.mjs [--quick]   (as root; uses build/sandbox-mcp, bwrap, unshare)
import { readFileSync, readdirSync, existsSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarize, timeIt, fmt, mcpClient, spawnTimes, writeHeadline } from './lib.mjs';

// The release build unless told otherwise (the tests default to the sanitized one).
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, cli, debianTemplate } = await import('../tests/lib/server.mjs');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const quick = process.argv.includes('--quick');
const N = quick ? 50 : 300;
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };

function row(name, s, note = '') {
  log(`| ${name} | ${s.n} | ${fmt(s.p50)} | ${fmt(s.p99)} | ${fmt(s.min)} | ${note} |`);
}

const bwrapArgs = ['--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib',
  '--symlink', 'usr/lib64', '/lib64', '--symlink', 'usr/sbin', '/sbin', '--proc', '/proc', '--dev', '/dev',
  '--tmpfs', '/tmp', '--unshare-all', '--die-with-parent', '--new-session'];

function pss(pid) {
  try {
    const t = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    return Number(t.match(/^Pss:\s+(\d+)/m)[1]) * 1024;
  } catch { return 0; }
}

function rss(pid) {
  try {
    return Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m)[1]) * 1024;
  } catch { return 0; }
}

function cgroupMemory(instanceDirs) {
  let total = 0, count = 0;
  for (const dir of instanceDirs) {
    for (const name of readdirSync(dir)) {
      const f = `${dir}/${name}/memory.usage_in_bytes`;
      const g = `${dir}/${name}/memory.current`;
      const file = existsSync(f) ? f : existsSync(g) ? g : null;
      if (!file) continue;
      total += Number(readFileSync(file, 'utf8'));
      count++;
    }
  }
  return { total, count };
}

function instanceDirs() {
  const roots = ['/sys/fs/cgroup/memory/sandbox-mcp', '/sys/fs/cgroup/sandbox-mcp'];
  const dirs = [];
  for (const r of roots) {
    if (!existsSync(r)) continue;
    for (const d of readdirSync(r)) if (/^[0-9a-f]{12}$/.test(d)) dirs.push(`${r}/${d}`);
  }
  return dirs;
}

// wrk with one connection for `seconds`: requests and latency percentiles (ms) of tools/call
// `params` to the server's /mcp.
function wrkLatency(srv, params, seconds, method = 'tools/call') {
  const script = path.join(srv.dataDir, 'call.lua');
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method, params });
  writeFileSync(script, `wrk.method = "POST"\nwrk.body = [==[${body}]==]\n` +
    'wrk.headers["Content-Type"] = "application/json"\nwrk.headers["Accept"] = "application/json, text/event-stream"\n' +
    `wrk.headers["Authorization"] = "Bearer ${srv.token}"\n`);
  const r = spawnSync('wrk', ['-t1', '-c1', `-d${seconds}s`, '--latency', '-s', script, srv.mcpUrl], { encoding: 'utf8' });
  const ms = (label) => {
    const m = r.stdout.match(new RegExp(`^\\s*${label}\\s+([\\d.]+)(us|ms|s)$`, 'm'));
    if (!m) throw new Error(`wrk: no ${label} in:\n${r.stdout}${r.stderr}`);
    return Number(m[1]) * ({ us: 0.001, ms: 1, s: 1000 })[m[2]];
  };
  if (/Non-2xx/.test(r.stdout)) throw new Error(`wrk: errors:\n${r.stdout}`);
  const requests = Number((r.stdout.match(/(\d+) requests in/) || [])[1]);
  return { requests, p50: ms('50%'), p99: ms('99%') };
}

// Ours and a peer timed in alternation, round after round (which goes first alternates too), so
// that within a round both meet the machine at the same speed: on this virtual machine that
// speed moves by a third from one minute to the next, more than the gaps measured. The ratio is
// the median of the rounds' ratios.
async function paired(rounds, ours, peer) {
  const o = [], p = [], r = [];
  for (let i = 0; i < rounds; i++) {
    let a, b;
    if (i % 2) {
      b = await peer();
      a = await ours();
    } else {
      a = await ours();
      b = await peer();
    }
    o.push(a);
    p.push(b);
    r.push(a / b);
  }
  return { ours: summarize(o).p50, peer: summarize(p).p50, ratio: summarize(r).p50, rounds };
}

function newUser(srv, name) {
  cli(['user', 'add', name, '--data-dir', srv.dataDir]);
  return cli(['token', 'create', '--user', name, '--data-dir', srv.dataDir]).stdout.match(/smcp_\S+/)[0];
}

function initPids(dataDir) {
  const r = cli(['sandbox', 'list', '--data-dir', dataDir]);
  return r.stdout.split('\n').slice(1).map((l) => Number(l.trim().split(/\s+/)[3])).filter((n) => n > 0);
}

const MiB = 1024 * 1024;

log(`## Sandboxes`);
log();
log(`Machine: ${cpus().length} cores (${cpus()[0].model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB.`);
log(`Command: \`node bench/sandbox.mjs${quick ? ' --quick' : ''}\` (release build, loopback, sequential calls).`);
log('Client: node:http over one keep-alive connection (its share is the `ping` row). Peers and floors:');
log('`bench/spawntime.c`, posix_spawn to waitpid timed in C, with no client at all.');
log('Servers run with `SANDBOX_DISK_MB=256`, chosen when admission was strict only (a start refused when the running sandboxes\' images could together outgrow the free disk), so that the density rows hold hundreds; kept so that the figures compare with earlier runs.');
log();
log('| what | runs | p50 ms | p99 ms | min ms | notes |');
log('|---|---|---|---|---|---|');

const headline = [];
// Small disk images: the server refuses to start sandboxes whose images could together outgrow
// the free disk, and the density rows run hundreds.
const DISK = { SANDBOX_DISK_MB: '256' };
const server = await startServer({ env: { SANDBOX_MAX_RUNNING: '1000', ...DISK } });
const client = mcpClient(server);
const call = (name, args, token) => client.call(name, args, token);
try {
  await call('container_exec', { command: 'true' });
  for (let i = 0; i < 20; i++) await call('container_exec', { command: 'true' });
  const t = [];
  for (let i = 0; i < N; i++) t.push(await timeIt(() => call('container_exec', { command: 'true' })));
  const execTrue = summarize(t);
  row('`container_exec` of `true` through /mcp (HTTP, JSON-RPC, auth, the sandbox\'s init starts `true`)', execTrue);
  // The same call with the leanest client there is on this machine: wrk (C), one keep-alive
  // connection, one request at a time, so that the ratio to the host floor (also timed from C)
  // is the server's and the sandbox's alone.
  const wrkTrue = wrkLatency(server, { name: 'container_exec', arguments: { command: 'true' } }, quick ? 3 : 8);
  log(`| \`container_exec\` of \`true\` through /mcp, wrk (C client, one keep-alive connection) | ${wrkTrue.requests} | ${fmt(wrkTrue.p50)} | ${fmt(wrkTrue.p99)} |  | the client's share is near nothing |`);
  const pings = [];
  for (let i = 0; i < N; i++) pings.push(await timeIt(() => client.ping()));
  const ping = summarize(pings);
  row('MCP `ping` through the same client (the client\'s and HTTP\'s share of each call)', ping);
  // The same client and server answering without a sandbox: the floor of any call through /mcp.
  // (After the Node.js client's rows: its keep-alive connection would sit idle through two wrk
  // runs, longer than the server keeps an idle connection.)
  const wrkPing = wrkLatency(server, {}, quick ? 3 : 8, 'ping');
  log(`| MCP \`ping\` through /mcp, wrk (the server's and HTTP's share of a call: no sandbox) | ${wrkPing.requests} | ${fmt(wrkPing.p50)} | ${fmt(wrkPing.p99)} |  | floor of a call |`);

  const big = [];
  for (let i = 0; i < Math.min(N, 100); i++) big.push(await timeIt(() => call('container_exec', { command: 'head -c 1048576 /dev/zero | tr "\\0" a' })));
  const bigS = summarize(big);
  const wrkBig = wrkLatency(server, { name: 'container_exec', arguments: { command: 'head -c 1048576 /dev/zero | tr "\\0" a' } }, quick ? 3 : 8);
  log(`| \`container_exec\` printing 1 MiB through /mcp, wrk (C client) | ${wrkBig.requests} | ${fmt(wrkBig.p50)} | ${fmt(wrkBig.p99)} |  |  |`);
  row('`container_exec` printing 1 MiB through /mcp (captured, kept in the sandbox, head and tail returned)', bigS);

  // The two exec rows of the headline, each against its peer in alternation.
  const BIG = 'head -c 1048576 /dev/zero | tr "\\0" a';
  const rounds = quick ? 4 : 12;
  const pairTrue = await paired(rounds, () => wrkLatency(server, { name: 'container_exec', arguments: { command: 'true' } }, 1).p50,
    async () => summarize(await spawnTimes(['true'], 100)).p50);
  log(`| \`container_exec\` of \`true\`, wrk, and the host floor, in alternation (${rounds} rounds: 1 s of wrk, then 100 spawns, or the other way round) | ${rounds} | ${fmt(pairTrue.ours)} |  |  | host floor ${fmt(pairTrue.peer)} ms; ratio (median of the rounds') ${pairTrue.ratio.toFixed(2)}x |`);
  const pairBig = await paired(rounds, () => wrkLatency(server, { name: 'container_exec', arguments: { command: BIG } }, 1).p50,
    async () => summarize(await spawnTimes(['bwrap', ...bwrapArgs, '/bin/sh', '-c', BIG], 20)).p50);
  log(`| \`container_exec\` printing 1 MiB, wrk, and bubblewrap printing it to /dev/null, in alternation (${rounds} rounds: 1 s of wrk, then 20 runs) | ${rounds} | ${fmt(pairBig.ours)} |  |  | bubblewrap ${fmt(pairBig.peer)} ms; ratio (median of the rounds') ${pairBig.ratio.toFixed(2)}x |`);

  const bwTrue = summarize(await spawnTimes(['bwrap', ...bwrapArgs, 'true'], N));
  row('peer: bubblewrap, a new sandbox running `true`', bwTrue, 'no HTTP, no cgroup, no overlay, no disk');
  const bwBig = summarize(await spawnTimes(['bwrap', ...bwrapArgs, '/bin/sh', '-c', 'head -c 1048576 /dev/zero | tr "\\0" a'], Math.min(N, 100)));
  row('peer: bubblewrap, the same 1 MiB to /dev/null', bwBig, 'output discarded, not captured');
  const un = summarize(await spawnTimes(['unshare', '--user', '--map-root-user', '--mount', '--pid', '--fork', '--net', '--uts', '--ipc', 'true'], N));
  row('peer: `unshare` (user, mount, pid, net, uts, ipc namespaces) running `true`', un, 'no root change at all');
  const plain = summarize(await spawnTimes(['true'], N));
  row('floor: `true` on the host, no sandbox', plain, 'the cost of creating a process here');

  // Cold start: a stopped sandbox started again by the next call.
  const cold = [], coldLog = [];
  for (let i = 0; i < (quick ? 10 : 40); i++) {
    cli(['sandbox', 'stop-all', '--data-dir', server.dataDir]);
    const before = server.stderr().length;
    cold.push(await timeIt(() => call('container_exec', { command: 'true' })));
    const m = server.stderr().slice(before).match(/sandbox started .* ms=([\d.]+)/);
    if (m) coldLog.push(Number(m[1]));
  }
  const coldAllS = summarize(coldLog);
  row('cold start after `sandbox stop-all`: first `container_exec` (its disk image is mounted again)', summarize(cold), 'start and exec');
  row('cold start after `sandbox stop-all` as logged by the server (start only)', coldAllS, 'mounts the ext4 image again');
  // A start as it happens in service: the server's own idle stop (the disk image stays mounted),
  // then the owner's next call. With standby (the default) the idle stop is followed by a start
  // in the background, which the call takes; without it (SANDBOX_STANDBY=0), the call starts it.
  const idleRestart = async (standby) => {
    const idleSrv = await startServer({ env: { SANDBOX_MAX_RUNNING: '1000', SANDBOX_IDLE_SECONDS: '1', SANDBOX_POOL: '0', SANDBOX_STANDBY: standby ? '8' : '0', ...DISK } });
    try {
      const idleClient = mcpClient(idleSrv);
      await idleClient.call('container_exec', { command: 'true' });
      const calls = [], logged = [];
      const ready = standby ? /sandbox standby ready/g : /reason=idle/g;
      for (let i = 0; i < (quick ? 10 : 30); i++) {
        const seen = (idleSrv.stderr().match(ready) || []).length;
        while ((idleSrv.stderr().match(ready) || []).length === seen) await sleep(20);
        const before = idleSrv.stderr().length;
        calls.push(await timeIt(() => idleClient.call('container_exec', { command: 'true' })));
        const m = idleSrv.stderr().slice(before).match(standby ? /sandbox started .* from=standby ms=([\d.]+)/ : /sandbox started .* ms=([\d.]+)/);
        if (m) logged.push(Number(m[1]));
      }
      idleClient.close();
      return { calls: summarize(calls), logged: summarize(logged) };
    } finally {
      await idleSrv.stop();
    }
  };
  const standbyR = await idleRestart(true);
  row('after an idle stop, from standby: first `container_exec`', standbyR.calls, 'take and exec');
  row('after an idle stop, taking the standby sandbox as logged by the server', standbyR.logged, 'peer: the bubblewrap row above');
  const idleR = await idleRestart(false);
  const coldS = idleR.logged;
  row('cold start after an idle stop without standby (`SANDBOX_STANDBY=0`): first `container_exec`', idleR.calls, 'start and exec');
  row('cold start after an idle stop without standby as logged by the server (start only)', coldS, 'the start a standby makes ahead');
  // The same on the debian template, the default (the rows above run on the host template).
  const deb = await startServer({ env: { ...(await debianTemplate()), SANDBOX_MAX_RUNNING: '1000', ...DISK } });
  let coldDebS, pyS;
  try {
    const debClient = mcpClient(deb);
    while (!/sandbox template debian ready/.test(deb.stderr())) await new Promise((r) => setTimeout(r, 100));
    await debClient.call('container_exec', { command: 'true' });
    const coldDeb = [];
    for (let i = 0; i < (quick ? 10 : 40); i++) {
      cli(['sandbox', 'stop-all', '--data-dir', deb.dataDir]);
      const before = deb.stderr().length;
      await debClient.call('container_exec', { command: 'true' });
      const m = deb.stderr().slice(before).match(/sandbox started .* template=debian .* ms=([\d.]+)/);
      if (m) coldDeb.push(Number(m[1]));
    }
    coldDebS = summarize(coldDeb);
    row('cold start on the debian template as logged by the server (start only)', coldDebS, 'the host template: two rows above');
    const py = [];
    for (let i = 0; i < (quick ? 5 : 20); i++)
      py.push(await timeIt(() => debClient.call('container_exec', { command: 'python3 -c "import pandas, matplotlib.pyplot"' })));
    pyS = summarize(py);
    row('`container_exec` of python3 importing pandas and matplotlib.pyplot (debian template)', pyS, 'warm page cache');
  } finally {
    await deb.stop();
  }
  const init = [];
  for (let i = 0; i < (quick ? 10 : 30); i++) init.push(await timeIt(() => call('container_initialize')));
  const initS = summarize(init);
  row('`container_initialize` without a pool (kill, wipe layer and workspace, new disk, start)', initS);
  // A new user's first call without a pool: the sandbox's first start, which also makes its
  // disk image (mkfs) and mounts it.
  const firstNoPool = [], firstNoPoolLog = [];
  for (let i = 0; i < (quick ? 5 : 20); i++) {
    const tok = newUser(server, `first${i}`);
    const before = server.stderr().length;
    firstNoPool.push(await timeIt(() => call('container_exec', { command: 'true' }, tok)));
    const m = server.stderr().slice(before).match(/sandbox started .* ms=([\d.]+)/);
    if (m) firstNoPoolLog.push(Number(m[1]));
  }
  const firstNoPoolS = summarize(firstNoPoolLog);
  row('a new user\'s first `container_exec` without a pool', summarize(firstNoPool), 'first start and exec');
  row('a new user\'s sandbox, first start as logged by the server', firstNoPoolS, 'makes and mounts its disk image');
  // The warm pool: the same calls served by a pooled sandbox. Each waits until the pool has one
  // ready (refilling takes a first start), as a call after a quiet moment would.
  const pool = await startServer({ env: { SANDBOX_MAX_RUNNING: '1000', SANDBOX_POOL: '2', ...DISK } });
  let takeS, poolInitS, poolFirstS;
  try {
    const poolClient = mcpClient(pool);
    const ready = async () => {
      const t0 = Date.now();
      for (;;) {
        const started = (pool.stderr().match(/sandbox started sbx=\S+ user=\(pool\)/g) || []).length;
        const taken = (pool.stderr().match(/sandbox assigned/g) || []).length;
        if (started - taken >= 2) return;
        if (Date.now() - t0 > 60000) throw new Error(`the pool did not fill:\n${pool.stderr().slice(-3000)}`);
        await sleep(10);
      }
    };
    const takes = () => [...pool.stderr().matchAll(/sandbox assigned .* us=(\d+)/g)].map((m) => Number(m[1]) / 1000);
    const first = [];
    for (let i = 0; i < (quick ? 5 : 20); i++) {
      const tok = newUser(pool, `warm${i}`);
      await ready();
      first.push(await timeIt(() => poolClient.call('container_exec', { command: 'true' }, tok)));
    }
    poolFirstS = summarize(first);
    const pinit = [];
    for (let i = 0; i < (quick ? 10 : 30); i++) {
      await ready();
      pinit.push(await timeIt(() => poolClient.call('container_initialize')));
    }
    poolInitS = summarize(pinit);
    takeS = summarize(takes());
    poolClient.close();
    row('a new user\'s first `container_exec` from the warm pool (`SANDBOX_POOL=2`)', poolFirstS, 'take and exec');
    row('`container_initialize` from the warm pool', poolInitS, 'take; the old sandbox is removed after the answer');
    row('taking a pooled sandbox as logged by the server (both rows above)', takeS, 'peer: the bubblewrap row above');
  } finally {
    await pool.stop();
  }
  headline.push(
    { what: '`container_exec` of `true` through /mcp (wrk, in alternation with the host floor; Node.js client in brackets)', ours: `${fmt(pairTrue.ours)} ms; alone: ${fmt(wrkTrue.p50)} ms (p99 ${fmt(wrkTrue.p99)}) [${fmt(execTrue.p50)} ms]`,
      peer: `host, no sandbox: ${fmt(pairTrue.peer)} ms (alone ${fmt(plain.p50)} ms); bubblewrap, new sandbox: ${fmt(bwTrue.p50)} ms; \`unshare\`: ${fmt(un.p50)} ms`,
      ratio: `${pairTrue.ratio.toFixed(2)}x host (alone ${(wrkTrue.p50 / plain.p50).toFixed(2)}x) [${(execTrue.p50 / plain.p50).toFixed(2)}x], ${(wrkTrue.p50 / bwTrue.p50).toFixed(2)}x bubblewrap`,
      target: `at most 1.2x the host: ${pairTrue.ratio <= 1.2 ? 'met' : '**not met**'}; the floor of a call, MCP \`ping\` (${fmt(wrkPing.p50)} ms) plus the host (${fmt(plain.p50)} ms), is ${((wrkPing.p50 + plain.p50) / plain.p50).toFixed(2)}x the host, and ours is ${fmt(wrkTrue.p50 - wrkPing.p50 - plain.p50)} ms above it` },
    { what: '`container_exec` printing 1 MiB through /mcp (wrk, in alternation with bubblewrap; Node.js client in brackets)', ours: `${fmt(pairBig.ours)} ms; alone: ${fmt(wrkBig.p50)} ms [${fmt(bigS.p50)} ms]`,
      peer: `bubblewrap, output to /dev/null: ${fmt(pairBig.peer)} ms (alone ${fmt(bwBig.p50)} ms)`, ratio: `${pairBig.ratio.toFixed(2)}x (alone ${(wrkBig.p50 / bwBig.p50).toFixed(2)}x; ours captures it, keeps it in the sandbox and returns head and tail)`,
      target: `at most 1.0x bubblewrap: ${pairBig.ratio <= 1.0 ? 'met' : '**not met**'}` },
    { what: 'a sandbox for a new user or `container_initialize`, from the warm pool (server\'s measure)', ours: `${fmt(takeS.p50)} ms (p99 ${fmt(takeS.p99)}); through /mcp: first call ${fmt(poolFirstS.p50)} ms, initialize ${fmt(poolInitS.p50)} ms`,
      peer: `bubblewrap, new sandbox running \`true\`: ${fmt(bwTrue.p50)} ms; without a pool: first start ${fmt(firstNoPoolS.p50)} ms, initialize ${fmt(initS.p50)} ms`,
      ratio: `${(takeS.p50 / bwTrue.p50).toFixed(2)}x bubblewrap`,
      target: `at most 0.1x bubblewrap: ${takeS.p50 <= 0.1 * bwTrue.p50 ? 'met' : '**not met**'}` },
    { what: 'sandbox start after an idle stop, no pool (server\'s measure): taken from standby', ours: `${fmt(standbyR.logged.p50)} ms (p99 ${fmt(standbyR.logged.p99)}); through /mcp: first call ${fmt(standbyR.calls.p50)} ms`,
      peer: `bubblewrap, new sandbox running \`true\`: ${fmt(bwTrue.p50)} ms; ours without standby: ${fmt(coldS.p50)} ms; after \`stop-all\` (image mounted again): ${fmt(coldAllS.p50)} ms`, ratio: `${(standbyR.logged.p50 / bwTrue.p50).toFixed(2)}x (without standby ${(coldS.p50 / bwTrue.p50).toFixed(2)}x)`,
      target: `at most 0.5x bubblewrap: ${standbyR.logged.p50 <= 0.5 * bwTrue.p50 ? 'met' : '**not met**'}` },
    { what: 'sandbox cold start on the debian template (server\'s measure)', ours: `${fmt(coldDebS.p50)} ms (p99 ${fmt(coldDebS.p99)})`,
      peer: `the host template: ${fmt(coldS.p50)} ms`, ratio: `${(coldDebS.p50 / coldS.p50).toFixed(2)}x` },
  );
  log();
  log(`Ratios (p50, same run): exec of \`true\` through the whole stack is ${(execTrue.p50 / bwTrue.p50).toFixed(2)}x bubblewrap running it in a new sandbox, ${(execTrue.p50 / un.p50).toFixed(2)}x \`unshare\`, and ${(execTrue.p50 / plain.p50).toFixed(2)}x running it on the host with no sandbox; ${(execTrue.p50 - plain.p50).toFixed(2)} ms above the host floor, of which ${ping.p50.toFixed(2)} ms is the client and HTTP. A sandbox stopped when idle is taken from standby in ${(standbyR.logged.p50 / bwTrue.p50).toFixed(2)}x the time of a bubblewrap sandbox, and without standby starts again in ${(coldS.p50 / bwTrue.p50).toFixed(2)}x (${(coldAllS.p50 / bwTrue.p50).toFixed(2)}x after \`stop-all\`, which unmounts its disk image); a pooled one is handed over in ${(takeS.p50 / bwTrue.p50).toFixed(2)}x.`);
  log(`Target: exec of \`true\` p50 under 5 ms through the whole stack: ${execTrue.p50 < 5 ? 'met' : 'not met'} (${fmt(execTrue.p50)} ms).`);
  log();

  // Density: many idle sandboxes.
  log('### Density (idle sandboxes)');
  log();
  log('| sandboxes | host memory each MiB | init PSS each KiB | cgroup memory each MiB | server RSS MiB |');
  log('|---|---|---|---|---|');
  const avail = () => Number(readFileSync('/proc/meminfo', 'utf8').match(/^MemAvailable:\s+(\d+)/m)[1]) * 1024;
  cli(['sandbox', 'stop-all', '--data-dir', server.dataDir]);
  await new Promise((r) => setTimeout(r, 500));
  const base = avail();
  const counts = quick ? [1, 20] : [1, 50, 200];
  const tokens = [];
  let made = 0;
  for (const target of counts) {
    while (made < target) {
      const name = `bench${made}`;
      cli(['user', 'add', name, '--data-dir', server.dataDir]);
      const tok = cli(['token', 'create', '--user', name, '--data-dir', server.dataDir]).stdout.match(/smcp_\S+/)[0];
      tokens.push(tok);
      await call('container_exec', { command: 'true' }, tok);
      made++;
    }
    await new Promise((r) => setTimeout(r, 500));
    const pids = initPids(server.dataDir);
    const initPss = pids.reduce((a, p) => a + pss(p), 0) / Math.max(1, pids.length);
    const cg = cgroupMemory(instanceDirs());
    const perSandbox = (base - avail()) / target / MiB;
    log(`| ${target} | ${perSandbox.toFixed(2)} | ${(initPss / 1024).toFixed(0)} | ${(cg.total / Math.max(1, cg.count) / MiB).toFixed(2)} | ${(rss(server.proc.pid) / MiB).toFixed(1)} |`);
    if (target === counts[counts.length - 1])
      headline.push({ what: `idle sandboxes: host memory each, at ${target}`, ours: `${perSandbox.toFixed(2)} MiB (init ${(initPss / 1024).toFixed(0)} KiB PSS); server RSS ${(rss(server.proc.pid) / MiB).toFixed(1)} MiB`,
        target: `under 2 MiB: ${perSandbox < 2 ? 'met' : '**not met**'}` });
  }
  // The warm pool's sandboxes idle the same way: a second server keeps a pool of nPool.
  const nPool = quick ? 20 : 200;
  const settled = async () => {
    // MemAvailable moves by megabytes on its own: the median of a few readings, after the disk
    // images' pending writes (a burst of starts leaves many) are on disk
    spawnSync('sync');
    await sleep(1000);
    const v = [];
    for (let i = 0; i < 5; i++) { v.push(avail()); await sleep(100); }
    return v.sort((a, b) => a - b)[2];
  };
  // What cannot be reclaimed, by /proc/meminfo: processes' anonymous memory (less the server's
  // own), kernel objects, kernel stacks, page tables and tmpfs; and the threads each costs.
  const UNRECLAIMABLE = ['AnonPages', 'SUnreclaim', 'KernelStack', 'PageTables', 'Shmem'];
  const meminfo = () => Object.fromEntries(UNRECLAIMABLE.map((k) =>
    [k, Number(readFileSync('/proc/meminfo', 'utf8').match(new RegExp(`^${k}:\\s+(\\d+)`, 'm'))[1]) * 1024]));
  const anonOf = (pid) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/^RssAnon:\s+(\d+)/m)[1]) * 1024;
  const threads = () => readdirSync('/proc').filter((d) => /^\d+$/.test(d)).length;
  const base2 = await settled();
  const mem0 = meminfo(), threads0 = threads();
  const ps = await startServer({ env: { SANDBOX_MAX_RUNNING: '1000', SANDBOX_POOL: String(nPool), ...DISK } });
  let poolEach, hardEach, parts, threadsEach;
  try {
    while ((ps.stderr().match(/user=\(pool\)/g) || []).length < nPool) await sleep(100);
    poolEach = (base2 - (await settled()) - rss(ps.proc.pid)) / nPool / MiB;
    const mem1 = meminfo();
    parts = Object.fromEntries(UNRECLAIMABLE.map((k) => [k, (mem1[k] - mem0[k] - (k === 'AnonPages' ? anonOf(ps.proc.pid) : 0)) / nPool / 1024]));
    hardEach = Object.values(parts).reduce((a, b) => a + b, 0) / 1024;
    threadsEach = (threads() - threads0 - 1) / nPool;
    log(`| ${nPool}, a warm pool (\`SANDBOX_POOL=${nPool}\`, another server) | ${poolEach.toFixed(2)} | | | ${(rss(ps.proc.pid) / MiB).toFixed(1)} |`);
  } finally {
    await ps.stop();
  }
  headline.push({ what: `warm pool: host memory each idle pooled sandbox, at ${nPool}`, ours: `${poolEach.toFixed(2)} MiB (of which cannot be reclaimed: ${hardEach.toFixed(2)} MiB)`,
    target: `under 0.5 MiB: ${poolEach < 0.5 ? 'met' : '**not met**'}` });
  log();
  log('Host memory is the drop in MemAvailable per sandbox (everything: processes, mounts, page cache, kernel objects; for the pool, less the second server\'s own RSS). cgroup memory is what the kernel charges to the sandbox, including page cache of shared files it touched first.');
  log();
  log(`Of each pooled sandbox, what cannot be reclaimed (/proc/meminfo before and after, per sandbox): ${UNRECLAIMABLE.map((k) => `${k} ${parts[k].toFixed(0)} KiB`).join(', ')}; ${(hardEach * 1024).toFixed(0)} KiB in all, and ${threadsEach.toFixed(1)} processes or kernel threads (the init; the ext4 journal's thread and reserved-conversion worker of its disk image; the loop device's worker while it has one).`);
  writeHeadline(headline);
} finally {
  client.close();
  await server.stop();
}

if (process.env.BENCH_OUT) {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
}
