// The tasks extension's conformance fixtures (serve --conformance-fixtures): what the suite does
// not check. A fixture task is its owner's alone, the caps on tasks kept refuse with a clear error,
// tasks/update refuses a task it cannot deliver to, an expired task is gone, and tasks/list of the
// 2025-11-25 revision pages through both sources (the fixtures and the runs).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rpc, addUser } from '../lib/server.mjs';
import { META_CAPS, modernRequest, assertNoSanitizerReport } from '../lib/http.mjs';

const EXT = 'io.modelcontextprotocol/tasks';
const WITH_TASKS = { [META_CAPS]: { extensions: { [EXT]: {} } } };

let server, bob;
before(async () => {
  server = await startServer({
    args: ['--conformance-fixtures'],
    env: { CONFORMANCE_TASKS_PER_USER: '3', CONFORMANCE_TASKS_MAX: '4' },
  });
  bob = addUser(server, 'bob');
});
after(async () => {
  const r = await server?.stop();
  assertNoSanitizerReport(server?.stderr() ?? '', 'server');
  assert.equal(r?.code, 0, server?.stderr());
});

let nextId = 1;
// A stateless-revision request that declares the tasks extension; token: whose it is.
async function call(srv, method, params, { token = srv.token } = {}) {
  const name = params.name ?? params.taskId;
  const { message, headers } = modernRequest(nextId++, method, params, { meta: WITH_TASKS, name });
  return rpc(srv, message, { headers, token });
}

async function createTask(srv, name, args, opts) {
  const r = await call(srv, 'tools/call', { name, arguments: args }, opts);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.resultType, 'task', r.text);
  assert.match(r.body.result.taskId, /^ftask_/);
  return r.body.result.taskId;
}

function assertRpcError(r, code, re) {
  assert.ok(r.body?.error, `expected a JSON-RPC error, got ${r.text}`);
  assert.equal(r.body.error.code, code, r.text);
  if (re) assert.match(r.body.error.message, re);
}

let working, asking;

test("another user's fixture task is not found", async () => {
  working = await createTask(server, 'slow_compute', { seconds: 120, label: 'mine' });
  const mine = await call(server, 'tasks/get', { taskId: working });
  assert.equal(mine.body.result.status, 'working', mine.text);
  for (const [method, params] of [
    ['tasks/get', { taskId: working }],
    ['tasks/cancel', { taskId: working }],
    ['tasks/update', { taskId: working, inputResponses: {} }],
  ]) {
    const r = await call(server, method, params, { token: bob });
    assertRpcError(r, -32602, /Task not found/);
  }
  // untouched by bob's cancel
  const still = await call(server, 'tasks/get', { taskId: working });
  assert.equal(still.body.result.status, 'working', still.text);
});

test('tasks/update refuses an unknown task, a task not waiting for input and bad responses', async () => {
  asking = await createTask(server, 'confirm_delete', { filename: 'a.txt' });
  const got = await call(server, 'tasks/get', { taskId: asking });
  assert.equal(got.body.result.status, 'input_required', got.text);
  const keys = Object.keys(got.body.result.inputRequests);
  assert.equal(keys.length, 1, got.text);
  assert.equal(got.body.result.inputRequests[keys[0]].method, 'elicitation/create');

  for (const taskId of ['ftask_none', 'run_none', 'nobody-owns-this'])
    assertRpcError(await call(server, 'tasks/update', { taskId, inputResponses: {} }), -32602,
      /Task not found/);
  assertRpcError(await call(server, 'tasks/update', { taskId: working, inputResponses: { [keys[0]]: {} } }),
    -32602, /not waiting for input: its status is 'working'/);
  assertRpcError(await call(server, 'tasks/update', { taskId: asking, inputResponses: [] }), -32602,
    /inputResponses must be an object/);
  const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, {}]));
  assertRpcError(await call(server, 'tasks/update', { taskId: asking, inputResponses: many }), -32602,
    /too many entries \(at most 32\)/);
  // 32 is fine: keys not outstanding are ignored, and the task still waits
  const fine = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`k${i}`, {}]));
  const ack = await call(server, 'tasks/update', { taskId: asking, inputResponses: fine });
  assert.equal(ack.body.result?.resultType, 'complete', ack.text);
  assert.equal((await call(server, 'tasks/get', { taskId: asking })).body.result.status, 'input_required');

  // the answer reaches the task, which completes with it
  const answered = await call(server, 'tasks/update', {
    taskId: asking, inputResponses: { [keys[0]]: { action: 'accept', content: { confirm: true } } },
  });
  assert.equal(answered.body.result?.resultType, 'complete', answered.text);
  const done = await call(server, 'tasks/get', { taskId: asking });
  assert.equal(done.body.result.status, 'completed', done.text);
  assert.equal(done.body.result.inputRequests, undefined, done.text);
  assert.match(done.body.result.result.content[0].text, /Deleted 'a\.txt'/);
  assertRpcError(await call(server, 'tasks/update', { taskId: asking, inputResponses: {} }), -32602,
    /not waiting for input: its status is 'completed'/);
});

test('the caps on fixture tasks refuse with a clear error', async () => {
  // admin holds two (one working, one completed: kept until it expires) of three
  await createTask(server, 'slow_compute', { seconds: 0, label: 'third' });
  const refused = await call(server, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } });
  assert.equal(refused.body.result?.isError, true, refused.text);
  assert.equal(refused.body.result.structuredContent.error.code, 'busy');
  assert.match(refused.body.result.content[0].text,
    /too many tasks: each user's at most 3 are kept \(CONFORMANCE_TASKS_PER_USER\)/);
  await server.waitLog(/mcp fixture-task refused user=\S+ reason=per-user-cap/);

  // bob takes the fourth and last of the server's
  await createTask(server, 'slow_compute', { seconds: 0 }, { token: bob });
  const full = await call(server, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0 } },
    { token: bob });
  assert.equal(full.body.result?.isError, true, full.text);
  assert.match(full.body.result.content[0].text, /too many tasks: at most 4 are kept \(CONFORMANCE_TASKS_MAX\)/);
  await server.waitLog(/mcp fixture-task refused user=\S+ reason=cap/);
});

test('tasks/list of 2025-11-25 pages through the fixtures and the runs', async () => {
  const seen = [];
  let cursor;
  for (let page = 0; page < 10; page++) {
    const r = await rpc(server,
      { jsonrpc: '2.0', id: nextId++, method: 'tasks/list', params: cursor ? { cursor } : {} },
      { headers: { 'mcp-protocol-version': '2025-11-25' } });
    assert.equal(r.status, 200, r.text);
    seen.push(...r.body.result.tasks.map((t) => t.taskId));
    cursor = r.body.result.nextCursor;
    if (!cursor) break;
  }
  assert.equal(cursor, undefined, 'the pages end');
  assert.ok(seen.includes(working) && seen.includes(asking), JSON.stringify(seen));
  assert.equal(seen.length, 3, `admin's three tasks, none of bob's: ${JSON.stringify(seen)}`);
  const bad = await rpc(server,
    { jsonrpc: '2.0', id: nextId++, method: 'tasks/list', params: { cursor: '7:' } },
    { headers: { 'mcp-protocol-version': '2025-11-25' } });
  assertRpcError(bad, -32602, /invalid cursor/);
});

test('an expired fixture task is gone, and its place under the cap is free again', async () => {
  const srv = await startServer({
    args: ['--conformance-fixtures'],
    env: { CONFORMANCE_TASKS_PER_USER: '1', CONFORMANCE_TASK_TTL_MS: '300' },
  });
  try {
    const r = await call(srv, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60 } });
    assert.equal(r.body.result.resultType, 'task', r.text);
    assert.equal(r.body.result.ttlMs, 300);
    const id = r.body.result.taskId;
    let gone = null;
    for (let i = 0; i < 600 && !gone; i++) {
      const g = await call(srv, 'tasks/get', { taskId: id });
      if (g.body.error) gone = g;
      else await new Promise((res) => setTimeout(res, 50));
    }
    assert.ok(gone, 'the task expires');
    assertRpcError(gone, -32602, /Task not found/);
    await srv.waitLog(new RegExp(`mcp fixture-task expired task=${id}`));
    await createTask(srv, 'slow_compute', { seconds: 0 });
  } finally {
    await srv.stop();
    assertNoSanitizerReport(srv.stderr(), 'server');
  }
});
