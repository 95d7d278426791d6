// The run and session pages in a real browser: headless Chromium (the Debian package) driven by
// playwright-core, against the real server with OpenCode running against a scripted fake
// upstream. Screenshots (phone and desktop width) go to tests/out/screenshots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

import { startServer, rpc, cli } from '../lib/server.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';

const shots = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'out', 'screenshots');
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 900 };

let fake, router, server, browser;
let nextId = 1;

before(async () => {
  mkdirSync(shots, { recursive: true });
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  server = await startServer({ env: { ANTHROPIC_API_KEY: 'sk-ant-test-key', ANTHROPIC_BASE_URL: fake.url } });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  });
});

after(async () => {
  await browser?.close();
  await server?.stop();
  await fake?.close();
});

async function ok(name, args) {
  const r = await rpc(server, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.isError, undefined, r.text);
  return r.body.result.structuredContent;
}

async function finished(runId) {
  for (;;) {
    const r = await ok('get_result', { run_id: runId, wait_seconds: 30 });
    if (!['queued', 'running'].includes(r.status)) return r;
  }
}

async function pageAt(url, viewport) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  const res = await page.goto(url);
  return { page, context, res, problems };
}

test('a running run: events appear as the agent works, then the final state', async () => {
  const s = router.add('web-live-71b', [
    { tool: 'write', input: { filePath: '/workspace/web/notes.md', content: '# Notes\nfirst line\n' } },
    // (the curl is refused: these servers give sandboxes no network; the page shows the refusal)
    { hold: true, tool: 'bash', input: { command: "cd /workspace/web && git init -q 2>/dev/null; curl -s --noproxy '' -x http://127.0.0.1:3128 http://localhost:9/ >/dev/null; echo done", description: 'Finish up' } },
    { text: 'Wrote notes.md for you.' },
  ]);
  const run = await ok('run_task', { task: 'web-live-71b: write some notes', title: 'Notes for the page' });
  await s.waitHeld();
  const phone = await pageAt(run.web_url, PHONE);
  assert.equal(phone.res.status(), 200);
  const { page } = phone;
  // the events so far (step start, the write, a step finish) are on the page while it runs
  await page.waitForFunction(() => document.querySelectorAll('#timeline li').length >= 3);
  assert.equal(await page.textContent('#status'), 'running');
  assert.equal(await page.textContent('#title'), 'Notes for the page');
  assert.match(await page.textContent('#timeline'), /write/);
  assert.equal(await page.isVisible('#live'), true);
  await page.screenshot({ path: path.join(shots, 'run-running-phone.png'), fullPage: true });
  const before = await page.$$eval('#timeline li', (l) => l.length);
  s.release();
  // later events arrive on the same page, and the end brings the final state
  await page.waitForFunction(() => document.querySelector('#status').textContent === 'succeeded',
    null, { timeout: 120000 });
  await page.waitForFunction(() => !document.querySelector('#outcome').hidden);
  const after = await page.$$eval('#timeline li', (l) => l.map((x) => Number(x.dataset.seq)));
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
  await desk.page.waitForFunction(() => document.querySelectorAll('#timeline li').length > 0);
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
  const run = await ok('run_task', { task: `web-xss-2c9 ${evil}`, title: `t ${evil}` });
  await finished(run.run_id);
  const { page, context, problems } = await pageAt(run.web_url, DESKTOP);
  await page.waitForFunction(() => document.querySelector('#status').textContent !== 'loading');
  await page.waitForFunction(() => !document.querySelector('#outcome').hidden);
  await page.waitForFunction(() => document.querySelectorAll('#timeline li').length > 0);
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

test('without the view token the page and the stream are 401; another run\'s token is 403; revoked links stop', async () => {
  router.add('web-denied-e40', [{ text: 'Secret result text.' }]);
  router.add('web-other-e40', [{ text: 'Other.' }]);
  const run = await ok('run_task', { task: 'web-denied-e40' });
  const other = await ok('run_task', { task: 'web-other-e40' });
  await finished(run.run_id);
  await finished(other.run_id);
  const base = `${server.url}/runs/${run.run_id}`;
  const otherToken = new URL(other.web_url).searchParams.get('t');

  const bare = await pageAt(base, PHONE);
  assert.equal(bare.res.status(), 401);
  const text = await bare.page.textContent('body');
  assert.doesNotMatch(text, /Secret result|web-denied/);
  await bare.page.screenshot({ path: path.join(shots, 'run-denied-phone.png'), fullPage: true });
  await bare.context.close();

  const wrong = await pageAt(`${base}?t=${otherToken}`, PHONE);
  assert.equal(wrong.res.status(), 403);
  assert.doesNotMatch(await wrong.page.textContent('body'), /Secret result|web-denied/);
  await wrong.context.close();

  for (const suffix of ['/events', '/data']) {
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
