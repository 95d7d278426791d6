// Coding runs of the real OpenCode: run_task, get_result, list_runs and cancel_run over /mcp, the
// agent in the user's sandbox talking to a scripted fake of the Anthropic API through the
// server's proxy: its events as stored, its phases as get_result streams them, its key, a
// conversation it goes on with, a server killed under it. The run machinery that is the same for
// every agent (repositories, listing, cancel, timeout) is in runs_machinery.test.mjs, with Codex.
// Each run's task carries a unique marker; the fake routes a run's requests to its own script
// (tests/lib/fake-anthropic.mjs, agentRouter), so runs of different tests can go on at once.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { startServer, rpc, tempDir, removeDataDir, sqlRowsAsync, addUserAsync as addUser } from '../lib/server.mjs';
import { bareRepo } from '../lib/git.mjs';
import { call, refused, sessionGroup, toolText as text } from '../lib/runs.mjs';
import { startFake, agentRouter, toolResults, userTexts } from '../lib/fake-anthropic.mjs';
import { modernRequest } from '../lib/http.mjs';

const API_KEY = 'sk-ant-test-key';
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const STATUSES = new Set(['queued', 'running', ...TERMINAL]);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;
// The event types OpenCode writes for a turn (`opencode run --format json`).
const AGENT_TYPES = new Set(['step_start', 'text', 'tool_use', 'step_finish']);
// `git commit` in the sandbox without relying on a configured identity
const COMMIT = 'git -c user.name=Agent -c user.email=agent@example.com commit -q';

let fake, router, server, env, scratch;
let nextId = 1;
const repos = {};

// ---- helpers --------------------------------------------------------------------------------

// A tools/call answered with a result (tests/lib/runs.mjs call); opts.token calls as another user.
const tool = (srv, name, args = {}, { token } = {}) => call(srv, name, args, token || srv.token);

// A call that must succeed; returns its structuredContent.
async function ok(srv, name, args, opts) {
  const res = await tool(srv, name, args, opts);
  assert.equal(res.isError, undefined, `${name} ${JSON.stringify(args).slice(0, 200)}: ${text(res)}`);
  assert.ok(res.structuredContent, `${name}: no structuredContent: ${JSON.stringify(res)}`);
  return res.structuredContent;
}

async function runTask(srv, args, opts) {
  const r = await ok(srv, 'run_task', args, opts);
  assert.match(r.run_id, /\S/);
  assert.match(r.session_id, /\S/);
  assert.ok(r.status === 'queued' || r.status === 'running', JSON.stringify(r));
  assert.equal(typeof r.web_url, 'string');
  return r;
}

// get_result with a long poll until the run is in a final state.
async function waitRun(srv, runId, { token, tool: name = 'get_result', ms = 600000 } = {}) {
  const t0 = Date.now();
  for (;;) {
    const r = await ok(srv, name, { run_id: runId, wait_seconds: 30 }, { token });
    assert.ok(STATUSES.has(r.status), JSON.stringify(r));
    if (TERMINAL.has(r.status)) return r;
    if (Date.now() - t0 > ms) throw new Error(`run ${runId} still ${r.status} after ${ms} ms: ${JSON.stringify(r)}`);
  }
}

async function waitUntil(cond, what, ms = 120000) {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`not met in time: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const sql = sqlRowsAsync;

const q = (s) => `'${String(s).replace(/'/g, "''")}'`;

// A run's events from SQLite, checked: seq 1..n without gaps, raw is the agent's JSON event of
// that type, and no agent event stored twice (OpenCode gives every part its own id).
async function events(srv, runId) {
  const rows = await sql(srv, `SELECT seq, time, type, summary, raw FROM run_events WHERE run_id = ${q(runId)} ORDER BY seq`);
  rows.forEach((e, i) => {
    assert.equal(e.seq, i + 1, `event seq not contiguous: ${rows.map((x) => x.seq).join(',')}`);
    assert.equal(typeof e.summary, 'string');
    assert.ok(Number.isInteger(e.time) && e.time > 0, JSON.stringify(e));
  });
  const parts = [];
  for (const e of rows.filter((x) => AGENT_TYPES.has(x.type))) {
    const raw = JSON.parse(e.raw);
    assert.equal(raw.type, e.type, e.raw);
    parts.push(raw.part.id);
  }
  assert.equal(new Set(parts).size, parts.length, `an agent event was stored twice: ${parts.join(' ')}`);
  return rows;
}

// get_result with a progress token, read as it streams: {progress: [{progress, message}],
// result, first} where first resolves with the first progress notification. modern: under the
// 2026-07-28 revision, else the legacy one.
function progressCall(srv, args, { modern = false, token = 'ptok', auth = srv.token } = {}) {
  const call = { name: 'get_result', arguments: args };
  const id = nextId++;
  const { message, headers } = modern
    ? modernRequest(id, 'tools/call', call, { meta: { progressToken: token } })
    : { message: { jsonrpc: '2.0', id, method: 'tools/call', params: { ...call, _meta: { progressToken: token } } },
      headers: {} };
  let gotFirst;
  const first = new Promise((resolve) => { gotFirst = resolve; });
  const out = { progress: [], result: null, first };
  out.done = (async () => {
    const res = await fetch(srv.mcpUrl, { method: 'POST', body: JSON.stringify(message), headers: {
      'content-type': 'application/json', accept: 'application/json, text/event-stream',
      authorization: `Bearer ${auth}`, ...headers } });
    assert.equal(res.status, 200);
    if (/^application\/json/.test(res.headers.get('content-type'))) {
      // nothing to wait for: the answer at once
      const body = await res.json();
      assert.equal(body.id, id);
      out.result = body.result;
      return out;
    }
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true });
      let cut;
      while ((cut = buf.indexOf('\n\n')) >= 0) {
        const data = buf.slice(0, cut).split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('');
        buf = buf.slice(cut + 2);
        if (!data) continue;
        const msg = JSON.parse(data);
        if (msg.method === 'notifications/progress') {
          assert.equal(msg.params.progressToken, token);
          out.progress.push(msg.params);
          gotFirst(msg.params);
        } else {
          assert.equal(msg.id, id);
          out.result = msg.result;
        }
      }
    }
    assert.ok(out.result, `no result after ${JSON.stringify(out.progress)}`);
    return out;
  })();
  return out;
}

function agentTypes(rows) {
  return rows.map((e) => e.type).filter((t) => AGENT_TYPES.has(t));
}

// A bare repository <name>/<name>.git with main (one commit, README.md, the default branch) and
// feature (one more commit adding feature.txt).
const repo = (name) => bareRepo(path.join(scratch, name, `${name}.git`), { feature: true });

// ---- setup ----------------------------------------------------------------------------------

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  // Each sandbox's disk as the server counts room (small: at 10 GiB the server has room for a
  // few running sandboxes only, and stops idle sessions whose next run boots its agent again).
  env = { ANTHROPIC_API_KEY: API_KEY, ANTHROPIC_BASE_URL: fake.url, RUNS_ALLOW_LOCAL_REPOS: '1',
    RUNS_MAX_RUNNING_PER_USER: '4', SANDBOX_DISK_MB: '2048' };
  server = await startServer({ env });
  scratch = tempDir('smcp-runs-');
  for (const name of ['widget', 'phoenix', 'pawl', 'ratchet']) repos[name] = await repo(name);
});

after(async () => {
  if (process.env.SHOW_STDERR) console.log(server?.stderr());
  await server?.stop();
  await fake?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

// ---- the tools ------------------------------------------------------------------------------

test('tools/list has the four run tools; the opencode_* aliases are callable but not listed', async () => {
  const r = await rpc(server, { jsonrpc: '2.0', id: nextId++, method: 'tools/list', params: {} });
  const names = r.body.result.tools.map((t) => t.name);
  for (const n of ['run_task', 'get_result', 'list_runs', 'cancel_run']) assert.ok(names.includes(n), names.join(', '));
  for (const n of names) assert.doesNotMatch(n, /^opencode_/);
  const list = await ok(server, 'opencode_list_runs', {});
  assert.ok(Array.isArray(list.runs));
  assert.equal(typeof list.has_more, 'boolean');
  await refused(server, 'opencode_get_result', { run_id: 'run_doesnotexist' }, /not found/i);
  await refused(server, 'opencode_run_task', { task: '' }, /task/);
});

test('input errors are tool errors naming the problem, and create no run', async () => {
  const before = (await ok(server, 'list_runs', { limit: 100 })).runs.length;
  await refused(server, 'run_task', {}, /task/);
  await refused(server, 'run_task', { task: '' }, /task/);
  await refused(server, 'run_task', { task: 'x'.repeat(50001) }, /task/);
  await refused(server, 'run_task', { task: 'fine', title: 't'.repeat(101) }, /title/);
  await refused(server, 'run_task', { task: 'fine', timeout_minutes: 0 }, /timeout_minutes/);
  await refused(server, 'run_task', { task: 'fine', timeout_minutes: -1 }, /timeout_minutes/);
  await refused(server, 'run_task', { task: 'fine', session_id: 'ses_doesnotexist' }, /not found/i);
  await refused(server, 'get_result', {}, /run_id/);
  await refused(server, 'get_result', { run_id: 'run_doesnotexist' }, /not found/i);
  await refused(server, 'get_result', { run_id: 'run_doesnotexist', wait_seconds: 61 }, /wait_seconds/);
  await refused(server, 'get_result', { run_id: 'run_doesnotexist', wait_seconds: -1 }, /wait_seconds/);
  await refused(server, 'cancel_run', { run_id: 'run_doesnotexist' }, /not found/i);
  await refused(server, 'list_runs', { limit: 0 }, /limit/);
  await refused(server, 'list_runs', { limit: 101 }, /limit/);
  await refused(server, 'list_runs', { status: 'sleeping' }, /status/);
  await refused(server, 'list_runs', { cursor: 'not-a-cursor' }, /cursor/);
  assert.equal((await ok(server, 'list_runs', { limit: 100 })).runs.length, before);
});

// ---- runs; independent ones go on at the same time --------------------------------------------

let first; // the run of the write-and-commit test, for the isolation test below

describe('runs', { concurrency: 2 }, () => {
  // These tests' runs go on in one session (sessionGroup), one test at a time, so that each has
  // the session to itself.
  describe('in one session', { concurrency: 1 }, () => {
    const group = sessionGroup(() => server, 'one-session', runTask);
    const inSession = group.run;

    test('a run\'s phase, elapsed time and latest events; get_result streams them as progress while it waits', async () => {
      const s = router.add('pawl-ph', [
        { tool: 'bash', input: { command: 'ls README.md', description: 'List the readme' } },
        { hold: true, tool: 'write', input: { filePath: '/workspace/pawl/notes.md', content: 'notes\n' } },
        { text: 'Wrote notes.md.' },
      ]);
      const started = await inSession({ task: 'pawl-ph: list, then write notes', repository: repos.pawl });
      const runId = started.run_id;
      await s.waitHeld();
      // while the model thinks about step 2, the first step's command is among the latest events
      let mid;
      for (;;) {
        const res = await tool(server, 'get_result', { run_id: runId }, group.as);
        mid = res.structuredContent;
        if (mid.recent_events.some((e) => e.summary === 'bash: List the readme')) {
          assert.match(text(res), /^Run \S+ is running, (\d+h )?(\d+m )?\d+[sm] so far: step 1: ran `ls README\.md` \(\d+ events\)\./);
          assert.match(text(res), /\n\nLatest events:\n- bash: List the readme$/);
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      let diag = JSON.stringify(mid, null, 1);
      assert.equal(mid.status, 'running', diag);
      assert.equal(mid.phase.name, 'agent', diag);
      // OpenCode begins step 2 once the model's answer starts: until then it is on step 1
      assert.equal(mid.phase.step, 1, diag);
      assert.equal(mid.phase.detail, 'ran `ls README.md`', diag);
      assert.equal(mid.phase.text, 'step 1: ran `ls README.md`', diag);
      assert.match(mid.phase.since, ISO);
      assert.ok(Number.isInteger(mid.elapsed_seconds) && mid.elapsed_seconds >= 0, diag);
      assert.deepEqual(mid.recent_events.map((e) => [e.type, e.summary]), [['tool_use', 'bash: List the readme']], diag);
      for (const e of mid.recent_events) {
        assert.ok(Number.isInteger(e.seq) && e.seq > 0);
        assert.match(e.time, ISO);
      }

      // two waits with a progress token, one under each protocol revision: each hears the phase
      // at once, then every step until the run ends
      const waits = [progressCall(server, { run_id: runId, wait_seconds: 60 }, { token: 'legacy-tok', auth: group.as.token }),
        progressCall(server, { run_id: runId, wait_seconds: 60 }, { modern: true, token: 'modern-tok', auth: group.as.token })];
      const firsts = await Promise.all(waits.map((w) => w.first));
      for (const f of firsts) assert.equal(f.message, 'step 1: ran `ls README.md`');
      s.release();
      const heard = [];
      for (const w of waits) {
        const messages = [];
        let got = await w.done;
        for (;;) {
          // each call counts its progress from 1, and says no total
          const values = got.progress.map((p) => p.progress);
          assert.deepEqual(values, values.map((_, i) => i + 1), JSON.stringify(got.progress));
          for (const p of got.progress) assert.equal(p.total, undefined);
          messages.push(...got.progress.map((p) => p.message));
          if (!['queued', 'running'].includes(got.result.structuredContent.status)) break;
          // (a slow machine may need more than one wait to see the end)
          got = await progressCall(server, { run_id: runId, wait_seconds: 60 }, { auth: group.as.token }).done;
        }
        heard.push({ messages, result: got.result });
      }
      for (const { messages, result } of heard) {
        diag = `${JSON.stringify(messages)}\n${JSON.stringify(result, null, 1)}`;
        assert.equal(result.structuredContent.status, 'succeeded', diag);
        // in order: the write of step 2, collecting the changes, the end
        const at = (re) => messages.findIndex((m) => re.test(m));
        assert.ok(at(/^step 2: wrote notes\.md$/) > 0, diag);
        assert.ok(at(/^collecting the changes$/) > at(/^step 2: wrote notes\.md$/), diag);
        assert.equal(messages.at(-1), 'succeeded after 3 steps', diag);
        assert.match(result.content[0].text, /^Run \S+ succeeded after 3 steps \(in (\d+h )?(\d+m )?\d+[sm]\)\.\n\nWrote notes\.md\./);
      }

      const r = heard[0].result.structuredContent;
      diag = JSON.stringify(r, null, 1);
      assert.deepEqual(r.phase, { name: 'succeeded', step: 3, detail: 'after 3 steps', text: 'succeeded after 3 steps', since: r.phase.since }, diag);
      assert.ok(Date.parse(r.phase.since) <= Date.parse(r.finished_at), diag);
      assert.equal(r.elapsed_seconds, Math.floor((Date.parse(r.finished_at) - Date.parse(r.started_at)) / 1000), diag);
      assert.deepEqual(r.recent_events.map((e) => e.summary), ['bash: List the readme', 'write notes.md', 'Wrote notes.md.'], diag);
      // the run's history tells its phases in order, and its status_reason followed them
      const phases = r.transitions.map((t) => `${t.status}: ${t.reason}`);
      assert.deepEqual(phases, ['queued: accepted', 'running: preparing the sandbox', `running: cloning ${repos.pawl}`,
        'running: unpacking the repository into the workspace', 'running: starting the agent',
        'running: collecting the changes', 'succeeded: the agent finished'], diag);

      // a finished run answers at once, with its phase, and no progress
      const again = await progressCall(server, { run_id: runId, wait_seconds: 30 }, { auth: group.as.token }).done;
      assert.deepEqual(again.progress, []);
      assert.equal(again.result.structuredContent.phase.text, 'succeeded after 3 steps');
    });

    test('the session moved to another repository: a new conversation there; the agent holds a proxy token, never the real key', async () => {
      // Counts only, so that nothing secret lands in the events; the key's pattern is split so
      // that the command itself does not contain it. Lines: the working directory, the real key
      // in the environment, a JWT in the environment, files holding the real key.
      const s = router.add('key-hunt', [
        { tool: 'bash', input: { description: 'Look for the key',
          command: 'pwd; printenv | grep -c "sk-ant-te""st-key"; printenv | grep -c "eyJ[A-Za-z0-9_-]*[.]eyJ"; '
            + 'grep -rl "sk-ant-te""st-key" "$HOME" /workspace /tmp /etc 2>/dev/null | wc -l' } },
        { text: 'No key here.' },
      ]);
      const started = await inSession({ task: 'key-hunt: look around', repository: repos.ratchet });
      const r = await waitRun(server, started.run_id, group.as);
      assert.equal(r.status, 'succeeded', JSON.stringify(r, null, 1));
      assert.equal(r.repository, repos.ratchet);
      assert.match(toolResults(s.requests[1].body).at(-1).text, /^\/workspace\/ratchet\n0\n[1-9]\d*\n0\n$/);
      // OpenCode keeps a conversation with the directory it began in (asked to go on with it in
      // another, it hangs without a word): the session's conversation in pawl is not this one's
      const said = userTexts(s.requests[0].body);
      assert.ok(said[0].includes('key-hunt') && !said.some((t) => t.includes('pawl-ph')), JSON.stringify(said));
      for (const req of [...s.requests, ...s.titles]) assert.equal(req.headers['x-api-key'], API_KEY);
    });

    test('an upstream 401 fails the run with an authentication error (through the opencode_* aliases)', async () => {
      const s = router.add('bad-key', [
        { status: 401, error: { type: 'authentication_error', message: 'invalid x-api-key' } },
      ]);
      const started = await ok(server, 'opencode_run_task', { task: 'bad-key: anything', sessionId: group.session }, group.as);
      assert.equal(started.session_id, group.session);
      const r = await waitRun(server, started.run_id, { ...group.as, tool: 'opencode_get_result' });
      assert.equal(r.status, 'failed', JSON.stringify(r, null, 1));
      assert.equal(r.result.success, false);
      assert.match(r.result.error, /401|authenticat/i);
      assert.ok(s.requests.length >= 1);
    });
  });

  test('a run writes a file and commits it; a second run in the same session continues the conversation', async () => {
    // (a) write + commit
    const task1 = 'widget-a1: add hello.txt saying hello and commit it';
    const s1 = router.add('widget-a1', [
      { text: 'I will add hello.txt.', tool: 'write',
        input: { filePath: '/workspace/widget/hello.txt', content: 'hello from the agent\n' },
        usage: { input_tokens: 1000, output_tokens: 50 } },
      { tool: 'bash', input: { command: `git add hello.txt && ${COMMIT} -m "Add hello" && git rev-parse HEAD`,
        description: 'Commit hello.txt' }, usage: { input_tokens: 1200, output_tokens: 60 } },
      { text: 'Added hello.txt and committed it.', usage: { input_tokens: 1500, output_tokens: 70 } },
    ]);
    const started = await runTask(server, { task: task1, repository: repos.widget, title: 'Add hello' });
    const r = await waitRun(server, started.run_id);
    const diag = JSON.stringify(r, null, 1);
    assert.equal(r.status, 'succeeded', diag);
    assert.equal(s1.overrun, 0, diag);
    assert.equal(s1.remaining, 0, diag);
    first = r;

    // the commit the agent made, as its bash call printed it
    const sha = toolResults(s1.requests[2].body).at(-1).text.trim();
    assert.match(sha, /^[0-9a-f]{40}$/, sha);

    assert.equal(r.run_id, started.run_id);
    assert.equal(r.session_id, started.session_id);
    assert.equal(r.task, task1);
    assert.equal(r.title, 'Add hello');
    assert.equal(r.agent, 'opencode');
    assert.equal(typeof r.model, 'string');
    assert.ok(r.model.length > 0);
    assert.equal(r.repository, repos.widget);
    assert.equal(r.branch, 'main'); // the remote's default
    for (const k of ['created_at', 'started_at', 'finished_at']) assert.match(r[k], ISO, k);
    assert.ok(r.created_at <= r.started_at && r.started_at <= r.finished_at, diag);
    assert.equal(r.web_url, started.web_url);

    assert.equal(r.result.success, true);
    assert.equal(r.result.summary, 'Added hello.txt and committed it.');
    assert.equal(r.result.error, null);

    assert.equal(r.changes.files_changed, 1, diag);
    assert.equal(r.changes.insertions, 1);
    assert.equal(r.changes.deletions, 0);
    assert.deepEqual(r.changes.files.map(({ path: p, insertions, deletions }) => ({ path: p, insertions, deletions })),
      [{ path: 'hello.txt', insertions: 1, deletions: 0 }]);
    assert.equal(r.changes.commits.length, 1, diag);
    assert.ok(r.changes.commits[0].sha.length >= 7 && sha.startsWith(r.changes.commits[0].sha), diag);
    assert.equal(r.changes.commits[0].message, 'Add hello');
    assert.equal(typeof r.changes.branch, 'string'); // the branch the work is on

    // usage is what the fake reported for the agent's turns (title requests report none)
    assert.deepEqual(s1.usage, { input_tokens: 3700, output_tokens: 180 });
    assert.equal(r.usage.input_tokens, 3700, diag);
    assert.equal(r.usage.output_tokens, 180, diag);
    assert.equal(typeof r.usage.cost, 'number');
    assert.ok(r.usage.cost >= 0);

    // the agent's events, in order
    const ev = await events(server, r.run_id);
    assert.deepEqual(agentTypes(ev), [
      'step_start', 'text', 'tool_use', 'step_finish',
      'step_start', 'tool_use', 'step_finish',
      'step_start', 'text', 'step_finish']);
    assert.equal(r.event_count, ev.length);
    assert.equal(r.latest_event.seq, ev.length);
    assert.equal(r.latest_event.type, ev.at(-1).type);
    assert.equal(typeof r.latest_event.summary, 'string');
    assert.match(r.latest_event.time, ISO);
    const write = JSON.parse(ev.find((e) => e.type === 'tool_use').raw);
    assert.equal(write.part.tool, 'write');
    assert.equal(write.part.state.status, 'completed');

    const moves = r.transitions.map((t) => t.status);
    assert.equal(moves.at(-1), 'succeeded', diag);
    assert.ok(moves.indexOf('running') >= 0 && moves.indexOf('running') < moves.length - 1, diag);
    for (const t of r.transitions) {
      assert.match(t.at, ISO);
      assert.equal(typeof t.reason, 'string');
    }

    // cancelling a finished run changes nothing
    await tool(server, 'cancel_run', { run_id: r.run_id });
    assert.equal((await ok(server, 'get_result', { run_id: r.run_id })).status, 'succeeded');

    // (c) the same session again: the workspace and the conversation carry over
    const task2 = 'widget-c2: what does hello.txt say?';
    const s2 = router.add('widget-c2', [
      { tool: 'bash', input: { command: 'cat /workspace/widget/hello.txt && git -C /workspace/widget log --format=%s -1',
        description: 'Show hello.txt' } },
      { text: 'It says hello from the agent.' },
    ]);
    const again = await runTask(server, { task: task2, session_id: r.session_id });
    assert.equal(again.session_id, r.session_id);
    assert.notEqual(again.run_id, r.run_id);
    const r2 = await waitRun(server, again.run_id);
    assert.equal(r2.status, 'succeeded', JSON.stringify(r2, null, 1));
    assert.equal(r2.session_id, r.session_id);
    assert.equal(r2.result.summary, 'It says hello from the agent.');
    // the agent saw the first run's work in the workspace
    assert.equal(toolResults(s2.requests[1].body).at(-1).text, 'hello from the agent\nAdd hello\n');
    // and the model was sent the first run's conversation: its task and its tool results
    const convo = s2.requests[0].body;
    const [latest, before] = userTexts(convo);
    assert.ok(latest.includes(task2) && before.includes(task1), JSON.stringify(userTexts(convo)));
    const earlier = toolResults(convo).map((t) => t.text);
    assert.ok(earlier.some((t) => t.includes(sha)), JSON.stringify(earlier));
    assert.equal(earlier.length, 2, JSON.stringify(earlier));
    assert.deepEqual(agentTypes(await events(server, r2.run_id)), [
      'step_start', 'tool_use', 'step_finish', 'step_start', 'text', 'step_finish']);

    const inSession = await ok(server, 'list_runs', { session_id: r.session_id });
    assert.deepEqual(inSession.runs.map((x) => x.run_id), [again.run_id, r.run_id]);
  });

});

// ---- after the runs -------------------------------------------------------------------------

test("another user cannot see, cancel or continue the first user's runs", async () => {
  assert.ok(first, 'the write-and-commit run did not finish');
  const token = await addUser(server, 'mallory');
  const as = { token };
  const list = await ok(server, 'list_runs', { limit: 100 }, as);
  assert.deepEqual(list.runs, []);
  assert.equal(list.has_more, false);
  await refused(server, 'get_result', { run_id: first.run_id }, /not found/i, as.token);
  await refused(server, 'cancel_run', { run_id: first.run_id }, /not found/i, as.token);
  // listing by their session: refused as not found, or simply nothing
  const bySession = await tool(server, 'list_runs', { session_id: first.session_id }, as);
  if (bySession.isError) assert.match(text(bySession), /not found/i);
  else assert.deepEqual(bySession.structuredContent.runs, []);
  await refused(server, 'run_task', { task: 'mallory: continue their work', session_id: first.session_id }, /not found/i, as.token);
  assert.deepEqual((await ok(server, 'list_runs', {}, as)).runs, []);
  assert.equal((await ok(server, 'get_result', { run_id: first.run_id })).status, 'succeeded');
});

test('events of every run are contiguous and unique; neither the key nor a token is in them or in the log', async () => {
  const runs = await sql(server, 'SELECT run_id, MIN(seq) AS lo, MAX(seq) AS hi, COUNT(*) AS n FROM run_events GROUP BY run_id');
  assert.ok(runs.length >= 4, JSON.stringify(runs));
  for (const r of runs) {
    assert.equal(r.lo, 1, JSON.stringify(r));
    assert.equal(r.hi, r.n, JSON.stringify(r));
    await events(server, r.run_id);
  }
  const counts = await sql(server, 'SELECT r.id AS id, r.event_count AS c, (SELECT COUNT(*) FROM run_events e WHERE e.run_id = r.id) AS n FROM runs r');
  for (const c of counts) assert.equal(c.c, c.n, JSON.stringify(c));
  const raw = (await sql(server, 'SELECT raw FROM run_events')).map((e) => e.raw).join('\n');
  assert.ok(!raw.includes(API_KEY), 'the API key is in run_events');
  assert.doesNotMatch(raw, /eyJ[\w-]+\.eyJ[\w-]+\./, 'a JWT is in run_events');
  const log = server.stderr();
  assert.ok(!log.includes(API_KEY), 'the API key is in the server log');
  assert.doesNotMatch(log, /eyJ[\w-]+\.eyJ[\w-]+\./, 'a JWT is in the server log');
  // the proxy put the real key on every request the fake got, and the agent's token never arrived
  assert.ok(fake.requests.length > 0);
  for (const req of fake.requests) {
    assert.equal(req.headers['x-api-key'], API_KEY);
    assert.equal(req.headers.authorization, undefined);
    assert.doesNotMatch(req.body, /eyJ[\w-]+\.eyJ[\w-]+\./);
  }
  assert.deepEqual(router.unmatched.map((u) => userTexts(u.body)[0]), []);
});

// kill -9 while the fake holds the agent's request: the proxy connection dies with the server,
// the fake gives the held step back, and OpenCode retries (after about 2, 4, 8, 16 and 30 s,
// then gives up), so once a new server on the same data directory is up, a retry reaches the
// fake again through the new server's proxy and gets the same step: the run goes on and ends.
test('kill -9 of the server mid-run: a new server on the same data dir takes the run over to the end', async () => {
  const dataDir = tempDir();
  let srv = await startServer({ dataDir, env });
  const token = srv.token;
  try {
    const s = router.add('phoenix-k9', [
      { tool: 'bash', input: { command: 'echo before > before.txt', description: 'Write before.txt' } },
      { hold: true, tool: 'bash', input: { command: `echo after > after.txt && git add -A && ${COMMIT} -m "Survive a restart"`,
        description: 'Write after.txt and commit' } },
      { text: 'Survived the restart.' },
    ]);
    const started = await runTask(srv, { task: 'phoenix-k9: write two files across a restart', repository: repos.phoenix });
    await s.waitHeld();
    await srv.stop('SIGKILL');
    await waitUntil(() => s.aborted >= 1, 'the proxy connection died with the server');
    srv = await startServer({ dataDir, env });
    srv.token = token;
    s.release();
    const r = await waitRun(srv, started.run_id);
    const diag = `${JSON.stringify(r, null, 1)}\n${srv.stderr().slice(-3000)}`;
    assert.equal(r.status, 'succeeded', diag);
    assert.equal(r.result.summary, 'Survived the restart.');
    assert.ok(s.requests.filter((x) => x.step === 1).length >= 2, 'the held step was not asked for again');
    assert.equal(s.overrun, 0);
    assert.deepEqual(r.changes.commits.map((c) => c.message), ['Survive a restart']);
    assert.deepEqual(r.changes.files.map((f) => f.path).sort(), ['after.txt', 'before.txt']);
    const ev = await events(srv, r.run_id);
    assert.deepEqual(agentTypes(ev), [
      'step_start', 'tool_use', 'step_finish',
      'step_start', 'tool_use', 'step_finish',
      'step_start', 'text', 'step_finish']);
    assert.equal(r.event_count, ev.length);
    assert.equal(r.transitions.at(-1).status, 'succeeded');
    // the new server counted on from the steps the first one had seen
    assert.equal(r.phase.text, 'succeeded after 3 steps', diag);
  } finally {
    await srv.stop();
    removeDataDir(dataDir);
  }
});
