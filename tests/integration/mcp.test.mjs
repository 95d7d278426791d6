// MCP over POST /mcp in the legacy revisions (2025-03-26, 2025-06-18, 2025-11-25).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rpc } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

function initialize(version, id = 1) {
  return rpc(server, {
    jsonrpc: '2.0', id, method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'itest', version: '1.0.0' } },
  });
}

const call = (id, name, args) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, ...(args !== undefined ? { arguments: args } : {}) } });

for (const version of ['2025-03-26', '2025-06-18', '2025-11-25']) {
  test(`initialize echoes the supported version ${version}`, async () => {
    const r = await initialize(version);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type'), /^application\/json/);
    assert.equal(r.body.id, 1);
    assert.equal(r.body.result.protocolVersion, version);
    assert.equal(r.body.result.serverInfo.name, 'sandbox-mcp');
    assert.equal(typeof r.body.result.serverInfo.version, 'string');
    assert.equal(typeof r.body.result.capabilities.tools, 'object');
    assert.equal(r.headers.get('mcp-session-id'), null, 'a stateless server issues no session');
  });
}

test('initialize answers 2025-11-25 for an unknown requested version', async () => {
  const r = await initialize('1999-01-01', 'init-x');
  assert.equal(r.status, 200);
  assert.equal(r.body.id, 'init-x');
  assert.equal(r.body.result.protocolVersion, '2025-11-25');
  assert.equal(r.body.result.serverInfo.name, 'sandbox-mcp');
});

test('notifications/initialized answers 202 with an empty body', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', method: 'notifications/initialized' });
  assert.equal(r.status, 202);
  assert.equal(r.text, '');
});

test('a JSON-RPC response posted by the client answers 202 with an empty body', async () => {
  for (const msg of [{ jsonrpc: '2.0', id: 5, result: {} }, { jsonrpc: '2.0', id: 'x', error: { code: -1, message: 'no' } }]) {
    const r = await rpc(server, msg);
    assert.equal(r.status, 202);
    assert.equal(r.text, '');
  }
});

test('ping answers an empty result', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: 'p', method: 'ping' });
  assert.equal(r.status, 200);
  assert.deepEqual(r.body, { jsonrpc: '2.0', id: 'p', result: {} });
});

test('tools/list lists server_info with schemas and read-only annotations', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: 3, method: 'tools/list' });
  assert.equal(r.status, 200);
  assert.equal(r.body.id, 3);
  const tool = r.body.result.tools.find((t) => t.name === 'server_info');
  assert.ok(tool, `tools: ${r.body.result.tools.map((t) => t.name)}`);
  assert.equal(tool.inputSchema.type, 'object');
  assert.equal(tool.inputSchema.properties.include_tools.type, 'boolean');
  assert.equal(tool.outputSchema.type, 'object');
  // a success has user; a failed call has error instead
  assert.ok(tool.outputSchema.anyOf[0].required.includes('user'));
  assert.deepEqual(tool.outputSchema.anyOf[1].required, ['error']);
  assert.equal(tool.annotations.readOnlyHint, true);
  assert.equal(tool.annotations.destructiveHint, false);
  assert.equal(typeof tool.description, 'string');
  assert.equal(r.body.result.nextCursor, undefined);
  assert.equal(r.body.result.resultType, undefined, 'no 2026 fields in a legacy result');
});

test('tools/call server_info returns structuredContent and the same JSON as text', async () => {
  const r = await rpc(server, call(4, 'server_info', {}));
  assert.equal(r.status, 200);
  assert.equal(r.body.id, 4);
  const res = r.body.result;
  assert.equal(res.isError, undefined);
  assert.equal(res.structuredContent.user, 'admin');
  assert.equal(res.structuredContent.name, 'sandbox-mcp');
  assert.equal(res.structuredContent.protocol_version, '2025-03-26', 'no header means 2025-03-26');
  assert.equal(res.content[0].type, 'text');
  assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent);
});

test('tools/call reports the protocol version named in MCP-Protocol-Version', async () => {
  const r = await rpc(server, call(5, 'server_info', {}), { headers: { 'mcp-protocol-version': '2025-06-18' } });
  assert.equal(r.status, 200);
  assert.equal(r.body.result.structuredContent.protocol_version, '2025-06-18');
});

test('tools/call server_info with include_tools lists the tool names', async () => {
  const r = await rpc(server, call(6, 'server_info', { include_tools: true }));
  assert.deepEqual(r.body.result.structuredContent.tools, [
    'server_info', 'container_initialize', 'container_ping', 'container_exec',
    'container_file_write', 'container_file_read', 'container_files_list', 'container_file_delete',
    'container_preview', 'run_task', 'get_result', 'list_runs', 'cancel_run', 'deliver_run', 'answer_run',
  ]);
});

test('tools/call with an unknown tool is a JSON-RPC error -32602', async () => {
  const r = await rpc(server, call(7, 'no_such_tool', {}));
  assert.equal(r.body.id, 7);
  assert.equal(r.body.error.code, -32602);
  assert.match(r.body.error.message, /no_such_tool/);
  assert.equal(r.body.result, undefined);
});

test('tools/call with a wrongly typed argument is a tool error naming the argument', async () => {
  const r = await rpc(server, call(8, 'server_info', { include_tools: 'yes' }));
  assert.equal(r.status, 200);
  assert.equal(r.body.id, 8);
  assert.equal(r.body.result.isError, true);
  assert.equal(r.body.result.content[0].type, 'text');
  assert.match(r.body.result.content[0].text, /include_tools/);
  // the error shape every failed call has, with the same words
  assert.deepEqual(r.body.result.structuredContent,
    { error: { code: 'invalid_arguments', message: r.body.result.content[0].text } });
});

test('tools/call with an unknown argument is a tool error naming it', async () => {
  const r = await rpc(server, call(9, 'server_info', { frobnicate: 1 }));
  assert.equal(r.body.result.isError, true);
  assert.match(r.body.result.content[0].text, /frobnicate/);
});

test('tools/call with non-object arguments or no name is -32602', async () => {
  const a = await rpc(server, call(10, 'server_info', [1, 2]));
  assert.equal(a.body.error.code, -32602);
  const b = await rpc(server, { jsonrpc: '2.0', id: 11, method: 'tools/call', params: {} });
  assert.equal(b.body.error.code, -32602);
});

test('an unknown method is -32601', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: 12, method: 'frob/nicate' });
  assert.equal(r.body.id, 12);
  assert.equal(r.body.error.code, -32601);
  assert.match(r.body.error.message, /frob\/nicate/);
});

test('a body that is not JSON is HTTP 400 with -32700 and id null', async () => {
  for (const text of ['{"jsonrpc":"2.0","id":1,', 'not json', '']) {
    const r = await rpc(server, text);
    assert.equal(r.status, 400, JSON.stringify(text));
    assert.equal(r.body.error.code, -32700);
    assert.equal(r.body.id, null);
  }
});

test('invalid requests are HTTP 400 with -32600', async () => {
  const cases = [
    { jsonrpc: '1.0', id: 1, method: 'ping' },
    { jsonrpc: '2.0', id: { a: 1 }, method: 'ping' },
    { jsonrpc: '2.0', id: 1, method: 42 },
    { jsonrpc: '2.0', id: 1, method: 'ping', params: [1] },
    { id: 1, method: 'ping' },
  ];
  for (const msg of cases) {
    const r = await rpc(server, msg);
    assert.equal(r.status, 400, JSON.stringify(msg));
    assert.equal(r.body.error.code, -32600, JSON.stringify(msg));
  }
  const idObj = await rpc(server, { jsonrpc: '2.0', id: { a: 1 }, method: 'ping' });
  assert.equal(idObj.body.id, null, 'an unusable id is answered with id null');
});

test('valid JSON that is not an object or array (42, "x", null) is -32600 Invalid Request, not -32700', async () => {
  // JSON-RPC 2.0: -32700 is for text that is not JSON; well-formed JSON that is not a Request
  // object is -32600.
  for (const text of ['42', '"ping"', 'null', 'true']) {
    const r = await rpc(server, text);
    assert.equal(r.status, 400, text);
    assert.equal(r.body.error.code, -32600, `${text}: ${r.text}`);
    assert.equal(r.body.id, null);
  }
});

test('an unsupported MCP-Protocol-Version header is HTTP 400', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: 13, method: 'ping' }, { headers: { 'mcp-protocol-version': '1999-01-01' } });
  assert.equal(r.status, 400);
  assert.equal(r.body.id, 13);
  assert.equal(r.body.error.code, -32600);
  assert.equal(r.body.error.data.requested, '1999-01-01');
  assert.ok(r.body.error.data.supported.includes('2025-11-25'));
});

test('a batch under 2025-06-18 (and 2025-11-25) is HTTP 400 -32600', async () => {
  for (const v of ['2025-06-18', '2025-11-25']) {
    const r = await rpc(server, [{ jsonrpc: '2.0', id: 1, method: 'ping' }], { headers: { 'mcp-protocol-version': v } });
    assert.equal(r.status, 400, v);
    assert.equal(r.body.error.code, -32600, v);
    assert.equal(r.body.id, null);
  }
});

for (const [label, headers] of [['MCP-Protocol-Version 2025-03-26', { 'mcp-protocol-version': '2025-03-26' }], ['no version header', {}]]) {
  test(`a batch with ${label} answers its requests in one array`, async () => {
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 'b', method: 'tools/list' },
    ];
    const r = await rpc(server, batch, { headers });
    assert.equal(r.status, 200);
    assert.ok(Array.isArray(r.body), r.text.slice(0, 200));
    assert.equal(r.body.length, 2);
    const byId = new Map(r.body.map((m) => [m.id, m]));
    assert.deepEqual(byId.get(1).result, {});
    assert.ok(byId.get('b').result.tools.some((t) => t.name === 'server_info'));
  });
}

test('a batch of notifications only answers 202', async () => {
  const r = await rpc(server, [{ jsonrpc: '2.0', method: 'notifications/initialized' }]);
  assert.equal(r.status, 202);
  assert.equal(r.text, '');
});

test('an empty batch is HTTP 400 -32600', async () => {
  const r = await rpc(server, []);
  assert.equal(r.status, 400);
  assert.equal(r.body.error.code, -32600);
});

test('tools/list with a cursor is -32602 (no cursor was ever issued)', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: 14, method: 'tools/list', params: { cursor: 'abc' } });
  assert.equal(r.body.id, 14);
  assert.equal(r.body.error.code, -32602);
});

test('the server is still running and logged no sanitizer report', () => {
  assert.equal(server.proc.exitCode, null, server.stderr());
  assertNoSanitizerReport(server.stderr(), 'server');
});
