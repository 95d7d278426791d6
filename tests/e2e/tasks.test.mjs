// MCP tasks over coding runs: the official SDK client's experimental tasks API (2025-11-25) and
// the stateless revision's io.modelcontextprotocol/tasks extension over raw HTTP (SDK 1.x does
// not speak 2026-07-28), against the real server with Codex (runs.codexEnv) talking to the
// scripted fake model. A run is a task: its id is the run id.
// Run: node --test tests/e2e/tasks.test.mjs   (SANDBOX_MCP_BIN overrides the binary)
import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, McpError } from '@modelcontextprotocol/sdk/types.js';

import { startServer, rpc, addUser } from '../lib/server.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { codexEnv } from '../lib/runs.mjs';

const MODERN = '2026-07-28';
const EXT = 'io.modelcontextprotocol/tasks';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

let fake, router, server, client, other, otherToken;

async function connect(token) {
  const c = new Client({ name: 'sandbox-mcp-tasks', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }));
  return c;
}

// A request of the stateless revision; caps are the request's client capabilities.
function modern(method, params, { caps = { extensions: { [EXT]: {} } }, name, token } = {}) {
  const headers = { 'mcp-protocol-version': MODERN, 'mcp-method': method };
  const n = name ?? params.name ?? params.taskId;
  if (n) headers['mcp-name'] = n;
  return rpc(server, { jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': caps } } }, { headers, token });
}

// The McpError code a promise rejects with.
async function rejection(p) {
  try { await p; } catch (e) { assert.ok(e instanceof McpError, String(e)); return e; }
  assert.fail('expected an error');
}

// get_result with a long poll until the run has ended.
async function runEnded(runId) {
  for (;;) {
    const r = (await client.callTool({ name: 'get_result', arguments: { run_id: runId, wait_seconds: 30 } },
      undefined, { timeout: 60000 })).structuredContent;
    if (r.status !== 'queued' && r.status !== 'running') return r;
  }
}

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  server = await startServer({ env: codexEnv(fake.url) });
  client = await connect(server.token);
  otherToken = addUser(server, 'mallory');
  other = await connect(otherToken);
});

after(async () => {
  await client?.close();
  await other?.close();
  if (server) {
    const { code, signal } = await server.stop();
    assert.equal(signal, null, server.stderr());
    assert.equal(code, 0, server.stderr());
  }
  await fake?.close();
});

// The two protocols one after the other, their runs in one session: the first run's, which every
// later run goes to (its sandbox and warm agent; a new session boots one, seconds of CPU). If the
// first run's test failed before its run, the next run makes it.
describe('tasks', { concurrency: 1 }, () => {
let sessionId;
// the session, once a run has made it; a run's arguments with it
const inSession = (args) => (sessionId ? { ...args, session_id: sessionId } : args);
// A test that failed half-way may leave a run of its own in the session (one held at the fake):
// cancelled, so that the next test's runs do not wait behind it.
afterEach(async () => {
  if (!sessionId) return;
  for (const status of ['queued', 'running'])
    for (const r of (await client.callTool({ name: 'list_runs',
      arguments: { session_id: sessionId, status, limit: 100 } })).structuredContent.runs)
      await client.callTool({ name: 'cancel_run', arguments: { run_id: r.run_id } });
});

describe('2025-11-25 tasks with the SDK client', { concurrency: 1 }, () => {
  // the first task's run
  let taskId;

  test('the capability and run_task\'s execution.taskSupport are advertised', async () => {
    const caps = client.getServerCapabilities().tasks;
    assert.ok(caps?.requests?.tools?.call, JSON.stringify(client.getServerCapabilities()));
    assert.ok(caps.list && caps.cancel);
    const { tools } = await client.listTools();
    const supporting = tools.filter((t) => t.execution?.taskSupport).map((t) => [t.name, t.execution.taskSupport]);
    assert.deepEqual(supporting, [['run_task', 'optional']]);
  });

  test('run_task as a task: created working, polled to completed, its result the run\'s', async () => {
    router.add('tasks-sdk-4c1', [
      { tool: 'write', input: { filePath: '/workspace/task.txt', content: 'done\n' } },
      { text: 'Wrote task.txt.' },
    ]);
    const seen = [];
    let result;
    // callToolStream asks for a task (run_task is a task tool), polls tasks/get at the task's
    // pollInterval, fetches tasks/result, and checks it against run_task's outputSchema.
    for await (const m of client.experimental.tasks.callToolStream(
      { name: 'run_task', arguments: inSession({ task: 'tasks-sdk-4c1: write task.txt' }) }, CallToolResultSchema,
      { timeout: 60000 })) {
      if (m.type === 'error') throw m.error;
      if (m.type === 'taskCreated' || m.type === 'taskStatus') seen.push(m.task);
      if (m.type === 'result') result = m.result;
    }
    const created = seen[0];
    taskId = created.taskId;
    assert.equal(created.status, 'working');
    assert.match(created.createdAt, ISO);
    assert.match(created.lastUpdatedAt, ISO);
    assert.equal(created.ttl, null);
    assert.ok(created.pollInterval > 0);
    assert.equal(seen.at(-1).status, 'completed');
    assert.notEqual(result.isError, true, JSON.stringify(result));
    assert.equal(result.structuredContent.run_id, taskId);
    if (sessionId) assert.equal(result.structuredContent.session_id, sessionId);
    sessionId ??= result.structuredContent.session_id;
    assert.equal(result.structuredContent.status, 'succeeded');
    assert.equal(result.structuredContent.result.summary, 'Wrote task.txt.');
    assert.equal(result._meta['io.modelcontextprotocol/related-task'].taskId, taskId);
    // the task is the run get_result knows
    const r = (await client.callTool({ name: 'get_result', arguments: { run_id: taskId } })).structuredContent;
    assert.equal(r.status, 'succeeded');
    assert.deepEqual(result.structuredContent.changes, r.changes);
    const again = await client.experimental.tasks.getTask(taskId);
    assert.equal(again.status, 'completed');
    assert.equal(again.createdAt, created.createdAt);
  });

  test('tasks/list has the caller\'s task and not another user\'s; their lookups are not found', async () => {
    assert.ok(taskId, 'the first task did not run');
    const mine = await client.experimental.tasks.listTasks();
    assert.ok(mine.tasks.some((t) => t.taskId === taskId && t.status === 'completed'), JSON.stringify(mine));
    const theirs = await other.experimental.tasks.listTasks();
    assert.deepEqual(theirs.tasks, []);
    for (const call of [() => other.experimental.tasks.getTask(taskId),
      () => other.experimental.tasks.getTaskResult(taskId, CallToolResultSchema),
      () => other.experimental.tasks.cancelTask(taskId)]) {
      const e = await rejection(call());
      assert.equal(e.code, -32602);
      assert.match(e.message, /not found/i);
    }
    const bad = await rejection(client.experimental.tasks.listTasks('not-a-cursor'));
    assert.equal(bad.code, -32602);
  });

  test('tasks/cancel of a running task cancels the run; a blocked tasks/result then answers; a second cancel is refused', async () => {
    const script = router.add('tasks-sdk-cancel-9e2', [{ hold: true, text: 'Never sent.' }]);
    let id;
    for await (const m of client.experimental.tasks.callToolStream(
      { name: 'run_task', arguments: inSession({ task: 'tasks-sdk-cancel-9e2: wait for a slow model' }) })) {
      if (m.type === 'error') throw m.error;
      if (m.type === 'taskCreated') { id = m.task.taskId; break; }
    }
    await script.waitHeld();
    const working = await client.experimental.tasks.getTask(id);
    assert.equal(working.status, 'working');
    // what the run is doing: the agent waits for the model's first answer (Codex tells of its
    // turn's start before it asks, which the run may have read by now)
    assert.match(working.statusMessage, /^(starting the agent|step 1: thinking)$/);
    // tasks/result holds until the task ends
    const waiting = client.experimental.tasks.getTaskResult(id, CallToolResultSchema, { timeout: 120000 });
    const cancelled = await client.experimental.tasks.cancelTask(id);
    assert.equal(cancelled.taskId, id);
    assert.equal(cancelled.status, 'cancelled');
    const result = await waiting;
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent.status, 'cancelled');
    assert.equal(result._meta['io.modelcontextprotocol/related-task'].taskId, id);
    assert.equal((await client.experimental.tasks.getTask(id)).status, 'cancelled');
    assert.equal((await runEnded(id)).status, 'cancelled');
    const e = await rejection(client.experimental.tasks.cancelTask(id));
    assert.equal(e.code, -32602);
    assert.match(e.message, /terminal status 'cancelled'/);
  });
});

describe('2026-07-28: the io.modelcontextprotocol/tasks extension over HTTP', { concurrency: 1 }, () => {
  test('server/discover advertises the extension in place of the 2025-11-25 capability', async () => {
    const r = await modern('server/discover', {}, { caps: {} });
    assert.equal(r.status, 200, r.text);
    const caps = r.body.result.capabilities;
    assert.deepEqual(caps.extensions?.[EXT], {});
    assert.equal(caps.tasks, undefined);
  });

  test('run_task from a client with the extension is a task; tasks/get inlines the result once it completes', async () => {
    router.add('tasks-modern-7b3', [{ text: 'Nothing to change.' }]);
    const created = await modern('tools/call', { name: 'run_task', arguments: inSession({ task: 'tasks-modern-7b3: look around' }) });
    assert.equal(created.status, 200, created.text);
    const t = created.body.result;
    assert.equal(t.resultType, 'task');
    assert.equal(t.status, 'working');
    assert.equal(t.ttlMs, null);
    assert.ok(Number.isInteger(t.pollIntervalMs) && t.pollIntervalMs > 0);
    assert.equal(t.ttl, undefined);
    assert.equal(t.task, undefined);
    assert.match(t.createdAt, ISO);
    // at once findable
    const working = await modern('tasks/get', { taskId: t.taskId });
    assert.equal(working.body.result.taskId, t.taskId, working.text);
    assert.equal(working.body.result.resultType, 'complete');
    await runEnded(t.taskId);
    const done = await modern('tasks/get', { taskId: t.taskId });
    const d = done.body.result;
    assert.equal(d.status, 'completed', done.text);
    assert.equal(d.result.structuredContent.run_id, t.taskId);
    if (sessionId) assert.equal(d.result.structuredContent.session_id, sessionId);
    sessionId ??= d.result.structuredContent.session_id;
    assert.equal(d.result.structuredContent.result.summary, 'Nothing to change.');
    assert.equal(d.result.isError, false);
    assert.equal(d.result._meta, undefined);
    // ended: a cancel is acknowledged all the same, and changes nothing
    const ack = await modern('tasks/cancel', { taskId: t.taskId });
    assert.deepEqual(Object.keys(ack.body.result).sort(), ['_meta', 'resultType']);
    assert.equal((await modern('tasks/get', { taskId: t.taskId })).body.result.status, 'completed');
    // the same task under 2025-11-25
    const legacy = await client.experimental.tasks.getTask(t.taskId);
    assert.equal(legacy.status, 'completed');
  });

  test('without the extension run_task answers as before, and the task methods ask for it', async () => {
    router.add('tasks-plain-d40', [{ hold: true, text: 'Never sent.' }]);
    const r = await modern('tools/call', { name: 'run_task', arguments: inSession({ task: 'tasks-plain-d40: x' }) },
      { caps: {} });
    assert.equal(r.body.result.resultType, 'complete', r.text);
    const runId = r.body.result.structuredContent.run_id;
    assert.match(runId, /\S/);
    for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
      const e = await modern(method, { taskId: runId, inputResponses: {} }, { caps: {} });
      assert.equal(e.status, 400, e.text);
      assert.equal(e.body.error.code, -32021);
      assert.deepEqual(e.body.error.data.requiredCapabilities, { extensions: { [EXT]: {} } });
    }
    // with it: cancelled at once, seen as cancelled
    assert.equal((await modern('tasks/cancel', { taskId: runId })).status, 200);
    assert.equal((await modern('tasks/get', { taskId: runId })).body.result.status, 'cancelled');
    assert.equal((await runEnded(runId)).status, 'cancelled');
  });

  test('tasks/update refuses a run that does not wait for input; another user\'s task is not found; tasks/result and tasks/list are gone', async () => {
    const { tasks } = await client.experimental.tasks.listTasks();
    const id = tasks[0].taskId;
    const up = await modern('tasks/update', { taskId: id, inputResponses: { x: { action: 'accept' } } });
    assert.equal(up.body.error?.code, -32602, up.text);
    assert.match(up.body.error.message, /^Task is not waiting for input: its status is '(completed|cancelled)'$/);
    for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
      const e = await modern(method, { taskId: id, inputResponses: {} }, { token: otherToken });
      assert.equal(e.body.error.code, -32602, `${method}: ${e.text}`);
      assert.match(e.body.error.message, /not found/i);
    }
    for (const method of ['tasks/result', 'tasks/list']) {
      const e = await modern(method, { taskId: id });
      assert.equal(e.status, 404, e.text);
      assert.equal(e.body.error.code, -32601);
    }
    const mismatch = await modern('tasks/get', { taskId: id }, { name: 'someone-else' });
    assert.equal(mismatch.status, 400);
    assert.equal(mismatch.body.error.code, -32020);
  });
});
});
