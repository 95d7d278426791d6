// Environment snapshots (src/runs/envs.c, src/sandbox/env.c, src/sandbox/layer.c): a new
// session's successful setup is saved; another user never starts on it; one that cannot be
// mounted is dropped and the run goes on from a fresh setup; one past its age that nobody used is
// not used; the least recently used goes when a user's share is full; the account page and `cache
// drop` drop one. What a later session of the same user finds on it (the commits since,
// maintenance only, a lock file change, a rebuild) is runs_env_rebuild.test.mjs's. One server,
// the real Codex (runs.codexEnv), a scripted fake upstream, local repositories. Each user's first
// session on elm is made before the tests, and until the bound's test each user has one snapshot
// of elm that no session started on, which a test takes as it finds it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, tempDir, removeDataDir, addUserAsync, cliAsync } from '../lib/server.mjs';
import { ok, finished, until, codexEnv } from '../lib/runs.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { repoWithFiles } from '../lib/git.mjs';
import { CookieJar, request, forms, setPassword, signIn } from '../lib/oauth.mjs';

let fake, router, server, scratch, bob, first, bobFirst;

const repoWith = (name, files) => repoWithFiles(path.join(scratch, `${name}.git`), files);

function sql(query) {
  const out = execFileSync('sqlite3', ['-json', path.join(server.dataDir, 'sandbox-mcp.db'), query],
    { encoding: 'utf8' });
  return out.trim() ? JSON.parse(out) : [];
}

const events = (runId) => sql(`SELECT type, summary, raw FROM run_events WHERE run_id = '${runId}' ORDER BY seq`);

// A run in a new session on repository; its agent runs `command` with bash, then ends.
async function runWith(marker, repository, command, token = server.token) {
  const script = router.add(marker, [{ tool: 'bash', input: { command, description: 'Look' } }, { text: 'Done.' }]);
  const started = await ok(server, 'run_task', { task: `${marker}: look`, repository, pull_request: 'none' },
    token);
  const r = await finished(server, started.run_id, token);
  const evs = events(started.run_id);
  const diag = JSON.stringify({ r, evs: evs.map((e) => [e.type, e.summary]) }).slice(0, 4000);
  // what the agent's command printed, as the model was told it
  const tool = toolResults(script.requests.at(-1)?.body ?? {}).map((x) => x.text).join('\n');
  return { r, evs, diag, tool, has: (type) => evs.some((e) => e.type === type) };
}

// The snapshot a run saved (its env_saved event's), or undefined.
const savedBy = (run) => {
  const saved = run.evs.find((e) => e.type === 'env_saved');
  return saved && JSON.parse(saved.raw).snapshot;
};

// What the agent prints: the setup log, the installed dependency, the checkout, git's view.
const look = 'printf "LOG:"; tr "\\n" "," < /var/lib/elm/log; echo; cat node_modules/dep/index.txt; '
  + 'ls; echo "STATUS:$(git status --porcelain | wc -l)"';

// What the setup installs weighs 2.5 MiB (a blob beside the dependency), so that an elm snapshot
// and two others fill a share of 6 MiB (ENV_CACHE_USER_MB) in the bound's test.
const heavy = 'head -c 2621440 /dev/zero > node_modules/blob\n';
const setup = 'mkdir -p node_modules/dep /var/lib/elm\n'
  + 'echo "dep built from $(tr -d "\\n" < package-lock.json)" > node_modules/dep/index.txt\n'
  + heavy
  + 'echo setup >> /var/lib/elm/log\n';

let elm;
const liveSnapshots = (user) => sql(`SELECT id, user_id, scope, bytes, created_at FROM envs WHERE dropped = 0 AND `
  + `repository = '${elm}' AND user_id = (SELECT id FROM users WHERE name = '${user}')`);

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  scratch = tempDir('smcp-env-');
  // what a server that stopped mid-way would leave: a copy not finished, a removal not finished
  const dataDir = tempDir();
  for (const left of ['envs/env-unfinished.part/root/usr', 'envs/env-dropped.gone/workspace/elm'])
    mkdirSync(path.join(dataDir, left), { recursive: true });
  writeFileSync(path.join(dataDir, 'envs/env-dropped.gone/workspace/elm/file'), 'x\n');
  server = await startServer({ dataDir, env: { ...codexEnv(fake.url),
    RUNS_ALLOW_LOCAL_REPOS: '1', ENV_CACHE_MB: '64', ENV_CACHE_USER_MB: '6' } });
  bob = await addUserAsync(server, 'bob');
  elm = await repoWith('elm', {
    'package-lock.json': '{"lockfileVersion": 3}\n',
    '.gitignore': 'node_modules/\n',
    '.sandbox-mcp/setup.sh': setup,
    '.sandbox-mcp/maintenance.sh': 'echo maintenance >> /var/lib/elm/log\n',
  });
  // the first new session of each user, admin's first: bob's starts while admin's snapshot is there
  first = await runWith('env-first', elm, look);
  bobFirst = await runWith('env-bob', elm, look, bob);
});

test('what a stopped server left of snapshots is removed at the start', async () => {
  await server.waitLog(/environment snapshot leftovers removed count=2/);
  for (const left of ['env-unfinished.part', 'env-dropped.gone'])
    await until(() => !existsSync(path.join(server.dataDir, 'envs', left)), `${left} removed`);
});

after(async () => {
  await server?.stop();
  if (server) removeDataDir(server.dataDir);
  await fake?.close();
  rmSync(scratch, { recursive: true, force: true });
});

test('a new session\'s successful setup is saved as the user\'s snapshot of the repository', async () => {
  assert.equal(first.r.status, 'succeeded', first.diag);
  assert.equal(first.r.setup.source, '.sandbox-mcp/setup.sh', first.diag);
  assert.ok(first.has('env_saved'), first.diag);
  assert.ok(!first.has('env_restored'), first.diag);
  assert.match(first.tool, /LOG:setup,/, first.diag);
  const live = liveSnapshots('admin');
  assert.equal(live.length, 1);
  assert.equal(live[0].id, savedBy(first));
  assert.equal(live[0].scope, live[0].user_id); // admin's alone
});

test('another user never starts on a user\'s snapshot', async () => {
  const r = bobFirst;
  assert.equal(r.r.status, 'succeeded', r.diag);
  // admin's snapshot was there to be taken: saved before bob's session began, and live still
  assert.equal(sql(`SELECT dropped FROM envs WHERE id = '${savedBy(first)}'`)[0]?.dropped, 0, first.diag);
  assert.ok(!r.has('env_restored'), r.diag);
  assert.equal(r.r.setup.source, '.sandbox-mcp/setup.sh', r.diag);
  assert.match(r.tool, /LOG:setup,/, r.diag);
  assert.doesNotMatch(r.tool, /maintenance/, r.diag);
  // bob's own, for bob alone
  const mine = liveSnapshots('bob');
  assert.equal(mine.length, 1);
  assert.equal(mine[0].scope, mine[0].user_id);
});

test('a snapshot that cannot be mounted is dropped, and the run goes on from a fresh setup', async () => {
  const [snap] = liveSnapshots('admin');
  rmSync(path.join(server.dataDir, 'envs', snap.id, 'workspace'), { recursive: true, force: true });
  const r = await runWith('env-broken', elm, look);
  assert.equal(r.r.status, 'succeeded', r.diag);
  assert.ok(r.evs.some((e) => e.type === 'env_note' && /could not be used/.test(e.summary)), r.diag);
  assert.ok(!r.has('env_restored'), r.diag);
  assert.equal(r.r.setup.source, '.sandbox-mcp/setup.sh', r.diag);
  assert.match(r.tool, /LOG:setup,/, r.diag);
  assert.ok(r.has('env_saved'), r.diag);
  const now = liveSnapshots('admin');
  assert.equal(now.length, 1);
  assert.notEqual(now[0].id, snap.id);
  // the broken one is gone from disk: no sandbox starts on it
  assert.ok(!existsSync(path.join(server.dataDir, 'envs', snap.id)));
});

test('a snapshot past ENV_CACHE_MAX_AGE_HOURS is not used', async () => {
  const [snap] = liveSnapshots('admin');
  sql(`UPDATE envs SET created_at = created_at - 25 * 3600 * 1000 WHERE id = '${snap.id}'`);
  const r = await runWith('env-aged', elm, look);
  assert.equal(r.r.status, 'succeeded', r.diag);
  assert.ok(!r.has('env_restored'), r.diag);
  assert.equal(r.r.setup.source, '.sandbox-mcp/setup.sh', r.diag);
  assert.ok(r.has('env_saved'), r.diag);
  assert.equal(sql(`SELECT dropped FROM envs WHERE id = '${snap.id}'`)[0]?.dropped ?? 1, 1);
});

test('a user\'s share is bounded (ENV_CACHE_USER_MB): the least recently used snapshot goes', async () => {
  // three snapshots of 2.5 MiB each for a share of 6 MiB: admin's of elm, the least recently
  // used, then those of two repositories whose setups install as much
  const [oldest] = liveSnapshots('admin');
  assert.ok(oldest && oldest.bytes >= 2621440, JSON.stringify(oldest));
  const ids = [oldest.id];
  for (const name of ['fir', 'pine']) {
    const repo = await repoWith(name, { '.gitignore': 'node_modules/\n',
      '.sandbox-mcp/setup.sh': `mkdir -p node_modules\n${heavy}` });
    const r = await runWith(`env-heavy-${name}`, repo, 'ls -la node_modules');
    assert.equal(r.r.status, 'succeeded', r.diag);
    assert.ok(r.has('env_saved'), r.diag);
    ids.push(savedBy(r));
  }
  const live = sql(`SELECT id, bytes FROM envs WHERE dropped = 0 AND user_id = (SELECT id FROM users WHERE name = 'admin')`);
  const total = live.reduce((n, e) => n + e.bytes, 0);
  assert.ok(total <= 6 * 1048576, JSON.stringify(live));
  assert.ok(!live.some((e) => e.id === ids[0]), JSON.stringify(live)); // the least recently used
  assert.ok(live.some((e) => e.id === ids[1]) && live.some((e) => e.id === ids[2]), JSON.stringify(live));
  // bob's is untouched by admin's eviction
  assert.equal(liveSnapshots('bob').length, 1);
});

test('the account page lists a user\'s cached environments and drops one; another user\'s is not theirs to drop', async () => {
  const mine = sql(`SELECT id, repository FROM envs WHERE dropped = 0 AND user_id = (SELECT id FROM users WHERE name = 'admin') ORDER BY id`);
  const [bobs] = liveSnapshots('bob');
  assert.ok(mine.length > 0 && bobs);
  setPassword(server, 'admin', 'environments page password 1');
  const jar = new CookieJar();
  assert.equal((await signIn(server, jar, { name: 'admin', password: 'environments page password 1' })).status, 303);
  const card = (html) => html.slice(html.indexOf('<section class="card" id="environments">'));
  let page = await request(server, '/account', { jar });
  assert.equal(page.status, 200);
  for (const m of mine) assert.ok(card(page.text).includes(`<code>${m.repository}</code>`), card(page.text).slice(0, 2000));
  const drops = forms(card(page.text)).filter((f) => f.action === '/account/env/drop');
  assert.deepEqual(drops.map((f) => f.fields.id).sort(), mine.map((m) => m.id)); // bob's is not listed
  const { csrf } = drops[0].fields;
  // without the page's CSRF token nothing is done; another user's id is refused
  let r = await request(server, '/account/env/drop', { jar, form: { id: mine[0].id } });
  assert.equal(r.status, 403);
  r = await request(server, '/account/env/drop', { jar, form: { csrf, id: bobs.id } });
  assert.equal(r.status, 200);
  assert.match(r.text, /There is no such cached environment\./);
  assert.equal(liveSnapshots('bob').length, 1);
  r = await request(server, '/account/env/drop', { jar, form: { csrf, id: mine[0].id } });
  assert.equal(r.status, 303);
  assert.equal(r.location.pathname + r.location.search, '/account?done=env-dropped');
  assert.equal(sql(`SELECT dropped FROM envs WHERE id = '${mine[0].id}'`)[0]?.dropped ?? 1, 1);
  page = await request(server, r.location.pathname + r.location.search, { jar });
  assert.match(page.text, /The cached environment is dropped/);
  assert.ok(!forms(card(page.text)).some((f) => f.fields.id === mine[0].id));
});

test('cache list shows a user\'s snapshot; cache drop drops it, and the next session sets up afresh', async () => {
  const [snap] = liveSnapshots('bob');
  const slug = elm.split('/').slice(-2).join('/').replace(/\.git$/, '');
  const list = await cliAsync(['cache', 'list', '--user', 'bob', '--data-dir', server.dataDir]);
  assert.equal(list.status, 0, list.stderr);
  assert.ok(list.stdout.split('\n').some((l) => /^snapshot\s+bob\s/.test(l) && l.endsWith(elm)), list.stdout);
  // another user's name drops nothing of bob's
  const none = await cliAsync(['cache', 'drop', 'admin', 'nobody/nothing', '--data-dir', server.dataDir]);
  assert.equal(none.status, 1, none.stdout);
  const drop = await cliAsync(['cache', 'drop', 'bob', slug, '--data-dir', server.dataDir]);
  assert.equal(drop.status, 0, drop.stderr);
  assert.match(drop.stdout, /dropped/);
  assert.equal(sql(`SELECT dropped FROM envs WHERE id = '${snap.id}'`)[0]?.dropped ?? 1, 1);
  // the next new session of bob's sets up afresh
  const r = await runWith('env-dropped', elm, look, bob);
  assert.equal(r.r.status, 'succeeded', r.diag);
  assert.ok(!r.has('env_restored'), r.diag);
  assert.equal(r.r.setup.source, '.sandbox-mcp/setup.sh', r.diag);
});
