// The stateless 2026-07-28 revision: per-request _meta, Mcp-* headers, server/discover.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rpc, sseMessages } from '../lib/server.mjs';
import {
  MODERN, META_VERSION, META_CAPS, META_SERVERINFO, META_LOGLEVEL,
  modernMeta, modernHeaders, modernRequest, assertNoSanitizerReport,
} from '../lib/http.mjs';

let server;
before(async () => { server = await startServer({ args: ['--conformance-fixtures'] }); });
after(async () => { await server?.stop(); });

async function send(id, method, params, opts) {
  const { message, headers } = modernRequest(id, method, params, opts);
  return rpc(server, message, { headers: { ...headers, ...(opts?.headers ?? {}) } });
}

function assertServerInfoMeta(result) {
  assert.equal(result.resultType, 'complete');
  assert.equal(result._meta[META_SERVERINFO].name, 'sandbox-mcp');
  assert.equal(typeof result._meta[META_SERVERINFO].version, 'string');
}

function assertError(r, status, code, id) {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal(r.body.jsonrpc, '2.0');
  assert.equal(r.body.error.code, code, r.text);
  if (id !== undefined) assert.equal(r.body.id, id);
}

test('server/discover lists the supported versions and the server identity', async () => {
  const r = await rpc(server,
    { jsonrpc: '2.0', id: 'd1', method: 'server/discover', params: { _meta: { [META_VERSION]: MODERN, [META_CAPS]: {} } } },
    { headers: { 'MCP-Protocol-Version': MODERN, 'Mcp-Method': 'server/discover' } });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal(r.body.id, 'd1');
  const res = r.body.result;
  assert.ok(res.supportedVersions.includes('2026-07-28'), `${res.supportedVersions}`);
  assert.ok(res.supportedVersions.includes('2025-11-25'), `${res.supportedVersions}`);
  assert.equal(res.resultType, 'complete');
  assert.equal(typeof res.ttlMs, 'number');
  assert.ok(res.ttlMs >= 0);
  assert.ok(['public', 'private'].includes(res.cacheScope), res.cacheScope);
  assert.equal(typeof res.capabilities.tools, 'object');
  assert.equal(res._meta[META_SERVERINFO].name, 'sandbox-mcp');
});

test('tools/list carries resultType, ttlMs and cacheScope', async () => {
  const r = await send(2, 'tools/list', {});
  assert.equal(r.status, 200);
  const res = r.body.result;
  assertServerInfoMeta(res);
  assert.equal(typeof res.ttlMs, 'number');
  assert.ok(['public', 'private'].includes(res.cacheScope));
  const tool = res.tools.find((t) => t.name === 'server_info');
  assert.equal(tool.annotations.readOnlyHint, true);
  assert.equal(tool.execution, undefined, 'no execution field in 2026-07-28');
});

test('tools/call server_info works with matching headers and reports 2026-07-28', async () => {
  const r = await send(3, 'tools/call', { name: 'server_info', arguments: {} });
  assert.equal(r.status, 200);
  assert.equal(r.body.id, 3);
  assertServerInfoMeta(r.body.result);
  assert.equal(r.body.result.structuredContent.user, 'admin');
  assert.equal(r.body.result.structuredContent.protocol_version, MODERN);
});

test('tools/call without Mcp-Name is 400 -32020', async () => {
  const r = await rpc(server,
    { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'server_info', _meta: modernMeta() } },
    { headers: modernHeaders('tools/call') });
  assertError(r, 400, -32020, 4);
  assert.match(r.body.error.message, /Mcp-Name/);
});

test('tools/call with a mismatched Mcp-Name is 400 -32020', async () => {
  const r = await send(5, 'tools/call', { name: 'server_info' }, { name: 'other_tool' });
  assertError(r, 400, -32020, 5);
  assert.match(r.body.error.message, /other_tool/);
});

test('tools/call accepts the base64 form of Mcp-Name', async () => {
  const r = await send(6, 'tools/call', { name: 'server_info' }, { name: '=?base64?c2VydmVyX2luZm8=?=' });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.structuredContent.user, 'admin');
});

test('a broken base64 Mcp-Name is 400 -32020', async () => {
  const r = await send(7, 'tools/call', { name: 'server_info' }, { name: '=?base64?!!!!?=' });
  assertError(r, 400, -32020, 7);
});

test('an Mcp-Method header that does not match the body is 400 -32020', async () => {
  const r = await send(8, 'tools/list', {}, { headers: { 'mcp-method': 'tools/call' } });
  assertError(r, 400, -32020, 8);
  assert.match(r.body.error.message, /Mcp-Method/);
});

test('a missing Mcp-Method header is 400 -32020', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: 9, method: 'tools/list', params: { _meta: modernMeta() } },
    { headers: { 'mcp-protocol-version': MODERN } });
  assertError(r, 400, -32020, 9);
});

test('a missing MCP-Protocol-Version header is 400 -32020', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: 10, method: 'tools/list', params: { _meta: modernMeta() } },
    { headers: { 'mcp-method': 'tools/list' } });
  assertError(r, 400, -32020, 10);
  assert.match(r.body.error.message, /MCP-Protocol-Version/);
});

test('an MCP-Protocol-Version header that differs from _meta is 400 -32020', async () => {
  const r = await send(11, 'tools/list', {}, { headers: { 'mcp-protocol-version': '2025-11-25' } });
  assertError(r, 400, -32020, 11);
});

test('an unsupported _meta protocol version is 400 -32022 with supported and requested', async () => {
  const r = await send(12, 'tools/list', {}, { meta: { [META_VERSION]: '1900-01-01' }, headers: { 'mcp-protocol-version': '1900-01-01' } });
  assertError(r, 400, -32022, 12);
  assert.equal(r.body.error.data.requested, '1900-01-01');
  assert.ok(Array.isArray(r.body.error.data.supported));
  assert.ok(r.body.error.data.supported.includes(MODERN));
  assert.ok(r.body.error.data.supported.includes('2025-11-25'));
});

test('a _meta version of 1900-01-01 under a 2026-07-28 header is a header mismatch, 400 -32020', async () => {
  const r = await send(12, 'tools/list', {}, { meta: { [META_VERSION]: '1900-01-01' } });
  assertError(r, 400, -32020, 12);
  assert.match(r.body.error.message, /MCP-Protocol-Version/);
});

test('missing clientCapabilities in _meta is 400 -32602', async () => {
  const r = await rpc(server,
    { jsonrpc: '2.0', id: 13, method: 'tools/list', params: { _meta: { [META_VERSION]: MODERN } } },
    { headers: modernHeaders('tools/list') });
  assertError(r, 400, -32602, 13);
  assert.match(r.body.error.message, /clientCapabilities/);
});

test('the 2026-07-28 header without a _meta protocol version is 400 -32602', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: 14, method: 'tools/list' }, { headers: modernHeaders('tools/list') });
  assertError(r, 400, -32602, 14);
});

test('initialize and ping in the 2026-07-28 form are 404 -32601', async () => {
  for (const method of ['initialize', 'ping']) {
    const params = method === 'initialize' ? { protocolVersion: MODERN, capabilities: {}, clientInfo: { name: 'x', version: '1' } } : {};
    const r = await send(`m-${method}`, method, params);
    assertError(r, 404, -32601, `m-${method}`);
  }
});

test('methods removed in 2026-07-28 (logging/setLevel, resources/subscribe) are 404 -32601', async () => {
  const setLevel = await send('sl', 'logging/setLevel', { level: 'info' });
  assertError(setLevel, 404, -32601, 'sl');
  const sub = await send('sub', 'resources/subscribe', { uri: 'test://watched-resource' });
  assertError(sub, 404, -32601, 'sub');
});

test('server/discover advertises neither subscriptions nor session logging', async () => {
  const r = await send('d2', 'server/discover', {});
  assert.equal(r.status, 200);
  const caps = r.body.result.capabilities;
  assert.equal(caps.logging, undefined);
  assert.equal(caps.resources?.subscribe, undefined);
});

test('an unknown method in the 2026-07-28 form is 404 -32601', async () => {
  const r = await send(15, 'frob/nicate', {});
  assertError(r, 404, -32601, 15);
});

test('an unknown tool in the 2026-07-28 form is 400 -32602', async () => {
  const r = await send(16, 'tools/call', { name: 'no_such_tool' });
  assertError(r, 400, -32602, 16);
});

test('a batch in the 2026-07-28 form is 400 -32600', async () => {
  const { message, headers } = modernRequest(17, 'tools/list', {});
  const r = await rpc(server, [message], { headers });
  assertError(r, 400, -32600);
});

test('progress notifications stream when a progressToken is given', async () => {
  const r = await send(18, 'tools/call', { name: 'test_tool_with_progress', arguments: {} }, { meta: { progressToken: 'm-tok' } });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const msgs = sseMessages(r.text);
  assert.equal(msgs.length, 4);
  assert.deepEqual(msgs.slice(0, 3).map((m) => m.params.progressToken), ['m-tok', 'm-tok', 'm-tok']);
  assert.equal(msgs[3].id, 18);
  assertServerInfoMeta(msgs[3].result);
});

test('no notifications/message without a logLevel in _meta; streamed with one', async () => {
  const quiet = await send(19, 'tools/call', { name: 'test_tool_with_logging', arguments: {} });
  assert.equal(quiet.status, 200);
  assert.match(quiet.headers.get('content-type'), /^application\/json/);
  assert.ok(!quiet.text.includes('notifications/message'));
  assert.equal(quiet.body.result.content[0].text, 'Tool with logging executed successfully');

  const loud = await send(20, 'tools/call', { name: 'test_tool_with_logging', arguments: {} }, { meta: { [META_LOGLEVEL]: 'info' } });
  assert.match(loud.headers.get('content-type'), /^text\/event-stream/);
  const msgs = sseMessages(loud.text);
  assert.deepEqual(msgs.map((m) => m.method ?? 'result'),
    ['notifications/message', 'notifications/message', 'notifications/message', 'result']);
  assert.equal(msgs[3].id, 20);
});

// SEP-2243: test_param_headers (a --conformance-fixtures tool) marks region, priority and
// verbose with x-mcp-header; over HTTP the headers reach the check whatever their case, and the
// server looks at no more than 32 Mcp-Param-* headers a request.
test('Mcp-Param-* headers are checked against the arguments they mirror', async () => {
  const args = { region: 'Hello, \u4e16\u754c', priority: 42, query: 'q' };
  const good = { 'mcp-param-region': '=?base64?SGVsbG8sIOS4lueVjA==?=', 'MCP-PARAM-PRIORITY': '42.0' };
  const ok = await send(30, 'tools/call', { name: 'test_param_headers', arguments: args }, { headers: good });
  assert.equal(ok.status, 200, ok.text);
  assert.match(ok.body.result.content[0].text, /^Mcp-Param headers matched the arguments: /);

  const other = await send(31, 'tools/call', { name: 'test_param_headers', arguments: args },
    { headers: { ...good, 'MCP-PARAM-PRIORITY': '41' } });
  assertError(other, 400, -32020, 31);
  assert.match(other.body.error.message, /Mcp-Param-Priority header value '41' does not match body value '42'/);

  const missing = await send(32, 'tools/call', { name: 'test_param_headers', arguments: args },
    { headers: { 'Mcp-Param-Region': good['mcp-param-region'] } });
  assertError(missing, 400, -32020, 32);
  assert.match(missing.body.error.message, /Mcp-Param-Priority header is required/);

  // unrelated Mcp-Param-* headers are ignored, up to the cap
  const extra = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`Mcp-Param-Extra${i}`, 'x']));
  const within = await send(33, 'tools/call', { name: 'test_param_headers', arguments: args },
    { headers: { ...good, ...extra(30) } });
  assert.equal(within.status, 200, within.text);
  const over = await send(34, 'tools/call', { name: 'test_param_headers', arguments: args },
    { headers: { ...good, ...extra(31) } });
  assertError(over, 400, -32020, 34);
  assert.match(over.body.error.message, /more than 32 Mcp-Param-\* headers/);
  // a tool that declares none does not look at them
  const plain = await send(35, 'tools/call', { name: 'test_simple_text', arguments: {} }, { headers: extra(40) });
  assert.equal(plain.status, 200, plain.text);
});

test('the server is still running and logged no sanitizer report', () => {
  assert.equal(server.proc.exitCode, null, server.stderr());
  assertNoSanitizerReport(server.stderr(), 'server');
});
