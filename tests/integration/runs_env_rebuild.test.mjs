// A snapshot as its repository and time move on (src/runs/envs.c): a new session starts on the
// last setup's snapshot, with the commits since, and runs only maintenance; past
// ENV_CACHE_MAX_AGE_HOURS, one that was used since it was built keeps serving while a run of its
// owner without an agent sets the repository up afresh; the new snapshot replaces it under the
// same key and the next session starts on it without running setup. The rebuild is its owner's
// alone: it is not in list_runs, and another user never starts on what it built. A lock file
// change then makes it out of date, and the next session builds a new one. One server, the real
// Codex (runs.codexEnv), a scripted fake upstream, local repositories. The tests go on from one
// another's snapshot: admin's first two sessions are made before them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer, tempDir, removeDataDir, addUserAsync } from '../lib/server.mjs';
import { ok, finished, until, codexEnv } from '../lib/runs.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { gitAsync, repoWithFiles } from '../lib/git.mjs';

let fake, router, server, scratch, bob, oak, first, second;

const repoWith = (name, files) => repoWithFiles(path.join(scratch, `${name}.git`), files);

// A commit on bare's main: files written ({path: text}, null removes one).
async function commit(bare, files, message) {
  const work = mkdtempSync(path.join(tmpdir(), 'smcp-rebuild-work-'));
  try {
    await gitAsync(['clone', '-q', bare, work]);
    for (const [p, text] of Object.entries(files)) {
      const at = path.join(work, p);
      if (text === null) {
        rmSync(at);
      } else {
        mkdirSync(path.dirname(at), { recursive: true });
        writeFileSync(at, text);
      }
    }
    await gitAsync(['add', '-A'], work);
    await gitAsync(['commit', '-q', '-m', message], work);
    await gitAsync(['push', '-q', bare, 'HEAD:main'], work);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function sql(query) {
  const out = execFileSync('sqlite3', ['-json', path.join(server.dataDir, 'sandbox-mcp.db'), query],
    { encoding: 'utf8' });
  return out.trim() ? JSON.parse(out) : [];
}

const events = (runId) => sql(`SELECT type, summary, raw FROM run_events WHERE run_id = '${runId}' ORDER BY seq`);

async function runWith(marker, repository, command, token = server.token) {
  const script = router.add(marker, [{ tool: 'bash', input: { command, description: 'Look' } }, { text: 'Done.' }]);
  const started = await ok(server, 'run_task', { task: `${marker}: look`, repository, pull_request: 'none' },
    token);
  const r = await finished(server, started.run_id, token);
  const evs = events(started.run_id);
  const diag = JSON.stringify({ r, evs: evs.map((e) => [e.type, e.summary]) }).slice(0, 4000);
  // what the agent's command printed, as the model was told it
  const tool = toolResults(script.requests.at(-1)?.body ?? {}).map((x) => x.text).join('\n');
  const restored = evs.find((e) => e.type === 'env_restored');
  return { r, evs, diag, tool, has: (type) => evs.some((e) => e.type === type),
    restored: restored && JSON.parse(restored.raw).snapshot };
}

// The setup counts its runs in the snapshot (/var/lib/oak/log) and stamps what it installed,
// with the lock file it installed from.
const setup = 'mkdir -p node_modules/dep /var/lib/oak\n'
  + 'echo "dep $(cat /proc/sys/kernel/random/uuid) built from $(tr -d "\\n" < package-lock.json)" '
  + '> node_modules/dep/index.txt\n'
  + 'echo setup >> /var/lib/oak/log\n';
// What the agent prints: the setup log, the installed dependency, the checkout, git's view.
const look = 'printf "LOG:"; tr "\\n" "," < /var/lib/oak/log; echo; cat node_modules/dep/index.txt; '
  + 'ls; echo "STATUS:$(git status --porcelain | wc -l)"';

const live = (user) => sql(`SELECT id, key, scope, user_id, created_at, uses FROM envs WHERE dropped = 0 AND `
  + `repository = '${oak}' AND user_id = (SELECT id FROM users WHERE name = '${user}')`);

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  scratch = tempDir('smcp-rebuild-');
  server = await startServer({ env: { ...codexEnv(fake.url),
    RUNS_ALLOW_LOCAL_REPOS: '1', ENV_CACHE_MB: '64', ENV_CACHE_USER_MB: '16' } });
  bob = await addUserAsync(server, 'bob');
  oak = await repoWith('oak', {
    'package-lock.json': '{"lockfileVersion": 3}\n',
    '.gitignore': 'node_modules/\n',
    'old.txt': 'old\n',
    '.sandbox-mcp/setup.sh': setup,
    '.sandbox-mcp/maintenance.sh': 'echo maintenance >> /var/lib/oak/log\n',
  });
  // admin's first session saves a snapshot; a commit later, a second one starts on it
  first = await runWith('rb-first', oak, look);
  await commit(oak, { 'new.txt': 'new\n', 'old.txt': null }, 'Replace old.txt');
  second = await runWith('rb-second', oak, look);
});

after(async () => {
  await server?.stop();
  if (server) removeDataDir(server.dataDir);
  await fake?.close();
  rmSync(scratch, { recursive: true, force: true });
});

let rebuiltId;

test('a new session starts on the last setup\'s snapshot, with the commits since, and runs only maintenance', async () => {
  assert.equal(first.r.status, 'succeeded', first.diag);
  assert.equal(first.r.setup.source, '.sandbox-mcp/setup.sh', first.diag);
  assert.ok(first.has('env_saved'), first.diag);
  assert.ok(!first.has('env_restored'), first.diag);
  assert.match(first.tool, /LOG:setup,/, first.diag);

  assert.equal(second.r.status, 'succeeded', second.diag);
  assert.ok(second.restored, second.diag);
  assert.equal(second.restored, JSON.parse(first.evs.find((e) => e.type === 'env_saved').raw).snapshot,
    second.diag);
  assert.ok(!second.has('env_saved'), second.diag);
  assert.equal(second.r.setup.source, '.sandbox-mcp/maintenance.sh', second.diag);
  // setup.sh did not run again: its log has the snapshot's line and maintenance's
  assert.match(second.tool, /LOG:setup,maintenance,/, second.diag);
  assert.match(second.tool, /dep [0-9a-f-]+ built from \{"lockfileVersion": 3\}/, second.diag);
  // the commit since the snapshot is checked out, the file it removed is gone, nothing stray
  assert.match(second.tool, /new\.txt/, second.diag);
  assert.doesNotMatch(second.tool, /old\.txt/, second.diag);
  assert.match(second.tool, /STATUS:0/, second.diag);
  // a session that started on it is a use of it
  const [snap] = live('admin');
  assert.equal(snap.id, second.restored);
  assert.equal(snap.uses, 1);
});

test('a used snapshot past its age serves on while it is rebuilt in the background, then the new one serves', async () => {
  assert.ok(second.restored, second.diag);
  const [old] = live('admin');
  assert.equal(old.id, second.restored);
  assert.equal(old.uses, 1);
  const oldDep = second.tool.match(/dep [0-9a-f-]+/)?.[0];
  assert.ok(oldDep, second.diag);

  // past its age (24 hours by default): the next session still starts on it, without waiting
  sql(`UPDATE envs SET created_at = created_at - 25 * 3600 * 1000 WHERE id = '${old.id}'`);
  const aged = await runWith('rb-aged', oak, look);
  assert.equal(aged.r.status, 'succeeded', aged.diag);
  assert.equal(aged.restored, old.id, aged.diag);
  assert.equal(aged.r.setup.source, '.sandbox-mcp/maintenance.sh', aged.diag);
  assert.match(aged.tool, new RegExp(oldDep), aged.diag);

  // the rebuild replaces it under the same key
  await until(() => {
    const now = live('admin');
    return now.length === 1 && now[0].id !== old.id;
  }, 'the rebuilt snapshot', 300000);
  const [fresh] = live('admin');
  assert.equal(fresh.key, old.key);
  assert.equal(fresh.scope, old.scope);
  assert.ok(fresh.created_at > old.created_at);
  assert.equal(sql(`SELECT dropped FROM envs WHERE id = '${old.id}'`)[0]?.dropped ?? 1, 1);
  rebuiltId = fresh.id;

  // the rebuild was a run of the owner's, with no agent, not in list_runs
  const [rb] = sql(`SELECT id, user_id, session_id, status, status_reason, agent_pid FROM runs WHERE rebuild = '${old.id}'`);
  assert.ok(rb);
  assert.equal(rb.status, 'succeeded', JSON.stringify(rb));
  assert.equal(rb.user_id, sql(`SELECT id FROM users WHERE name = 'admin'`)[0].id);
  assert.equal(rb.agent_pid, null);
  // its session is cleaned up once it ended: the snapshot has what it made
  await until(() => sql(`SELECT cleaned_at FROM sessions WHERE id = '${rb.session_id}'`)[0]?.cleaned_at,
    'the rebuild\'s session cleaned up');
  const listed = await ok(server, 'list_runs', { limit: 100 });
  assert.ok(!JSON.stringify(listed).includes(rb.id), JSON.stringify(listed).slice(0, 2000));

  // the next session starts on the new snapshot: the rebuild's setup, not setup again
  const next = await runWith('rb-next', oak, look);
  assert.equal(next.r.status, 'succeeded', next.diag);
  assert.equal(next.restored, fresh.id, next.diag);
  assert.equal(next.r.setup.source, '.sandbox-mcp/maintenance.sh', next.diag);
  assert.match(next.tool, /LOG:setup,maintenance,/, next.diag);
  assert.doesNotMatch(next.tool, new RegExp(oldDep), next.diag);
});

test('another user never starts on a rebuilt private snapshot', async () => {
  assert.ok(rebuiltId);
  const r = await runWith('rb-bob', oak, look, bob);
  assert.equal(r.r.status, 'succeeded', r.diag);
  assert.ok(!r.has('env_restored'), r.diag);
  assert.equal(r.r.setup.source, '.sandbox-mcp/setup.sh', r.diag);
  assert.match(r.tool, /LOG:setup,/, r.diag);
  assert.doesNotMatch(r.tool, /maintenance/, r.diag);
  const [mine] = live('bob');
  assert.ok(mine && mine.id !== rebuiltId);
  assert.equal(mine.scope, mine.user_id);
  assert.equal(live('admin')[0].id, rebuiltId);
});

test('a lock file change: the snapshot is out of date, the full setup runs, the next session builds anew', async () => {
  const [old] = live('admin');
  assert.ok(old);
  await commit(oak, { 'package-lock.json': '{"lockfileVersion": 3, "changed": true}\n' }, 'Bump a dependency');
  const stale = await runWith('rb-stale', oak, look);
  assert.equal(stale.r.status, 'succeeded', stale.diag);
  assert.ok(stale.evs.some((e) => e.type === 'env_note' && /out of date/.test(e.summary)), stale.diag);
  assert.equal(stale.r.setup.source, '.sandbox-mcp/setup.sh', stale.diag);
  assert.match(stale.tool, /dep [0-9a-f-]+ built from \{"lockfileVersion": 3, "changed": true\}/, stale.diag);
  assert.equal(live('admin').length, 0, stale.diag);

  const anew = await runWith('rb-anew', oak, look);
  assert.equal(anew.r.status, 'succeeded', anew.diag);
  assert.ok(!anew.has('env_restored'), anew.diag);
  assert.ok(anew.has('env_saved'), anew.diag);
  assert.match(anew.tool, /LOG:setup,/, anew.diag);
  const now = live('admin');
  assert.equal(now.length, 1);
  assert.notEqual(now[0].id, old.id);
});
