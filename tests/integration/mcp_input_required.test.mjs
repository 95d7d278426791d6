// Input-required results (SEP-2322, the 2026-07-28 revision): what the conformance suite does not
// check. A requestState is sealed by the server and bound to the user, the request and an expiry:
// another user's, another tool's, an expired or an oversized one is refused with -32602 before the
// tool runs; the client's answers are checked and capped.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rpc, addUser, tempDir, removeDataDir } from '../lib/server.mjs';
import { META_CAPS, modernRequest, assertNoSanitizerReport } from '../lib/http.mjs';

const ALL_CAPS = { elicitation: {}, sampling: {}, roots: { listChanged: true } };
const CONFIRM = 'test_input_required_result_request_state';

let server, bob;
before(async () => {
  server = await startServer({ args: ['--conformance-fixtures'] });
  bob = addUser(server, 'bob');
});
after(async () => {
  await server?.stop();
  assertNoSanitizerReport(server?.stderr() ?? '', 'server');
});

let nextId = 1;
async function send(srv, method, params, { token = srv.token, caps = ALL_CAPS } = {}) {
  const { message, headers } = modernRequest(nextId++, method, params, { meta: { [META_CAPS]: caps } });
  return rpc(srv, message, { headers, token });
}
const callTool = (srv, name, extra = {}, opts) => send(srv, 'tools/call', { name, arguments: {}, ...extra }, opts);
const confirmed = { confirm: { action: 'accept', content: { ok: true } } };

// The first round of the confirmation tool: its InputRequiredResult.
async function firstRound(srv, name = CONFIRM, opts) {
  const r = await callTool(srv, name, {}, opts);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.resultType, 'input_required', r.text);
  assert.equal(typeof r.body.result.requestState, 'string');
  return r.body.result;
}

function assertRefused(r, re) {
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body.error.code, -32602, r.text);
  assert.match(r.body.error.message, re);
}

test('the user the state was issued to completes with it; the state reveals nothing', async () => {
  const first = await firstRound(server);
  assert.equal(first.inputRequests.confirm.method, 'elicitation/create');
  assert.doesNotMatch(Buffer.from(first.requestState, 'base64url').toString('latin1'), /confirm|usr_/);
  const r = await callTool(server, CONFIRM, { inputResponses: confirmed, requestState: first.requestState });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.resultType, 'complete');
  assert.match(r.body.result.content[0].text, /state-ok/);
});

test("another user's replay of a requestState is refused", async () => {
  const first = await firstRound(server);
  const r = await callTool(server, CONFIRM, { inputResponses: confirmed, requestState: first.requestState }, { token: bob });
  assertRefused(r, /issued to another user/);
  await server.waitLog(/mcp request-state refused .*reason="requestState was issued to another user"/);
  // bob's own state is his alone too
  const his = await firstRound(server, CONFIRM, { token: bob });
  assertRefused(await callTool(server, CONFIRM, { inputResponses: confirmed, requestState: his.requestState }),
    /issued to another user/);
});

test("a requestState issued for tool A is refused on tool B and on a prompt", async () => {
  const first = await firstRound(server);
  assertRefused(await callTool(server, 'test_input_required_result_tampered_state',
    { inputResponses: confirmed, requestState: first.requestState }), /issued for another request \(tools\/call 'test_input_required_result_request_state'\)/);
  assertRefused(await send(server, 'prompts/get', { name: 'test_input_required_result_prompt', requestState: first.requestState }),
    /issued for another request/);
});

test('an altered requestState is refused and the tool does not run', async () => {
  const first = await firstRound(server);
  const s = first.requestState;
  const flipped = s.slice(0, 40) + (s[40] === 'A' ? 'B' : 'A') + s.slice(41);
  assertRefused(await callTool(server, CONFIRM, { inputResponses: confirmed, requestState: flipped }), /not one this server issued/);
  assertRefused(await callTool(server, CONFIRM, { inputResponses: confirmed, requestState: `${s}=` }), /not one this server issued/);
  assertRefused(await callTool(server, CONFIRM, { inputResponses: confirmed, requestState: 42 }), /requestState must be a string/);
});

test('an oversized requestState is refused before it is opened', async () => {
  const tooLong = 'A'.repeat(4097);
  assertRefused(await callTool(server, CONFIRM, { inputResponses: confirmed, requestState: tooLong }), /longer than 4096 characters/);
  assertRefused(await callTool(server, CONFIRM, { inputResponses: confirmed, requestState: 'A'.repeat(4096) }), /not one this server issued/);
});

test('inputResponses must be an object of at most 32 result objects', async () => {
  assertRefused(await callTool(server, CONFIRM, { inputResponses: [] }), /inputResponses must be an object/);
  assertRefused(await callTool(server, CONFIRM, { inputResponses: { confirm: 'yes' } }), /inputResponses\["confirm"\] must be an object/);
  const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, { action: 'cancel' }]));
  assertRefused(await callTool(server, CONFIRM, { inputResponses: many }), /33 entries, more than the 32/);
  const enough = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`k${i}`, { action: 'cancel' }]));
  const r = await callTool(server, CONFIRM, { inputResponses: enough });
  assert.equal(r.body.result.resultType, 'input_required', r.text);
});

test('an answer that does not match what was asked is asked again', async () => {
  const first = await firstRound(server);
  for (const answer of [{ action: 'accept', content: { ok: 'yes' } }, { action: 'accept' }, { action: 'maybe' }]) {
    const r = await callTool(server, CONFIRM, { inputResponses: { confirm: answer }, requestState: first.requestState });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.result.resultType, 'input_required', r.text);
    assert.notEqual(r.body.result.requestState, first.requestState);
  }
});

test('the server asks only for what the client declared, else -32021', async () => {
  const r = await callTool(server, 'test_input_required_result_elicitation', {}, { caps: { sampling: {} } });
  assert.equal(r.status, 400, r.text);
  assert.equal(r.body.error.code, -32021, r.text);
  assert.deepEqual(r.body.error.data.requiredCapabilities, { elicitation: {} });
  const s = await callTool(server, 'test_input_required_result_capabilities', {}, { caps: { sampling: {} } });
  assert.deepEqual(Object.values(s.body.result.inputRequests).map((q) => q.method), ['sampling/createMessage']);
});

test('an expired requestState is refused (MCP_REQUEST_STATE_TTL)', async () => {
  const short = await startServer({ args: ['--conformance-fixtures'], env: { MCP_REQUEST_STATE_TTL: '1' } });
  try {
    const first = await firstRound(short);
    // good for one second: retried until it has expired (each retry before that completes)
    let r;
    for (let i = 0; i < 100; i++) {
      r = await callTool(short, CONFIRM, { inputResponses: confirmed, requestState: first.requestState });
      if (r.body?.error) break;
      assert.match(r.body.result.content[0].text, /state-ok/);
      await new Promise((res) => setTimeout(res, 100));
    }
    assertRefused(r, /requestState has expired; call again without it/);
  } finally {
    await short.stop();
    assertNoSanitizerReport(short.stderr(), 'server');
  }
});

test('a requestState opens after a restart (a key derived from PROXY_JWT_SECRET), not under another secret', async () => {
  const dir = tempDir();
  try {
    const one = await startServer({ args: ['--conformance-fixtures'], dataDir: dir });
    const first = await firstRound(one);
    await one.stop();
    const again = await startServer({ args: ['--conformance-fixtures'], dataDir: dir });
    again.token = one.token;
    const r = await callTool(again, CONFIRM, { inputResponses: confirmed, requestState: first.requestState });
    assert.match(r.body.result?.content?.[0]?.text ?? '', /state-ok/, r.text);
    await again.stop();
    const other = await startServer({ args: ['--conformance-fixtures'], dataDir: dir, env: { PROXY_JWT_SECRET: 'another-secret-another-secret-0123456789' } });
    other.token = one.token;
    assertRefused(await callTool(other, CONFIRM, { inputResponses: confirmed, requestState: first.requestState }),
      /not one this server issued/);
    await other.stop();
    for (const s of [one, again, other]) assertNoSanitizerReport(s.stderr(), 'server');
  } finally {
    removeDataDir(dir);
  }
});

test('a bad MCP_REQUEST_STATE_TTL stops the start', async () => {
  await assert.rejects(startServer({ args: ['--conformance-fixtures'], env: { MCP_REQUEST_STATE_TTL: '0' } }),
    /MCP_REQUEST_STATE_TTL/);
});
