// HTTP layer: routes, status codes, headers, body limits, Origin/Host checks, metrics.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import net from 'node:net';

import { startServer, rpc } from '../lib/server.mjs';
import { httpRequest, rawExchange, parseMetrics, assertNoSanitizerReport, portOf } from '../lib/http.mjs';
import { until } from '../lib/runs.mjs';

const PING = { jsonrpc: '2.0', id: 1, method: 'ping' };
const MAX_BODY = 4 * 1024 * 1024;
const METRICS_TOKEN = 'metrics-test-token';
const metricsAuth = { headers: { authorization: `Bearer ${METRICS_TOKEN}` } };

let server;
before(async () => {
  server = await startServer({ env: {
    ALLOWED_ORIGINS: 'https://app.example, https://other.example', METRICS_TOKEN,
  } });
  assert.match(server.token ?? '', /^smcp_/, `no first token on stdout:\n${server.stdout()}`);
});
after(async () => { await server?.stop(); });

test('GET and DELETE /mcp answer 405 with Allow: POST and a JSON-RPC error body', async () => {
  for (const method of ['GET', 'DELETE']) {
    const res = await fetch(server.mcpUrl, {
      method, headers: { authorization: `Bearer ${server.token}`, accept: 'application/json, text/event-stream' },
    });
    assert.equal(res.status, 405, method);
    assert.equal(res.headers.get('allow'), 'POST', method);
    const body = await res.json();
    assert.equal(body.jsonrpc, '2.0');
    assert.equal(body.error.code, -32600);
    assert.match(body.error.message, /Method Not Allowed/);
  }
});

test('the retired /sse transport answers 410 problem+json with a Link to /mcp, for any method and subpath', async () => {
  for (const [method, path] of [['GET', '/sse'], ['POST', '/sse'], ['DELETE', '/sse'], ['GET', '/sse/x'], ['POST', '/sse/messages?session=1']]) {
    const res = await fetch(server.url + path, { method, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? '{}' : undefined });
    assert.equal(res.status, 410, `${method} ${path}`);
    assert.equal(res.headers.get('content-type'), 'application/problem+json', `${method} ${path}`);
    const link = res.headers.get('link');
    assert.ok(link && link.includes('/mcp>'), `Link header ${link}`);
    assert.match(link, /rel="alternate"/);
    const body = await res.json();
    assert.equal(body.status, 410);
    assert.equal(body.title, 'Gone');
    assert.equal(body.endpoint, '/mcp');
  }
});

test('/healthz answers 200 JSON with status ok', async () => {
  const res = await fetch(`${server.url}/healthz`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^application\/json/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  const body = await res.json();
  assert.equal(body.status, 'ok');
  assert.equal(body.database, true);
  assert.match(body.version, /^\d+\.\d+\.\d+/);
});

test('/metrics counts /mcp requests by route and tool calls by tool and outcome', async () => {
  const before_ = parseMetrics(await (await fetch(`${server.url}/metrics`, metricsAuth)).text());
  const okKey = 'sandbox_mcp_tool_calls_total{tool="server_info",outcome="ok"}';
  const errKey = 'sandbox_mcp_tool_calls_total{tool="server_info",outcome="error"}';
  const r = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'server_info', arguments: {} } });
  assert.equal(r.status, 200);
  assert.equal(r.body.result.isError, undefined);
  const bad = await rpc(server, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'server_info', arguments: { x: 1 } } });
  assert.equal(bad.body.result.isError, true);

  const res = await fetch(`${server.url}/metrics`, metricsAuth);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  assert.match(text, /^# TYPE sandbox_mcp_http_requests_total counter$/m);
  assert.match(text, /^sandbox_mcp_http_requests_total\{route="\/mcp",status="200"\} \d+$/m);
  const after_ = parseMetrics(text);
  assert.equal((after_.get(okKey) ?? 0) - (before_.get(okKey) ?? 0), 1, 'one ok server_info call');
  assert.equal((after_.get(errKey) ?? 0) - (before_.get(errKey) ?? 0), 1, 'one error server_info call');
  const mcp200 = 'sandbox_mcp_http_requests_total{route="/mcp",status="200"}';
  assert.ok(after_.get(mcp200) - (before_.get(mcp200) ?? 0) >= 1, '/mcp 200 requests counted');
});

test('unknown paths answer 404 JSON', async () => {
  for (const path of ['/nope', '/mcpx', '/api/v1/things']) {
    const res = await fetch(server.url + path);
    assert.equal(res.status, 404, path);
    assert.match(res.headers.get('content-type'), /^application\/json/, path);
    const body = await res.json();
    assert.equal(body.code, 'not_found', path);
  }
});

test('/mcp/extra answers 404 even with valid credentials', async () => {
  const res = await fetch(`${server.mcpUrl}/extra`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token}` },
    body: JSON.stringify(PING),
  });
  assert.equal(res.status, 404);
  const body = await res.json();
  assert.equal(body.code, 'not_found');
  assert.match(body.error, /\/mcp/);
});

test('subpaths of /healthz and /metrics are unknown paths (404), like /mcp/extra', async () => {
  for (const path of ['/healthz/extra', '/metrics/extra']) {
    const res = await fetch(server.url + path);
    assert.equal(res.status, 404, `${path} answered ${res.status}: ${(await res.text()).slice(0, 80)}`);
  }
});

test('a chunked body of 4 MiB + 1 bytes is rejected with 413', async () => {
  // Chunked, so the server learns the size only by reading it all; with a Content-Length the
  // server may answer and close before the body is sent (see the next test).
  const n = MAX_BODY + 1;
  const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Accept: application/json, text/event-stream\r\nAuthorization: Bearer ${server.token}\r\n` +
    `Transfer-Encoding: chunked\r\n\r\n`;
  const body = Buffer.alloc(n, 0x20);
  Buffer.from(JSON.stringify(PING)).copy(body);
  const reply = await rawExchange(server, [head, `${n.toString(16)}\r\n`, body, '\r\n0\r\n\r\n']);
  assert.match(reply, /^HTTP\/1\.1 413 /, `reply: ${reply.slice(0, 200)}`);
  // a JSON-RPC error naming the limit (the id is unknown: the body is not parsed)
  assert.match(reply, /\r\ncontent-type: application\/json\r\n/i);
  const msg = JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4));
  assert.equal(msg.id, null);
  assert.equal(msg.error.code, -32600);
  assert.match(msg.error.message, /at most 4194304 bytes a request/);
});

test('a declared Content-Length of 4 MiB + 1 is rejected with 413 before the body is sent', async () => {
  const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Accept: application/json, text/event-stream\r\nAuthorization: Bearer ${server.token}\r\n` +
    `Content-Length: ${MAX_BODY + 1}\r\n\r\n`;
  const reply = await rawExchange(server, [head]);
  assert.match(reply, /^HTTP\/1\.1 413 /, `reply: ${reply.slice(0, 200)}`);
});

test('sockets a client keeps open after 413s are capped: the server holds at most 64 of them', async () => {
  // After a 413 the server reads and drops what the client still sends, outside the gate's
  // connection caps: a client repeating oversized requests must not pile up descriptors.
  const fds = () => readdirSync(`/proc/${server.proc.pid}/fd`).length;
  const before = fds();
  const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Authorization: Bearer ${server.token}\r\nContent-Length: ${MAX_BODY + 1}\r\n\r\n`;
  const socks = [];
  try {
    for (let i = 0; i < 100; i++) {
      const s = net.connect(portOf(server), '127.0.0.1');
      socks.push(s);
      const reply = await new Promise((resolve, reject) => {
        let got = '';
        s.on('error', reject);
        s.on('data', (d) => { got += d; if (got.includes('\r\n\r\n')) resolve(got); });
        s.on('close', () => resolve(got));
        s.write(head);
      });
      assert.match(reply, /^HTTP\/1\.1 413 /);
    }
    // The last ones' closes reach the server in their own time: wait until it has let them go.
    let held;
    await until(() => (held = fds() - before) <= 64 + 8, () => `the server holds ${held} more descriptors`, 10000);
    assert.ok(held <= 64 + 8, `the server holds ${held} more descriptors`);
  } finally {
    for (const s of socks) s.destroy();
  }
});

test('a body of exactly 4 MiB (valid JSON padded with whitespace) is accepted', async () => {
  const body = Buffer.alloc(MAX_BODY, 0x20);
  Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 'at-limit', method: 'ping' })).copy(body);
  const res = await httpRequest(server, {
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token}`, 'content-length': body.length },
    body,
  });
  assert.equal(res.status, 200, res.text.slice(0, 200));
  assert.deepEqual(res.body, { jsonrpc: '2.0', id: 'at-limit', result: {} });
});

test('a 3 MiB valid request gets a JSON-RPC answer', async () => {
  const pad = 'p'.repeat(3 * 1024 * 1024);
  const r = await rpc(server, { jsonrpc: '2.0', id: 'big', method: 'ping', params: { _meta: { pad } } });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, { jsonrpc: '2.0', id: 'big', result: {} });
});

test('a foreign Origin is rejected with 403', async () => {
  const r = await rpc(server, PING, { headers: { origin: 'http://evil.example' } });
  assert.equal(r.status, 403);
  assert.equal(r.body.code, 'forbidden');
  assert.match(r.body.error, /Origin/);
});

test('an Origin that only starts with an allowed one is rejected with 403', async () => {
  const r = await rpc(server, PING, { headers: { origin: 'https://app.example.evil.example' } });
  assert.equal(r.status, 403);
});

test('a loopback Origin (http://localhost:1234) is allowed on a loopback listener', async () => {
  const r = await rpc(server, PING, { headers: { origin: 'http://localhost:1234' } });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, { jsonrpc: '2.0', id: 1, result: {} });
});

test('ALLOWED_ORIGINS allows the listed origins', async () => {
  for (const origin of ['https://app.example', 'https://other.example']) {
    const r = await rpc(server, PING, { headers: { origin } });
    assert.equal(r.status, 200, origin);
    assert.deepEqual(r.body.result, {});
  }
});

test('a foreign Host header (DNS rebinding) is rejected with 403 on a loopback listener', async () => {
  const res = await httpRequest(server, {
    headers: { host: 'evil.example.com', 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token}` },
    body: JSON.stringify(PING),
  });
  assert.equal(res.status, 403);
  assert.equal(res.body.code, 'forbidden');
  assert.match(res.body.error, /Host/);
});

test('a loopback Host header with another port is allowed', async () => {
  const res = await httpRequest(server, {
    headers: { host: 'localhost:1234', 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token}` },
    body: JSON.stringify(PING),
  });
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { jsonrpc: '2.0', id: 1, result: {} });
});

test('Content-Type text/plain is rejected with 415', async () => {
  const r = await rpc(server, PING, { headers: { 'content-type': 'text/plain' } });
  assert.equal(r.status, 415);
  assert.equal(r.body.error.code, -32600);
  assert.match(r.body.error.message, /Unsupported Media Type/);
});

test('Content-Type application/json; charset=utf-8 is accepted', async () => {
  const r = await rpc(server, PING, { headers: { 'content-type': 'application/json; charset=utf-8' } });
  assert.equal(r.status, 200);
});

test('Accept: text/html is rejected with 406', async () => {
  const r = await rpc(server, PING, { headers: { accept: 'text/html' } });
  assert.equal(r.status, 406);
  assert.equal(r.body.error.code, -32600);
  assert.match(r.body.error.message, /Not Acceptable/);
});

test('every response carries a distinct x-request-id', async () => {
  const a = await rpc(server, PING);
  const b = await fetch(`${server.url}/healthz`);
  const c = await fetch(`${server.url}/nope`);
  const ids = [a.headers.get('x-request-id'), b.headers.get('x-request-id'), c.headers.get('x-request-id')];
  for (const id of ids) assert.ok(id && id.length > 0, `x-request-id ${id}`);
  assert.equal(new Set(ids).size, 3, `ids ${ids}`);
});

test('GET / describes the server as JSON', async () => {
  const res = await fetch(`${server.url}/`);
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.name, 'sandbox-mcp');
  assert.match(body.mcp, /\/mcp$/);
});

test('the server is still running and logged no sanitizer report', () => {
  assert.equal(server.proc.exitCode, null, server.stderr());
  assertNoSanitizerReport(server.stderr(), 'server');
});
