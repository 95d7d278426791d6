// The event stream of a run's page over plain HTTP: one SSE message per stored event, resumable
// with Last-Event-ID without gaps or duplicates, keep-alive comments while nothing happens, and
// an end when the run ends; and what the owner signed in does from the pages (a follow-up, a
// cancel). (The page itself is driven in a browser in tests/e2e/web.test.mjs.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rpc, cli } from '../lib/server.mjs';
import * as runs from '../lib/runs.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { CookieJar, request, setPassword, signIn } from '../lib/oauth.mjs';

let fake, router, server;
let nextId = 1;
// The session of the first run: the later runs go to it, to its sandbox and warm agent (undefined
// if the first test failed before its run, and they make their own).
let session;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  server = await startServer({ env: runs.codexEnv(fake.url) });
});

after(async () => {
  await server?.stop();
  await fake?.close();
});

async function ok(name, args) {
  const r = await rpc(server, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });
  assert.equal(r.body.result.isError, undefined, r.text);
  return r.body.result.structuredContent;
}

function eventsUrl(webUrl) {
  const u = new URL(webUrl);
  u.pathname += '/events';
  return u.toString();
}

// Read an SSE response, calling onChunk with all text so far; resolves with it at the end.
async function readStream(res, onChunk = () => {}) {
  const dec = new TextDecoder();
  let text = '';
  for await (const chunk of res.body) {
    text += dec.decode(chunk, { stream: true });
    onChunk(text);
  }
  return text;
}

function messages(text) {
  return text.split('\n\n').filter((m) => m.startsWith('id: ')).map((m) => {
    const id = Number(/^id: (\d+)/.exec(m)[1]);
    const data = JSON.parse(/^data: (.*)$/m.exec(m)[1]);
    return { id, data };
  });
}

test('the stream sends each event once, keeps the connection alive while the agent waits, and ends with the run', async () => {
  const s = router.add('sse-live-8d0', [
    { tool: 'bash', input: { command: 'echo one', description: 'First' } },
    { hold: true, text: 'All done.' },
  ]);
  const run = await ok('run_task', { task: 'sse-live-8d0' });
  session = run.session_id;
  await s.waitHeld();
  const res = await fetch(eventsUrl(run.web_url));
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  let released = false;
  const text = await readStream(res, (t) => {
    // a keep-alive comment comes while the model "thinks"; then let the run finish
    if (!released && t.includes('\n: keep-alive\n')) { released = true; s.release(); }
  });
  assert.ok(released, 'no keep-alive comment came');
  assert.match(text, /event: end\ndata: \{"status":"succeeded"\}\n\n$/);
  const got = messages(text);
  const result = await ok('get_result', { run_id: run.run_id });
  assert.deepEqual(got.map((m) => m.id), Array.from({ length: result.event_count }, (_, i) => i + 1));
  assert.deepEqual(got.map((m) => m.data.seq), got.map((m) => m.id));
  assert.ok(got.some((m) => m.data.type === 'text' && m.data.text === 'All done.'));
});

test('Last-Event-ID resumes after the last event the client has, without gaps or duplicates', async () => {
  router.add('sse-resume-8d0', [
    { tool: 'bash', input: { command: 'echo two', description: 'Second' } },
    { text: 'Resumed fine.' },
  ]);
  const run = await ok('run_task', { task: 'sse-resume-8d0', session_id: session });
  let r;
  do r = await ok('get_result', { run_id: run.run_id, wait_seconds: 30 });
  while (r.status === 'queued' || r.status === 'running');
  assert.ok(r.event_count >= 4, JSON.stringify(r));
  const full = messages(await readStream(await fetch(eventsUrl(run.web_url))));
  const res = await fetch(eventsUrl(run.web_url), { headers: { 'Last-Event-ID': '2' } });
  const rest = messages(await readStream(res));
  assert.deepEqual(rest.map((m) => m.id), full.slice(2).map((m) => m.id));
  assert.deepEqual(rest.map((m) => m.data), full.slice(2).map((m) => m.data));
});

test('a long agent text is cut for the page on a character boundary, not dropped', async () => {
  const long = 'a' + 'é'.repeat(3000); // the 4096-byte cut falls inside an "é"
  router.add('sse-long-8d0', [{ text: long }]);
  const run = await ok('run_task', { task: 'sse-long-8d0', session_id: session });
  let r;
  do r = await ok('get_result', { run_id: run.run_id, wait_seconds: 30 });
  while (r.status === 'queued' || r.status === 'running');
  const got = messages(await readStream(await fetch(eventsUrl(run.web_url))));
  const text = got.find((m) => m.data.type === 'text' && m.data.text?.startsWith('aé'));
  assert.ok(text, JSON.stringify(got.map((m) => m.data)));
  assert.ok(long.startsWith(text.data.text));
  assert.equal(Buffer.byteLength(text.data.text), 4095);
});

test('the pages\' icon answers at /favicon.ico too, for what a browser asks of its own accord', async () => {
  for (const p of ['/static/icon.svg', '/favicon.ico']) {
    const r = await fetch(`${server.url}${p}`);
    assert.equal(r.status, 200, p);
    assert.equal(r.headers.get('content-type'), 'image/svg+xml', p);
    assert.match(await r.text(), /^<svg/, p);
  }
  assert.equal((await fetch(`${server.url}/favicon.icon`)).status, 404);
});

test('the owner signed in follows up and cancels from the pages; a view link, a wrong CSRF token and another user are refused', async () => {
  router.add('web-owner-1', [{ text: 'First.' }]);
  const first = await ok('run_task', { task: 'web-owner-1: start', ...(session ? { session_id: session } : {}) });
  session = first.session_id;
  await runs.finished(server, first.run_id);
  const sessionUrl = new URL(first.session_web_url);
  const followUp = `/sessions/${first.session_id}/follow-up`;
  const origin = { origin: server.url };
  // not signed in: refused, and a view link reads only
  assert.equal((await request(server, followUp, { form: { task: 'x', csrf: 'x' }, headers: origin })).status, 401);
  const viewed = await request(server, `${sessionUrl.pathname}/data${sessionUrl.search}`);
  assert.equal(viewed.body.can_act, false);
  assert.equal(viewed.body.csrf, undefined);
  // the owner signed in: the data carries the form's token; a wrong one is refused
  setPassword(server, 'admin', 'web-owner-password-1');
  const jar = new CookieJar();
  assert.equal((await signIn(server, jar, { name: 'admin', password: 'web-owner-password-1' })).status, 303);
  const mine = await request(server, `${sessionUrl.pathname}/data`, { jar });
  assert.equal(mine.body.can_act, true);
  assert.equal((await request(server, followUp, { jar, headers: origin, form: { task: 'x', csrf: 'x'.repeat(43) } })).status, 403);
  const empty = await request(server, followUp, { jar, headers: origin, form: { task: '', csrf: mine.body.csrf } });
  assert.equal(empty.status, 400);
  assert.match(empty.body.error, /1 to 16384 bytes/);
  // a follow-up runs in the session, and the run's page cancels it
  router.add('web-owner-2', [{ tool: 'bash', input: { command: 'sleep 120', description: 'Wait' } }, { text: 'Never.' }]);
  const queued = await request(server, followUp, { jar, headers: origin, form: { task: 'web-owner-2: wait', csrf: mine.body.csrf } });
  assert.equal(queued.status, 200, queued.text);
  assert.equal(queued.body.session_id, first.session_id);
  assert.match(queued.body.web_url, new RegExp(`/runs/${queued.body.run_id}\\?t=`));
  const runData = await request(server, `/runs/${queued.body.run_id}/data`, { jar });
  assert.equal(runData.body.can_act, true);
  // another user signed in may do neither to it
  const bob = cli(['user', 'add', 'bob', '--data-dir', server.dataDir]);
  assert.equal(bob.status, 0, bob.stderr);
  setPassword(server, 'bob', 'web-owner-password-2');
  const bobJar = new CookieJar();
  assert.equal((await signIn(server, bobJar, { name: 'bob', password: 'web-owner-password-2' })).status, 303);
  const bobCsrf = /name="csrf" value="([^"]+)"/.exec((await request(server, '/account', { jar: bobJar })).text)[1];
  assert.equal((await request(server, followUp, { jar: bobJar, headers: origin, form: { task: 'mine now', csrf: bobCsrf } })).status, 404);
  assert.equal((await request(server, `/runs/${queued.body.run_id}/cancel`, { jar: bobJar, headers: origin, form: { csrf: bobCsrf } })).status, 404);
  assert.equal((await request(server, `/runs/${queued.body.run_id}/data`, { jar: bobJar })).status, 404);
  const cancelled = await request(server, `/runs/${queued.body.run_id}/cancel`, { jar, headers: origin, form: { csrf: mine.body.csrf } });
  assert.equal(cancelled.status, 200, cancelled.text);
  assert.equal((await runs.finished(server, queued.body.run_id)).status, 'cancelled');
  const again = await request(server, `/runs/${queued.body.run_id}/cancel`, { jar, headers: origin, form: { csrf: mine.body.csrf } });
  assert.equal(again.status, 409);
});
