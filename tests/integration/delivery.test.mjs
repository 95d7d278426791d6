// Runs that deliver: each user's own GitHub token, the session's branch pushed through the
// sandbox's git proxy (that branch only, fast-forward only), and a pull request opened, then
// commented on by a later run of the session. A local fake GitHub (git http-backend and the REST
// endpoints, tests/lib/fake-github.mjs) stands in for GitHub through GITHUB_BASE_URL and
// GITHUB_API_URL; the real Codex (runs.codexEnv), scripted fake model (tests/lib/fake-anthropic.mjs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

import { startServer, cli, sqlRows } from '../lib/server.mjs';
import * as runs from '../lib/runs.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { startFakeGitHub } from '../lib/fake-github.mjs';
import { startReceiver } from '../lib/notify-receiver.mjs';

const TOKEN = 'github_pat_11DELIVERYtestTOKEN_alice0123456789';
const WORK = /^sandbox-mcp\/[A-Za-z0-9]{8}-/;

let fake, router, gh, server, hook;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  gh = await startFakeGitHub({ tokens: [TOKEN], repos: {
    'acme/widget': { files: { 'README.md': '# widget\n' } },
    'acme/other': { files: { 'README.md': '# other\n' } },
    'acme/locked': { files: { 'README.md': '# locked\n' } },
    'acme/open': { public: true, files: { 'README.md': '# open\n' } },
    'acme/empty': { empty: true },
  } });
  server = await startServer({ env: {
    ...runs.codexEnv(fake.url),
    GITHUB_BASE_URL: gh.url, GITHUB_API_URL: gh.api, FETCH_ALLOW: `127.0.0.1:${gh.port}`,
    NOTIFY_TEST_ALLOW_LOOPBACK: '1',
  } });
  hook = await startReceiver();
});

after(async () => {
  await server?.stop();
  await hook?.close();
  await gh?.close();
  await fake?.close();
});

// The run helpers of tests/lib/runs.mjs on this file's server.
const call = (name, args) => runs.call(server, name, args);
const ok = (name, args) => runs.ok(server, name, args);
const finished = (runId) => runs.finished(server, runId);

function credential(action) {
  const r = cli(['user', 'credential', action, 'admin', 'github', '--data-dir', server.dataDir],
    action === 'set' ? { input: `${TOKEN}\n` } : {});
  assert.equal(r.status, 0, r.stderr);
}

// The proxy's Basic credential for a push from the agent's shell, with its own proxy token.
const AGENT_AUTH = 'h="Authorization: Basic $(printf \'x-access-token:%s\' "$SANDBOX_MCP_PROXY_TOKEN" | base64 -w0)"';
const proxyRepo = (name) => `http://127.0.0.1:8788/proxy/github/${name}.git`;

test('without a credential: no pull request by default, delivery says why, and asking for one is refused', async () => {
  router.add('nocred-5d1', [
    { tool: 'bash', input: { command: 'echo change > change.txt && git add -A && git -c user.name=A -c user.email=a@x commit -qm Change', description: 'Commit' } },
    { text: 'Changed.' },
  ]);
  // a public repository clones without a credential; with none, the run delivers nothing
  const started = await ok('run_task', { task: 'nocred-5d1: change something', repository: gh.repoUrl('acme/open') });
  const r = await finished(started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r));
  assert.equal(r.pull_request_mode, 'none');
  assert.equal(r.pull_request, null);
  assert.equal(r.delivery.status, 'skipped');
  assert.match(r.delivery.reason, /no GitHub credential serves acme\/open: set yours with `sandbox-mcp user credential set NAME github` or on the account page/);
  assert.match((await call('get_result', { run_id: r.run_id })).content[0].text, /Delivery skipped: no GitHub credential serves acme\/open/);
  assert.deepEqual(gh.refs('acme/open'), ['refs/heads/main']);
  assert.equal(gh.pulls.length, 0);
  // a private one does not clone at all (a run of the same session: its sandbox is there already)
  router.add('nocred-6e2', [{ text: 'Nothing.' }]);
  const priv = await finished((await ok('run_task', { task: 'nocred-6e2: look', repository: gh.repoUrl('acme/widget'),
    session_id: started.session_id })).run_id);
  assert.equal(priv.status, 'failed');
  assert.match(priv.result.error, /needs credentials this server does not have/);
  const refused = await call('run_task', { task: 'x', repository: gh.repoUrl('acme/widget'), pull_request: 'draft' });
  assert.equal(refused.isError, true);
  assert.match(refused.content[0].text, /pull_request 'draft' needs a GitHub credential for acme\/widget: set yours with `sandbox-mcp user credential set NAME github`/);
  const local = await call('run_task', { task: 'x', pull_request: 'ready' });
  assert.equal(local.isError, true);
  assert.match(local.content[0].text, /needs a repository on GitHub .*names no repository/);
  const bad = await call('run_task', { task: 'x', repository: gh.repoUrl('acme/widget'), pull_request: 'merged' });
  assert.equal(bad.isError, true);
});

test('a run\'s commits arrive on the session\'s branch with a draft pull request; a later run pushes to the same branch and comments', async () => {
  credential('set');
  const target = cli(['user', 'notify', 'add', 'admin', 'webhook', hook.url('/delivery'), '--data-dir', server.dataDir],
    { env: { NOTIFY_TEST_ALLOW_LOOPBACK: '1' } });
  assert.equal(target.status, 0, target.stderr);
  // (1) the agent commits one file and leaves another uncommitted; it looks for the token
  const s1 = router.add('deliver-a7c', [
    { tool: 'write', input: { filePath: '/workspace/widget/hello.txt', content: 'hello\n' } },
    { tool: 'bash', input: { command: 'git add hello.txt && git -c user.name=Agent -c user.email=a@x commit -qm "Add hello" && echo notes > notes.txt && git branch --show-current', description: 'Commit' } },
    { tool: 'bash', input: { command: 'env; git config --list --show-origin; cat ~/.gitconfig .git/config 2>&1; grep -rl "$(echo ' + Buffer.from(TOKEN.slice(0, 20)).toString('base64') + ' | base64 -d)" /workspace /root /tmp /etc /home /var /run 2>/dev/null | head -5; echo end', description: 'Look for secrets' } },
    { text: 'Added hello.txt; notes are in notes.txt.' },
  ]);
  const started = await ok('run_task', { task: 'deliver-a7c: add hello.txt', title: 'Add a greeting', repository: gh.repoUrl('acme/widget') });
  const r = await finished(started.run_id);
  const diag = JSON.stringify(r, null, 1);
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.branch, 'main', diag); // the base
  assert.equal(r.pull_request_mode, 'draft');
  const d = r.delivery;
  assert.equal(d.status, 'delivered', diag);
  assert.match(d.branch, WORK);
  assert.match(d.branch, /-add-a-greeting$/);
  assert.equal(d.base, 'main');
  // the agent worked on the session's branch
  assert.equal(toolResults(s1.requests[2].body).at(-1).text.trim(), d.branch);
  // the branch has exactly the run's commits on top of main: the agent's and the server's
  const pushed = gh.log('acme/widget', null, `main..refs/heads/${d.branch}`);
  assert.deepEqual(pushed.map((c) => c.subject), ['Add a greeting (left uncommitted by the agent)', 'Add hello']);
  assert.deepEqual(d.commits, pushed.map((c) => c.sha));
  assert.deepEqual(r.changes.commits.map((c) => c.sha), d.commits);
  assert.equal(gh.show('acme/widget', d.branch, 'notes.txt'), 'notes\n');
  assert.equal(gh.show('acme/widget', d.branch, 'hello.txt'), 'hello\n');
  // the pull request: title, body, base, head, draft, opened with the user's token
  assert.equal(gh.pulls.length, 1);
  const pr = gh.pulls[0];
  assert.equal(pr.title, 'Add a greeting');
  assert.equal(pr.base, 'main');
  assert.equal(pr.head, d.branch);
  assert.equal(pr.draft, true);
  assert.equal(pr.token, TOKEN);
  assert.match(pr.body, /Added hello.txt; notes are in notes.txt./);
  assert.ok(pr.body.includes(r.web_url), pr.body);
  assert.deepEqual(r.pull_request, { url: pr.html_url, number: pr.number, state: 'open', draft: true });
  const text = (await call('get_result', { run_id: r.run_id })).content[0].text;
  assert.ok(text.includes(`Pull request #${pr.number} (draft, open): ${pr.html_url}`), text);

  // the user is told: the pull request opened, then the run's end, which links it too
  const told = (run, type) => hook.waitFor((q) => q.json?.run_id === run && q.json.type === type, `${type} of ${run}`);
  const [opened] = await told(r.run_id, 'pull_request.opened');
  assert.equal(opened.json.pull_request_url, pr.html_url);
  assert.equal(opened.json.url, r.web_url);
  assert.equal(opened.json.title, 'Add a greeting');
  const [done] = await told(r.run_id, 'run.succeeded');
  assert.equal(done.json.pull_request_url, pr.html_url);
  assert.match(done.json.summary, /Added hello.txt/);

  // nothing in the sandbox ever saw the user's token
  const seen = toolResults(s1.requests[3].body).at(-1).text;
  assert.match(seen, /end\s*$/);
  assert.ok(!seen.includes(TOKEN.slice(0, 20)), seen);

  // (2) a later run in the session: pushes to the same branch, and comments on the pull request
  router.add('deliver-b8d', [
    { tool: 'bash', input: { command: 'echo more >> hello.txt && git commit -qam "More hello" && git branch --show-current', description: 'Commit' } },
    { text: 'Made hello longer.' },
  ]);
  const second = await ok('run_task', { task: 'deliver-b8d: make hello longer', title: 'Longer greeting', session_id: started.session_id });
  const r2 = await finished(second.run_id);
  assert.equal(r2.status, 'succeeded', JSON.stringify(r2));
  assert.equal(r2.delivery.status, 'delivered', JSON.stringify(r2.delivery));
  assert.equal(r2.delivery.branch, d.branch);
  assert.equal(r2.pull_request.number, pr.number);
  assert.equal(gh.pulls.length, 1);
  const log = gh.log('acme/widget', null, `main..refs/heads/${d.branch}`);
  assert.deepEqual(log.map((c) => c.subject), ['More hello', 'Add a greeting (left uncommitted by the agent)', 'Add hello']);
  assert.deepEqual(r2.delivery.commits, [log[0].sha]);
  assert.equal(gh.comments.length, 1);
  assert.equal(gh.comments[0].number, pr.number);
  assert.match(gh.comments[0].body, /Follow-up run\*\*: Longer greeting/);
  assert.match(gh.comments[0].body, /Made hello longer\./);
  assert.ok(gh.comments[0].body.includes(r2.web_url));
  // a comment opens no pull request: the end of the run alone is told, with the session's one
  const [done2] = await told(r2.run_id, 'run.succeeded');
  assert.equal(done2.json.pull_request_url, pr.html_url);
  assert.equal(hook.requests.filter((q) => q.json?.type === 'pull_request.opened').length, 1);

  // (3) the agent's own pushes: only the session's branch, fast-forward only; each refusal is
  // among the run's events
  const s4 = router.add('deliver-d0f', [
    { tool: 'bash', input: { command: `${AGENT_AUTH}; for t in "HEAD:refs/heads/main ${proxyRepo('acme/widget')}" "HEAD:refs/heads/${d.branch} ${proxyRepo('acme/other')}" "+HEAD~2:refs/heads/${d.branch} ${proxyRepo('acme/widget')}" "HEAD:refs/tags/v1 ${proxyRepo('acme/widget')}" ":refs/heads/${d.branch} ${proxyRepo('acme/widget')}"; do set -- $t; git -c credential.helper= -c http.extraHeader="$h" push -q "$2" "$1" >/dev/null 2>&1; echo "push $?"; done; for i in $(seq 60); do curl -s -o /dev/null -H "$h" "${proxyRepo('acme/other')}/info/refs?service=git-receive-pack"; done`, description: 'Push elsewhere' } },
    { text: 'Tried again.' },
  ]);
  const fourth = await ok('run_task', { task: 'deliver-d0f: try pushing again', session_id: started.session_id });
  const r4 = await finished(fourth.run_id);
  assert.equal(r4.status, 'succeeded', JSON.stringify(r4));
  const refusedAll = (text, n) => assert.match(text, new RegExp(`^(push [1-9]\\d*\\n){${n}}$`), text);
  refusedAll(toolResults(s4.requests[1].body).at(-1).text, 5);
  assert.deepEqual(gh.refs('acme/widget').sort(), ['refs/heads/main', `refs/heads/${d.branch}`].sort());
  assert.equal(gh.log('acme/widget', null, `main..refs/heads/${d.branch}`).length, 3);
  const refusals = sqlRows(server, `SELECT summary FROM run_events WHERE run_id = '${r4.run_id}' AND type = 'push_refused' ORDER BY seq`).map((e) => e.summary);
  // 65 refusals, of which the run keeps the first 32
  assert.equal(refusals.length, 32, refusals.join('\n'));
  assert.match(refusals[0], /pushes to branch '.*' of acme\/widget only, not 'refs\/heads\/main'/);
  assert.match(refusals[1], /push to acme\/other refused: this token opens repository 'acme\/widget' only/);
  assert.match(refusals[2], /only fast-forward pushes/);
  assert.match(refusals[3], /not 'refs\/tags\/v1'/);
  assert.match(refusals[4], /deleting branch/);
  assert.equal(r4.delivery.status, 'skipped');
  assert.match(r4.delivery.reason, /no commits/);

  // the token is nowhere the server writes: its log, the database's text, any response
  const all = JSON.stringify([r, r2, r4]);
  assert.ok(!all.includes(TOKEN));
  assert.ok(!server.stderr().includes(TOKEN) && !server.stdout().includes(TOKEN));
  const dump = sqlRows(server, 'SELECT raw FROM run_events').map((e) => e.raw).join('');
  assert.ok(!dump.includes(TOKEN.slice(0, 20)));
  for (const f of readdirSync(path.join(server.dataDir, 'runs'), { recursive: true })) {
    const p = path.join(server.dataDir, 'runs', f);
    if (statSync(p).isFile()) assert.ok(!readFileSync(p, 'latin1').includes(TOKEN), p);
  }
});

test('a refused pull request is reported with GitHub\'s reason and leaves the run succeeded', async () => {
  credential('set');
  gh.refuse('acme/locked', 'pulls', 403, 'Resource not accessible by personal access token');
  router.add('deliver-e1a', [
    { tool: 'bash', input: { command: 'echo x > x.txt', description: 'Write' } },
    { text: 'Wrote x.' },
  ]);
  router.add('deliver-e1b', [
    { tool: 'bash', input: { command: 'echo y > y.txt', description: 'Write' } },
    { text: 'Wrote y.' },
  ]);
  const started = await ok('run_task', { task: 'deliver-e1a: write x', repository: gh.repoUrl('acme/locked'), pull_request: 'ready' });
  // queued behind the first, before that one has made the session's branch
  const queued = await ok('run_task', { task: 'deliver-e1b: write y', session_id: started.session_id, pull_request: 'ready' });
  const r = await finished(started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r));
  assert.equal(r.delivery.status, 'failed');
  assert.match(r.delivery.reason, /pushed, but the pull request was not opened: HTTP 403: Resource not accessible by personal access token/);
  assert.equal(r.pull_request, null);
  // the push itself went through, and the queued run pushed to the same branch
  const r2 = await finished(queued.run_id);
  assert.equal(r2.status, 'succeeded', JSON.stringify(r2));
  assert.equal(r2.delivery.branch, r.delivery.branch);
  assert.match(r2.delivery.reason, /pushed, but the pull request was not opened/);
  assert.equal(gh.log('acme/locked', null, `main..refs/heads/${r.delivery.branch}`).length, 2);
});

test('an empty repository: the agent starts from nothing and the push creates its default branch', async () => {
  credential('set');
  const s = router.add('deliver-f2b', [
    { tool: 'bash', input: { command: 'git branch --show-current; git rev-parse -q --verify HEAD || echo no-commits; echo "# new" > README.md && git add README.md && git -c user.name=A -c user.email=a@x commit -qm "First commit"', description: 'Start' } },
    { text: 'Started the project.' },
  ]);
  const started = await ok('run_task', { task: 'deliver-f2b: start the project', repository: gh.repoUrl('acme/empty') });
  const r = await finished(started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r));
  assert.equal(toolResults(s.requests[1].body).at(-1).text, 'main\nno-commits\n');
  assert.equal(r.delivery.status, 'delivered', JSON.stringify(r.delivery));
  assert.equal(r.delivery.branch, 'main');
  assert.match(r.delivery.reason, /the repository was empty: the push created its branch 'main', so there is no pull request/);
  assert.equal(r.pull_request, null);
  assert.deepEqual(gh.refs('acme/empty'), ['refs/heads/main']);
  assert.deepEqual(gh.log('acme/empty', 'main').map((c) => c.subject), ['First commit']);
  assert.deepEqual(r.changes.commits.map((c) => c.message), ['First commit']);
  // the session's next run works on a branch of its own, and opens a pull request against main
  router.add('deliver-g3c', [
    { tool: 'bash', input: { command: 'echo more >> README.md && git commit -qam More', description: 'More' } },
    { text: 'Added more.' },
  ]);
  const next = await finished((await ok('run_task', { task: 'deliver-g3c: add more', session_id: started.session_id })).run_id);
  assert.equal(next.delivery.status, 'delivered', JSON.stringify(next.delivery));
  assert.match(next.delivery.branch, WORK);
  assert.equal(next.delivery.base, 'main');
  assert.equal(next.pull_request.number, gh.pulls.at(-1).number);
  assert.equal(gh.pulls.at(-1).base, 'main');
  assert.deepEqual(gh.log('acme/empty', 'main').map((c) => c.subject), ['First commit']);
});
