// The soak's short form (tests/lib/soak.mjs; `make soak` runs it for an hour on the release
// build): every kind of load it makes, against the sanitized build, for 36 seconds and then once
// more for half as long, its runs made by Codex (the hour's, by OpenCode). No call may fail and
// each kind of work must get done; every sample must be read; the store must be sound
// afterwards. And what the server holds once a load is over and its sandboxes have stopped is
// the same after the second load as after the first: the pools that start at first use are warm
// by then, so anything that grew was left behind by the second load's calls and runs, as it
// would pile up over an hour. The slopes are printed, not judged: a few minutes are a warm-up's
// length, and the hour's run is where they count.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSoak, slopes } from '../lib/soak.mjs';
import { sqlRowsAsync } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';
import * as runs from '../lib/runs.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A load that has not ended long after its minutes has a call that was never answered: fail with
// the end of the server's log rather than wait for ever.
async function bounded(s, minutes) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`a ${minutes}-minute load still going after ${minutes + 4} minutes\n` +
      `--- server log ---\n${s.server.stderr().slice(-12000)}`)), (minutes + 4) * 60000);
  });
  try {
    return await Promise.race([s.load(minutes), late]);
  } finally {
    clearTimeout(timer);
  }
}

test('the soak, short: no call fails, each kind of work gets done, the store is sound, and a second load leaves no descriptor or thread behind', async () => {
  const s = await startSoak({ sampleSeconds: 3, clients: 16, users: 3, runGapMs: 2000, idleSeconds: 8, thinkMs: 500,
    agent: 'codex' });
  // once its sandboxes have stopped and the load's connections have closed: the fewest
  // descriptors and threads seen over a few samples
  const atRest = async () => {
    await runs.until(async () => (await s.sample()).sandboxes === 0, 'every sandbox idle and stopped', 120000);
    let least = { fds: Infinity, threads: Infinity };
    for (let i = 0; i < 5; i++) {
      const x = await s.sample();
      least = { fds: Math.min(least.fds, x.fds), threads: Math.min(least.threads, x.threads) };
      await sleep(1000);
    }
    return least;
  };
  try {
    const first = await bounded(s, 0.6);
    assert.deepEqual(first.errors, []);
    const counts = { ...first.counts };
    for (const [what, n] of Object.entries(counts)) assert.ok(n > 0, `no ${what} done: ${JSON.stringify(counts)}`);
    assert.equal(counts.delivered, counts.runs, JSON.stringify(counts));
    assert.ok(first.samples.length >= 8, `${first.samples.length} samples`);
    for (const x of first.samples)
      for (const k of ['rss', 'fds', 'threads', 'lag', 'store', 'wal', 'disk']) assert.ok(Number.isFinite(x[k]) && x[k] >= 0, `${k} in ${JSON.stringify(x)}`);
    console.log(JSON.stringify(slopes(first.samples, counts.runs).map((x) => ({ name: x.name, perMinute: x.perMinute, unit: x.unit }))));
    const rest1 = await atRest();

    const second = await bounded(s, 0.3);
    assert.deepEqual(second.errors, []);
    for (const [what, n] of Object.entries(second.counts)) assert.ok(n > counts[what], `no more ${what} done: ${JSON.stringify(second.counts)}`);
    let rest2 = {};
    await runs.until(async () => {
      rest2 = await atRest();
      return rest2.fds <= rest1.fds + 2 && rest2.threads <= rest1.threads;
    }, () => `after the second load ${JSON.stringify(rest2)}, after the first ${JSON.stringify(rest1)}`, 60000);

    console.log(`at rest after the first load ${JSON.stringify(rest1)}, after the second ${JSON.stringify(rest2)}`);
    const [check] = await sqlRowsAsync(s.server, 'PRAGMA integrity_check');
    assert.equal(Object.values(check)[0], 'ok');
  } finally {
    const stderr = s.server.stderr();
    await s.stop();
    assertNoSanitizerReport(stderr);
  }
});
