// Repository mirrors (src/runs/workspace.c, envcache.c, src/cli/cache.c): a new session's clone
// fetches into the node's mirror of the repository (DATA_DIR/cache/mirrors/<owner>/<key>) and
// clones from it, so a second session negotiates from the objects the mirror has and sees what
// was pushed since; a mirror fetched with a user's credential is that user's alone; a user's
// entries over ENV_CACHE_USER_MB go least recently used first, other users' untouched; a corrupt
// mirror is made afresh and the run goes on; `cache list` and `cache drop` show and remove them.
// The git server is a loopback smart-HTTP server standing in for GitHub; its upload-pack
// requests are recorded with their bodies. What is tested is the clone, so each run is held in
// its setup once its repository is in the workspace, looked at there, and cancelled: the servers
// keep no agent warm (RUNS_AGENT_WARM_SECONDS=0), so no OpenCode boots beside the setup, and none
// after it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { existsSync, readdirSync, rmSync, writeFileSync, readFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { startServer, rpc, cli, tempDir, addUser, sqlRows, removeDataDir } from '../lib/server.mjs';
import { startFake } from '../lib/fake-anthropic.mjs';
import { until } from '../lib/runs.mjs';
import { bareRepo, startGitServer, gitAsync } from '../lib/git.mjs';

const USER_TOKEN = 'ghp_alice_own_token_for_private';
const USER_AUTH = `Basic ${Buffer.from(`x-access-token:${USER_TOKEN}`).toString('base64')}`;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

let fake, server, gitsrv, scratch, bobToken;
let nextId = 1;
const bodies = []; // {path, body} of every POST to git-upload-pack

// Private repositories (under /acme/private*) answer only with alice's token; every POST body is
// kept (gunzipped when git compressed it) to see what the client negotiated with.
function gitRoutes() {
  return (req, res, u) => {
    if (req.method === 'POST' && u.pathname.endsWith('/git-upload-pack')) {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        let b = Buffer.concat(chunks);
        if (req.headers['content-encoding'] === 'gzip') b = zlib.gunzipSync(b);
        bodies.push({ path: u.pathname, body: b.toString('latin1') });
      });
    }
    if (u.pathname.startsWith('/acme/private') && req.headers.authorization !== USER_AUTH) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"', 'content-type': 'text/plain' });
      res.end('authentication required\n');
      return true;
    }
    return false;
  };
}

async function tool(name, args = {}, token = server.token, srv = server) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name, arguments: args } }, { token });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.body && r.body.result, r.text);
  return r.body.result;
}

const text = (res) => (res.content || []).map((c) => c.text || '').join('');

// A tool call that must succeed; its structuredContent.
async function ok(name, args, token, srv) {
  const res = await tool(name, args, token, srv);
  assert.equal(res.isError, undefined, `${name} ${JSON.stringify(args)}: ${text(res)}`);
  assert.ok(res.structuredContent, text(res));
  return res.structuredContent;
}

const runTask = (args, token, srv) => ok('run_task', { pull_request: 'none', ...args }, token, srv);

async function waitRun(runId, token, srv) {
  for (;;) {
    const r = await ok('get_result', { run_id: runId, wait_seconds: 30 }, token, srv);
    if (TERMINAL.has(r.status)) return r;
  }
}

// A run of repository (args: more of run_task's) taken as far as its setup, which holds it: its
// clone is then in the session's workspace, where look (a command, when given) runs; then the
// run is cancelled. Returns the run as run_task told it and what look printed.
async function cloned(args, { token, srv, look } = {}) {
  const started = await runTask({ setup: 'sleep 600', ...args }, token, srv);
  await until(async () => {
    const r = await ok('get_result', { run_id: started.run_id }, token, srv);
    assert.ok(!TERMINAL.has(r.status), `the run ended before its setup: ${JSON.stringify(r).slice(0, 2000)}`);
    return r.phase?.name === 'setting up';
  }, 'the run is in its setup', 300000);
  let out = '';
  if (look) {
    const dir = `/workspace/${path.basename(new URL(args.repository).pathname, '.git')}`;
    const x = await ok('container_exec', { session_id: started.session_id, command: look, cwd: dir }, token, srv);
    assert.equal(x.exit_code, 0, JSON.stringify(x));
    out = x.stdout;
  }
  await ok('cancel_run', { run_id: started.run_id }, token, srv);
  const r = await waitRun(started.run_id, token, srv);
  assert.equal(r.status, 'cancelled', JSON.stringify(r).slice(0, 2000));
  return { ...started, out };
}

const userId = (name) => sqlRows(server, `SELECT id FROM users WHERE name = '${name}'`)[0].id;
const mirrorsDir = () => path.join(server.dataDir, 'cache', 'mirrors');
// The mirrors owner holds, as {key: data dir}
function mirrorsOf(owner) {
  const dir = path.join(mirrorsDir(), owner);
  if (!existsSync(dir)) return {};
  const out = {};
  for (const k of readdirSync(dir)) {
    const data = path.join(dir, k, 'data');
    if (existsSync(data)) out[k] = data;
  }
  return out;
}
const keyOf = (url) => crypto.createHash('sha256').update(url).digest('hex').slice(0, 32);

// A commit adding file (content) pushed to the bare repository; returns its sha.
async function pushFile(bare, file, content) {
  const work = mkdtempSync(path.join(tmpdir(), 'smcp-mirror-work-'));
  try {
    await gitAsync(['clone', '-q', bare, work]);
    writeFileSync(path.join(work, file), content);
    await gitAsync(['add', file], work);
    await gitAsync(['commit', '-q', '-m', `add ${file}`], work);
    await gitAsync(['push', '-q', 'origin', 'HEAD:main'], work);
    return (await gitAsync(['rev-parse', 'HEAD'], work)).trim();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

before(async () => {
  scratch = tempDir('smcp-mirror-');
  for (const rel of ['acme/widget', 'acme/private', 'acme/big1', 'acme/big2', 'acme/big3'])
    await bareRepo(path.join(scratch, 'git', `${rel}.git`), { readme: `# ${rel}\n`, message: `${rel} initial` });
  // 600 KiB that does not compress in each big repository: two of them are over 1 MiB
  for (const rel of ['acme/big1', 'acme/big2', 'acme/big3'])
    await pushFile(path.join(scratch, 'git', `${rel}.git`), 'blob.bin', crypto.randomBytes(600 << 10));
  fake = await startFake();
  gitsrv = await startGitServer(path.join(scratch, 'git'), { route: gitRoutes() });
  server = await startServer({ env: {
    ANTHROPIC_API_KEY: 'sk-ant-test-key', ANTHROPIC_BASE_URL: fake.url,
    GITHUB_BASE_URL: gitsrv.url, FETCH_ALLOW: `127.0.0.1:${gitsrv.port}`,
    ENV_CACHE_MB: '8', ENV_CACHE_USER_MB: '1', RUNS_AGENT_WARM_SECONDS: '0',
  } });
  bobToken = addUser(server, 'bob');
  const r = cli(['user', 'credential', 'set', 'admin', 'github', '--data-dir', server.dataDir],
    { input: `${USER_TOKEN}\n` });
  assert.equal(r.status, 0, r.stderr);
});

after(async () => {
  if (process.env.SHOW_STDERR) console.log(server?.stderr());
  await server?.stop();
  await fake?.close();
  await gitsrv?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

test('a second session fetches into the mirror: it negotiates from what the mirror has and sees new commits', async () => {
  const url = `${gitsrv.url}/acme/widget.git`;
  const bare = path.join(scratch, 'git', 'acme', 'widget.git');
  const first = (await gitAsync(['rev-parse', 'main'], bare)).trim();
  const a = await cloned({ task: 'mirror-one: read', repository: url }, { look: 'cat README.md' });
  assert.equal(a.out, '# acme/widget\n');
  const admin = userId('admin');
  const m = mirrorsOf(admin)[keyOf(url)];
  assert.ok(m, `no mirror of ${url} for admin: ${JSON.stringify(mirrorsOf(admin))}`);
  assert.equal((await gitAsync(['rev-parse', 'refs/heads/main'], m)).trim(), first);

  const newer = await pushFile(bare, 'NEW.txt', 'pushed between sessions\n');
  const before = bodies.length;
  const b = await cloned({ task: 'mirror-two: read', repository: url }, // a new session
    { look: 'cat NEW.txt; git log -1 --format=%H' });
  assert.notEqual(b.session_id, a.session_id);
  assert.equal(b.out.trim(), `pushed between sessions\n${newer}`);
  // the fetch of the second session offered the commit the mirror already had
  const fetches = bodies.slice(before).filter((x) => x.path === '/acme/widget.git/git-upload-pack' && x.body.includes('want '));
  assert.ok(fetches.length >= 1, JSON.stringify(bodies.slice(before).map((x) => x.body.slice(0, 200))));
  assert.ok(fetches.some((x) => x.body.includes(`have ${first}`)), JSON.stringify(fetches));
  assert.equal((await gitAsync(['rev-parse', 'refs/heads/main'], m)).trim(), newer);
  // the listing names it as admin's
  const l = cli(['cache', 'list', '--user', 'admin', '--data-dir', server.dataDir]);
  assert.equal(l.status, 0, l.stderr);
  assert.match(l.stdout, new RegExp(`mirrors\\s+admin\\s+.*acme/widget\\.git`));
});

// A session of admin's that goes from repository to repository (each cloned through its mirror
// when the session first names it), so that the tests below need no new session of admin's.
let roaming;

test('a mirror fetched with a user\'s credential is theirs alone; another user without one still fails', async () => {
  const url = `${gitsrv.url}/acme/private.git`;
  const a = await cloned({ task: 'mirror-private: x', repository: url }, { look: 'cat README.md' });
  assert.equal(a.out, '# acme/private\n');
  roaming = a.session_id;
  const admin = userId('admin'), bob = userId('bob');
  assert.ok(mirrorsOf(admin)[keyOf(url)], 'admin has a mirror of the private repository');
  const seen = gitsrv.requests.length;
  const b = await runTask({ task: 'mirror-private: x', repository: url }, bobToken);
  const r = await waitRun(b.run_id, bobToken);
  assert.equal(r.status, 'failed', JSON.stringify(r));
  assert.match(r.result.error, /^cannot clone '.*private\.git': the repository needs credentials this server does not have/);
  // bob asked the server himself, without a credential, and holds no mirror of it
  const asked = gitsrv.requests.slice(seen).filter((q) => q.url.startsWith('/acme/private.git/'));
  assert.ok(asked.length >= 1);
  for (const q of asked) assert.equal(q.auth, null, q.url);
  assert.equal(mirrorsOf(bob)[keyOf(url)], undefined);
  assert.ok(mirrorsOf(admin)[keyOf(url)], 'admin\'s mirror is still there');
  // nothing of admin's is shared
  assert.deepEqual(mirrorsOf('_public'), {});
});

test('a corrupt mirror is made afresh and the run goes on', async () => {
  const url = `${gitsrv.url}/acme/widget.git`;
  const m = mirrorsOf(userId('admin'))[keyOf(url)];
  assert.ok(m, 'the mirror of the first test');
  for (const f of readdirSync(path.join(m, 'objects', 'pack')))
    writeFileSync(path.join(m, 'objects', 'pack', f), 'garbage\n');
  writeFileSync(path.join(m, 'HEAD'), 'not a ref\n');
  // a session that has not had the repository: its clone goes through the mirror
  assert.ok(roaming, 'the session of the test before');
  const r = await cloned({ task: 'mirror-corrupt: read', repository: url, session_id: roaming },
    { look: 'cat NEW.txt' });
  assert.equal(r.out.trim(), 'pushed between sessions');
  assert.match(server.stderr(), /run mirror was unusable and was made afresh/);
  await gitAsync(['fsck', '--no-dangling'], m);
  assert.match(readFileSync(path.join(m, 'HEAD'), 'utf8'), /^ref: refs\/heads\/main/);
});

test('cache drop removes a user\'s mirrors of a repository and no one else\'s', async () => {
  const url = `${gitsrv.url}/acme/widget.git`;
  const admin = userId('admin');
  assert.ok(mirrorsOf(admin)[keyOf(url)]);
  let r = cli(['cache', 'drop', 'bob', 'acme/widget', '--data-dir', server.dataDir]);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /user 'bob' has no cached entries of 'acme\/widget'/);
  assert.ok(mirrorsOf(admin)[keyOf(url)]);
  r = cli(['cache', 'drop', 'admin', 'acme/widget', '--data-dir', server.dataDir]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /dropped 1 cached entry of 'acme\/widget' for user 'admin'/);
  assert.equal(mirrorsOf(admin)[keyOf(url)], undefined);
  assert.ok(mirrorsOf(admin)[keyOf(`${gitsrv.url}/acme/private.git`)], 'another repository stays');
  r = cli(['cache', 'drop', 'admin', 'widget', '--data-dir', server.dataDir]);
  assert.equal(r.status, 2);
  r = cli(['cache', 'list', '--data-dir', server.dataDir]);
  assert.equal(r.status, 0, r.stderr);
  assert.doesNotMatch(r.stdout, /acme\/widget\.git/);
  assert.match(r.stdout, /admin .*acme\/private\.git/);
  assert.doesNotMatch(r.stdout, /bob/); // bob's failed first fetch left nothing
});

test('over ENV_CACHE_USER_MB a user\'s least recently used mirror goes; other users\' stay', async () => {
  const admin = userId('admin'), bob = userId('bob');
  const big = (n) => `${gitsrv.url}/acme/big${n}.git`;
  const blob = 'git cat-file -s HEAD:blob.bin';
  const b = await cloned({ task: 'mirror-big: x', repository: big(3) }, { token: bobToken, look: blob });
  assert.equal(b.out.trim(), String(600 << 10));
  assert.ok(mirrorsOf(bob)[keyOf(big(3))]);
  const one = await cloned({ task: 'mirror-big: x', repository: big(1), session_id: roaming }, { look: blob });
  assert.equal(one.out.trim(), String(600 << 10));
  assert.ok(mirrorsOf(admin)[keyOf(big(1))], 'big1 is kept while under the cap');
  const two = await cloned({ task: 'mirror-big: x', repository: big(2), session_id: one.session_id }, { look: blob });
  assert.equal(two.out.trim(), String(600 << 10));
  const mine = mirrorsOf(admin);
  // 600 KiB each: big1 and big2 together are over admin's 1 MiB; big1 (and the small ones
  // before it, which go first) were used less recently than big2
  assert.equal(mine[keyOf(big(1))], undefined, JSON.stringify(mine));
  assert.ok(mine[keyOf(big(2))], JSON.stringify(mine));
  assert.ok(mirrorsOf(bob)[keyOf(big(3))], 'bob\'s mirror is untouched');
  assert.match(server.stderr(), /run cache entries evicted .*count=\d/);
  const l = cli(['cache', 'list', '--data-dir', server.dataDir]);
  assert.equal(l.status, 0, l.stderr);
  assert.match(l.stdout, /bob .*acme\/big3\.git/);
  assert.match(l.stdout, /admin .*acme\/big2\.git/);
});

test('with ENV_CACHE_SHARE_PUBLIC=1 a repository fetched without a credential has one mirror for every user', async () => {
  const own = await startServer({ env: {
    ANTHROPIC_API_KEY: 'sk-ant-test-key', ANTHROPIC_BASE_URL: fake.url,
    FETCH_ALLOW: `127.0.0.1:${gitsrv.port}`, ENV_CACHE_SHARE_PUBLIC: '1', RUNS_AGENT_WARM_SECONDS: '0',
  } });
  try {
    const carolToken = addUser(own, 'carol');
    const url = `${gitsrv.url}/acme/widget.git`;
    const checkedOut = async (token) => (await cloned({ task: 'mirror-shared: x', repository: url },
      { token, srv: own, look: 'git rev-parse HEAD' })).out.trim();
    const first = await checkedOut(own.token);
    const shared = path.join(own.dataDir, 'cache', 'mirrors', '_public', keyOf(url), 'data');
    assert.ok(existsSync(shared), 'a shared mirror');
    const head = (await gitAsync(['rev-parse', 'refs/heads/main'], shared)).trim();
    assert.equal(first, head);
    const before = bodies.length;
    assert.equal(await checkedOut(carolToken), head);
    // carol's clone fetched into the shared mirror, offering what it had, and made none of hers
    const fetches = bodies.slice(before).filter((x) => x.path === '/acme/widget.git/git-upload-pack' && x.body.includes('want '));
    assert.ok(fetches.length === 0 || fetches.some((x) => x.body.includes(`have ${head}`)), JSON.stringify(fetches));
    assert.deepEqual(readdirSync(path.join(own.dataDir, 'cache', 'mirrors')), ['_public']);
  } finally {
    await own.stop();
    removeDataDir(own.dataDir);
  }
});

test('an ENV_CACHE_* setting out of range stops any command with exit 2, before the store is made', () => {
  for (const [env, msg] of [
    [{ ENV_CACHE_MB: 'lots' }, "ENV_CACHE_MB 'lots' is not a number between 0 and 1048576"],
    [{ ENV_CACHE_MB: '8', ENV_CACHE_USER_MB: '9' }, "ENV_CACHE_USER_MB '9' is not a number between 1 and 8"],
    [{ ENV_CACHE_MAX_AGE_HOURS: '0' }, "ENV_CACHE_MAX_AGE_HOURS '0' is not a number between 1 and 8760"],
    [{ ENV_CACHE_SHARE_PUBLIC: 'yes' }, "ENV_CACHE_SHARE_PUBLIC 'yes' is not 1, 0, true or false"]]) {
    const d = path.join(tempDir('smcp-mirror-cfg-'), 'data');
    const r = cli(['user', 'list', '--data-dir', d, '--env-file', '/dev/null'], { env });
    assert.equal(r.status, 2, `${JSON.stringify(env)}: ${r.stderr}`);
    assert.ok(r.stderr.includes(`sandbox-mcp: ${msg}\n`), r.stderr);
    assert.equal(existsSync(d), false);
    rmSync(path.dirname(d), { recursive: true, force: true });
  }
});
