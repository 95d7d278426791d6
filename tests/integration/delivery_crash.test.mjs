// A server killed (SIGKILL, as kill -9) at each step of a delivery, then started again on the
// same data directory: the restarted server takes the run up and finishes its delivery exactly
// once: one pull request, one comment per run, the run's delivery status right. The steps: after
// the leftover commit, after the push, after the pull request is opened but before it is
// recorded, after the run's comment is made but before it is recorded. The server dies where
// SANDBOX_MCP_TEST_CRASH_AT says (base/log.c crash_point).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, cli, removeDataDir, tempDir } from '../lib/server.mjs';
import * as runs from '../lib/runs.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { startFakeGitHub } from '../lib/fake-github.mjs';

const TOKEN = 'github_pat_11CRASHtestTOKEN_alice0123456789';
let fake, router, gh, env, dataDir, srv;
let token; // the admin's, printed by the first server on the data directory

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  gh = await startFakeGitHub({ tokens: [TOKEN], repos: {
    'acme/crash1': { files: { 'README.md': '# one\n' } },
    'acme/crash2': { files: { 'README.md': '# two\n' } },
    'acme/crash3': { files: { 'README.md': '# three\n' } },
  } });
  env = {
    ...runs.codexEnv(fake.url),
    GITHUB_BASE_URL: gh.url, GITHUB_API_URL: gh.api, FETCH_ALLOW: `127.0.0.1:${gh.port}`,
  };
  dataDir = tempDir('smcp-crash-');
});

after(async () => {
  await srv?.stop();
  if (dataDir) removeDataDir(dataDir);
  await gh?.close();
  await fake?.close();
});

// A server on the data directory, dying at point when one is given.
async function serve(point) {
  srv = await startServer({ dataDir, env: { ...env, ...(point ? { SANDBOX_MCP_TEST_CRASH_AT: point } : {}) } });
  if (token) srv.token = token;
  else token = srv.token;
  const r = cli(['user', 'credential', 'set', 'admin', 'github', '--data-dir', dataDir], { input: `${TOKEN}\n` });
  assert.equal(r.status, 0, r.stderr);
  return srv;
}

// Start a run on a server that dies at point; then the server again: the run as it ended.
async function crashAt(point, task) {
  const dying = await serve(point);
  const started = await runs.ok(dying, 'run_task', task);
  await runs.until(() => dying.proc.exitCode !== null || dying.proc.signalCode !== null, `the server killed at ${point}`);
  assert.equal(dying.proc.signalCode, 'SIGKILL');
  assert.match(dying.stderr(), new RegExp(`crash point=${point}`));
  const again = await serve(null);
  const r = await runs.finished(again, started.run_id);
  await again.stop();
  srv = null;
  return { started, r };
}

const pullsOf = (repo) => gh.pulls.filter((p) => p.repo === repo);
const commentsOf = (repo, runId) => gh.issueComments.filter((c) => c.repo === repo && c.body.includes(`/runs/${runId}`));
const commit = (name) => ({ tool: 'bash', input: { command: `echo ${name} > ${name}.txt && git add -A && git -c user.name=A -c user.email=a@x commit -qm "Add ${name}"`, description: 'Commit' } });

test('killed after the leftover commit, then after the comment: one pull request, one comment, one commit each', async () => {
  // the agent leaves its change uncommitted: the server commits it, and dies
  router.add('cr-committed-1', [{ tool: 'bash', input: { command: 'echo left > left.txt', description: 'Write' } }, { text: 'Left it.' }]);
  const first = await crashAt('delivery-committed', { task: 'cr-committed-1: leave a file', title: 'Leave a file', repository: gh.repoUrl('acme/crash1') });
  assert.equal(first.r.status, 'succeeded', JSON.stringify(first.r).slice(0, 2000));
  assert.equal(first.r.delivery.status, 'delivered', JSON.stringify(first.r.delivery));
  assert.equal(pullsOf('acme/crash1').length, 1);
  const branch = first.r.delivery.branch;
  assert.deepEqual(gh.log('acme/crash1', null, `main..refs/heads/${branch}`).map((c) => c.subject),
    ['Leave a file (left uncommitted by the agent)']);
  // a follow-up comments on the pull request, and the server dies before it records that
  router.add('cr-commented-2', [commit('more'), { text: 'More.' }]);
  const second = await crashAt('delivery-commented', { task: 'cr-commented-2: more', session_id: first.started.session_id });
  assert.equal(second.r.delivery.status, 'delivered', JSON.stringify(second.r.delivery));
  assert.equal(commentsOf('acme/crash1', second.r.run_id).length, 1);
  assert.equal(pullsOf('acme/crash1').length, 1);
  assert.equal(second.r.pull_request.number, pullsOf('acme/crash1')[0].number);
});

test('killed after the push, and after the pull request is opened but before it is recorded: one pull request each', async () => {
  router.add('cr-pushed-3', [commit('pushed'), { text: 'Pushed.' }]);
  const a = await crashAt('delivery-pushed', { task: 'cr-pushed-3: add', title: 'Pushed', repository: gh.repoUrl('acme/crash2') });
  assert.equal(a.r.delivery.status, 'delivered', JSON.stringify(a.r.delivery));
  assert.equal(pullsOf('acme/crash2').length, 1);
  assert.equal(a.r.pull_request.number, pullsOf('acme/crash2')[0].number);
  router.add('cr-opened-4', [commit('opened'), { text: 'Opened.' }]);
  const b = await crashAt('delivery-opened', { task: 'cr-opened-4: add', title: 'Opened', repository: gh.repoUrl('acme/crash3') });
  assert.equal(b.r.delivery.status, 'delivered', JSON.stringify(b.r.delivery));
  assert.equal(pullsOf('acme/crash3').length, 1, JSON.stringify(pullsOf('acme/crash3')));
  assert.equal(b.r.pull_request.number, pullsOf('acme/crash3')[0].number);
});
