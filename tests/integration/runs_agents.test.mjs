// Runs by the agents beside OpenCode: the real Claude Code and Codex CLIs (pinned in
// src/runs/claude-code and src/runs/codex, installed by make deps) in the session's sandbox,
// talking to scripted fake models through the server's proxy: Claude Code in the Anthropic
// Messages API, Codex in OpenAI's Responses API (tests/lib/fake-anthropic.mjs, wire
// 'responses'). For each: a task that edits, runs a failing command and commits, delivered as a
// pull request to a fake GitHub; a continuation that resumes the same conversation; a failure;
// a cancel. Then a session handed from one agent to another, and a model an agent cannot speak
// to refused at run_task.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { startServer, cli, rpc, sqlRows, removeDataDir, tempDir } from '../lib/server.mjs';
import * as runs from '../lib/runs.mjs';
import { startFake, agentRouter, agentScript, toolResults, toolNames, userTexts } from '../lib/fake-anthropic.mjs';
import { startFakeGitHub, git } from '../lib/fake-github.mjs';
import { CookieJar, request, setPassword, signIn } from '../lib/oauth.mjs';

const TOKEN = 'github_pat_11AGENTStestTOKEN_alice0123456789';
const ANTHROPIC_KEY = 'sk-ant-agents-test-key-0123456789';
const OPENAI_KEY = 'sk-proj-agents-test-key-0123456789';
const CLAUDE_MODEL = 'anthropic/claude-sonnet-4-5';
const { CODEX_MODEL } = runs;

let fake, router, gh, server, env;
let restarted; // the data directory of a server started again on it (removed at the end)

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  gh = await startFakeGitHub({ tokens: [TOKEN], repos: {
    'acme/claude': { files: { 'README.md': '# claude\n' } },
    'acme/codex': { files: { 'README.md': '# codex\n' } },
    'acme/tries': { files: { 'README.md': '# tries\n' } },
    'acme/pin': { files: { 'README.md': '# pin\n' } },
  } });
  env = {
    ANTHROPIC_API_KEY: ANTHROPIC_KEY, ANTHROPIC_BASE_URL: fake.url,
    OPENAI_API_KEY: OPENAI_KEY, OPENAI_BASE_URL: fake.url,
    GITHUB_BASE_URL: gh.url, GITHUB_API_URL: gh.api, FETCH_ALLOW: `127.0.0.1:${gh.port}`,
  };
  server = await startServer({ env });
  const r = cli(['user', 'credential', 'set', 'admin', 'github', '--data-dir', server.dataDir], { input: `${TOKEN}\n` });
  assert.equal(r.status, 0, r.stderr);
});

after(async () => {
  await server?.stop();
  if (restarted) removeDataDir(restarted);
  await gh?.close();
  await fake?.close();
});

const call = (name, args) => runs.call(server, name, args);
const ok = (name, args) => runs.ok(server, name, args);
const finished = (runId) => runs.finished(server, runId);
const events = (runId) => sqlRows(server, `SELECT type, summary, raw FROM run_events WHERE run_id = '${runId}' ORDER BY seq`);

// A command that looks for the provider keys everywhere the agent can: in its environment and
// in the sandbox's files (spelled out of base64, so the command itself holds neither).
const b64 = (s) => Buffer.from(s).toString('base64');
const LOOK = `for k in ${b64(ANTHROPIC_KEY)} ${b64(OPENAI_KEY)}; do v=$(echo $k | base64 -d); `
  + 'env | grep -c "$v"; grep -rl "$v" /workspace /root /tmp /etc /home /var /run /opt --exclude-dir=agents '
  + '2>/dev/null | head -3; done; echo looked';

// Each agent's tools, as the fake model calls them.
const AGENTS = {
  'claude-code': {
    model: CLAUDE_MODEL, wire: 'anthropic', repo: 'acme/claude',
    shell: (command) => ({ tool: 'Bash', input: { command, description: 'Run' } }),
    write: (file, content) => ({ tool: 'Write', input: { file_path: file, content } }),
  },
  codex: {
    model: CODEX_MODEL, wire: 'responses', repo: 'acme/codex',
    // (answered once the command ends, however long it takes)
    shell: (command) => ({ tool: 'exec_command', input: { cmd: command, yield_time_ms: 300000 } }),
    write: (file, content) => ({ tool: 'exec_command', input: { cmd: `printf '%s' '${content}' > ${file}` } }),
  },
};

for (const [agent, a] of Object.entries(AGENTS)) {
  const tag = agent.replace('-', '');
  const add = (marker, steps) => router.add(marker, steps, { wire: a.wire });

  test(`${agent}: edits, runs a failing command, commits; delivered as a pull request; its conversation continues`, async () => {
    const dir = `/workspace/${a.repo.split('/')[1]}`;
    const s1 = add(`${tag}-edit-4c1`, [
      a.write(`${dir}/hello.txt`, 'hello\n'),
      a.shell('exit 3'),
      a.shell('git add hello.txt && git commit -qm "Add hello" && git log --format=%s -1'),
      a.shell(LOOK),
      { text: 'Added hello.txt.' },
    ]);
    const started = await ok('run_task', { task: `${tag}-edit-4c1: add hello.txt`, agent, model: a.model,
      title: 'Add hello', repository: gh.repoUrl(a.repo) });
    const r = await finished(started.run_id);
    const diag = JSON.stringify(r, null, 1);
    assert.equal(r.status, 'succeeded', diag);
    assert.equal(r.agent, agent);
    assert.equal(r.result.summary, 'Added hello.txt.');
    // what the agent saw of its commands
    const results = toolResults(s1.requests.at(-1).body).map((x) => x.text);
    assert.match(results[2], /Add hello/);
    // no key in its environment or files: two zero counts and no file named
    assert.match(results[3], /(^|\n)0\s+0\s+looked/, results[3]);
    assert.doesNotMatch(results[3].split('looked')[0], /\//, results[3]);
    // the timeline: the same kinds of events as OpenCode's, with targets and exit statuses
    const evs = events(r.run_id);
    const tools = evs.filter((e) => e.type === 'tool_use').map((e) => e.summary);
    assert.ok(tools.some((s) => s === 'bash: exit 3 (exit 3)'), JSON.stringify(tools));
    assert.ok(tools.some((s) => s.startsWith('bash: git add hello.txt')), JSON.stringify(tools));
    assert.ok(evs.some((e) => e.type === 'step_start'));
    assert.ok(evs.some((e) => e.type === 'text' && e.summary === 'Added hello.txt.'));
    // the phase reads the same whatever the agent: steps counted from its events
    assert.match(r.phase.text, /^succeeded after \d+ steps?$/, JSON.stringify(r.phase));
    assert.ok(r.phase.step >= 1);
    // tokens as the provider counted them: what the fake sent
    assert.deepEqual([r.usage.input_tokens, r.usage.output_tokens], [s1.usage.input_tokens, s1.usage.output_tokens]);
    // every model request came through the proxy with the run's token, never the key
    for (const req of s1.requests) {
      const auth = JSON.stringify(req.headers);
      assert.ok(auth.includes(a.wire === 'anthropic' ? ANTHROPIC_KEY : OPENAI_KEY), 'the proxy put the key in');
    }
    // delivered like any run
    assert.equal(r.delivery.status, 'delivered', diag);
    const pushed = gh.log(a.repo, null, `main..refs/heads/${r.delivery.branch}`);
    assert.deepEqual(pushed.map((c) => c.subject), ['Add hello']);
    assert.equal(gh.show(a.repo, r.delivery.branch, 'hello.txt'), 'hello\n');
    assert.ok(gh.pulls.some((p) => p.head === r.delivery.branch && p.title === 'Add hello'));

    // a later run in the session continues the same conversation (the agent's own resume)
    const s2 = add(`${tag}-again-8d2`, [{ text: 'Still here.' }]);
    const r2 = await finished((await ok('run_task', { task: `${tag}-again-8d2: anything else?`,
      session_id: started.session_id })).run_id);
    assert.equal(r2.status, 'succeeded', JSON.stringify(r2));
    assert.equal(r2.agent, agent, 'a session keeps its agent');
    const texts = userTexts(s2.requests[0].body).join('\n');
    assert.match(texts, new RegExp(`${tag}-edit-4c1: add hello.txt`), 'the first task is in the conversation');
    assert.deepEqual([r2.usage.input_tokens, r2.usage.output_tokens], [s2.usage.input_tokens, s2.usage.output_tokens],
      'a continued run counts its own tokens');
  });

  test(`${agent}: a model error fails the run with its reason; a cancel stops it`, async () => {
    add(`${tag}-fail-2b7`, [
      { status: 400, error: { type: 'invalid_request_error', message: 'prompt is too long' } },
      { status: 400, error: { type: 'invalid_request_error', message: 'prompt is too long' } },
      { status: 400, error: { type: 'invalid_request_error', message: 'prompt is too long' } },
    ]);
    const f = await finished((await ok('run_task', { task: `${tag}-fail-2b7: fail`, agent, model: a.model })).run_id);
    assert.equal(f.status, 'failed', JSON.stringify(f));
    assert.match(f.result.error, /[Pp]rompt is too long/);

    const held = add(`${tag}-hold-6e3`, [{ hold: true, text: 'never' }]);
    const started = await ok('run_task', { task: `${tag}-hold-6e3: wait`, agent, model: a.model });
    await held.waitHeld();
    await ok('cancel_run', { run_id: started.run_id });
    const c = await finished(started.run_id);
    assert.equal(c.status, 'cancelled', JSON.stringify(c));
    await runs.until(() => held.aborted > 0, 'the held request closed');
  });
}

test('a session handed to another agent starts a new conversation there, and its timeline says so', async () => {
  add2('handoff-a-1f9', 'anthropic', [AGENTS['claude-code'].shell('echo from-claude > who.txt'), { text: 'Claude wrote.' }]);
  const first = await ok('run_task', { task: 'handoff-a-1f9: write', agent: 'claude-code', model: CLAUDE_MODEL });
  assert.equal((await finished(first.run_id)).status, 'succeeded');
  const s = add2('handoff-b-3c8', 'responses', [AGENTS.codex.shell('cat who.txt'), { text: 'Codex read.' }]);
  const second = await ok('run_task', { task: 'handoff-b-3c8: read', agent: 'codex', model: CODEX_MODEL,
    session_id: first.session_id });
  const r = await finished(second.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r));
  // the same workspace, a new conversation
  assert.match(toolResults(s.requests.at(-1).body)[0].text, /from-claude/);
  assert.doesNotMatch(userTexts(s.requests[0].body).join('\n'), /handoff-a-1f9/);
  const note = events(r.run_id).find((e) => e.type === 'agent_changed');
  assert.ok(note, 'the timeline says the agent changed');
  assert.match(note.summary, /a new codex conversation: the session's earlier runs were claude-code's/);
  // and a later run without an agent named is the session's new agent's
  add2('handoff-c-7a2', 'responses', [{ text: 'Codex again.' }]);
  const third = await finished((await ok('run_task', { task: 'handoff-c-7a2: again', session_id: first.session_id })).run_id);
  assert.equal(third.agent, 'codex');
  assert.equal(third.status, 'succeeded', JSON.stringify(third));
});

test('run_task refuses a model its agent cannot speak to, naming the agents that can', async () => {
  const r = await call('run_task', { task: 'x', agent: 'claude-code', model: CODEX_MODEL });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /agent 'claude-code' cannot use model 'openai\/gpt-5-codex': provider 'openai' speaks OpenAI's Responses API, which claude-code does not; agents that can: opencode, codex/);
  const c = await call('run_task', { task: 'x', agent: 'codex', model: CLAUDE_MODEL });
  assert.equal(c.isError, true);
  assert.match(c.content[0].text, /agents that can: opencode, claude-code/);
  const u = await call('run_task', { task: 'x', agent: 'aider' });
  assert.equal(u.isError, true);
  assert.match(u.content[0].text, /field 'agent': must be one of: opencode, claude-code, codex/);
});

// The operator's default agent (RUN_DEFAULT_AGENT): a run that names none is its, on
// RUN_DEFAULT_MODEL, and run_task says so; a default agent that cannot speak to the default
// model's provider leaves runs unavailable, saying why, and the sandbox tools at work.
test('RUN_DEFAULT_AGENT: a run without agent is its; one that cannot speak to RUN_DEFAULT_MODEL makes runs unavailable, saying why', async () => {
  await runs.withServer({ ...env, RUN_DEFAULT_AGENT: 'codex', RUN_DEFAULT_MODEL: CODEX_MODEL }, async (srv) => {
    const list = await rpc(srv, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const rt = list.body.result.tools.find((t) => t.name === 'run_task');
    assert.match(rt.description, /\(codex by default;/);
    assert.match(rt.inputSchema.properties.agent.description, /^The coding agent \(default codex\)/);
    const s = router.add('default-agent-5f0', [{ text: 'Codex by default.' }]);
    const r = await runs.finished(srv, (await runs.ok(srv, 'run_task', { task: 'default-agent-5f0: hello' })).run_id);
    assert.equal(r.status, 'succeeded', JSON.stringify(r));
    assert.deepEqual([r.agent, r.model, r.result.summary], ['codex', CODEX_MODEL, 'Codex by default.']);
    assert.match(s.requests[0].url, /\/responses$/);
  });
  await runs.withServer({ ...env, RUN_DEFAULT_AGENT: 'claude-code', RUN_DEFAULT_MODEL: CODEX_MODEL }, async (srv) => {
    const r = await runs.call(srv, 'run_task', { task: 'x' });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /runs are unavailable on this server: RUN_DEFAULT_AGENT and RUN_DEFAULT_MODEL do not go together: agent 'claude-code' cannot use model 'openai\/gpt-5-codex'/);
    assert.equal((await runs.ok(srv, 'container_exec', { command: 'echo up' })).stdout, 'up\n');
  });
  // an agent there is not stops the start, naming the ones there are
  const dir = tempDir();
  const bad = cli(['serve', '--listen', '127.0.0.1:0', '--data-dir', dir], { env: { RUN_DEFAULT_AGENT: 'aider' },
    timeout: 60000 });
  removeDataDir(dir);
  assert.equal(bad.status, 2, bad.stderr);
  assert.match(bad.stderr, /RUN_DEFAULT_AGENT: 'aider' is not an agent; agents: opencode, claude-code, codex/);
});

test('attempts: one task by three agents at once, compared side by side, nothing pushed until one is picked and delivered', async () => {
  // each agent's own script: the three get the same task, and the fake tells them apart by
  // their wire format and tools (Codex speaks the Responses API; Claude Code's tools are
  // capitalized, OpenCode's not)
  const dir = '/workspace/tries';
  const scripts = {
    codex: agentScript([AGENTS.codex.shell('echo codex > codex.txt && git add -A && git commit -qm "Codex try"'),
      { text: 'Codex tried.' }], { wire: 'responses', name: 'codex' }),
    claude: agentScript([AGENTS['claude-code'].write(`${dir}/claude.txt`, 'claude\n'),
      AGENTS['claude-code'].shell('git add -A && git commit -qm "Claude try" && npm test'),
      { text: 'Claude tried; npm test has no package.json here.' }], { name: 'claude' }),
    opencode: agentScript([{ tool: 'bash', input: { command: 'echo opencode > opencode.txt', description: 'Write' } },
      { text: 'OpenCode tried (left it uncommitted).' }], { name: 'opencode' }),
  };
  fake.handle((req, res, raw) => {
    let body = {};
    try { body = JSON.parse(raw || '{}'); } catch { /* not JSON */ }
    const which = req.url.includes('/responses') ? 'codex' : toolNames(body).includes('Bash') ? 'claude' : 'opencode';
    scripts[which](req, res, raw);
  });
  try {
    const started = await ok('run_task', { task: 'tries-5e1: add a file saying who you are', title: 'Who am I',
      repository: gh.repoUrl('acme/tries'), attempts: 3, variants: [
        { agent: 'opencode', model: CLAUDE_MODEL }, { agent: 'claude-code', model: CLAUDE_MODEL },
        { agent: 'codex', model: CODEX_MODEL }] });
    assert.match(started.group_id, /^grp_/);
    assert.equal(started.attempts.length, 3);
    assert.deepEqual(started.attempts.map((a) => a.agent), ['opencode', 'claude-code', 'codex']);
    assert.equal(new Set(started.attempts.map((a) => a.session_id)).size, 3, 'a session each');
    assert.equal(started.run_id, started.attempts[0].run_id);
    const ends = await Promise.all(started.attempts.map((a) => finished(a.run_id)));
    for (const r of ends) {
      assert.equal(r.status, 'succeeded', JSON.stringify(r));
      assert.equal(r.delivery.status, 'held', JSON.stringify(r.delivery));
      assert.equal(r.group.group_id, started.group_id);
    }
    assert.deepEqual(gh.refs('acme/tries'), ['refs/heads/main'], 'nothing pushed before one is picked');
    assert.equal(gh.pulls.filter((p) => p.repo === 'acme/tries').length, 0);
    // the group, as get_result shows it: each attempt's outcome side by side
    const group = (await ok('get_result', { group_id: started.group_id })).group;
    const by = Object.fromEntries(group.attempts.map((a) => [a.agent, a]));
    assert.equal(by['claude-code'].summary, 'Claude tried; npm test has no package.json here.');
    assert.match(by['claude-code'].tests, /^failed: git add -A && git commit -qm "Claude try" && npm test \(exit \d+\)$/);
    assert.equal(by.codex.tests, null);
    assert.equal(by.opencode.commits, 1, 'its leftovers committed, ready to deliver');
    for (const a of group.attempts) assert.equal(a.files_changed, 1, JSON.stringify(a));
    assert.equal(group.picked, null);
    assert.equal(group.same_start, true);
    assert.equal(new Set(group.attempts.map((a) => a.base_commit)).size, 1);
    assert.equal(group.attempts[0].base_commit, gh.log('acme/tries', null, 'main')[0].sha);
    // each attempt is an MCP task of its own
    const tasks = await rpc(server, { jsonrpc: '2.0', id: 91, method: 'tasks/list', params: {} },
      { headers: { 'mcp-protocol-version': '2025-11-25' } });
    const ids = new Set(tasks.body.result.tasks.map((t) => t.taskId));
    for (const a of started.attempts) assert.ok(ids.has(a.run_id), `task ${a.run_id}`);
    // list_runs marks them
    const listed = (await ok('list_runs', { limit: 20 })).runs.filter((r) => r.group_id === started.group_id);
    assert.equal(listed.length, 3);

    // the group's page: its view link reads, and cannot pick
    const url = new URL(started.group_web_url);
    const page = await request(server, url.pathname + url.search);
    assert.equal(page.status, 200);
    assert.match(page.text, /data-page="group"/);
    const data = await request(server, `${url.pathname}/data${url.search}`);
    assert.equal(data.status, 200);
    assert.equal(data.body.attempts.length, 3);
    assert.equal(data.body.can_pick, false);
    assert.equal(data.body.csrf, undefined);
    assert.equal((await request(server, `${url.pathname}/data?t=${'A'.repeat(24)}`)).status, 403);
    assert.equal((await request(server, `${url.pathname}/deliver`, { form: { run_id: by.codex.run_id },
      headers: { origin: server.url } })).status, 401);
    // a stranger's large form is refused before it is read (the gate's cap on bodies without a
    // token, PREAUTH_REQUEST_BYTES), and the page still answers
    const big = await request(server, `${url.pathname}/deliver`, { headers: { origin: server.url },
      form: { run_id: by.codex.run_id, pad: 'x'.repeat(200 * 1024) } });
    assert.ok([401, 413].includes(big.status), `${big.status} ${big.text.slice(0, 200)}`);
    assert.equal((await request(server, `${url.pathname}/data${url.search}`)).status, 200);

    // the owner signed in picks Claude Code's from the page (CSRF token and all)
    setPassword(server, 'admin', 'attempts-password-1');
    const jar = new CookieJar();
    assert.equal((await signIn(server, jar, { name: 'admin', password: 'attempts-password-1' })).status, 303);
    const mine = await request(server, `${url.pathname}/data`, { jar });
    assert.equal(mine.body.can_pick, true);
    assert.equal((await request(server, `${url.pathname}/deliver`, { jar, headers: { origin: server.url },
      form: { run_id: by['claude-code'].run_id, csrf: 'x'.repeat(43) } })).status, 403, 'a wrong CSRF token');
    const picked = await request(server, `${url.pathname}/deliver`, { jar, headers: { origin: server.url },
      form: { run_id: by['claude-code'].run_id, csrf: mine.body.csrf } });
    assert.equal(picked.status, 200, picked.text);
    const delivered = await finished(picked.body.run_id);
    assert.equal(delivered.status, 'succeeded', JSON.stringify(delivered));
    assert.equal(delivered.delivers, by['claude-code'].run_id);
    assert.equal(delivered.delivery.status, 'delivered', JSON.stringify(delivered.delivery));
    assert.deepEqual(gh.log('acme/tries', null, `main..refs/heads/${delivered.delivery.branch}`).map((c) => c.subject),
      ['Claude try']);
    const pr = gh.pulls.find((p) => p.head === delivered.delivery.branch);
    assert.equal(pr.title, 'Who am I');
    assert.match(pr.body, /Claude tried; npm test has no package.json here./);
    // picking again gives the same delivery; another attempt is refused, naming the one picked
    const again = await ok('deliver_run', { run_id: by['claude-code'].run_id });
    assert.equal(again.run_id, picked.body.run_id);
    const other = await call('deliver_run', { run_id: by.codex.run_id });
    assert.equal(other.isError, true);
    assert.equal(other.structuredContent.error.code, 'already_exists');
    assert.match(other.content[0].text, new RegExp(`attempt ${by['claude-code'].run_id} of group ${started.group_id} was picked already`));
    const after = (await ok('get_result', { run_id: by.codex.run_id })).group;
    assert.equal(after.picked, by['claude-code'].run_id);
    // an attempt not picked stays a session of its own, to be continued
    scripts.codex = agentScript([{ text: 'Codex again, in its own session.' }], { wire: 'responses', name: 'codex2' });
    const more = await finished((await ok('run_task', { task: 'tries-5e1: and now?', session_id: by.codex.session_id })).run_id);
    assert.equal(more.status, 'succeeded', JSON.stringify(more));
    assert.equal(more.agent, 'codex');
    assert.equal(more.group, undefined, 'a later run of its session is its own');
    // a run on its own has nothing to pick
    const alone = await call('deliver_run', { run_id: delivered.run_id });
    assert.equal(alone.isError, true);
    // every answer matched its tool's output schema (the server checks each one it sends)
    assert.doesNotMatch(server.stderr(), /output-schema-mismatch/);
  } finally {
    fake.handle(router);
  }
});

test('attempts start from one commit: one that clones after the branch moved checks out the first one\'s', async () => {
  // one run at a time for the user, so the second attempt clones only after the first is done,
  // and the branch moves while the first works
  await runs.withServer({ ...env, RUNS_MAX_RUNNING_PER_USER: '1' }, async (srv) => {
    assert.equal(cli(['user', 'credential', 'set', 'admin', 'github', '--data-dir', srv.dataDir], { input: `${TOKEN}\n` }).status, 0);
    const s = add2('pin-7d3', 'anthropic', [{ hold: true, text: 'First.' }, { text: 'Second.' }]);
    const started = await runs.ok(srv, 'run_task', { task: 'pin-7d3: look', repository: gh.repoUrl('acme/pin'),
      attempts: 2, variants: [{ agent: 'claude-code' }] });
    await s.waitHeld();
    const work = mkdtempSync(path.join(tmpdir(), 'smcp-pin-'));
    try {
      git(['clone', '-q', path.join(gh.root, 'acme/pin.git'), work]);
      writeFileSync(path.join(work, 'later.txt'), 'later\n');
      git(['add', '-A'], work);
      git(['commit', '-qm', 'Later'], work);
      git(['push', '-q', 'origin', 'main'], work);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    s.release();
    const ends = [];
    for (const a of started.attempts) ends.push(await runs.finished(srv, a.run_id));
    for (const r of ends) assert.equal(r.status, 'succeeded', JSON.stringify(r));
    const group = ends[1].group;
    assert.equal(group.same_start, true);
    assert.equal(group.attempts[1].base_commit, group.attempts[0].base_commit);
    assert.notEqual(group.attempts[0].base_commit, gh.log('acme/pin', 'main')[0].sha, 'the branch moved');
    // the second attempt's workspace is at the first one's commit: without the later file
    const look = await runs.ok(srv, 'container_exec', { session_id: started.attempts[1].session_id,
      command: 'cd /workspace/pin && git log --format=%s && ls' });
    assert.doesNotMatch(look.stdout, /Later|later\.txt/);
  });
});

test('attempts: bad input is refused before anything is queued', async () => {
  const before = (await ok('list_runs', { limit: 100 })).runs.length;
  const cases = [
    [{ attempts: 5 }, /attempts/],
    [{ attempts: 2, session_id: 'ses_x' }, /attempts start sessions of their own/],
    [{ attempts: 2, variants: [{ agent: 'codex', model: CLAUDE_MODEL }] }, /attempts\[0\]: agent 'codex' cannot use model/],
    [{ variants: [{}, {}, {}, {}, {}] }, /variants/],
  ];
  for (const [args, re] of cases) {
    const r = await call('run_task', { task: 'x', ...args });
    assert.equal(r.isError, true, JSON.stringify(args));
    assert.match(r.content[0].text, re);
  }
  assert.equal((await ok('list_runs', { limit: 100 })).runs.length, before);
});

// The last test: it restarts the file's server.
test('codex: a continued run outlives a restart of the server, and still counts only its own tokens', async () => {
  add2('restart-c-1a4', 'responses', [{ text: 'First.' }]);
  const first = await finished((await ok('run_task', { task: 'restart-c-1a4: hello', agent: 'codex', model: CODEX_MODEL })).run_id);
  assert.equal(first.status, 'succeeded', JSON.stringify(first));
  const s = add2('restart-c-2b5', 'responses', [{ hold: true, text: 'Survived the restart.' }]);
  const started = await ok('run_task', { task: 'restart-c-2b5: again', session_id: first.session_id });
  await s.waitHeld();
  const { dataDir, token } = server;
  await server.stop('SIGKILL', { keep: true });
  restarted = dataDir;
  await runs.until(() => s.aborted >= 1, 'the proxy connection died with the server');
  server = await startServer({ dataDir, env });
  server.token = token;
  s.release();
  const r = await finished(started.run_id);
  assert.equal(r.status, 'succeeded', `${JSON.stringify(r)}\n${server.stderr().slice(-3000)}`);
  assert.equal(r.result.summary, 'Survived the restart.');
  // Codex reported the thread's totals (the first run's too); the adopted run counts its own
  assert.deepEqual([r.usage.input_tokens, r.usage.output_tokens], [s.usage.input_tokens, s.usage.output_tokens]);
});

function add2(marker, wire, steps) {
  return router.add(marker, steps, { wire });
}
