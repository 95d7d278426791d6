// A run's agent asks the person who gave it the task, and waits (src/runs/ask.c): the real agents
// in their sandboxes call ask_user and submit_plan, the server's own MCP tools at /agent/mcp with
// the run's token, as a scripted fake model tells them to. The run's phase becomes waiting, its
// owner is notified, get_result shows the question, and the answer comes back by each path: the
// answer_run tool, tasks/update of the run's task, an input-required retry of get_result, and the
// run's page; unanswered, it goes on without. plan_first: the plan is approved as written, with
// changes, or not in time (nothing delivered). The shared session's agent is OpenCode; run again
// on PostgreSQL (pg_questions.test.mjs), where what is tested is the store, it is Codex, which
// starts in well under a second.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer, rpc, cli, sqlRows, addUser, ON_POSTGRES } from '../lib/server.mjs';
import * as runs from '../lib/runs.mjs';
import { startFake, agentRouter, serverTool, toolResults, userTexts } from '../lib/fake-anthropic.mjs';
import { startReceiver } from '../lib/notify-receiver.mjs';
import { META_CAPS, modernRequest, assertNoSanitizerReport } from '../lib/http.mjs';
import { CookieJar, request, setPassword, signIn } from '../lib/oauth.mjs';

const TASKS_EXT = 'io.modelcontextprotocol/tasks';
let fake, router, server, hook, bob;
let session; // the session shared by the tests that use it (its sandbox and warm agent)

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  hook = await startReceiver();
  server = await startServer({ env: {
    ANTHROPIC_API_KEY: 'sk-ant-questions-key', ANTHROPIC_BASE_URL: fake.url,
    OPENAI_API_KEY: 'sk-proj-questions-key', OPENAI_BASE_URL: fake.url,
    NOTIFY_TEST_ALLOW_LOOPBACK: '1', NOTIFY_RETRY_SECONDS: '1',
    ...(ON_POSTGRES ? runs.codexEnv(fake.url) : {}),
  } });
  const r = cli(['user', 'notify', 'add', 'admin', 'webhook', `http://127.0.0.1:${hook.port}/hook`,
    '--data-dir', server.dataDir], { env: { NOTIFY_TEST_ALLOW_LOOPBACK: '1' } });
  assert.equal(r.status, 0, r.stderr);
  bob = addUser(server, 'bob');
});

after(async () => {
  const stderr = server?.stderr() ?? '';
  await server?.stop();
  await hook?.close();
  await fake?.close();
  assertNoSanitizerReport(stderr, 'server');
});

const ok = (name, args, token) => runs.ok(server, name, args, token);
const call = (name, args, token) => runs.call(server, name, args, token);
const events = (runId) => sqlRows(server, `SELECT type, summary, raw FROM run_events WHERE run_id = '${runId}' ORDER BY seq`);

// The run's get_result once it waits for an answer.
async function waiting(runId, token) {
  return runs.until(async () => {
    const r = await ok('get_result', { run_id: runId }, token);
    if (runs.TERMINAL.has(r.status))
      assert.fail(`the run ended before it asked: ${JSON.stringify(r).slice(0, 2000)}\n${runs.agentLog(server, runId)}`);
    return r.phase.name === 'waiting' && r.question ? r : null;
  }, 'the run waits for an answer');
}

// Start a run in the shared session whose agent asks, then says what it was told.
async function asking(marker, question, extra = {}) {
  const script = router.add(marker, [
    serverTool('ask_user', question),
    { text: 'Done with the answer.' },
  ]);
  const started = await ok('run_task', { task: `${marker}: ask first`, ...(session ? { session_id: session } : {}), ...extra });
  session = started.session_id;
  return { script, started };
}

// What the agent's call of the tool returned, from the model's next request.
function toldAgent(script) {
  const results = toolResults(script.requests.at(-1).body);
  assert.ok(results.length, 'the model got no tool result');
  return results.at(-1).text;
}

test('an agent asks with choices: the run waits, its owner is notified, get_result shows it, answer_run answers once', async () => {
  const { script, started } = await asking('q-tool-1', { question: 'Which database should it use?', choices: ['SQLite', 'PostgreSQL'] });
  const w = await waiting(started.run_id);
  assert.equal(w.status, 'running');
  assert.equal(w.question.kind, 'question');
  assert.equal(w.question.text, 'Which database should it use?');
  assert.deepEqual(w.question.choices, ['SQLite', 'PostgreSQL']);
  assert.match(w.question.id, /^q_/);
  const text = (await call('get_result', { run_id: started.run_id })).content[0].text;
  assert.match(text, /waits for your user's answer/);
  // the owner's notification carries the question and the run's page
  const note = await runs.until(() => hook.requests.find((r) => r.json?.type === 'run.question' && r.json.run_id === started.run_id),
    'the run.question notification');
  assert.match(note.json.summary, /Which database should it use\?/);
  assert.match(note.json.url, new RegExp(`/runs/${started.run_id}`));
  // another user can neither see nor answer it
  const theirs = await call('answer_run', { run_id: started.run_id, answer: 'MySQL' }, bob);
  assert.equal(theirs.isError, true);
  assert.equal(theirs.structuredContent.error.code, 'not_found');
  // a question answered with what the run asks now, and no other
  const stale = await call('answer_run', { run_id: started.run_id, answer: 'x', question_id: 'q_notthisone' });
  assert.equal(stale.isError, true);
  assert.match(stale.structuredContent.error.message, /no longer waiting/);
  const empty = await call('answer_run', { run_id: started.run_id, answer: '' });
  assert.equal(empty.structuredContent.error.code, 'invalid_arguments');
  const answered = await ok('answer_run', { run_id: started.run_id, answer: 'PostgreSQL, please', question_id: w.question.id });
  assert.equal(answered.answered, true);
  const r = await runs.finished(server, started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
  assert.equal(r.question, null);
  assert.match(toldAgent(script), /The person answered:\s+PostgreSQL, please/);
  // the timeline keeps the question and the answer
  const evs = events(started.run_id);
  const q = evs.find((e) => e.type === 'question');
  assert.equal(q.summary, 'Asked: Which database should it use?');
  assert.deepEqual(JSON.parse(q.raw).choices, ['SQLite', 'PostgreSQL']);
  const a = evs.find((e) => e.type === 'answer');
  assert.equal(a.summary, 'Answered with answer_run: PostgreSQL, please');
  assert.ok(evs.indexOf(q) < evs.indexOf(a));
  // answered once: a second answer finds nothing waiting
  const again = await call('answer_run', { run_id: started.run_id, answer: 'SQLite' });
  assert.equal(again.isError, true);
  assert.match(again.structuredContent.error.message, /not waiting for an answer/);
});

let nextId = 1;
async function modern(method, params, caps) {
  const { message, headers } = modernRequest(nextId++, method, params, { meta: { [META_CAPS]: caps }, name: params.name ?? params.taskId });
  return rpc(server, message, { headers });
}

test("a client that runs it as a task answers through tasks/update: the task is input_required with the question's elicitation", async () => {
  const script = router.add('q-tasks-2', [serverTool('ask_user', { question: 'Keep the old API?' }), { text: 'Done.' }]);
  const caps = { extensions: { [TASKS_EXT]: {} }, elicitation: {} };
  const created = await modern('tools/call', { name: 'run_task', arguments: { task: 'q-tasks-2: ask', session_id: session } }, caps);
  assert.equal(created.body.result.resultType, 'task', created.text);
  const taskId = created.body.result.taskId;
  const t = await runs.until(async () => {
    const g = await modern('tasks/get', { taskId }, caps);
    return g.body.result?.status === 'input_required' ? g.body.result : null;
  }, 'the task waits for input');
  const [key] = Object.keys(t.inputRequests);
  assert.match(key, /^q_/);
  assert.equal(t.inputRequests[key].method, 'elicitation/create');
  assert.match(t.inputRequests[key].params.message, /Keep the old API\?/);
  const up = await modern('tasks/update', { taskId, inputResponses: { [key]: { action: 'accept', content: { answer: 'Yes, keep it' } } } }, caps);
  assert.equal(up.status, 200, up.text);
  assert.equal(up.body.error, undefined, up.text);
  const r = await runs.finished(server, taskId);
  assert.equal(r.status, 'succeeded');
  assert.match(toldAgent(script), /Yes, keep it/);
  assert.ok(events(taskId).some((e) => e.type === 'answer' && e.summary === "Answered through the client's task: Yes, keep it"));
});

test('get_result asks a client that can elicit, and its retry carries the answer (an input-required result)', async () => {
  const { script, started } = await asking('q-mrtr-3', { question: 'Which port?' });
  await waiting(started.run_id);
  const caps = { elicitation: {} };
  const first = await modern('tools/call', { name: 'get_result', arguments: { run_id: started.run_id } }, caps);
  assert.equal(first.body.result.resultType, 'input_required', first.text);
  const [key] = Object.keys(first.body.result.inputRequests);
  assert.match(first.body.result.inputRequests[key].params.message, /Which port\?/);
  // another user's retry with the state is refused before the tool runs
  const { message, headers } = modernRequest(nextId++, 'tools/call', { name: 'get_result', arguments: { run_id: started.run_id },
    inputResponses: { [key]: { action: 'accept', content: { answer: '1' } } }, requestState: first.body.result.requestState },
  { meta: { [META_CAPS]: caps }, name: 'get_result' });
  const theirs = await rpc(server, message, { headers, token: bob });
  assert.equal(theirs.body.error?.code, -32602, theirs.text);
  const retry = await modern('tools/call', { name: 'get_result', arguments: { run_id: started.run_id },
    inputResponses: { [key]: { action: 'accept', content: { answer: '8080' } } }, requestState: first.body.result.requestState }, caps);
  assert.equal(retry.body.result.resultType, 'complete', retry.text);
  const r = await runs.finished(server, started.run_id);
  assert.equal(r.status, 'succeeded');
  assert.match(toldAgent(script), /8080/);
  assert.ok(events(started.run_id).some((e) => e.type === 'answer' && /through get_result: 8080/.test(e.summary)));
});

test("the run's page answers for its owner signed in; a view link only reads, another user is refused", async () => {
  const { script, started } = await asking('q-page-4', { question: 'Ship it on Friday?', choices: ['yes', 'no'] });
  const w = await waiting(started.run_id);
  const page = new URL(w.web_url);
  const viewed = await request(server, `${page.pathname}/data${page.search}`);
  assert.equal(viewed.body.question.text, 'Ship it on Friday?');
  assert.equal(viewed.body.csrf, undefined);
  const answerPath = `/runs/${started.run_id}/answer`;
  const origin = { origin: server.url };
  assert.equal((await request(server, answerPath, { form: { answer: 'no', csrf: 'x' }, headers: origin })).status, 401);
  setPassword(server, 'admin', 'questions-password-1');
  const jar = new CookieJar();
  assert.equal((await signIn(server, jar, { name: 'admin', password: 'questions-password-1' })).status, 303);
  const mine = await request(server, `/runs/${started.run_id}/data`, { jar });
  assert.equal(mine.body.can_act, true);
  assert.equal((await request(server, answerPath, { jar, headers: origin, form: { answer: 'no', csrf: 'y'.repeat(43) } })).status, 403);
  setPassword(server, 'bob', 'questions-password-2');
  const bobJar = new CookieJar();
  assert.equal((await signIn(server, bobJar, { name: 'bob', password: 'questions-password-2' })).status, 303);
  const bobCsrf = /name="csrf" value="([^"]+)"/.exec((await request(server, '/account', { jar: bobJar })).text)[1];
  assert.equal((await request(server, answerPath, { jar: bobJar, headers: origin, form: { answer: 'yes', csrf: bobCsrf } })).status, 404);
  const sent = await request(server, answerPath, { jar, headers: origin, form: { answer: 'no, Monday', question_id: w.question.id, csrf: mine.body.csrf } });
  assert.equal(sent.status, 200, sent.text);
  const again = await request(server, answerPath, { jar, headers: origin, form: { answer: 'yes', csrf: mine.body.csrf } });
  assert.equal(again.status, 409);
  const r = await runs.finished(server, started.run_id);
  assert.equal(r.status, 'succeeded');
  assert.match(toldAgent(script), /no, Monday/);
  assert.ok(events(started.run_id).some((e) => e.type === 'answer' && e.summary === "Answered on the run's page: no, Monday"));
  // a plan is approved from the page the same way: nothing in the box approves it as written
  const plan = router.add('q-page-plan-4b', [
    serverTool('submit_plan', { plan: '1. Nothing much' }),
    { text: 'Did nothing much.' },
  ]);
  const planned = await ok('run_task', { task: 'q-page-plan-4b: plan it', plan_first: true, session_id: session });
  const w2 = await waiting(planned.run_id);
  assert.equal(w2.question.kind, 'plan');
  const approved = await request(server, `/runs/${planned.run_id}/answer`, { jar, headers: origin,
    form: { answer: '', question_id: w2.question.id, csrf: mine.body.csrf } });
  assert.equal(approved.status, 200, approved.text);
  const r2 = await runs.finished(server, planned.run_id);
  assert.equal(r2.status, 'succeeded', JSON.stringify(r2).slice(0, 1500));
  assert.match(toldAgent(plan), /approved as written/);
  assert.ok(events(planned.run_id).some((e) => e.type === 'answer' && e.summary === "Plan approved on the run's page"));
});

test('a question nobody answers in time: the agent is told to go on with its own judgement, and the timeline says so', async () => {
  const { script, started } = await asking('q-late-5', { question: 'Anyone there?' }, { question_timeout_minutes: 0.05 });
  const r = await runs.finished(server, started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
  assert.match(toldAgent(script), /No answer came within 1 minutes\. Proceed with your best judgement/);
  const a = events(started.run_id).find((e) => e.type === 'answer');
  assert.equal(a.summary, 'No answer within 1 min: the agent proceeds on its own judgement');
  assert.equal(JSON.parse(a.raw).by, 'timeout');
});

// A plan_first run: the agent submits a plan, then (once approved) writes a file.
async function planning(marker, extra = {}) {
  const script = router.add(marker, [
    serverTool('submit_plan', { plan: `1. Write ${marker}.txt\n2. Done` }),
    { tool: 'bash', input: { command: `echo planned > /workspace/${marker}.txt`, description: 'Write' } },
    { text: 'Carried out the plan.' },
  ]);
  const started = await ok('run_task', { task: `${marker}: plan it`, plan_first: true, session_id: session, ...extra });
  return { script, started };
}

test('plan_first: the agent is told to plan first; approved as written, then with changes, it carries the plan out', async () => {
  const { script, started } = await planning('q-plan-6');
  const w = await waiting(started.run_id);
  assert.equal(w.question.kind, 'plan');
  assert.match(w.question.text, /Write q-plan-6\.txt/);
  assert.match(userTexts(script.requests[0].body).join('\n'), /Before you change anything, make a plan/);
  await ok('answer_run', { run_id: started.run_id });
  const r = await runs.finished(server, started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
  assert.match(toolResults(script.requests[1].body).at(-1).text, /approved as written/);
  assert.ok(events(started.run_id).some((e) => e.type === 'answer' && e.summary === 'Plan approved with answer_run'));

  const second = await planning('q-plan-7');
  await waiting(second.started.run_id);
  await ok('answer_run', { run_id: second.started.run_id, answer: 'Also add a README line.' });
  const r2 = await runs.finished(server, second.started.run_id);
  assert.equal(r2.status, 'succeeded');
  assert.match(toolResults(second.script.requests[1].body).at(-1).text,
    /approved with these changes:\s+Also add a README line\.\s+Carry it out/);
});

test('plan_first: a plan not approved in time is not carried out, and the run fails saying so', async () => {
  const script = router.add('q-plan-8', [
    serverTool('submit_plan', { plan: 'Rewrite everything' }),
    { text: 'Stopped: the plan waits for approval.' },
  ]);
  const started = await ok('run_task', { task: 'q-plan-8: plan it', plan_first: true, session_id: session, question_timeout_minutes: 0.05 });
  const r = await runs.finished(server, started.run_id);
  assert.equal(r.status, 'failed', JSON.stringify(r).slice(0, 2000));
  assert.match(r.result.error, /its plan was not approved within 1 minutes/);
  assert.match(toldAgent(script), /the plan is not approved\. Do not carry it out/);
  // a run that never submits its plan fails too
  router.add('q-plan-9', [{ text: 'I just did it.' }]);
  const skipped = await runs.finished(server, (await ok('run_task', { task: 'q-plan-9: plan it', plan_first: true, session_id: session })).run_id);
  assert.equal(skipped.status, 'failed');
  assert.match(skipped.result.error, /never submitted a plan/);
});

test('the sandbox-mcp tools answer only the run working in the sandbox, with its token; questions are capped in size', async () => {
  // a call with too long a question is refused by the schema, and the run goes on
  const script = router.add('q-caps-10', [
    serverTool('ask_user', { question: 'x'.repeat(5000) }),
    { text: 'Fine.' },
  ]);
  const r = await runs.finished(server, (await ok('run_task', { task: 'q-caps-10: ask too much', session_id: session })).run_id);
  assert.equal(r.status, 'succeeded');
  assert.match(toldAgent(script), /4096|too long|longer/i);
  assert.ok(!events(r.run_id).some((e) => e.type === 'question'));
  // from outside a sandbox, /agent/mcp is not served at all
  const out = await fetch(`${server.url}/agent/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) });
  assert.notEqual(out.status, 200);
});

for (const [agent, model, wire] of [['claude-code', 'anthropic/claude-sonnet-4-5', 'anthropic'], ['codex', 'openai/gpt-5-codex', 'responses']]) {
  test(`${agent} asks through the same tool and gets the answer`, async () => {
    const marker = `q-${agent}-11`;
    const script = router.add(marker, [serverTool('ask_user', { question: `Which name, ${agent}?` }), { text: 'Named.' }], { wire });
    const started = await ok('run_task', { task: `${marker}: ask`, agent, model });
    const w = await waiting(started.run_id);
    assert.equal(w.question.text, `Which name, ${agent}?`);
    await ok('answer_run', { run_id: started.run_id, answer: `call it ${agent}-answer` });
    const r = await runs.finished(server, started.run_id);
    assert.equal(r.status, 'succeeded', JSON.stringify(r).slice(0, 2000));
    assert.match(toldAgent(script), new RegExp(`call it ${agent}-answer`));
  });
}
