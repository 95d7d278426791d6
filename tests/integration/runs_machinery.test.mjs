// The run machinery behind run_task, get_result, list_runs and cancel_run, with Codex
// (runs.codexEnv) as the agent, which starts in well under a second where OpenCode takes seconds
// of CPU: what a run is given to work on (an empty repository, a HEAD naming no branch, a clone
// that fails, a session that moves between repositories), how runs are listed and paged, and how
// a run is cancelled or timed out. OpenCode's own part of a run (its events,
// its phases, its key, a restart mid-run) is in runs.test.mjs. The scripted fake upstream
// (tests/lib/fake-anthropic.mjs, agentRouter) answers in OpenAI's Responses API; each run's task
// carries a marker that routes its requests to its own script, so runs of different tests go on
// at once.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { startServer, tempDir, sqlRowsAsync as sql, addUserAsync as addUser } from '../lib/server.mjs';
import { bareRepo, gitAsync } from '../lib/git.mjs';
import * as runs from '../lib/runs.mjs';
import { codexEnv, refused, sessionGroup } from '../lib/runs.mjs';
import { startFake, agentRouter, toolResults, userTexts } from '../lib/fake-anthropic.mjs';

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
// `git commit` in the sandbox without relying on a configured identity
const COMMIT = 'git -c user.name=Agent -c user.email=agent@example.com commit -q';

let fake, router, server, scratch;
const repos = {};

// ---- helpers --------------------------------------------------------------------------------

// The calls of tests/lib/runs.mjs; as: {token} to call as another user.
const ok = (srv, name, args, as) => runs.ok(srv, name, args, as?.token || srv.token);
const waitRun = (srv, runId, { token, tool } = {}) => runs.finished(srv, runId, token || srv.token, tool);

async function runTask(srv, args, as) {
  const r = await ok(srv, 'run_task', args, as);
  assert.match(r.run_id, /\S/);
  assert.match(r.session_id, /\S/);
  assert.ok(r.status === 'queued' || r.status === 'running', JSON.stringify(r));
  return r;
}

const q = (s) => `'${String(s).replace(/'/g, "''")}'`;

// A run's stored events: seq 1..n without gaps, each with a summary and a time.
async function events(srv, runId) {
  const rows = await sql(srv, `SELECT seq, time, type, summary FROM run_events WHERE run_id = ${q(runId)} ORDER BY seq`);
  rows.forEach((e, i) => {
    assert.equal(e.seq, i + 1, `event seq not contiguous: ${rows.map((x) => x.seq).join(',')}`);
    assert.equal(typeof e.summary, 'string');
    assert.ok(Number.isInteger(e.time) && e.time > 0, JSON.stringify(e));
  });
  return rows;
}

// A bare repository <name>/<name>.git with main (one commit, README.md, the default branch) and
// feature (one more commit adding feature.txt).
const repo = (name) => bareRepo(path.join(scratch, name, `${name}.git`), { feature: true });

// A bare repository <name>.git without a commit, whose HEAD names head.
async function emptyRepo(name, head) {
  const bare = path.join(scratch, `${name}.git`);
  await gitAsync(['init', '-q', '--bare', bare]);
  await gitAsync(['symbolic-ref', 'HEAD', `refs/heads/${head}`], bare);
  return bare;
}

// repo(name) with exactly the given branches (each at main's commit unless it is feature),
// and its HEAD naming master, a branch it does not have.
async function headlessRepo(name, branches) {
  const bare = await repo(name);
  for (const b of branches) if (b !== 'main' && b !== 'feature') await gitAsync(['branch', b, 'main'], bare);
  await gitAsync(['symbolic-ref', 'HEAD', 'refs/heads/master'], bare);
  for (const b of ['main', 'feature']) if (!branches.includes(b)) await gitAsync(['branch', '-D', b], bare);
  return bare;
}

function closedPort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// ---- setup ----------------------------------------------------------------------------------

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  // four runs at a time for a user, so that a test's waits start when its runs can; each
  // sandbox's disk small as the server counts room, so that idle sessions are not stopped for it
  server = await startServer({ env: { ...codexEnv(fake.url), RUNS_ALLOW_LOCAL_REPOS: '1',
    RUNS_MAX_RUNNING_PER_USER: '4', SANDBOX_DISK_MB: '2048' } });
  scratch = tempDir('smcp-runs-codex-');
});

after(async () => {
  await server?.stop();
  await fake?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// The admin's runs that need a session of their own neither for a repository nor for a
// conversation (the cancel, the timeout) go on in one session without repository, one at a time,
// each with its own deadline from its start.
let shared;
async function runShared(srv, args) {
  if (!shared) {
    const made = runTask(srv, args);
    shared = made.then((r) => r.session_id);
    return made;
  }
  const session_id = await shared;
  const r = await runTask(srv, { ...args, session_id });
  assert.equal(r.session_id, session_id);
  return r;
}

describe('runs', { concurrency: 4 }, () => {
  // The runs of these tests go on in one session (sessionGroup): a session moves between
  // repositories, and each test's first run names the repository it works in, so no test depends
  // on where another left the session. The tests go one at a time, so that each has the session
  // to itself and its runs go in the order it asks for them: a run without repository works where
  // the session's newest run does.
  describe('in one session that each test moves to its own repositories', { concurrency: 1 }, () => {
    const group = sessionGroup(() => server, 'repo-moves', runTask);
    const inSession = group.run;

    test('an empty repository: the agent starts from nothing; its commits and files are the changes', async () => {
      const blank = await emptyRepo('blank', 'trunk');
      const s1 = router.add('blank-1', [
        { tool: 'write', input: { filePath: '/workspace/blank/notes.txt', content: 'first\nsecond\n' } },
        { tool: 'bash', input: { command: `git add notes.txt && ${COMMIT} -m "Start notes" && echo draft > draft.txt && git branch --show-current && ls -A`,
          description: 'Commit the notes' } },
        { text: 'Started the notes.' },
      ]);
      // with branch, that branch; and no commit at all
      const s2 = router.add('void-1', [
        { tool: 'bash', input: { command: 'git symbolic-ref --short HEAD && echo x > a.txt', description: 'Where am I' } },
        { text: 'Wrote a.txt.' },
      ]);
      // asked for one after the other, so that they go in that order: blank's run is the
      // session's last, which the third run below goes on from
      const b = await inSession({ task: 'void-1: write a.txt', repository: await emptyRepo('void', 'main'), branch: 'dev' });
      const a = await inSession({ task: 'blank-1: start the notes', repository: blank });
      const [ra, rb] = await Promise.all([waitRun(server, a.run_id, group.as), waitRun(server, b.run_id, group.as)]);
      let diag = JSON.stringify(ra, null, 1);
      assert.equal(ra.status, 'succeeded', diag);
      assert.equal(ra.branch, 'trunk', diag); // as the remote's HEAD names it
      assert.equal(toolResults(s1.requests[2].body).at(-1).text, 'trunk\n.git\ndraft.txt\nnotes.txt\n');
      assert.equal(ra.changes.branch, 'trunk', diag);
      assert.deepEqual(ra.changes.files.map(({ path: p, insertions, deletions }) => ({ path: p, insertions, deletions })),
        [{ path: 'draft.txt', insertions: 1, deletions: 0 }, { path: 'notes.txt', insertions: 2, deletions: 0 }], diag);
      assert.equal(ra.changes.files_changed, 2, diag);
      assert.equal(ra.changes.insertions, 3, diag);
      assert.deepEqual(ra.changes.commits.map((c) => c.message), ['Start notes'], diag);
      const [rowA] = await sql(server, `SELECT base_commit, workdir FROM runs WHERE id = ${q(a.run_id)}`);
      assert.deepEqual(rowA, { base_commit: null, workdir: '/workspace/blank' }); // no starting commit

      diag = JSON.stringify(rb, null, 1);
      assert.equal(rb.status, 'succeeded', diag);
      assert.equal(rb.branch, 'dev', diag);
      assert.equal(toolResults(s2.requests[1].body).at(-1).text, 'dev\n');
      assert.deepEqual(rb.changes.files.map((f) => f.path), ['a.txt'], diag);
      assert.deepEqual(rb.changes.commits, [], diag);
      assert.equal(rb.changes.branch, 'dev', diag);

      // the same session again, without repository: it goes on in blank from the first run's commit
      const s3 = router.add('blank-2', [
        { tool: 'bash', input: { command: `echo third >> notes.txt && ${COMMIT} -a -m "More notes"`, description: 'Commit more' } },
        { text: 'More notes.' },
      ]);
      const c = await inSession({ task: 'blank-2: add to the notes' });
      const rc = await waitRun(server, c.run_id, group.as);
      diag = JSON.stringify(rc, null, 1);
      assert.equal(rc.status, 'succeeded', diag);
      assert.equal(s3.remaining, 0, diag);
      assert.equal(rc.repository, blank);
      assert.equal(rc.branch, 'trunk', diag);
      assert.ok(userTexts(s3.requests[0].body).some((t) => t.includes('blank-1')), 'the conversation did not go on');
      assert.deepEqual(rc.changes.commits.map((x) => x.message), ['More notes'], diag);
      assert.deepEqual(rc.changes.files.find((f) => f.path === 'notes.txt'),
        { path: 'notes.txt', insertions: 1, deletions: 0, binary: false }, diag);
      const [rowC] = await sql(server, `SELECT base_commit FROM runs WHERE id = ${q(c.run_id)}`);
      assert.ok(ra.changes.commits[0].sha.startsWith(rowC.base_commit) || rowC.base_commit.startsWith(ra.changes.commits[0].sha), JSON.stringify(rowC));
    });

    test('a HEAD naming no branch: the only branch is cloned; with several, the run names them; a run on another branch works on it', async () => {
      const lost = await headlessRepo('lost', ['main']);
      const many = ['main', 'feature', ...Array.from({ length: 10 }, (_, i) => `b${String(i + 1).padStart(2, '0')}`)];
      const forked = await headlessRepo('forked', many);
      const s1 = router.add('lost-1', [
        { tool: 'bash', input: { command: 'git branch --show-current && cat README.md', description: 'Where am I' } },
        { text: 'On main.' },
      ]);
      // a run without repository, asked for while the first has not ended, works in the first
      // one's repository
      const s2 = router.add('lost-2', [
        { tool: 'bash', input: { command: 'pwd', description: 'Where am I' } },
        { text: 'In lost.' },
      ]);
      const sf = router.add('forked-1', [{ text: 'Should not run.' }]);
      const f = await inSession({ task: 'forked-1: which branch?', repository: forked });
      const a = await inSession({ task: 'lost-1: which branch?', repository: lost });
      const b = await inSession({ task: 'lost-2: where are you?' });
      const [ra, rf] = await Promise.all([waitRun(server, a.run_id, group.as), waitRun(server, f.run_id, group.as)]);
      let diag = JSON.stringify(ra, null, 1);
      assert.equal(ra.status, 'succeeded', diag);
      assert.equal(ra.branch, 'main', diag);
      assert.equal(toolResults(s1.requests[1].body).at(-1).text, 'main\n# lost\n');
      const rb = await waitRun(server, b.run_id, group.as);
      assert.equal(rb.status, 'succeeded', JSON.stringify(rb, null, 1));
      assert.equal(rb.repository, lost);
      assert.equal(toolResults(s2.requests[1].body).at(-1).text, '/workspace/lost\n');

      diag = JSON.stringify(rf, null, 1);
      assert.equal(rf.status, 'failed', diag);
      assert.equal(sf.requests.length + sf.titles.length, 0, diag);
      const err = rf.result.error;
      assert.match(err, /^cannot clone '[^']*forked\.git': /, diag);
      assert.match(err, /\bbranch\b/, diag);
      assert.match(err, /'b01', 'b02', .*'b10'/, diag); // the first ten, sorted
      assert.doesNotMatch(err, /'main'|'feature'/, diag);
      assert.match(err, /12/, diag);

      // the same session, with a branch: the clone is made afresh and works on that branch
      const sg = router.add('forked-2', [
        { tool: 'bash', input: { command: 'git branch --show-current && cat feature.txt', description: 'Where am I' } },
        { text: 'On feature.' },
      ]);
      const g = await inSession({ task: 'forked-2: which branch?', repository: forked, branch: 'feature' });
      const rg = await waitRun(server, g.run_id, group.as);
      assert.equal(rg.status, 'succeeded', JSON.stringify(rg, null, 1));
      assert.equal(rg.branch, 'feature');
      assert.equal(toolResults(sg.requests[1].body).at(-1).text, 'feature\nfeature work\n');
      assert.equal(rg.changes.files_changed, 0);
      assert.deepEqual(rg.changes.commits, []);
    });
  });

  test('a run that cannot clone fails clearly and leaves its session as it was; the session then works in /workspace, and moves to a repository with its conversation', async () => {
    const port = await closedPort();
    // a loopback address is refused at once (this server's FETCH_ALLOW names none)
    await refused(server, 'run_task', { task: 'clone-refused: do something', repository: `https://127.0.0.1:${port}/acme/widget.git` },
      /cannot clone .*127\.0\.0\.1 is a loopback address/);
    const as = { token: await addUser(server, 'repo-again') }; // its own user: its runs count against no other test's limits
    const ratchet = await repo('ratchet');
    // a new session's first run, and then its second
    const cases = [
      { marker: 'clone-missing', repository: path.join(scratch, 'does-not-exist.git'),
        res: [/^cannot clone /, /clone|repositor|not found|does not exist/i] },
      { marker: 'no-branch', repository: ratchet, branch: 'no-such-branch',
        res: [/branch 'no-such-branch' does not exist/] },
    ];
    const scripts = cases.map((c) => router.add(c.marker, [{ text: 'Should not run.' }]));
    const started = [];
    for (const c of cases) {
      started.push(await runTask(server, { task: `${c.marker}: do something`, repository: c.repository,
        ...(c.branch ? { branch: c.branch } : {}), ...(started.length ? { session_id: started[0].session_id } : {}) }, as));
    }
    const results = await Promise.all(started.map((s) => waitRun(server, s.run_id, as)));
    results.forEach((r, i) => {
      const diag = JSON.stringify(r, null, 1);
      assert.equal(r.status, 'failed', diag);
      assert.equal(r.result.success, false);
      for (const re of cases[i].res) assert.match(r.result.error, re, diag);
      assert.equal(r.phase.text, 'failed while cloning', diag);
      // the agent never started
      assert.equal(scripts[i].requests.length + scripts[i].titles.length, 0, diag);
    });
    const session_id = started[0].session_id;

    // neither repository became the session's: a run without one works in /workspace
    const s1 = router.add('missing-2', [
      { tool: 'bash', input: { command: 'pwd', description: 'Where am I' } },
      { text: 'In the workspace.' },
    ]);
    const n = await runTask(server, { task: 'missing-2: where are you?', session_id }, as);
    const rn = await waitRun(server, n.run_id, as);
    assert.equal(rn.status, 'succeeded', JSON.stringify(rn, null, 1));
    assert.equal(rn.repository, null);
    assert.equal(toolResults(s1.requests[1].body).at(-1).text, '/workspace\n');

    // the session moves to the repository whose branch was missing: cloned afresh, on its
    // default branch; Codex's conversation goes on there (OpenCode's would start anew, as
    // runs.test.mjs shows)
    const s2 = router.add('missing-3', [
      { tool: 'bash', input: { command: 'pwd && git branch --show-current', description: 'Where am I' } },
      { text: 'In ratchet.' },
    ]);
    const o = await runTask(server, { task: 'missing-3: where are you?', session_id, repository: ratchet, timeout_minutes: 5 }, as);
    const ro = await waitRun(server, o.run_id, as);
    assert.equal(ro.status, 'succeeded', JSON.stringify(ro, null, 1));
    assert.equal(toolResults(s2.requests[1].body).at(-1).text, '/workspace/ratchet\nmain\n');
    const said = userTexts(s2.requests[0].body);
    assert.ok(said[0].includes('missing-3') && said.some((t) => t.includes('missing-2')), JSON.stringify(said));

    // and a branch that exists: the session's clone checks it out
    const s3 = router.add('ratchet-2', [
      { tool: 'bash', input: { command: 'git branch --show-current && cat feature.txt', description: 'Where am I' } },
      { text: 'On feature.' },
    ]);
    const b = await runTask(server, { task: 'ratchet-2: which branch?', session_id, repository: ratchet, branch: 'feature' }, as);
    const rb = await waitRun(server, b.run_id, as);
    assert.equal(rb.status, 'succeeded', JSON.stringify(rb, null, 1));
    assert.equal(rb.branch, 'feature');
    assert.equal(toolResults(s3.requests[1].body).at(-1).text, 'feature\nfeature work\n');
  });

  test('list_runs filters by status and by session and pages with a cursor', async () => {
    const token = await addUser(server, 'lister');
    const as = { token };
    router.add('lister-A', [{ text: 'A done.' }]);
    router.add('lister-B', [{ text: 'B done.' }]);
    const sc = router.add('lister-C', [{ hold: true, text: 'C done.' }]);
    const a = await runTask(server, { task: 'lister-A: say A', title: 'First' }, as);
    assert.equal((await waitRun(server, a.run_id, as)).status, 'succeeded');
    const b = await runTask(server, { task: 'lister-B: say B', session_id: a.session_id }, as);
    assert.equal((await waitRun(server, b.run_id, as)).status, 'succeeded');
    const c = await runTask(server, { task: 'lister-C: say C' }, as);
    await sc.waitHeld();
    assert.notEqual(c.session_id, a.session_id);

    const ids = (l) => l.runs.map((x) => x.run_id);
    const all = await ok(server, 'list_runs', {}, as);
    assert.deepEqual(ids(all), [c.run_id, b.run_id, a.run_id]); // newest first
    assert.equal(all.has_more, false);
    const ra = all.runs[2];
    assert.equal(ra.session_id, a.session_id);
    assert.equal(ra.status, 'succeeded');
    assert.equal(ra.title, 'First');
    assert.equal(ra.task_preview, 'lister-A: say A');
    assert.match(ra.created_at, ISO);
    assert.match(ra.finished_at, ISO);
    assert.equal(all.runs[0].status, 'running');
    assert.equal(all.runs[0].finished_at, null);

    assert.deepEqual(ids(await ok(server, 'list_runs', { status: 'running' }, as)), [c.run_id]);
    assert.deepEqual(ids(await ok(server, 'list_runs', { status: 'succeeded' }, as)), [b.run_id, a.run_id]);
    assert.deepEqual(ids(await ok(server, 'list_runs', { status: 'failed' }, as)), []);
    assert.deepEqual(ids(await ok(server, 'list_runs', { session_id: a.session_id }, as)), [b.run_id, a.run_id]);
    assert.deepEqual(ids(await ok(server, 'list_runs', { session_id: c.session_id }, as)), [c.run_id]);
    assert.deepEqual(ids(await ok(server, 'list_runs', { session_id: a.session_id, status: 'running' }, as)), []);

    // one page at a time
    const seen = [];
    let page = await ok(server, 'list_runs', { limit: 1 }, as);
    for (;;) {
      assert.equal(page.runs.length, 1);
      seen.push(page.runs[0].run_id);
      if (!page.has_more) break;
      assert.equal(typeof page.next_cursor, 'string');
      page = await ok(server, 'list_runs', { limit: 1, cursor: page.next_cursor }, as);
    }
    assert.deepEqual(seen, [c.run_id, b.run_id, a.run_id]);
    const two = await ok(server, 'list_runs', { limit: 2 }, as);
    assert.deepEqual(ids(two), [c.run_id, b.run_id]);
    assert.equal(two.has_more, true);
    const rest = await ok(server, 'list_runs', { limit: 2, cursor: two.next_cursor }, as);
    assert.deepEqual(ids(rest), [a.run_id]);
    assert.equal(rest.has_more, false);
    assert.ok(rest.next_cursor === null || rest.next_cursor === undefined, JSON.stringify(rest));

    // another user's list has none of these
    const adminIds = ids(await ok(server, 'list_runs', { limit: 100 }));
    for (const id of [a.run_id, b.run_id, c.run_id]) assert.ok(!adminIds.includes(id));

    // the seed's names: sessionId, and its statuses started (a run not yet at work: d waits
    // behind c in c's session) and completed (succeeded)
    const d = await runTask(server, { task: 'lister-D: after C', session_id: c.session_id }, as);
    const seed = async (args) => ids(await ok(server, 'opencode_list_runs', args, as));
    assert.deepEqual(await seed({ status: 'started' }), [d.run_id]);
    assert.deepEqual(await seed({ status: 'completed' }), [b.run_id, a.run_id]);
    assert.deepEqual(await seed({ status: 'running' }), [c.run_id]);
    assert.deepEqual(await seed({ sessionId: a.session_id, status: 'completed' }), [b.run_id, a.run_id]);
    assert.deepEqual(await seed({ sessionId: c.session_id }), [d.run_id, c.run_id]);

    await ok(server, 'cancel_run', { run_id: d.run_id }, as);
    await ok(server, 'cancel_run', { run_id: c.run_id }, as);
    assert.equal((await waitRun(server, c.run_id, as)).status, 'cancelled');
    assert.equal((await waitRun(server, d.run_id, as)).status, 'cancelled');
    assert.deepEqual(ids(await ok(server, 'list_runs', { status: 'cancelled' }, as)), [d.run_id, c.run_id]);
    assert.deepEqual(ids(await ok(server, 'list_runs', { status: 'running' }, as)), []);
  });

  test('cancel_run stops a running run; get_result says cancelled', async () => {
    const s = router.add('cancel-me', [{ hold: true, text: 'Never sent.' }]);
    const started = await runShared(server, { task: 'cancel-me: wait for a slow model' });
    await s.waitHeld();
    // Codex's turn started before its request reached the model: once the server has read that
    // far, the run is in its first step
    const mid = await runs.until(async () => {
      const m = await ok(server, 'get_result', { run_id: started.run_id });
      return m.phase.step === 1 && m;
    }, 'the run in its first step');
    assert.equal(mid.status, 'running');
    const c = await ok(server, 'cancel_run', { run_id: started.run_id });
    assert.deepEqual(c, { run_id: started.run_id, status: 'cancelled', already_ended: false });
    // cancelling again changes nothing and says so
    const again = await ok(server, 'cancel_run', { run_id: started.run_id });
    assert.deepEqual(again, { run_id: started.run_id, status: 'cancelled', already_ended: true });
    const r = await waitRun(server, started.run_id);
    assert.equal(r.status, 'cancelled', JSON.stringify(r, null, 1));
    assert.match(r.finished_at, ISO);
    assert.equal(r.result.success, false);
    assert.equal(r.transitions.at(-1).status, 'cancelled');
    // where it was when it was cancelled
    assert.equal(r.phase.name, 'cancelled');
    assert.equal(r.phase.text, 'cancelled at step 1', JSON.stringify(r.phase));
    // the agent is gone: its request to the model was dropped
    await runs.until(() => s.aborted >= 1, 'the held request closed after cancel', 120000);
    await events(server, r.run_id);
  });

  test('a run over its timeout fails, saying so', async () => {
    const s = router.add('too-slow', [{ hold: true, text: 'Never sent.' }]);
    const started = await runShared(server, { task: 'too-slow: think for a long time', timeout_minutes: 0.1 });
    const r = await waitRun(server, started.run_id);
    assert.equal(r.status, 'failed', JSON.stringify(r, null, 1));
    assert.equal(r.result.success, false);
    assert.match(`${r.status_reason} ${r.result.error}`, /timed? ?out|timeout/i);
    assert.match(r.result.error, /timed? ?out|timeout/i);
    // the agent is gone: no request of it is left hanging at the fake (on a slow machine the
    // agent may not even have reached the model in 6 s)
    await runs.until(() => s.held === 0, 'the held request closed after the timeout', 120000);
  });

});
