// A run's setup before its agent (src/runs/setup.c): the setup argument, else in a new workspace
// the repository's .sandbox-mcp/setup.sh, else its devcontainer.json; recorded in the timeline
// and get_result, a failure or a timeout told to the agent, which starts anyway. One server
// (RUN_SETUP_TIMEOUT_SECONDS short for the timeout's test) and one session: each run names
// another repository, so its clone makes its workspace new. The real Codex (runs.codexEnv), scripted fake upstream.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';
import { startServer, tempDir, removeDataDir, cliAsync } from '../lib/server.mjs';
import { call, ok, finished, until, codexEnv } from '../lib/runs.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { repoWithFiles } from '../lib/git.mjs';

let fake, router, server, scratch, session;

// A bare repository <name>.git whose main has one commit with files ({path: text}) and a README.
const repoWith = (name, files) =>
  repoWithFiles(path.join(scratch, `${name}.git`), { 'README.md': `# ${name}\n`, ...files });

function sql(query) {
  const out = execFileSync('sqlite3', ['-json', path.join(server.dataDir, 'sandbox-mcp.db'), query],
    { encoding: 'utf8' });
  return out.trim() ? JSON.parse(out) : [];
}

const events = (runId) => sql(`SELECT type, summary, raw FROM run_events WHERE run_id = '${runId}' ORDER BY seq`);

// A run of the session on repository with args; its agent runs `command` with bash, then ends.
async function runWith(marker, repository, command, args = {}) {
  const script = router.add(marker, [
    { tool: 'bash', input: { command, description: 'Look' } },
    { text: 'Done.' },
  ]);
  const started = await ok(server, 'run_task', { task: `${marker}: look`, repository,
    pull_request: 'none', ...(session ? { session_id: session } : {}), ...args });
  session = started.session_id;
  const r = await finished(server, started.run_id);
  const evs = events(started.run_id);
  const diag = JSON.stringify({ r, evs: evs.map((e) => [e.type, e.summary]) }).slice(0, 4000);
  return { r, evs, script, diag };
}

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  scratch = tempDir('smcp-setup-');
  server = await startServer({ env: { ...codexEnv(fake.url),
    RUNS_ALLOW_LOCAL_REPOS: '1', RUN_SETUP_TIMEOUT_SECONDS: '5' } });
});

after(async () => {
  await server?.stop();
  if (server) removeDataDir(server.dataDir);
  await fake?.close();
  rmSync(scratch, { recursive: true, force: true });
});

test('a repository\'s .sandbox-mcp/setup.sh runs before the agent, and the timeline tells of it', async () => {
  const repo = await repoWith('alder', {
    '.sandbox-mcp/setup.sh': 'echo "alder setup ran in $(pwd)" > /workspace/alder-setup.txt\necho set up\n' });
  const { r, evs, diag } = await runWith('alder-su', repo, 'cat /workspace/alder-setup.txt');
  assert.equal(r.status, 'succeeded', diag);
  const start = evs.find((e) => e.type === 'setup_start');
  const end = evs.find((e) => e.type === 'setup_end');
  assert.ok(start && end, diag);
  assert.equal(JSON.parse(start.raw).source, '.sandbox-mcp/setup.sh');
  const endRaw = JSON.parse(end.raw);
  assert.equal(endRaw.exit_status, 0, diag);
  assert.equal(endRaw.failed, false);
  assert.match(endRaw.output, /set up/);
  // the setup came before the agent's first event, and the agent saw what it made
  assert.ok(evs.indexOf(end) < evs.findIndex((e) => e.type === 'tool_use'), diag);
  assert.ok(evs.some((e) => e.type === 'tool_use' && /alder setup ran in \/workspace\/alder/.test(e.raw)), diag);
  assert.equal(r.setup.source, '.sandbox-mcp/setup.sh');
  assert.equal(r.setup.exit_status, 0);
  assert.equal(r.setup.failed, false);
});

test('the setup argument wins over the repository\'s own', async () => {
  const repo = await repoWith('birch', {
    '.sandbox-mcp/setup.sh': 'echo repository > /workspace/birch-setup.txt\n' });
  const { r, evs, diag } = await runWith('birch-su', repo, 'cat /workspace/birch-setup.txt',
    { setup: 'echo argument > /workspace/birch-setup.txt' });
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.setup.source, 'the setup argument', diag);
  assert.equal(evs.filter((e) => e.type === 'setup_start').length, 1, diag);
  assert.ok(evs.some((e) => e.type === 'tool_use' && /argument/.test(e.raw)), diag);
  assert.ok(!evs.some((e) => e.type === 'tool_use' && /repository/.test(e.raw)), diag);
});

test('devcontainer.json: its commands run, and what does not apply is noted', async () => {
  const repo = await repoWith('cedar', {
    '.devcontainer/devcontainer.json': JSON.stringify({
      image: 'mcr.microsoft.com/devcontainers/base:ubuntu',
      forwardPorts: [3000],
      // an array form: no shell, its argv as written
      postCreateCommand: ['/bin/sh', '-c', 'echo devcontainer-made > /workspace/cedar-setup.txt'],
    }) });
  const { r, evs, diag } = await runWith('cedar-su', repo, 'cat /workspace/cedar-setup.txt');
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.setup.source, '.devcontainer/devcontainer.json', diag);
  assert.equal(r.setup.failed, false, diag);
  const notes = evs.filter((e) => e.type === 'setup_note').map((e) => e.summary);
  assert.ok(notes.some((n) => /^skipped: image/.test(n)), diag);
  assert.ok(notes.some((n) => /^skipped: forwardPorts/.test(n)), diag);
  assert.ok(evs.some((e) => e.type === 'tool_use' && /devcontainer-made/.test(e.raw)), diag);
});

test('a failing setup: the agent starts anyway and is told; get_result has its exit status', async () => {
  const repo = await repoWith('dogwood', {
    '.sandbox-mcp/setup.sh': 'echo "installing deps"\necho "dogwood: no such package" >&2\nexit 3\n' });
  const { r, evs, script, diag } = await runWith('dogwood-su', repo, 'true');
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.setup.exit_status, 3, diag);
  assert.equal(r.setup.failed, true);
  assert.equal(r.setup.timed_out, false);
  const end = evs.find((e) => e.type === 'setup_end');
  assert.match(end.summary, /failed with exit status 3/, diag);
  const prompt = JSON.stringify(script.requests[0].body.messages ?? script.requests[0].body.input);
  assert.match(prompt, /The repository's setup \(.sandbox-mcp\/setup.sh\) failed with exit status 3; its last lines:/);
  assert.match(prompt, /dogwood: no such package/);
  assert.match(prompt, /dogwood-su: look/);
});

test('a setup past RUN_SETUP_TIMEOUT_SECONDS is stopped and reported timed out', async () => {
  const repo = await repoWith('elm', {});
  const { r, evs, script, diag } = await runWith('elm-su', repo, 'true',
    { setup: 'echo elm-before-the-wait\nsleep 30' });
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.setup.timed_out, true, diag);
  assert.equal(r.setup.failed, true);
  assert.equal(r.setup.exit_status, null);
  assert.match(evs.find((e) => e.type === 'setup_end').summary, /timed out after 5 s/, diag);
  assert.match(JSON.stringify(script.requests[0].body.messages ?? script.requests[0].body.input), /setup \(the setup argument\) timed out after 5 s/);
  // what it wrote before it was stopped is kept, as a failed one's is
  assert.match(JSON.parse(evs.find((e) => e.type === 'setup_end').raw).output, /elm-before-the-wait/, diag);
  assert.match(JSON.stringify(script.requests[0].body.messages ?? script.requests[0].body.input), /elm-before-the-wait/);
});

// The server's first user's settings for repository, through the command line beside the
// running server (the script on stdin).
async function userRepo(repository, script, ...flags) {
  const res = await cliAsync(['user', 'repo', 'set', 'admin', repository, ...(script === null ? [] : ['--setup-stdin']),
    ...flags, '--data-dir', server.dataDir], { input: script ?? '' });
  assert.equal(res.status, 0, res.stderr);
}

// A repository's "owner/name" as the settings take it: its last two path segments.
const slug = (bare) => bare.split('/').slice(-2).join('/').replace(/\.git$/, '');

test('a user\'s setup for the repository wins over the repository\'s own (source user)', async () => {
  const repo = await repoWith('ivy', { '.sandbox-mcp/setup.sh': 'echo repository > /workspace/ivy-setup.txt\n' });
  await userRepo(slug(repo).toUpperCase(), 'echo "user script in $(pwd)" > /workspace/ivy-setup.txt\n');
  const { r, evs, diag } = await runWith('ivy-su', repo, 'cat /workspace/ivy-setup.txt');
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.setup.source, 'user', diag);
  assert.equal(r.setup.failed, false, diag);
  assert.equal(JSON.parse(evs.find((e) => e.type === 'setup_start').raw).source, 'user', diag);
  assert.equal(evs.filter((e) => e.type === 'setup_start').length, 1, diag);
  assert.ok(evs.some((e) => e.type === 'tool_use' && /user script in \/workspace\/ivy/.test(e.raw)), diag);
});

test('on-setup-failure stop: a failed setup ends the run failed with its last lines, and no agent starts', async () => {
  const repo = await repoWith('juniper', {
    '.sandbox-mcp/setup.sh': 'echo "juniper: building"\necho "juniper: no compiler" >&2\nexit 4\n' });
  await userRepo(slug(repo), null, '--on-setup-failure', 'stop');
  const script = router.add('juniper-su', [{ text: 'Done.' }]);
  const started = await ok(server, 'run_task', { task: 'juniper-su: look', repository: repo,
    pull_request: 'none', session_id: session });
  const r = await finished(server, started.run_id);
  const diag = JSON.stringify(r).slice(0, 3000);
  assert.equal(r.status, 'failed', diag);
  assert.equal(r.setup.source, '.sandbox-mcp/setup.sh', diag);
  assert.equal(r.setup.exit_status, 4, diag);
  assert.match(r.result.error, /setup \(\.sandbox-mcp\/setup\.sh\) failed with exit status 4; its last lines:/, diag);
  assert.match(r.result.error, /juniper: no compiler/, diag);
  assert.equal(r.phase.text, 'failed while setting up', diag);
  assert.equal(script.requests.length, 0, diag);
  assert.ok(!events(started.run_id).some((e) => e.type === 'step_start'), diag);
});

test('the setup argument wins over the user\'s setup for the repository', async () => {
  const repo = await repoWith('kale', {});
  await userRepo(slug(repo), 'echo user > /workspace/kale-setup.txt\n');
  const { r, evs, diag } = await runWith('kale-su', repo, 'cat /workspace/kale-setup.txt',
    { setup: 'echo argument > /workspace/kale-setup.txt' });
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.setup.source, 'the setup argument', diag);
  assert.equal(evs.filter((e) => e.type === 'setup_start').length, 1, diag);
  assert.ok(evs.some((e) => e.type === 'tool_use' && /argument/.test(e.raw)), diag);
});

test('a devcontainer.json that does not parse is noted and skipped, and the run goes on', async () => {
  const repo = await repoWith('fir', { '.devcontainer.json': '{"postCreateCommand": [1, 2' });
  const { r, evs, diag } = await runWith('fir-su', repo, 'true');
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.setup, null, diag);
  assert.ok(evs.some((e) => e.type === 'setup_note' && /^setup: \.devcontainer\.json does not parse/.test(e.summary)), diag);
  assert.ok(!evs.some((e) => e.type === 'setup_start'), diag);
});

test('cancel_run during the setup stops it, and the run ends cancelled before its agent', async () => {
  const repo = await repoWith('hazel', {});
  const script = router.add('hazel-su', [{ text: 'Done.' }]);
  const started = await ok(server, 'run_task', { task: 'hazel-su: look', repository: repo,
    pull_request: 'none', session_id: session, setup: 'sleep 30' });
  await until(() => events(started.run_id).some((e) => e.type === 'setup_start'), 'the setup started');
  // while it is held, the run is in a phase of its own
  const during = await ok(server, 'get_result', { run_id: started.run_id });
  assert.equal(during.phase.name, 'setting up', JSON.stringify(during.phase));
  assert.equal(during.phase.text, 'setting up (the setup argument)');
  await ok(server, 'cancel_run', { run_id: started.run_id });
  const r = await finished(server, started.run_id);
  const diag = JSON.stringify(r).slice(0, 3000);
  assert.equal(r.status, 'cancelled', diag);
  assert.equal(r.setup, null, diag);
  assert.equal(script.requests.length, 0, diag);
});

test('a setup that is not a string, or too long, is refused and no run is made', async () => {
  const before = sql('SELECT count(*) AS n FROM runs')[0].n;
  for (const setup of [42, 'x'.repeat(64 * 1024 + 1)]) {
    const res = await call(server, 'run_task', { task: 'gorse-su: nothing', setup });
    assert.equal(res.isError, true, JSON.stringify(res).slice(0, 300));
    assert.match(res.content[0].text, /setup/);
  }
  assert.equal(sql('SELECT count(*) AS n FROM runs')[0].n, before);
});
