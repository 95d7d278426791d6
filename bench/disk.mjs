// Disk density: how many sandboxes of the default 10 GiB image one host's disk holds, idle and at
// work, with thin admission (the default: by what images hold, a reserve kept free and watched)
// and with strict admission (SANDBOX_DISK_ADMIT=strict: every running image could grow to its
// size). The data dir is on an ext4 filesystem of DISK_BENCH_GB (default 40) on a loop device of
// its own, so the host's own free space plays no part. Idle: a user's sandbox started with one
// command. At work: one that then writes DISK_BENCH_WORK_MB (default 256) of files and syncs.
// Each case starts sandboxes of new users one at a time, counting those running at once, until a
// start is refused (or, at work, the writer is paused) or an idle one is stopped to make room,
// up to DISK_BENCH_MAX (default 200, SANDBOX_MAX_RUNNING is set above it). A working sandbox keeps
// a process running, so it is never stopped to make room.
// Run: node bench/disk.mjs [--quick]   (as root; uses build/sandbox-mcp; loopback only)
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statfsSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeHeadline } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, addUserAsync, removeDataDir } = await import('../tests/lib/server.mjs');
const { call } = await import('../tests/lib/runs.mjs');

const quick = process.argv.includes('--quick');
const GB = Number(process.env.DISK_BENCH_GB || (quick ? 12 : 40));
const WORK_MB = Number(process.env.DISK_BENCH_WORK_MB || 256);
const MAX = Number(process.env.DISK_BENCH_MAX || (quick ? 40 : 200));
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };

const base = mkdtempSync('/var/tmp/smcp-disk-bench-');
const mnt = path.join(base, 'mnt');
mkdirSync(mnt);
execFileSync('truncate', ['-s', `${GB}G`, path.join(base, 'fs.img')]);
execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', path.join(base, 'fs.img')]);
execFileSync('mount', ['-o', 'loop', path.join(base, 'fs.img'), mnt]);
const freeMb = () => { const s = statfsSync(mnt); return (s.bavail * s.bsize) / 2 ** 20; };
const text = (r) => (r.content || []).map((c) => c.text || '').join('');

// Sandboxes of new users, one at a time, until one is refused (or paused): how many ran.
async function density(admit, work) {
  const dataDir = path.join(mnt, `${admit}-${work ? 'work' : 'idle'}`);
  mkdirSync(dataDir);
  const srv = await startServer({ dataDir, env: {
    SANDBOX_DISK_ADMIT: admit, SANDBOX_POOL: '0', SANDBOX_MAX_RUNNING: String(MAX + 8),
    SANDBOX_UID_RANGES: String(MAX + 64),
  } });
  const before = freeMb();
  let n = 0, why = `reached ${MAX}`, usedMb = 0;
  try {
    for (; n < MAX; n++) {
      const token = await addUserAsync(srv, `u${n}`);
      // at work: a process left running, so that the sandbox is busy and never stopped to make room
      const command = work ? `head -c ${WORK_MB}M /dev/zero > /workspace/work && sync -f /workspace/work && (nohup sleep 3600 >/dev/null 2>&1 &)` : 'true';
      const r = await call(srv, 'container_exec', { command, timeout_ms: 600000 }, token);
      if (r.isError || r.structuredContent?.exit_code !== 0) {
        why = (text(r) || r.structuredContent?.stderr || '').replace(/\s+/g, ' ').slice(0, 160);
        break;
      }
      // an idle sandbox stopped to make room for this one: the disk holds no more at once
      if (/reason=evicted \(disk room\)/.test(srv.stderr())) {
        why = 'an idle sandbox was stopped to make room for the next';
        break;
      }
    }
  } finally {
    usedMb = before - freeMb();
    await srv.stop();
    removeDataDir(dataDir);
  }
  return { n, why, usedMb };
}

try {
  const fsMb = freeMb();
  const rows = [];
  for (const admit of ['strict', 'thin'])
    for (const work of [false, true]) {
      const r = await density(admit, work);
      rows.push({ admit, work, ...r });
      console.error(`${admit} ${work ? 'working' : 'idle'}: ${r.n} (${r.why})`);
    }
  const get = (admit, work) => rows.find((r) => r.admit === admit && r.work === work);
  log('## Disk density');
  log();
  log(`\`node bench/disk.mjs\`: ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; the data dir on an ext4 filesystem of ${GB} GiB`);
  log(`(${fsMb.toFixed(0)} MiB free) on a loop device; sandboxes of the default 10 GiB image (\`SANDBOX_DISK_MB=10240\`), one`);
  log(`user each, started one at a time until a start is refused, up to ${MAX}. Idle: one command run. At`);
  log(`work: each then writes ${WORK_MB} MiB and syncs it. Thin keeps its default reserve (5% of the filesystem).`);
  log();
  log('| admission | idle sandboxes at once | what stopped it | working sandboxes at once | what stopped it |');
  log('|---|---|---|---|---|');
  // what ended each case, in short
  const ended = (why) => (/stopped to make room/.test(why) ? 'an idle one stopped to make room for the next'
    : /would overcommit/.test(why) ? 'the next refused: the running images could outgrow the free space'
      : /nearly full: /.test(why) ? 'the next refused: the free space at the reserve'
        : /is paused/.test(why) ? 'the last writer paused at the reserve'
          : /^reached/.test(why) ? 'the bench\'s cap' : why);
  for (const admit of ['strict', 'thin']) {
    const idle = get(admit, false), busy = get(admit, true);
    log(`| ${admit} | ${idle.n} | ${ended(idle.why)} | ${busy.n} | ${ended(busy.why)} |`);
  }
  const per = get('thin', false).usedMb / Math.max(1, get('thin', false).n);
  const reserve = Math.min(Math.max(fsMb / 20, 256), 4096, fsMb / 10);
  log();
  log(`Strict admits by what the images could grow to, so idle and working hold the same (a host with 73 GB free`);
  log(`runs 7), and past that idle ones are stopped. Thin admits by what they hold: an idle sandbox's image took`);
  log(`${per.toFixed(1)} MiB, so this disk has room for about ${Math.floor((fsMb - reserve) / Math.max(per, 0.1))} idle ones above its ${reserve.toFixed(0)} MiB reserve (\`SANDBOX_MAX_RUNNING\`,`);
  log('64 by default, binds first), and working ones take what they wrote: the disk bounds density by real use,');
  log('and the reserve is kept (the disk never filled).');
  writeHeadline([{
    what: `Disk density: sandboxes of 10 GiB images on a ${GB} GiB disk (idle / each writing ${WORK_MB} MiB)`,
    ours: `thin: ${get('thin', false).n} / ${get('thin', true).n}`,
    peer: `strict: ${get('strict', false).n} / ${get('strict', true).n}`,
    ratio: `${(get('thin', true).n / Math.max(1, get('strict', true).n)).toFixed(0)}x working`,
    target: 'density bounded by real use',
  }]);
  if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
} finally {
  spawnSync('umount', ['-l', mnt]);
  rmSync(base, { recursive: true, force: true });
}
