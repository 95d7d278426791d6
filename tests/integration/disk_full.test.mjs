// The data dir's disk filling up (src/sandbox/diskwatch.c, admit.c, the init's relay, the store's
// reserve). The data dir is on a small ext4 filesystem of the test's own, on a loop device, so
// that filling it touches nothing else: sandbox images there are sparse, admitted thin (by what
// they hold) with a reserve kept free. A sandbox writing the disk down to its reserve is paused
// and its calls say why, new sandboxes are refused saying why, and all resumes once the
// operator frees space. A disk filled to its last block by something else: the run whose
// agent's output cannot be kept fails saying so, a sandbox whose image met write errors says
// why its writes fail and is repaired by its next start, the store stays sound, and once space
// returns all works again without a restart.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync, statfsSync, unlinkSync, existsSync } from 'node:fs';
import path from 'node:path';

import { startServer, tempDir, removeDataDir, addUser } from '../lib/server.mjs';
import { call, ok, finished, until } from '../lib/runs.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const MIB = 1 << 20;
const METRICS_TOKEN = 'disk-full-metrics-token-0123456789';
const metrics = async (srv) => (await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
const FS_MB = 1536;
const RESERVE_MB = 384;

let base, mnt, fake, router;

before(async () => {
  base = tempDir('smcp-diskfull-');
  mnt = path.join(base, 'mnt');
  mkdirSync(mnt);
  execFileSync('truncate', ['-s', `${FS_MB}M`, path.join(base, 'fs.img')]);
  execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', path.join(base, 'fs.img')]);
  execFileSync('mount', ['-o', 'loop', path.join(base, 'fs.img'), mnt]);
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
});

after(async () => {
  await fake?.close();
  spawnSync('umount', ['-l', mnt]);
  rmSync(base, { recursive: true, force: true });
});

const text = (res) => (res.content || []).map((c) => c.text || '').join('');
const freeMb = () => { const s = statfsSync(mnt); return (s.bavail * s.bsize) / MIB; };

// Something else on the host takes the disk: a file of the test's own, `mb` MiB.
function fill(name, mb) {
  execFileSync('fallocate', ['-l', `${Math.floor(mb)}M`, path.join(mnt, name)]);
}
// ... down to its last block.
function fillAll(name) {
  const f = path.join(mnt, name);
  spawnSync('fallocate', ['-l', `${Math.floor(freeMb())}M`, f]);
  spawnSync('sh', ['-c', `dd if=/dev/zero of=${f}.tail bs=4k 2>/dev/null; sync`]);
}

// A sandbox's cgroups: under the v1 freezer and memory hierarchies, or v2's one group (found
// where it is); frozen() reads its state.
function frozenGroup(id) {
  const find = (ctrl) => execFileSync('sh', ['-c', `ls -d /sys/fs/cgroup/${ctrl}/sandbox-mcp/*/${id} 2>/dev/null || true`], { encoding: 'utf8' }).trim();
  const v1 = find('freezer');
  if (v1) return { freezer: v1, memory: find('memory'), frozen: () => readFileSync(path.join(v1, 'freezer.state'), 'utf8').trim() === 'FROZEN' };
  const v2 = execFileSync('sh', ['-c', `find /sys/fs/cgroup -maxdepth 8 -type d -name ${id} 2>/dev/null | head -n 1`], { encoding: 'utf8' }).trim();
  return { freezer: v2, memory: v2, frozen: () => /^frozen 1$/m.test(readFileSync(path.join(v2, 'cgroup.events'), 'utf8')) };
}
const procs = (dir) => readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').trim().split('\n').filter(Boolean).map(Number).sort((a, b) => a - b);

async function withServer(env, fn) {
  const dataDir = path.join(mnt, `data-${Date.now()}`);
  mkdirSync(dataDir);
  const srv = await startServer({
    dataDir,
    env: { ANTHROPIC_API_KEY: 'sk-ant-disk-full', ANTHROPIC_BASE_URL: fake.url, SANDBOX_DISK_RESERVE_MB: String(RESERVE_MB), METRICS_TOKEN, ...env },
  });
  try {
    return await fn(srv);
  } finally {
    const stderr = srv.stderr();
    await srv.stop();
    removeDataDir(dataDir);
    assertNoSanitizerReport(stderr);
  }
}

// A writer at about 100 MiB/s at most, each MiB straight to the image (no page cache between),
// so that the watcher's once-a-second look sees the disk go down in steps smaller than the
// reserve; it leaves /workspace/written when done.
const writer = (mb) => `i=0; while [ $i -lt ${mb} ]; do dd if=/dev/zero of=/workspace/big bs=1M count=4 seek=$i conv=notrunc oflag=direct status=none || exit 1; i=$((i+4)); sleep 0.04; done; touch /workspace/written`;

test('thin admission: images larger than the free space start; the sandbox writing the disk down to its reserve is paused and says why, new ones are refused, and all resumes once space is freed', async () => {
  await withServer({ SANDBOX_DISK_MB: String(2 * FS_MB), SANDBOX_POOL: '1' }, async (srv) => {
    const bob = addUser(srv, 'bob');
    // thin: two images each larger than the whole filesystem start
    assert.equal((await ok(srv, 'container_exec', { command: 'echo a' })).stdout, 'a\n');
    assert.equal((await ok(srv, 'container_exec', { command: 'echo b' }, bob)).stdout, 'b\n');
    await srv.waitLog(/sandbox started sbx=\S+ user=\(pool\)/);
    // something else takes the disk down to 300 MiB above the reserve
    fill('other', freeMb() - RESERVE_MB - 300);
    // the writer goes past the reserve: paused, its call answered with the reason
    const paused = await call(srv, 'container_exec', { command: writer(600), timeout_ms: 120000 });
    assert.equal(paused.isError, true, JSON.stringify(paused));
    assert.match(text(paused), /this sandbox is paused: the server's disk is nearly full \(\d+ MiB free, 384 MiB kept in reserve\) and it was writing the most/);
    const [, pausedId] = await srv.waitLog(/sandbox paused sbx=(\S+) user=\S+ grew_mb=\d+/);
    // frozen: every process of its group (the writer among them) in a frozen freezer group. The
    // kernel reports FREEZING until each task has stopped, and a writer in the middle of a write
    // to a nearly full disk stops only once that write returns: with the host's disk busy writing
    // back, once seen after more than a minute, so the bound is far beyond that.
    const cg = frozenGroup(pausedId);
    await until(() => cg.frozen(), () => `${cg.freezer} frozen (${readFileSync(path.join(cg.freezer, cg.freezer.includes('/freezer/') ? 'freezer.state' : 'cgroup.events'), 'utf8').trim()})`, 300000);
    assert.deepEqual(procs(cg.freezer), procs(cg.memory));
    assert.ok(procs(cg.freezer).length >= 2, 'its init and the writer');
    await srv.waitLog(/disk low free_mb=\d+ reserve_mb=384/);
    assert.ok(freeMb() > 0, 'the disk kept room');
    // its next calls say the same; the idle sandbox was stopped and cannot start again; the
    // pool gave its image back
    assert.match(text(await call(srv, 'container_exec', { command: 'true' })), /this sandbox is paused/);
    await srv.waitLog(/sandbox stopped sbx=\S+ user=\S+ reason=disk low/);
    await srv.waitLog(/sandbox removed sbx=\S+ user= reason=disk low/);
    const refused = await call(srv, 'container_exec', { command: 'echo b' }, bob);
    assert.equal(refused.isError, true, JSON.stringify(refused));
    assert.match(text(refused), /the server's disk is nearly full: \d+ MiB free, of which it keeps 384 MiB in reserve/);
    assert.match(await metrics(srv), /^sandbox_mcp_sandboxes_paused 1$/m);
    // /healthz: degraded, still 200 (the server serves), and why
    const low = await fetch(`${srv.url}/healthz`);
    assert.equal(low.status, 200);
    const lowBody = await low.json();
    assert.equal(lowBody.status, 'degraded');
    assert.equal(lowBody.database, true);
    assert.equal(lowBody.disk.low, true);
    assert.equal(lowBody.disk.paused, 1);
    // whether, not how much: the bytes are on /metrics, behind its token
    assert.deepEqual(Object.keys(lowBody.disk).sort(), ['low', 'paused']);
    assert.match(await metrics(srv), /^sandbox_mcp_disk_free_bytes \d+/m);
    // the operator frees space: the writer goes on where it was and finishes
    unlinkSync(path.join(mnt, 'other'));
    await srv.waitLog(/disk room again free_mb=\d+ reserve_mb=384 paused=1/);
    await until(async () => (await call(srv, 'container_exec', { command: 'test -e /workspace/written' })).structuredContent?.exit_code === 0,
      'the paused writer finished', 120000);
    const size = await ok(srv, 'container_exec', { command: 'stat -c %s /workspace/big' });
    assert.equal(Number(size.stdout), 600 * MIB);
    assert.equal((await ok(srv, 'container_exec', { command: 'echo b' }, bob)).stdout, 'b\n');
    assert.match(await metrics(srv), /^sandbox_mcp_sandboxes_paused 0$/m);
    const back = await (await fetch(`${srv.url}/healthz`)).json();
    assert.equal(back.status, 'ok');
    assert.equal(back.disk.low, false);
  });
});

test('a sandbox filling its own image fills only it: its writes find its image full, the host keeps its room, and other sandboxes carry on', async () => {
  await withServer({ SANDBOX_DISK_MB: '256' }, async (srv) => {
    const bob = addUser(srv, 'bob');
    const before = freeMb();
    const r = await ok(srv, 'container_exec', { command: 'dd if=/dev/zero of=/workspace/big bs=1M count=4096 2>&1 | grep -o "No space left on device"; sync' });
    assert.equal(r.stdout, 'No space left on device\n');
    assert.ok(before - freeMb() < 300, `the host gave ${before - freeMb()} MiB`);
    assert.equal((await ok(srv, 'container_exec', { command: 'echo b' }, bob)).stdout, 'b\n');
    assert.doesNotMatch(srv.stderr(), /disk low|sandbox paused/);
  });
});

test('strict admission (SANDBOX_DISK_ADMIT=strict) still refuses an image that could outgrow the free space', async () => {
  await withServer({ SANDBOX_DISK_MB: String(2 * FS_MB), SANDBOX_DISK_ADMIT: 'strict' }, async (srv) => {
    const refused = await call(srv, 'container_exec', { command: 'true' });
    assert.equal(refused.isError, true, JSON.stringify(refused));
    assert.match(text(refused), /would overcommit it/);
  });
});

test('a disk filled to its last block: the run whose output cannot be kept fails saying so, a sandbox whose image failed says why and is repaired, the store stays sound, and once space returns all works without a restart', async () => {
  await withServer({ SANDBOX_DISK_MB: '256', SANDBOX_DISK_RESERVE_MB: '1' }, async (srv) => {
    // a sandbox with a file in it, kept busy (an idle one is stopped when the disk runs low),
    // and a run held at its model
    await ok(srv, 'container_exec', { command: 'echo kept > /workspace/kept; sync; nohup sleep 600 >/dev/null 2>&1 & echo $! > /tmp/bg.pid' });
    const script = router.add('dfull-1', [
      { hold: true, tool: 'bash', input: { command: 'echo out', description: 'Print' } },
      { text: 'Printed it.' },
    ]);
    const started = await ok(srv, 'run_task', { task: 'dfull-1: print' });
    await script.waitHeld();
    fillAll('other');
    // the agent's output finds no room: the run fails saying why
    script.release();
    const done = await finished(srv, started.run_id);
    assert.equal(done.status, 'failed', JSON.stringify(done));
    assert.match(done.status_reason, /the server's disk (is nearly full|is full|filled up)/);
    // a write that needs room fails, and its call says why (taking again first what the
    // watcher's trim of the images gave back). When the watcher looks while the write still
    // finds a few blocks the trim gave back, the image grew and the sandbox is paused instead,
    // as the busiest writer under the reserve: that answer says why as well. Room is then given
    // back, the sandbox resumes, and the disk is filled and the write tried again.
    const fills = () => readdirSync(mnt).filter((f) => /^(other|again\d+|more\d+)(\.tail)?$/.test(f));
    let fill = 0;
    const wrote = await until(async () => {
      fillAll(`again${fill++}`);
      const r = await call(srv, 'container_exec', { command: 'dd if=/dev/zero of=/workspace/x bs=1M count=64 conv=fsync status=none' });
      if (!/this sandbox is paused: the server's disk is nearly full/.test(text(r))) return r;
      for (const f of fills()) unlinkSync(path.join(mnt, f));
      await until(async () => !/this sandbox is paused/.test(text(await call(srv, 'container_exec', { command: 'true' }))),
        'the paused sandbox resumed once room was back', 30000);
      return null;
    }, 'a write refused for want of room rather than paused', 120000);
    assert.notEqual(wrote.structuredContent?.exit_code, 0, JSON.stringify(wrote));
    assert.ok(wrote.structuredContent.note, `${JSON.stringify(wrote)}\nfree ${freeMb()} MiB\n--- server log ---\n${srv.stderr().slice(-4000)}`);
    assert.match(wrote.structuredContent.note, /the server's disk (is nearly full \(\d+ MiB free|was nearly full in the last minute|filled up)/);
    assert.match(text(wrote), /note: .*the server's disk/);
    // new metadata the image cannot place (its journal and inode tables are sparse too) makes
    // the kernel keep its filesystem read-only: the calls say so
    // (each round takes again first what was given back meanwhile: the store's reserve, the
    // watcher's trims)
    let round = 0;
    const ro = await until(async () => {
      fillAll(`more${round++}`);
      const r = await call(srv, 'container_exec', { command: 'i=0; while [ $i -lt 400 ]; do mkdir -p /workspace/m/$i.$$ || exit 1; i=$((i+1)); done; sync; touch /workspace/y' });
      return /stopped taking writes/.test(r.structuredContent?.note) ? r : null;
    }, 'the image read-only', 90000);
    assert.match(ro.structuredContent.stderr, /Read-only file system/);
    assert.match(ro.structuredContent.note, /this sandbox's disk stopped taking writes when the server's disk filled up/);
    assert.match(text(ro), /note: this sandbox's disk stopped taking writes/);
    // the store is sound
    const db = path.join(srv.dataDir, 'sandbox-mcp.db');
    if (existsSync(db))
      assert.equal(execFileSync('sqlite3', [db, 'PRAGMA integrity_check'], { encoding: 'utf8' }).trim(), 'ok');
    // space returns: no restart; the failed image is checked at its next start and keeps its files
    for (const f of fills()) unlinkSync(path.join(mnt, f));
    await ok(srv, 'container_exec', { command: 'p=$(cat /tmp/bg.pid); kill $p; while kill -0 $p 2>/dev/null; do sleep 0.05; done' });
    // this sandbox's stop: the run's may have failed and stopped too, sooner
    const sbx = ro.structuredContent.sandbox_id;
    await srv.waitLog(new RegExp(`sandbox stopped sbx=${sbx} user=\\S+ reason=disk failed`));
    const back = await ok(srv, 'container_exec', { command: 'cat /workspace/kept; touch /workspace/y && echo writable' });
    assert.equal(back.stdout, 'kept\nwritable\n', `${JSON.stringify(back)}\nfree ${freeMb()} MiB\n--- server log ---\n${srv.stderr().slice(-4000)}`);
    router.add('dfull-2', [{ text: 'Fine now.' }]);
    const again = await ok(srv, 'run_task', { task: 'dfull-2: anything' });
    assert.equal((await finished(srv, again.run_id)).status, 'succeeded');
    if (existsSync(db))
      assert.equal(execFileSync('sqlite3', [db, 'PRAGMA integrity_check'], { encoding: 'utf8' }).trim(), 'ok');
  });
});
