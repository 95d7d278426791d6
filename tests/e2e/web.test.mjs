// The run and session pages in a real browser: headless Chromium (the Debian package) driven by
// playwright-core, against the real server with OpenCode running against a scripted fake
// upstream. Screenshots (phone and desktop width) go to tests/out/screenshots/.
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

import { startServer, rpc, cli, tempDir } from '../lib/server.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { startFakeGitHub } from '../lib/fake-github.mjs';
import { bareRepo as makeBareRepo } from '../lib/git.mjs';
import * as runs from '../lib/runs.mjs';
import { setPassword } from '../lib/oauth.mjs';

const shots = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'out', 'screenshots');
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 900 };

let fake, router, server, browser, scratch, gh;
// The session of the first run: every later run goes to it, to its sandbox and warm agent (every
// new session boots one, seconds of CPU), the runs on a repository too, which clone it into
// the session's workspace as a new session would (undefined if the first test failed before its
// run, and they make their own). The tests go one at a time, so each has the session to itself.
let session;
const GH_TOKEN = 'github_pat_11WEBPAGEtest0123456789abcdef';

before(async () => {
  mkdirSync(shots, { recursive: true });
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  gh = await startFakeGitHub({ tokens: [GH_TOKEN], repos: { 'acme/widget': {} } });
  server = await startServer({ env: { ANTHROPIC_API_KEY: 'sk-ant-test-key', ANTHROPIC_BASE_URL: fake.url,
    RUNS_ALLOW_LOCAL_REPOS: '1', GITHUB_BASE_URL: gh.url, GITHUB_API_URL: gh.api,
    FETCH_ALLOW: `127.0.0.1:${gh.port}` } });
  const cred = cli(['user', 'credential', 'set', 'admin', 'github', '--data-dir', server.dataDir], { input: `${GH_TOKEN}\n` });
  assert.equal(cred.status, 0, cred.stderr);
  scratch = tempDir('smcp-web-');
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  });
});

// A test that failed half-way may leave a run of its own in the session (one held at the fake):
// cancelled, so that the next test's runs do not wait behind it.
afterEach(() => session && runs.cancelUnfinished(server, { session }));

after(async () => {
  await browser?.close();
  await server?.stop();
  await fake?.close();
  await gh?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// A bare repository <name>.git whose main has one commit with README.md.
const bareRepo = (name) => makeBareRepo(path.join(scratch, `${name}.git`));

// The run helpers of tests/lib/runs.mjs on this file's server.
const ok = (name, args) => runs.ok(server, name, args);
const finished = (runId) => runs.finished(server, runId);

// A page at url; problems collects script errors, dialogs what alert() and the like asked.
async function pageAt(url, viewport) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const problems = [];
  const dialogs = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  const res = await page.goto(url);
  return { page, context, res, problems, dialogs };
}

test('a running run: events appear as the agent works, then the final state', async () => {
  const s = router.add('web-live-71b', [
    { tool: 'write', input: { filePath: '/workspace/web/notes.md', content: '# Notes\nfirst line\n' } },
    // (the curl is refused: these servers give sandboxes no network; the page shows the refusal)
    { hold: true, tool: 'bash', input: { command: "cd /workspace/web && git init -q 2>/dev/null; curl -s --noproxy '' -x http://127.0.0.1:3128 http://localhost:9/ >/dev/null; echo done", description: 'Finish up' } },
    { text: 'Wrote notes.md for you.' },
  ]);
  const run = await ok('run_task', { task: 'web-live-71b: write some notes', title: 'Notes for the page' });
  session = run.session_id;
  await s.waitHeld();
  const phone = await pageAt(run.web_url, PHONE);
  assert.equal(phone.res.status(), 200);
  const { page } = phone;
  // the events so far (step start, the write, a step finish) are on the page while it runs
  await page.waitForFunction(() => document.querySelectorAll('#timeline [data-seq]').length >= 3);
  // the step's start and finish frame the write instead of being rows of their own
  assert.equal(await page.locator('#timeline > li.step .step-events li.event-tool_use').count() >= 1, true);
  assert.equal(await page.locator('#timeline li.event-step_start, #timeline li.event-step_finish').count(), 0);
  assert.equal(await page.textContent('#status'), 'running');
  assert.equal(await page.textContent('#title'), 'Notes for the page');
  assert.match(await page.textContent('#timeline'), /write/);
  assert.equal(await page.isVisible('#live'), true);
  // the phase: the step and what the agent did in it, and how long the run has been going
  await page.waitForFunction(() => document.querySelector('#phase').textContent === 'step 1: wrote web/notes.md');
  assert.match(await page.textContent('#elapsed'), /^· (\d+h )?(\d+m )?\d+[sm] so far$/);
  await page.screenshot({ path: path.join(shots, 'run-running-phone.png'), fullPage: true });
  const before = await page.$$eval('#timeline [data-seq]', (l) => l.length);
  // a reader who scrolled up is offered the way back when later events come
  await page.evaluate(() => window.scrollTo(0, 0));
  s.release();
  await page.waitForSelector('#jump', { state: 'visible' });
  await page.click('#jump');
  await page.waitForSelector('#jump', { state: 'hidden' });
  // later events arrive on the same page, and the end brings the final state
  await page.waitForFunction(() => document.querySelector('#status').textContent === 'succeeded',
    null, { timeout: 120000 });
  await page.waitForFunction(() => !document.querySelector('#outcome').hidden);
  // the phase, live over the event stream, says how it ended
  await page.waitForFunction(() => document.querySelector('#phase').textContent === 'succeeded after 3 steps');
  assert.match(await page.textContent('#elapsed'), /^· took /);
  const after = await page.$$eval('#timeline [data-seq]', (l) => l.map((x) => Number(x.dataset.seq)));
  assert.ok(after.length > before, `${after.length} > ${before}`);
  assert.deepEqual(after, after.map((_, i) => i + 1), 'each event once, in order');
  const result = await finished(run.run_id);
  assert.equal(after.length, result.event_count);
  assert.equal(await page.textContent('#summary'), 'Wrote notes.md for you.');
  assert.match(await page.textContent('#usage'), /input tokens/);
  // what the run's sandbox tried on the network, and why it was refused
  assert.equal(await page.isVisible('#network'), true);
  assert.match(await page.textContent('#network-mode'), /none/);
  assert.match(await page.textContent('#network-denied'), /localhost:9 mode none 1×.*no network/s);
  await page.screenshot({ path: path.join(shots, 'run-finished-phone.png'), fullPage: true });
  assert.deepEqual(phone.problems, []);
  await phone.context.close();

  const desk = await pageAt(run.web_url, DESKTOP);
  await desk.page.waitForFunction(() => document.querySelector('#status').textContent === 'succeeded');
  await desk.page.waitForFunction(() => document.querySelectorAll('#timeline [data-seq]').length > 0);
  await desk.page.screenshot({ path: path.join(shots, 'run-finished-desktop.png'), fullPage: true });
  assert.deepEqual(desk.problems, []);
  await desk.context.close();

  // the session page lists the run and links to it
  const ses = await pageAt(result.session_web_url, PHONE);
  assert.equal(ses.res.status(), 200);
  await ses.page.waitForSelector('#runs li a');
  assert.equal(await ses.page.textContent('#runs li a'), 'Notes for the page');
  await ses.page.screenshot({ path: path.join(shots, 'session-phone.png'), fullPage: true });
  await ses.page.click('#runs li a');
  await ses.page.waitForFunction(() => document.querySelector('#status').textContent === 'succeeded');
  await ses.context.close();
});

test('what the agent wrote stays text: <script> and <img onerror> do nothing', async () => {
  const evil = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';
  router.add('web-xss-2c9', [{ text: `Done ${evil}` }]);
  const run = await ok('run_task', { task: `web-xss-2c9 ${evil}`, title: `t ${evil}`, session_id: session });
  await finished(run.run_id);
  const { page, context, problems } = await pageAt(run.web_url, DESKTOP);
  await page.waitForFunction(() => document.querySelector('#status').textContent !== 'loading');
  await page.waitForFunction(() => !document.querySelector('#outcome').hidden);
  await page.waitForFunction(() => document.querySelectorAll('#timeline [data-seq]').length > 0);
  // give an injected handler every chance to run
  await page.waitForTimeout(300);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.$$eval('img, script:not([src])', (l) => l.length), 0);
  assert.equal(await page.textContent('#summary'), `Done ${evil}`);
  assert.equal(await page.textContent('#title'), `t ${evil}`);
  assert.match(await page.textContent('#task'), /<script>window.__pwned=2<\/script>/);
  assert.match(await page.textContent('#timeline'), /onerror/);
  await page.screenshot({ path: path.join(shots, 'run-xss-desktop.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await context.close();
});

test('without the view token the page sends a browser to sign in and the stream is 401; another run\'s token is 403; revoked links stop', async () => {
  router.add('web-denied-e40', [{ text: 'Secret result text.' }]);
  router.add('web-other-e40', [{ text: 'Other.' }]);
  const run = await ok('run_task', { task: 'web-denied-e40', session_id: session });
  const other = await ok('run_task', { task: 'web-other-e40', session_id: session });
  await finished(run.run_id);
  await finished(other.run_id);
  const base = `${server.url}/runs/${run.run_id}`;
  const otherToken = new URL(other.web_url).searchParams.get('t');

  // a browser not signed in is sent to sign in, and comes back to the run once it has
  // (NOTIFY_VIEW_TOKEN=0 links, tests/integration/notify.test.mjs); it sees nothing of the run
  const bare = await pageAt(base, PHONE);
  assert.equal(bare.res.status(), 200);
  assert.equal(new URL(bare.page.url()).pathname, '/login');
  assert.equal(new URL(bare.page.url()).searchParams.get('return_to'), `/runs/${run.run_id}`);
  assert.equal(await bare.page.locator('form:has(input[name="password"])').count(), 1);
  const text = await bare.page.textContent('body');
  assert.doesNotMatch(text, /Secret result|web-denied/);
  const redirect = await fetch(base, { redirect: 'manual' });
  assert.equal(redirect.status, 303);
  assert.equal(redirect.headers.get('location'), `/login?return_to=/runs/${run.run_id}`);
  await bare.page.screenshot({ path: path.join(shots, 'run-denied-phone.png'), fullPage: true });
  await bare.context.close();

  const wrong = await pageAt(`${base}?t=${otherToken}`, PHONE);
  assert.equal(wrong.res.status(), 403);
  assert.doesNotMatch(await wrong.page.textContent('body'), /Secret result|web-denied/);
  await wrong.context.close();

  for (const suffix of ['/events', '/data', '/diff']) {
    let r = await fetch(`${base}${suffix}`);
    assert.equal(r.status, 401);
    assert.doesNotMatch(await r.text(), /Secret/);
    r = await fetch(`${base}${suffix}?t=${otherToken}`);
    assert.equal(r.status, 403);
    assert.doesNotMatch(await r.text(), /Secret/);
  }
  // an id that does not exist answers like a wrong token
  const none = await fetch(`${server.url}/runs/run_doesnotexist?t=${otherToken}`);
  assert.equal(none.status, 403);
  // the token opens only pages: it is no MCP credential
  const mcp = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    { token: new URL(run.web_url).searchParams.get('t') });
  assert.equal(mcp.status, 401);

  // revoked: the old address stops working; get_result hands out a new one that works
  const revoke = cli(['links', 'revoke', run.run_id, '--data-dir', server.dataDir]);
  assert.equal(revoke.status, 0, revoke.stderr);
  assert.equal((await fetch(run.web_url)).status, 403);
  const again = await ok('get_result', { run_id: run.run_id });
  assert.notEqual(again.web_url, run.web_url);
  assert.equal((await fetch(again.web_url)).status, 200);
});

test('the run\'s diff on a phone: a block a file, cut where it is long, what the agent wrote as text', async () => {
  const evil = '<img src=x onerror="window.__pwned=1;alert(1)"><script>window.__pwned=2;alert(2)</script>';
  const evilName = '<img src=x onerror=alert(3)>.txt';
  const commitMsg = 'Add big.txt <svg onload=alert(4)>';
  const repo = await bareRepo('diffpage');
  const W = '/workspace/diffpage';
  router.add('web-diff-5d1', [
    { tool: 'write', input: { filePath: `${W}/evil.html`, content: `${evil}\n${'x'.repeat(1500)}\n` } },
    { tool: 'bash', input: { description: 'Make the files', command: [
      `cd ${W}`,
      'seq 1 1000 > big.txt',
      "printf '\\000\\001\\002\\377binary' > blob.bin",
      `printf 'hello\\n' > '${evilName}'`,
      "printf 'more\\n' >> README.md",
      'w=$(printf "w%.0s" $(seq 1 1100))',
      'for i in $(seq 1 451); do echo "$i $w"; done > wide1.txt',
      'cp wide1.txt wide2.txt',
      'echo after > zz-after.txt',
      `git add big.txt && git -c user.name=Agent -c user.email=agent@example.com commit -qm '${commitMsg}'`,
    ].join(' && ') } },
    { text: 'Made the files.' },
  ]);
  const run = await ok('run_task', { task: 'web-diff-5d1: make some files', repository: repo, title: 'Diff page',
    session_id: session });
  const result = await finished(run.run_id);
  assert.equal(result.status, 'succeeded', JSON.stringify(result));
  assert.equal(result.changes.files_changed, 8, JSON.stringify(result.changes));
  assert.equal(result.diff, undefined, 'get_result leaves the diff to the page');

  // the diff as served: the files in git's order, cut where they are long
  const diff = await (await fetch(result.web_url.replace('?', '/diff?'))).json();
  assert.deepEqual(diff.files.map((f) => f.path), [evilName, 'README.md', 'big.txt', 'blob.bin',
    'evil.html', 'wide1.txt', 'wide2.txt']);
  assert.equal(diff.more_files, 1); // zz-after.txt: past the half megabyte
  assert.equal(diff.truncated, true);
  const byPath = Object.fromEntries(diff.files.map((f) => [f.path, f]));
  assert.equal(byPath['big.txt'].insertions, 1000);
  assert.equal(byPath['big.txt'].more_lines, 601); // "@@" and 1000 lines, 400 shown
  assert.equal(byPath['blob.bin'].binary, true);
  assert.equal(byPath['blob.bin'].hunks, '');
  assert.equal(byPath['README.md'].status, 'modified');
  assert.equal(byPath['evil.html'].status, 'added');
  assert.ok(byPath['evil.html'].hunks.includes(`+${evil}`));
  assert.match(byPath['evil.html'].hunks, /\+x{999} \[\.\.\. 501 more bytes\]/);
  assert.equal(byPath['wide1.txt'].more_lines, 52);
  assert.ok(byPath['wide2.txt'].more_lines > 0);

  const { page, context, problems, dialogs } = await pageAt(run.web_url, PHONE);
  await page.waitForFunction(() => document.querySelectorAll('#diff details.file').length > 0);
  assert.equal(await page.isVisible('#changes'), true);
  const summaries = await page.$$eval('#diff details.file > summary', (l) => l.map((x) => x.textContent));
  assert.equal(summaries.length, 7);
  assert.match(summaries[0], /^<img src=x onerror=alert\(3\)>\.txt \+1 −0 added$/);
  assert.match(summaries[2], /^big\.txt \+1000 −0 added$/);
  assert.match(summaries[3], /^blob\.bin added binary$/);
  assert.match(await page.textContent('#diff > .more'), /^1 more file$/);
  assert.equal(await page.isVisible('#diff-note'), true);
  assert.equal(await page.isVisible('#files'), false);
  // a long diff starts folded; each block opens with a tap
  for (const s of await page.$$('#diff details.file > summary')) await s.click();
  // a block is filled on its toggle event, which comes after the click: wait for the last one
  await page.waitForFunction(() => [...document.querySelectorAll('#diff details.file')].every((d) => d.open && d.dataset.filled === '1'));
  const more = await page.$$eval('#diff details.file', (l) => l.map((d) => d.querySelector('.more')?.textContent || ''));
  assert.deepEqual(more.slice(0, 6), ['', '', '601 more lines', '', '', '52 more lines']);
  assert.match(more[6], /^\d+ more lines$/);
  assert.match(await page.textContent('#diff details.file:nth-of-type(4)'), /Binary file, not shown/);
  // what the agent wrote is on the page as text, and nothing of it ran
  const evilText = await page.$eval('#diff details.file:nth-of-type(5) .hunks', (x) => x.textContent);
  assert.ok(evilText.includes(`+${evil}`), evilText.slice(0, 300));
  assert.match(await page.textContent('#commits'), /Add big\.txt <svg onload=alert\(4\)>/);
  await page.waitForTimeout(300);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  assert.equal(await page.$$eval('img, svg, script:not([src])', (l) => l.length), 0);
  assert.deepEqual(dialogs, []);
  // lines are coloured by kind, readable, and wrap inside their block: the page is no wider
  const kinds = await page.$$eval('#diff details.file:nth-of-type(2) .ln', (l) => l.map((x) => x.className));
  assert.deepEqual(kinds, ['ln hunk', 'ln ctx', 'ln add']);
  const style = await page.$eval('#diff .ln.add', (x) => {
    const c = getComputedStyle(x);
    return { size: parseFloat(c.fontSize), bg: c.backgroundColor };
  });
  assert.ok(style.size >= 12, `font size ${style.size}px`);
  assert.notEqual(style.bg, 'rgba(0, 0, 0, 0)');
  const width = await page.evaluate(() => [document.documentElement.scrollWidth, document.body.scrollWidth]);
  assert.ok(width[0] <= PHONE.width && width[1] <= PHONE.width, `page ${width} wider than ${PHONE.width}`);
  // the picture: the long blocks folded again
  for (const i of [3, 6, 7]) await page.click(`#diff details.file:nth-of-type(${i}) > summary`);
  await page.locator('#changes').scrollIntoViewIfNeeded();
  await page.screenshot({ path: path.join(shots, 'run-diff-phone.png'), fullPage: true });
  assert.deepEqual(problems, []);
  await context.close();
});

test('a run\'s pull request: linked on the run and session pages, with the pushed commits', async () => {
  router.add('web-pr-8a2', [
    { tool: 'bash', input: { command: 'echo fix > fix.txt && git add fix.txt && git -c user.name=A -c user.email=a@x commit -qm "Fix <script>alert(1)</script>" && echo rest > rest.txt', description: 'Commit' } },
    { text: 'Opened it.' },
  ]);
  const run = await ok('run_task', { task: 'web-pr-8a2: fix it', title: 'PR run', repository: gh.repoUrl('acme/widget'),
    session_id: session });
  const result = await finished(run.run_id);
  assert.equal(result.delivery?.status, 'delivered', JSON.stringify(result));
  const pr = result.pull_request;
  assert.equal(pr.url, gh.pulls[0].html_url);
  const { page, context, problems, dialogs } = await pageAt('about:blank', PHONE);
  // the session page is given a pull request address that is not http(s), which is not linked
  // (the session's other runs have none)
  await page.route(/\/sessions\/[^/]+\/data\?/, async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    body.runs = body.runs.map((r) => (r.pull_request ? { ...r, pull_request: { ...r.pull_request, url: 'javascript:alert(5)' } } : r));
    route.fulfill({ response: res, json: body });
  });
  await page.goto(run.web_url);
  await page.waitForFunction(() => !document.querySelector('#pull-request').hidden);
  assert.equal(await page.textContent('#pr-link'), `Pull request #${pr.number}`);
  assert.equal(await page.getAttribute('#pr-link', 'href'), pr.url);
  assert.equal(await page.textContent('#pr-state'), '(open, draft)');
  assert.equal(await page.textContent('#delivery'), `delivered · branch ${result.delivery.branch} · 2 commits pushed`);
  const commits = await page.$$eval('#commits li', (l) => l.map((x) => x.textContent));
  assert.deepEqual(commits, result.changes.commits.map((c) => `${c.sha.slice(0, 10)} ${c.message}`));
  assert.equal(commits.length, 2);
  assert.ok(commits.some((c) => c.endsWith(' Fix <script>alert(1)</script>')), commits.join('\n'));
  await page.screenshot({ path: path.join(shots, 'run-pull-request-phone.png'), fullPage: true });
  // on the session page: linked only when the address is http(s)
  await page.goto(result.session_web_url);
  await page.waitForSelector('#runs li a.pr');
  assert.equal(await page.locator('#runs li a.pr').count(), 1);
  assert.equal(await page.textContent('#runs li a.pr'), `pull request #${pr.number}`);
  assert.equal(await page.getAttribute('#runs li a.pr', 'href'), null);
  assert.equal(await page.$$eval('script:not([src]), b', (l) => l.length), 0);
  assert.deepEqual(dialogs, []);
  assert.deepEqual(problems, []);
  await context.close();
});

test('attempts side by side on a phone: each one\'s outcome and diff, and no button for a view link', async () => {
  // two Claude Code attempts on one script: each commits a file of its own, then ends
  const step = (body) => (toolResults(body).length ? { text: 'Tried it.' }
    : { tool: 'Bash', input: { command: 'echo "$(date +%N)" > try.txt && git add -A && git commit -qm "A try"', description: 'Try' } });
  router.add('web-tries-3c9', [step, step, step, step]);
  const started = await ok('run_task', { task: 'web-tries-3c9: try something', repository: gh.repoUrl('acme/widget'),
    attempts: 2, variants: [{ agent: 'claude-code' }] });
  for (const a of started.attempts) assert.equal((await finished(a.run_id)).delivery?.status, 'held');
  const { page, context, problems, dialogs } = await pageAt(started.group_web_url, PHONE);
  await page.waitForFunction(() => document.querySelectorAll('.attempt').length === 2);
  const heads = await page.$$eval('.attempt h2', (l) => l.map((x) => x.textContent));
  assert.deepEqual(heads, ['claude-code · anthropic/claude-sonnet-4-5', 'claude-code · anthropic/claude-sonnet-4-5']);
  assert.equal(await page.locator('.attempt .status-succeeded').count(), 2);
  assert.match(await page.textContent('#picked'), /None picked yet/);
  // the page does not grow sideways: the attempts scroll inside their row
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  await page.click('.attempt:first-child details.diff summary');
  await page.waitForSelector('.attempt:first-child details.diff .file');
  assert.match(await page.textContent('.attempt:first-child details.diff .file .path'), /try\.txt/);
  // a view link reads only: no button, and it says so
  assert.equal(await page.locator('.attempt button').count(), 0);
  assert.equal(await page.isVisible('#pick-note'), true);
  await page.screenshot({ path: path.join(shots, 'group-phone.png'), fullPage: true });
  assert.deepEqual(dialogs, []);
  assert.deepEqual(problems, []);
  await context.close();
  const desk = await pageAt(started.group_web_url, DESKTOP);
  await desk.page.waitForFunction(() => document.querySelectorAll('.attempt').length === 2);
  await desk.page.screenshot({ path: path.join(shots, 'group-desktop.png'), fullPage: true });
  assert.deepEqual(desk.problems, []);
  await desk.context.close();
});


test('on a phone, the owner signed in follows up from the session page and cancels from the run page', async () => {
  router.add('web-follow-0', [{ text: 'Ready.' }]);
  const first = await ok('run_task', { task: 'web-follow-0: start', ...(session ? { session_id: session } : {}) });
  session = first.session_id;
  await finished(first.run_id);
  setPassword(server, 'admin', 'web-follow-password-1');
  const sessionPath = `/sessions/${first.session_id}`;
  // signed in through the sign-in page, which comes back to the session
  const { page, context, problems, dialogs } = await pageAt(`${server.url}${sessionPath}`, PHONE);
  assert.equal(new URL(page.url()).pathname, '/login');
  await page.fill('input[name="name"]', 'admin');
  await page.fill('input[name="password"]', 'web-follow-password-1');
  await Promise.all([page.waitForURL((u) => u.pathname === sessionPath), page.click('form:has(input[name="password"]) button[type="submit"]')]);
  await page.waitForSelector('#follow-up:not([hidden])');
  router.add('web-follow-1', [{ tool: 'bash', input: { command: 'sleep 120', description: 'Wait' } }, { text: 'Never.' }]);
  await page.fill('#follow-up-task', 'web-follow-1: take your time');
  await Promise.all([page.waitForURL((u) => u.pathname.startsWith('/runs/')), page.click('#follow-up button')]);
  const runId = new URL(page.url()).pathname.split('/')[2];
  await page.waitForSelector('#actions:not([hidden])');
  await page.screenshot({ path: path.join(shots, 'run-owner-phone.png'), fullPage: true });
  await page.click('#cancel');
  assert.equal((await finished(runId)).status, 'cancelled');
  await page.waitForSelector('#actions', { state: 'hidden' });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  assert.deepEqual(dialogs, []);
  assert.deepEqual(problems, []);
  await context.close();
});

test('on a phone, the owner answers the question the run\'s agent asks, picking one of its choices', async () => {
  const script = router.add('web-ask-1', [
    (body) => {
      const name = (body.tools || []).map((t) => t.name).find((n) => n.endsWith('ask_user'));
      return name ? { tool: name, input: { question: 'Which colour for the button?', choices: ['green', 'blue'] } }
        : { text: 'no ask_user tool' };
    },
    { text: 'Painted it.' },
  ]);
  const started = await ok('run_task', { task: 'web-ask-1: ask me', ...(session ? { session_id: session } : {}) });
  session = started.session_id;
  setPassword(server, 'admin', 'web-ask-password-1');
  const runPath = `/runs/${started.run_id}`;
  const { page, context, problems, dialogs } = await pageAt(`${server.url}${runPath}`, PHONE);
  await page.fill('input[name="name"]', 'admin');
  await page.fill('input[name="password"]', 'web-ask-password-1');
  await Promise.all([page.waitForURL((u) => u.pathname === runPath), page.click('form:has(input[name="password"]) button[type="submit"]')]);
  // the question appears while the run waits, with its choices and the owner's form
  await page.waitForSelector('#answer-form:not([hidden])');
  assert.equal(await page.textContent('#question-text'), 'Which colour for the button?');
  assert.match(await page.textContent('#phase'), /waiting for an answer/);
  await page.screenshot({ path: path.join(shots, 'run-question-phone.png'), fullPage: true });
  await page.click('.choices button:has-text("blue")');
  assert.equal(await page.inputValue('#answer-text'), 'blue');
  await page.click('#answer-send');
  await page.waitForSelector('#answer-form', { state: 'hidden' });
  const r = await finished(started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 1500));
  assert.match(toolResults(script.requests.at(-1).body).at(-1).text, /The person answered:\s+blue/);
  // the timeline keeps both, and the question's box goes once it is answered
  await page.waitForSelector('#question', { state: 'hidden' });
  await page.waitForSelector('#timeline :text("Answered on the run\'s page: blue")');
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  assert.deepEqual(dialogs, []);
  assert.deepEqual(problems, []);
  await context.close();
});

test('on a phone, the run page links the preview its agent opened and shows its screenshot; the app\'s page runs in an origin of its own and its WebSocket echoes', async () => {
  const app = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'preview', 'app.js'));
  router.add('web-preview-1', [
    { tool: 'bash', input: { command: `echo ${app.toString('base64')} | base64 -d > /workspace/app.js && (nohup node /workspace/app.js 3400 > /workspace/app.log 2>&1 &) && for i in $(seq 100); do grep -q listening /workspace/app.log && break; sleep 0.1; done`, description: 'Start the app' } },
    (body) => {
      const name = (body.tools || []).map((t) => t.name).find((n) => n.endsWith('open_preview'));
      return name ? { tool: name, input: { port: 3400, description: 'the app' } } : { text: 'no open_preview tool' };
    },
    { tool: 'bash', input: { command: 'sh /opt/sandbox-mcp/screenshot http://127.0.0.1:3400/ /workspace/shot.png', description: 'Screenshot' } },
    (body) => {
      const name = (body.tools || []).map((t) => t.name).find((n) => n.endsWith('add_evidence'));
      return name ? { tool: name, input: { path: 'shot.png', caption: 'the app, as a phone shows it' } } : { text: 'no add_evidence tool' };
    },
    { text: 'Have a look.' },
  ]);
  const started = await ok('run_task', { task: 'web-preview-1: show it', ...(session ? { session_id: session } : {}) });
  session = started.session_id;
  const r = await finished(started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 1500));
  const { page, context, problems } = await pageAt(r.web_url, PHONE);
  await page.waitForSelector('#previews:not([hidden]) #preview-list a');
  assert.equal(await page.textContent('#preview-list a'), 'Port 3400');
  // the screenshot the agent kept, drawn at the card's width
  await page.waitForFunction(() => document.querySelector('#evidence:not([hidden]) img')?.naturalWidth > 0);
  assert.equal(await page.textContent('#evidence figcaption'), 'the app, as a phone shows it');
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth));
  await page.screenshot({ path: path.join(shots, 'run-preview-phone.png'), fullPage: true });
  const [app2] = await Promise.all([context.waitForEvent('page'), page.click('#preview-list a')]);
  await app2.waitForFunction(() => document.getElementById('state')?.textContent === 'echo: from the page');
  // the app's page is an opaque origin: nothing of the server's is within its reach
  assert.equal(await app2.evaluate(() => self.origin), 'null');
  assert.equal(await app2.evaluate(() => { try { return document.cookie; } catch (e) { return `refused: ${e.name}`; } }),
    'refused: SecurityError');
  await app2.screenshot({ path: path.join(shots, 'preview-app-phone.png') });
  assert.deepEqual(problems, []);
  await context.close();
});
