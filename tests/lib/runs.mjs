// Helpers for tests of tools and runs against a real server: tool calls, waiting for a run's end,
// a server of a test's own, and polling. Written once here for every suite.
import { before, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, rpc, removeDataDir, addUserAsync } from './server.mjs';

let nextId = 1;

// A tools/call whose answer must be a 200 with a JSON-RPC result in JSON; returns the
// result. When the server cannot be reached, the error says how it ended and what it logged last.
export async function call(srv, name, args = {}, token = srv.token) {
  let r;
  try {
    r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } },
      { token });
  } catch (e) {
    throw new Error(`${name}: ${e.message} (${e.cause?.message})` + (srv.proc ? `; server exit ${srv.proc.exitCode} `
      + `${srv.proc.signalCode}; stderr:\n${srv.stderr().slice(-6000)}` : ''));
  }
  assert.equal(r.status, 200, r.text);
  assert.ok(r.body?.result, r.text);
  return r.body.result;
}

// A tools/call that must succeed; returns its structuredContent.
export async function ok(srv, name, args = {}, token = srv.token) {
  const res = await call(srv, name, args, token);
  assert.equal(res.isError, undefined, `${name}: ${JSON.stringify(res).slice(0, 500)}`);
  return res.structuredContent;
}

export const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

// get_result (or its alias tool), waiting until the run has ended.
export async function finished(srv, runId, token = srv.token, tool = 'get_result') {
  for (;;) {
    const r = await ok(srv, tool, { run_id: runId, wait_seconds: 30 }, token);
    assert.ok(['queued', 'running'].includes(r.status) || TERMINAL.has(r.status), JSON.stringify(r));
    if (TERMINAL.has(r.status)) return r;
  }
}

// The text of a tool result's content.
export function toolText(res) {
  return (res.content || []).map((c) => c.text || '').join('');
}

// A call that must be refused with a tool error whose text matches re; returns the text.
export async function refused(srv, name, args, re, token = srv.token) {
  const res = await call(srv, name, args, token);
  assert.equal(res.isError, true, `${name} ${JSON.stringify(args).slice(0, 200)} was not refused: ${JSON.stringify(res).slice(0, 500)}`);
  assert.match(toolText(res), re);
  return toolText(res);
}

// The run's agent.log (what its agent and the bridge to it printed), for a failed assertion's
// message; its end when it is long.
export function agentLog(srv, runId, max = 6000) {
  try {
    return `agent.log of ${runId}:\n${readFileSync(path.join(srv.dataDir, 'runs', runId, 'agent.log'), 'utf8').slice(-max)}`;
  } catch (e) {
    return `agent.log of ${runId}: ${e.code}`;
  }
}

// Poll cond until it gives something truthy, which is returned. what names the condition in the
// error on timeout; a function is called then, to say what was seen last.
export async function until(cond, what, ms = 60000) {
  const t0 = Date.now();
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`not met in time: ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Cancel a user's runs that are still queued or running (of one session, with session):
// what a failed test left behind in a session tests share, so that the next test's runs do not
// wait behind it.
export async function cancelUnfinished(srv, { token = srv.token, session } = {}) {
  for (const status of ['queued', 'running'])
    for (const r of (await ok(srv, 'list_runs', { ...(session ? { session_id: session } : {}), status, limit: 100 },
      token)).runs)
      await call(srv, 'cancel_run', { run_id: r.run_id }, token);
}

// The runs of a group of tests (a describe whose tests go one at a time) in one session of a user
// of its own, so on one warm agent (every new session boots one, seconds of CPU), its runs counted
// against no other test's limits. Call it in the describe; server() gives the file's server (set
// by its before), runTask(srv, args, as) starts a run. Returns {as ({token}, once the group has
// begun), session (made by the group's first run), run(args): run_task in the session}. After
// each test, what it left queued or running in the session is cancelled, so that the next test's
// runs do not wait behind it.
export function sessionGroup(server, user, runTask) {
  const g = { as: null, session: null };
  before(async () => { g.as = { token: await addUserAsync(server(), user) }; });
  afterEach(() => g.session && cancelUnfinished(server(), { token: g.as.token, session: g.session }));
  g.run = async (args) => {
    const r = await runTask(server(), g.session ? { ...args, session_id: g.session } : args, g.as);
    if (g.session) assert.equal(r.session_id, g.session);
    g.session ??= r.session_id;
    return r;
  };
  return g;
}

// A server of its own for one test, stopped and its data removed afterwards.
export async function withServer(env, fn) {
  const server = await startServer({ env });
  try {
    return await fn(server);
  } finally {
    await server.stop();
    removeDataDir(server.dataDir);
  }
}

// The agent of the tests of the run machinery (queues, delivery, clusters, stores, environments)
// rather than of one agent: Codex, a real agent of the product that starts in well under a
// second, where OpenCode takes seconds of CPU for each run. The tests of OpenCode itself keep it
// (runs, runs_warm, runs_pool_agent, opencode_mcp and others). Its model requests go to the fake
// at url in OpenAI's Responses API, which agentScript answers in kind.
export const CODEX_MODEL = 'openai/gpt-5-codex';
export function codexEnv(url) {
  return { RUN_DEFAULT_AGENT: 'codex', RUN_DEFAULT_MODEL: CODEX_MODEL,
    OPENAI_API_KEY: 'sk-proj-fake-key-0123456789', OPENAI_BASE_URL: url };
}
