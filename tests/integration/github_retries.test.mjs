// The server's own GitHub calls when GitHub refuses them for now (src/github/rest.c): a 5xx on a
// call that is safe to make again (a pull request's creation: a second is a duplicate GitHub
// refuses), a 429, a secondary rate limit (403 with its message and Retry-After) are made again
// after a wait, up to GITHUB_RETRIES times; a comment is not made again after a 5xx, which GitHub
// may have acted on; a wait longer than the budget is not waited. The fake GitHub answers with
// scripted refusals first, then as usual; the real Codex (runs.codexEnv) makes the commits.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, cli } from '../lib/server.mjs';
import * as runs from '../lib/runs.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { startFakeGitHub } from '../lib/fake-github.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const TOKEN = 'github_pat_11RETRIEStestTOKEN_alice0123456789';
let fake, router, gh, server;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  gh = await startFakeGitHub({ tokens: [TOKEN], repos: {
    'acme/retry': { files: { 'README.md': '# retry\n' } },
    'acme/bound': { files: { 'README.md': '# bound\n' } },
  } });
  server = await startServer({ env: {
    ...runs.codexEnv(fake.url),
    GITHUB_BASE_URL: gh.url, GITHUB_API_URL: gh.api, FETCH_ALLOW: `127.0.0.1:${gh.port}`,
    GITHUB_RETRY_BASE_MS: '20',
  } });
  const r = cli(['user', 'credential', 'set', 'admin', 'github', '--data-dir', server.dataDir], { input: `${TOKEN}\n` });
  assert.equal(r.status, 0, r.stderr);
});

after(async () => {
  const stderr = server?.stderr() ?? '';
  await server?.stop();
  await gh?.close();
  await fake?.close();
  assertNoSanitizerReport(stderr, 'server');
});

const ok = (name, args) => runs.ok(server, name, args);

// A run that commits a file and delivers (in session, or a new one on repo).
async function commitRun(marker, { repo = 'acme/retry', session } = {}) {
  router.add(marker, [
    { tool: 'bash', input: { command: `echo ${marker} > ${marker}.txt && git add -A && git -c user.name=A -c user.email=a@x commit -qm "Add ${marker}"`, description: 'Commit' } },
    { text: `Added ${marker}.` },
  ]);
  const started = await ok('run_task', { task: `${marker}: add a file`, title: `Add ${marker}`,
    ...(session ? { session_id: session } : { repository: gh.repoUrl(repo) }) });
  return { started, r: await runs.finished(server, started.run_id) };
}

const pullsOf = (repo) => gh.pulls.filter((p) => p.repo === repo);
const commentsOn = (repo, n) => gh.issueComments.filter((c) => c.repo === repo && c.number === n);

let session, prNumber;

test('a pull request GitHub answered 502, then 429 with Retry-After, is opened once', async () => {
  const s = gh.script('POST', /\/repos\/acme\/retry\/pulls$/, [
    [502, { message: 'Server Error' }],
    [429, { message: 'Too many requests' }, { 'retry-after': '1' }],
  ]);
  const { started, r } = await commitRun('rt-open-1');
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
  assert.equal(r.delivery.status, 'delivered', JSON.stringify(r.delivery));
  assert.equal(s.seen, 2);
  assert.equal(pullsOf('acme/retry').length, 1);
  assert.equal(r.pull_request.number, pullsOf('acme/retry')[0].number);
  session = started.session_id;
  prNumber = r.pull_request.number;
  assert.match(server.stderr(), /github retry call="POST \/repos\/acme\/retry\/pulls" status=502 attempt=1/);
});

test('a comment refused by a secondary rate limit is made once it may be; after a 502 it is looked for before it is made again', async () => {
  const s = gh.script('POST', /\/repos\/acme\/retry\/issues\/\d+\/comments$/, [
    [403, { message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.' }, { 'retry-after': '1' }],
  ]);
  const { r } = await commitRun('rt-comment-2', { session });
  assert.equal(r.delivery.status, 'delivered', JSON.stringify(r.delivery));
  assert.equal(s.seen, 1);
  assert.equal(commentsOn('acme/retry', prNumber).length, 1);
  // a 502 after GitHub made it: found among the pull request's comments, not made twice
  const s2 = gh.script('POST', /\/repos\/acme\/retry\/issues\/\d+\/comments$/, [{ acted: [502, { message: 'Server Error' }] }]);
  const { r: r3 } = await commitRun('rt-comment-3', { session });
  assert.equal(r3.delivery.status, 'delivered', JSON.stringify(r3.delivery));
  assert.equal(s2.seen, 1);
  assert.equal(commentsOn('acme/retry', prNumber).length, 2);
  assert.match(commentsOn('acme/retry', prNumber).at(-1).body, new RegExp(`/runs/${r3.run_id}`));
  // a 502 before it made it: not found, so made again, once
  const s3 = gh.script('POST', /\/repos\/acme\/retry\/issues\/\d+\/comments$/, [[502, { message: 'Server Error' }]]);
  const { r: r4 } = await commitRun('rt-comment-4', { session });
  assert.equal(r4.delivery.status, 'delivered', JSON.stringify(r4.delivery));
  assert.equal(s3.seen, 1);
  assert.equal(commentsOn('acme/retry', prNumber).length, 3);
  assert.match(commentsOn('acme/retry', prNumber).at(-1).body, new RegExp(`/runs/${r4.run_id}`));
  // two in a row: it says so
  const s4 = gh.script('POST', /\/repos\/acme\/retry\/issues\/\d+\/comments$/, [[502, { message: 'Server Error' }], [502, { message: 'Server Error' }]]);
  const { r: r5 } = await commitRun('rt-comment-5', { session });
  assert.equal(r5.delivery.status, 'failed', JSON.stringify(r5.delivery));
  assert.match(r5.delivery.reason, /not commented on: HTTP 502/);
  assert.equal(s4.seen, 2);
  assert.equal(commentsOn('acme/retry', prNumber).length, 3);
});

test('the retries stop at GITHUB_RETRIES, and a wait past the budget is not waited', async () => {
  const s = gh.script('POST', /\/repos\/acme\/bound\/pulls$/, Array(10).fill([503, { message: 'Unavailable' }]));
  const { started, r } = await commitRun('rt-bound-4', { repo: 'acme/bound' });
  assert.equal(r.delivery.status, 'failed', JSON.stringify(r.delivery));
  assert.match(r.delivery.reason, /HTTP 503/);
  assert.equal(s.seen, 4, 'one call and three more');
  assert.equal(pullsOf('acme/bound').length, 0);
  s.replies.length = 0;
  // GitHub asks for more than the budget: refused at once, with the reason
  const s2 = gh.script('POST', /\/repos\/acme\/bound\/pulls$/, [[429, { message: 'Slow down' }, { 'retry-after': '100000' }]]);
  const { r: r2 } = await commitRun('rt-bound-5', { session: started.session_id });
  assert.equal(r2.delivery.status, 'failed', JSON.stringify(r2.delivery));
  assert.match(r2.delivery.reason, /HTTP 429/);
  assert.equal(s2.seen, 1);
  assert.match(server.stderr(), /github call not retried call="POST \/repos\/acme\/bound\/pulls" status=429/);
});
