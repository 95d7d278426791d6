// SSE responses (progress and log notifications) with the conformance fixtures, and a graceful
// stop while a streaming call is in flight.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rpc, sseMessages } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

let server;
before(async () => { server = await startServer({ args: ['--conformance-fixtures'] }); });
after(async () => { await server?.stop(); });

const call = (id, name, meta) => ({
  jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {}, ...(meta ? { _meta: meta } : {}) },
});

function assertProgressStream(messages, token, id) {
  assert.equal(messages.length, 4, JSON.stringify(messages));
  const notes = messages.slice(0, 3);
  for (const n of notes) {
    assert.equal(n.jsonrpc, '2.0');
    assert.equal(n.method, 'notifications/progress');
    assert.equal(n.id, undefined, 'notifications carry no id');
    assert.equal(n.params.progressToken, token);
    assert.equal(n.params.total, 100);
    assert.equal(typeof n.params.message, 'string');
  }
  for (let i = 1; i < notes.length; i++)
    assert.ok(notes[i].params.progress > notes[i - 1].params.progress, `progress increases: ${notes.map((n) => n.params.progress)}`);
  const last = messages[3];
  assert.equal(last.id, id);
  assert.equal(last.result.content[0].text, 'Progress reported in three steps');
}

test('a call with a progressToken streams 3 progress notifications, then the result', async () => {
  const r = await rpc(server, call('req-1', 'test_tool_with_progress', { progressToken: 'tok-1' }));
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  assert.equal(r.headers.get('x-accel-buffering'), 'no');
  assertProgressStream(sseMessages(r.text), 'tok-1', 'req-1');
});

test('an integer progressToken is echoed as an integer', async () => {
  const r = await rpc(server, call(77, 'test_tool_with_progress', { progressToken: 42 }));
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  assertProgressStream(sseMessages(r.text), 42, 77);
});

test('with Accept: application/json only, the same call answers plain JSON', async () => {
  const r = await rpc(server, call('req-2', 'test_tool_with_progress', { progressToken: 'tok-1' }), {
    headers: { accept: 'application/json' },
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal(r.body.id, 'req-2');
  assert.equal(r.body.result.content[0].text, 'Progress reported in three steps');
  assert.ok(!r.text.includes('notifications/progress'));
});

test('without a progressToken the call answers plain JSON', async () => {
  const r = await rpc(server, call('req-3', 'test_tool_with_progress'));
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  assert.equal(r.body.id, 'req-3');
  assert.equal(r.body.result.content[0].text, 'Progress reported in three steps');
});

test('test_tool_with_logging streams 3 notifications/message, then the result', async () => {
  const r = await rpc(server, call('log-1', 'test_tool_with_logging'));
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const messages = sseMessages(r.text);
  assert.equal(messages.length, 4, r.text);
  assert.deepEqual(messages.slice(0, 3).map((m) => m.method), Array(3).fill('notifications/message'));
  assert.deepEqual(messages.slice(0, 3).map((m) => m.params.data),
    ['Tool execution started', 'Tool processing data', 'Tool execution completed']);
  for (const m of messages.slice(0, 3)) assert.equal(m.params.level, 'info');
  assert.equal(messages[3].id, 'log-1');
  assert.equal(messages[3].result.content[0].text, 'Tool with logging executed successfully');
});

test('a progress call inside a 2025-03-26 batch answers JSON without notifications', async () => {
  const r = await rpc(server, [call('b1', 'test_tool_with_progress', { progressToken: 'tok-b' }), { jsonrpc: '2.0', id: 'b2', method: 'ping' }]);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  const byId = new Map(r.body.map((m) => [m.id, m]));
  assert.equal(byId.size, 2);
  assert.equal(byId.get('b1').result.content[0].text, 'Progress reported in three steps');
  assert.deepEqual(byId.get('b2').result, {});
});

test('the fixtures server is still running and logged no sanitizer report', () => {
  assert.equal(server.proc.exitCode, null, server.stderr());
  assertNoSanitizerReport(server.stderr(), 'server');
});

test('SIGTERM during a streaming call lets the call finish, then exits 0', async () => {
  const s = await startServer({ args: ['--conformance-fixtures'] });
  try {
    const res = await fetch(s.mcpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${s.token}` },
      body: JSON.stringify(call('slow', 'test_tool_with_progress', { progressToken: 'stop-1' })),
    });
    assert.equal(res.status, 200);
    // The headers went out with the first progress event: the call is now in flight.
    const reader = res.body.getReader();
    const first = await reader.read();
    assert.equal(first.done, false);
    s.proc.kill('SIGTERM');
    let text = Buffer.from(first.value).toString('utf8');
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString('utf8');
    }
    assertProgressStream(sseMessages(text), 'stop-1', 'slow');

    const { code, signal } = await s.exited;
    // Normally inflight=1 (the signal is sent as soon as the first event arrives and the call runs
    // ~100 ms more); a stalled test host may deliver it after the call ended, which is inflight=0.
    // Either way the whole stream above must have arrived and the exit must be clean.
    assert.match(s.stderr(), /http stopping reason=SIGTERM inflight=[01]\b/);
    assert.equal(signal, null, `server killed by ${signal}:\n${s.stderr().slice(-2000)}`);
    assert.equal(code, 0, `server exited ${code}:\n${s.stderr().slice(-2000)}`);
    assert.match(s.stderr(), /http stopped/);
    assertNoSanitizerReport(s.stderr(), 'server');
  } finally {
    await s.stop();
  }
});

test('SIGTERM on an idle server exits 0 and stops listening', async () => {
  const s = await startServer();
  try {
    assert.equal((await fetch(`${s.url}/healthz`)).status, 200);
    s.proc.kill('SIGTERM');
    const { code, signal } = await s.exited;
    assert.equal(signal, null, `server killed by ${signal}:\n${s.stderr().slice(-2000)}`);
    assert.equal(code, 0);
    await assert.rejects(fetch(`${s.url}/healthz`), 'nothing listens after the stop');
  } finally {
    await s.stop();
  }
});
