// Sandbox benchmarks: container_exec latency through /mcp, cold start, initialize, density,
// and the same work done by bubblewrap and unshare on the same machine.
// Run: node bench/sandbox.mjs [--quick]   (as root; uses build/sandbox-mcp, bwrap, unshare)
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarize, timeIt, fmt, mcpClient, spawnTimes, writeHeadline } from './lib.mjs';

// The release build unless told otherwise (the tests default to the sanitized one).
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, cli, debianTemplate } = await import('../tests/lib/server.mjs');

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
log();
log('| what | runs | p50 ms | p99 ms | min ms | notes |');
log('|---|---|---|---|---|---|');

const headline = [];
const server = await startServer({ env: { SANDBOX_MAX_RUNNING: '1000' } });
const client = mcpClient(server);
const call = (name, args, token) => client.call(name, args, token);
try {
  await call('container_exec', { command: 'true' });
  for (let i = 0; i < 20; i++) await call('container_exec', { command: 'true' });
  const t = [];
  for (let i = 0; i < N; i++) t.push(await timeIt(() => call('container_exec', { command: 'true' })));
  const execTrue = summarize(t);
  row('`container_exec` of `true` through /mcp (HTTP, JSON-RPC, auth, the sandbox\'s init starts `true`)', execTrue);
  const pings = [];
  for (let i = 0; i < N; i++) pings.push(await timeIt(() => client.ping()));
  const ping = summarize(pings);
  row('MCP `ping` through the same client (the client\'s and HTTP\'s share of each call)', ping);

  const big = [];
  for (let i = 0; i < Math.min(N, 100); i++) big.push(await timeIt(() => call('container_exec', { command: 'head -c 1048576 /dev/zero | tr "\\0" a' })));
  const bigS = summarize(big);
  row('`container_exec` printing 1 MiB through /mcp (captured, kept in the sandbox, head and tail returned)', bigS);

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
    const m = server.stderr().slice(before).match(/sandbox started .* ms=(\d+)/);
    if (m) coldLog.push(Number(m[1]));
  }
  const coldS = summarize(coldLog);
  row('cold start: first `container_exec` after the sandbox was stopped', summarize(cold), 'start and exec');
  row('cold start as logged by the server (start only)', coldS, 'peer: the bubblewrap row above');
  // The same on the debian template, the default (the rows above run on the host template).
  const deb = await startServer({ env: { ...(await debianTemplate()), SANDBOX_MAX_RUNNING: '1000' } });
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
      const m = deb.stderr().slice(before).match(/sandbox started .* template=debian .* ms=(\d+)/);
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
  row('`container_initialize` (kill, wipe layer and workspace, new disk, start)', initS);
  headline.push(
    { what: '`container_exec` of `true` through /mcp', ours: `${fmt(execTrue.p50)} ms (p99 ${fmt(execTrue.p99)})`,
      peer: `bubblewrap, new sandbox: ${fmt(bwTrue.p50)} ms; \`unshare\`: ${fmt(un.p50)} ms; host, no sandbox: ${fmt(plain.p50)} ms`,
      ratio: `${(execTrue.p50 / bwTrue.p50).toFixed(2)}x bubblewrap, ${(execTrue.p50 / plain.p50).toFixed(2)}x host`,
      target: `under 5 ms: ${execTrue.p50 < 5 ? 'met' : '**not met**'}` },
    { what: '`container_exec` printing 1 MiB through /mcp', ours: `${fmt(bigS.p50)} ms`,
      peer: `bubblewrap, output to /dev/null: ${fmt(bwBig.p50)} ms`, ratio: `${(bigS.p50 / bwBig.p50).toFixed(2)}x (ours captures and returns it)` },
    { what: 'sandbox cold start (server\'s measure)', ours: `${fmt(coldS.p50)} ms (p99 ${fmt(coldS.p99)})`,
      peer: `bubblewrap, new sandbox running \`true\`: ${fmt(bwTrue.p50)} ms`, ratio: `${(coldS.p50 / bwTrue.p50).toFixed(2)}x`,
      target: `under 30 ms: ${coldS.p50 < 30 ? 'met' : '**not met**'}` },
    { what: 'sandbox cold start on the debian template (server\'s measure)', ours: `${fmt(coldDebS.p50)} ms (p99 ${fmt(coldDebS.p99)})`,
      peer: `the host template: ${fmt(coldS.p50)} ms`, ratio: `${(coldDebS.p50 / coldS.p50).toFixed(2)}x` },
    { what: '`container_initialize` (new disk, start)', ours: `${fmt(initS.p50)} ms (p99 ${fmt(initS.p99)})` });
  log();
  log(`Ratios (p50, same run): exec of \`true\` through the whole stack is ${(execTrue.p50 / bwTrue.p50).toFixed(2)}x bubblewrap running it in a new sandbox, ${(execTrue.p50 / un.p50).toFixed(2)}x \`unshare\`, and ${(execTrue.p50 / plain.p50).toFixed(2)}x running it on the host with no sandbox; ${(execTrue.p50 - plain.p50).toFixed(2)} ms above the host floor, of which ${ping.p50.toFixed(2)} ms is the client and HTTP. A stopped sandbox starts in ${(summarize(coldLog).p50 / bwTrue.p50).toFixed(2)}x the time of a bubblewrap sandbox.`);
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
  log();
  log('Host memory is the drop in MemAvailable per sandbox (everything: processes, mounts, page cache, kernel objects). cgroup memory is what the kernel charges to the sandbox, including page cache of shared files it touched first.');
  writeHeadline(headline);
} finally {
  client.close();
  await server.stop();
}

if (process.env.BENCH_OUT) {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
}
