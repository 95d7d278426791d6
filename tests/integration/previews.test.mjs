// Previews (src/preview): a port of a sandbox at a capability URL, proxied by the server into the
// sandbox's network namespace. A real app (tests/fixtures/preview/app.js, node) runs in the
// sandbox; a client speaks HTTP and WebSockets to it through the URL. Revoked or expired, the URL
// answers 404 and its WebSockets close; a preview reaches only its own sandbox's loopback (not
// the host, not another user's sandbox); its answers carry no cookie either way and run in an
// opaque origin; connections and previews are capped. A run's agent opens one with open_preview,
// and its page and get_result show it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { startServer, sqlRows, addUser } from '../lib/server.mjs';
import * as runs from '../lib/runs.mjs';
import { startFake, agentRouter, serverTool, toolResults } from '../lib/fake-anthropic.mjs';
import { openWebSocket } from '../lib/websocket.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const APP = readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'preview', 'app.js'), 'utf8');
let fake, router, server, bob;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  // runs by Codex (a run's agent and its tools are the same to previews whichever it is)
  server = await startServer({ env: {
    ...runs.codexEnv(fake.url), PREVIEW_CONNECTIONS: '2', PREVIEW_CONNECTIONS_PER_USER: '3',
  } });
  bob = addUser(server, 'bob');
});

after(async () => {
  const stderr = server?.stderr() ?? '';
  await server?.stop();
  await fake?.close();
  assertNoSanitizerReport(stderr, 'server');
});

const ok = (name, args, token) => runs.ok(server, name, args, token);
const call = (name, args, token) => runs.call(server, name, args, token);

// The app started in the caller's sandbox on port, once it listens.
async function startApp(port, token) {
  await ok('container_file_write', { path: 'app.js', content: APP }, token);
  const r = await ok('container_exec', { command: `nohup node app.js ${port} > app-${port}.log 2>&1 &
    for i in $(seq 100); do grep -q listening app-${port}.log && break; sleep 0.1; done; cat app-${port}.log` }, token);
  assert.match(r.stdout, new RegExp(`listening on ${port}`), r.stdout + r.stderr);
}

let url; // the first test's preview of port 3000
let previewId;

test('a port at a capability URL: the app answers through it, with the request as sent and nothing of the server\'s cookies', async () => {
  await startApp(3000);
  const opened = await ok('container_preview', { port: 3000 });
  url = opened.opened.url;
  previewId = opened.opened.id;
  assert.match(url, new RegExp(`^${server.url}/preview/prv_[a-z0-9]+-[A-Za-z0-9_-]{43}/$`));
  assert.equal(opened.previews.length, 1);
  const r = await fetch(`${url}api/items?x=1`, { method: 'POST', body: 'hello', headers: { cookie: 'smcp_session=secret' } });
  assert.equal(r.status, 200);
  const seen = await r.json();
  assert.deepEqual([seen.method, seen.url, seen.body, seen.cookie], ['POST', '/api/items?x=1', 'hello', null]);
  assert.match(seen.prefix, /^\/preview\/prv_/);
  // it ran in the sandbox, not on the host
  const hostname = (await ok('container_exec', { command: 'hostname' })).stdout.trim();
  assert.equal(seen.hostname, hostname);
  // its answer: no cookie set, an opaque origin, no referrer, CORS for its own pages
  assert.equal(r.headers.get('set-cookie'), null);
  assert.match(r.headers.get('content-security-policy'), /^sandbox allow-scripts/);
  assert.doesNotMatch(r.headers.get('content-security-policy'), /allow-same-origin/);
  assert.equal(r.headers.get('referrer-policy'), 'no-referrer');
  assert.equal(r.headers.get('access-control-allow-origin'), '*');
  // a redirect to one of its paths stays in the preview; the bare URL gets its slash
  const red = await fetch(`${url}redirect`, { redirect: 'manual' });
  assert.equal(red.status, 302);
  assert.equal(red.headers.get('location'), `${new URL(url).pathname}landed`);
  const bare = await fetch(url.slice(0, -1) + '?q=1', { redirect: 'manual' });
  assert.equal(bare.status, 308);
  assert.equal(bare.headers.get('location'), `${new URL(url).pathname}?q=1`);
  // a preflight of its page is granted
  const pre = await fetch(`${url}api`, { method: 'OPTIONS', headers: { origin: 'null', 'access-control-request-method': 'PUT' } });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-methods'), 'PUT');
});

test('a WebSocket from the app in the sandbox reaches the client and back', async () => {
  const ws = await openWebSocket(`${url}ws`);
  assert.equal(ws.status, 101, JSON.stringify(ws));
  ws.send('hi there');
  assert.equal(await ws.next(), 'echo: hi there');
  ws.send('x'.repeat(5000));
  assert.equal(await ws.next(), `echo: ${'x'.repeat(5000)}`);
  ws.close();
});

// What the app has got out of /flood and "flood N" so far, once it stops growing: the app waits
// for each write to drain, so it stops when what is in flight between it and the client is full.
async function floodedOnceStuck() {
  let last = -1;
  return runs.until(async () => {
    const now = (await (await fetch(`${url}flooded`)).json()).bytes;
    const stuck = now > 0 && now === last;
    last = now;
    if (!stuck) await new Promise((r) => setTimeout(r, 300)); // the next look is a while on
    return stuck ? now : 0;
  }, 'the flood held back');
}

test('a client that does not read holds the app back: what a preview holds in flight is bounded', async () => {
  const MiB = 1 << 20;
  // HTTP: an answer of 256 MiB whose reader reads nothing
  const base = (await (await fetch(`${url}flooded`)).json()).bytes;
  const ctl = new AbortController();
  const res = await fetch(`${url}flood?mb=256`, { signal: ctl.signal });
  assert.equal(res.status, 200);
  const held = (await floodedOnceStuck()) - base;
  assert.ok(held < 64 * MiB, `the app got ${held} bytes out to a client that read none`);
  ctl.abort();
  // a WebSocket whose client stops reading
  const ws = await openWebSocket(`${url}ws`);
  ws.socket.pause();
  const before = (await (await fetch(`${url}flooded`)).json()).bytes;
  ws.send('flood 256');
  const heldWs = (await floodedOnceStuck()) - before;
  assert.ok(heldWs < 64 * MiB, `the app got ${heldWs} bytes out to a WebSocket that read none`);
  ws.close();
});

test('connections are capped per preview and per user', async () => {
  const a = await openWebSocket(`${url}ws`);
  const b = await openWebSocket(`${url}ws`);
  assert.equal(a.status, 101);
  assert.equal(b.status, 101);
  const third = await fetch(`${url}busy`);
  assert.equal(third.status, 429);
  assert.equal(third.headers.get('retry-after'), '1');
  assert.match((await third.json()).error, /PREVIEW_CONNECTIONS/);
  // the user's third: on another preview, the last one they may have open at once
  const other = (await ok('container_preview', { port: 3000 })).opened;
  const c = await openWebSocket(`${other.url}ws`);
  assert.equal(c.status, 101);
  const fourth = await fetch(`${other.url}busy`);
  assert.equal(fourth.status, 429);
  assert.match((await fourth.json()).error, /PREVIEW_CONNECTIONS_PER_USER/);
  c.close();
  a.close();
  // once one closes, there is room again
  await runs.until(async () => (await fetch(`${url}again`)).status === 200, 'a connection freed');
  b.close();
  await ok('container_preview', { revoke: other.id });
  // a body is held to what the server takes from a request without a credential
  const big = await fetch(`${url}upload`, { method: 'POST', body: 'x'.repeat(200 * 1024) });
  assert.equal(big.status, 401);
  assert.match((await big.json()).error, /larger than the unauthenticated allowance/);
});

test('a preview reaches only its own sandbox: not the host, not another user\'s sandbox; forged and reserved ones are refused; four a sandbox', async () => {
  // the host listens on a port the sandbox does not: the preview finds nothing there
  let hostHits = 0;
  const host = http.createServer((req, res) => { hostHits++; res.end('host'); });
  await new Promise((r) => host.listen(0, '127.0.0.1', r));
  const hostPort = host.address().port;
  try {
    const p = (await ok('container_preview', { port: hostPort })).opened;
    const r = await fetch(p.url);
    assert.equal(r.status, 502);
    assert.match((await r.json()).error, new RegExp(`port ${hostPort} of the sandbox .*cannot be reached`));
    assert.equal(hostHits, 0);
    await ok('container_preview', { revoke: p.id });
  } finally {
    host.close();
  }
  // bob's app on 3200 is in his sandbox; alice's preview of 3200 reaches hers, where nothing is
  await startApp(3200, bob);
  const mine = (await ok('container_preview', { port: 3200 })).opened;
  assert.equal((await fetch(mine.url)).status, 502);
  const his = (await ok('container_preview', { port: 3200 }, bob)).opened;
  assert.equal((await fetch(`${his.url}x`)).status, 200);
  const steal = await call('container_preview', { revoke: his.id });
  assert.equal(steal.structuredContent.error.code, 'not_found');
  await ok('container_preview', { revoke: mine.id });
  await ok('container_preview', { revoke: his.id }, bob);
  // a forged capability, another preview's MAC, a bare id: 404 alike
  const good = new URL(url).pathname.split('/')[2];
  const [id, mac] = [good.slice(0, good.indexOf('-')), good.slice(good.indexOf('-') + 1)];
  const hisCap = new URL(his.url).pathname.split('/')[2];
  const otherMac = hisCap.slice(hisCap.indexOf('-') + 1);
  const forged = `${mac.slice(0, -1)}${mac.at(-1) === 'A' ? 'B' : 'A'}`; // one character changed
  for (const cap of [`${id}-${forged}`, `${id}-${otherMac}`, id, `${id}-`])
    assert.equal((await fetch(`${server.url}/preview/${cap}/`)).status, 404, cap);
  // the server's own listeners in the sandbox are not previews
  for (const port of [8788, 3128]) {
    const r = await call('container_preview', { port });
    assert.equal(r.structuredContent.error.code, 'invalid_arguments');
  }
  // four open at once a sandbox (the first test's one among them)
  const more = [];
  for (let i = 0; i < 3; i++) more.push((await ok('container_preview', { port: 4000 + i })).opened.id);
  const fifth = await call('container_preview', { port: 4010 });
  assert.equal(fifth.isError, true);
  assert.match(fifth.structuredContent.error.message, /4 previews open, the most/);
  for (const m of more) await ok('container_preview', { revoke: m });
});

test('revoked or expired, the URL answers 404 and its open WebSockets close', async () => {
  const ws = await openWebSocket(`${url}ws`);
  assert.equal(ws.status, 101);
  await ok('container_preview', { revoke: previewId });
  await runs.until(() => ws.closed, 'the WebSocket closed on revocation');
  assert.equal((await fetch(url)).status, 404);
  // expiry, as the clock brings it: the row's end moved to the past
  const p = (await ok('container_preview', { port: 3000, ttl_minutes: 5 })).opened;
  const ws2 = await openWebSocket(`${p.url}ws`);
  assert.equal(ws2.status, 101);
  ws2.send('before');
  assert.equal(await ws2.next(), 'echo: before');
  sqlRows(server, `UPDATE previews SET expires_at = 1 WHERE id = '${p.id}' RETURNING id`);
  await runs.until(() => ws2.closed, 'the WebSocket closed on expiry');
  assert.equal((await fetch(p.url)).status, 404);
});

test("a run's agent opens a preview of its app; the run's page and get_result show it", async () => {
  const b64 = Buffer.from(APP).toString('base64');
  // the app in a session of its own, so that it outlives the command (Codex ends a command's group)
  const script = router.add('pv-run-1', [
    { tool: 'bash', input: { command: `echo ${b64} | base64 -d > /workspace/app.js && setsid -f node /workspace/app.js 3300 > /workspace/app.log 2>&1 < /dev/null && for i in $(seq 100); do grep -q listening /workspace/app.log && break; sleep 0.1; done; cat /workspace/app.log`, description: 'Start the app' } },
    serverTool('open_preview', { port: 3300, description: 'the app' }),
    { text: 'The app is up.' },
  ]);
  const started = await ok('run_task', { task: 'pv-run-1: show me' });
  const r = await runs.finished(server, started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
  assert.equal(r.previews.length, 1, runs.agentLog(server, r.run_id));
  const p = r.previews[0];
  // the agent was told the preview's URL
  const told = toolResults(script.requests.at(-1).body).at(-1).text;
  assert.ok(told.includes(p.url), told);
  assert.equal(p.port, 3300);
  assert.equal(p.run_id, started.run_id);
  const seen = await (await fetch(`${p.url}hello`)).json();
  assert.equal(seen.url, '/hello');
  const ev = sqlRows(server, `SELECT summary FROM run_events WHERE run_id = '${started.run_id}' AND type = 'preview'`);
  assert.deepEqual(ev.map((e) => e.summary), ['Preview of port 3300: the app']);
  // the page's data lists it for whoever has the page
  const page = new URL(r.web_url);
  const data = await (await fetch(`${server.url}${page.pathname}/data${page.search}`)).json();
  assert.equal(data.previews[0].url, p.url);
});

test("a run's agent keeps a screenshot of its app as evidence: on the run's page, and in get_result as an image", async () => {
  const b64 = Buffer.from(APP).toString('base64');
  const script = router.add('pv-shot-2', [
    { tool: 'bash', input: { command: `echo ${b64} | base64 -d > /workspace/app.js && (nohup node /workspace/app.js 3500 > /workspace/app.log 2>&1 &) && for i in $(seq 100); do grep -q listening /workspace/app.log && break; sleep 0.1; done; sh /opt/sandbox-mcp/screenshot http://127.0.0.1:3500/ /workspace/shot.png && echo notes > /workspace/notes.txt`, description: 'Start and shoot' } },
    serverTool('add_evidence', { path: 'notes.txt', caption: 'not an image' }),
    serverTool('add_evidence', { path: '/workspace/shot.png', caption: 'the app on a phone' }),
    { text: 'Shot taken.' },
  ]);
  const started = await ok('run_task', { task: 'pv-shot-2: show me' });
  const r = await runs.finished(server, started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
  // the agent saw the shot taken, the text file refused, the image kept
  const results = toolResults(script.requests.at(-1).body).map((x) => x.text);
  assert.equal(results.length, 3, `${JSON.stringify(results)}\n${runs.agentLog(server, r.run_id)}`);
  assert.match(results.at(-3), /shot\.png/, results.at(-3));
  assert.match(results.at(-2), /not a whole PNG, JPEG, GIF or WebP image/);
  // (the tool's words, or its structured result, which is what Codex shows the model)
  assert.match(results.at(-1), /Kept as evidence 1|"n":1,"file":"evidence-1\.png"/);
  assert.equal(r.evidence.length, 1);
  assert.deepEqual([r.evidence[0].n, r.evidence[0].mime, r.evidence[0].caption], [1, 'image/png', 'the app on a phone']);
  // get_result gives it as image content beside its caption
  const full = await call('get_result', { run_id: started.run_id });
  const img = full.content.find((c) => c.type === 'image');
  assert.equal(img.mimeType, 'image/png');
  assert.equal(Buffer.from(img.data, 'base64').subarray(1, 4).toString(), 'PNG');
  assert.ok(full.content.some((c) => c.type === 'text' && c.text === 'Evidence 1: the app on a phone'));
  // the run's page serves it to whoever holds the page's link, and no one else
  const page = new URL(r.web_url);
  const shot = await fetch(`${server.url}${r.evidence[0].path}${page.search}`);
  assert.equal(shot.status, 200);
  assert.equal(shot.headers.get('content-type'), 'image/png');
  assert.equal(Buffer.from(await shot.arrayBuffer()).length, r.evidence[0].bytes);
  assert.notEqual((await fetch(`${server.url}${r.evidence[0].path}`)).status, 200);
  assert.equal((await fetch(`${server.url}/runs/${started.run_id}/evidence/2${page.search}`)).status, 404);
});
