// Environment snapshots with real installs (src/runs/envs.c): a repository whose setup runs
// `npm ci` (24 packages, some depending on others, from its package-lock.json) and `pip install`
// (6 wheels) against the tests' local registries. The first new session's setup installs them
// through the egress proxy and is saved; a later new session, with no network at all, starts on
// the snapshot and the agent's bash tool runs the repository's tests, which need every one of
// them. One server, the real Codex (runs.codexEnv), scripted fake upstream, registries on 127.0.0.2.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import path from 'node:path';

import { startServer, tempDir, removeDataDir } from '../lib/server.mjs';
import { ok, finished, codexEnv } from '../lib/runs.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { startDepsRegistries, depsRepo, CHECK, TEST_COMMAND, NPM_COUNT, PY_COUNT } from '../lib/deps_repo.mjs';

let fake, router, server, scratch, deps, repo;

function sql(query) {
  const out = execFileSync('sqlite3', ['-json', path.join(server.dataDir, 'sandbox-mcp.db'), query],
    { encoding: 'utf8' });
  return out.trim() ? JSON.parse(out) : [];
}

const events = (runId) => sql(`SELECT type, summary, raw FROM run_events WHERE run_id = '${runId}' ORDER BY seq`);

// A run in a new session on the repository; its agent runs command, then ends. tool: what the
// command printed, as the model was sent it.
async function runWith(marker, command, extra = {}) {
  const script = router.add(marker, [{ tool: 'bash', input: { command, description: 'Test' } }, { text: 'Done.' }]);
  const started = await ok(server, 'run_task', { task: `${marker}: run the tests`, repository: repo,
    pull_request: 'none', ...extra });
  const r = await finished(server, started.run_id);
  const evs = events(started.run_id);
  const tool = script.requests.flatMap((q) => toolResults(q.body)).map((t) => t.text).join('\n');
  const diag = JSON.stringify({ r, tool, evs: evs.map((e) => [e.type, e.summary]) }).slice(0, 6000);
  return { r, evs, diag, tool, has: (type) => evs.some((e) => e.type === type) };
}

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  scratch = tempDir('smcp-envi-');
  deps = await startDepsRegistries();
  repo = await depsRepo(scratch, deps);
  server = await startServer({ env: { ...codexEnv(fake.url),
    RUNS_ALLOW_LOCAL_REPOS: '1', ENV_CACHE_MB: '256',
    // the registries alone, by address: nothing else is reachable
    SANDBOX_NETWORK: 'allowlist', SANDBOX_NETWORK_DEFAULTS: '0', SANDBOX_NETWORK_ADDRS: deps.addrs } });
});

after(async () => {
  await server?.stop();
  if (server) removeDataDir(server.dataDir);
  await fake?.close();
  await deps?.close();
  rmSync(scratch, { recursive: true, force: true });
});

test('npm ci and pip install in the setup are saved; a new session without network runs the tests on them', async () => {
  const first = await runWith('envi-first', TEST_COMMAND);
  assert.equal(first.r.status, 'succeeded', first.diag);
  assert.equal(first.r.setup?.source, '.sandbox-mcp/setup.sh', first.diag);
  assert.equal(first.r.setup?.exit_status, 0, first.diag);
  assert.ok(first.has('env_saved'), first.diag);
  assert.ok(first.tool.includes(CHECK), first.diag);
  // the setup fetched every package from the registries, through the proxy
  const tarballs = deps.npm.requests.filter((q) => q.url.endsWith('.tgz')).length;
  const wheels = deps.py.requests.filter((q) => q.url.startsWith('/packages/')).length;
  assert.equal(tarballs, NPM_COUNT, first.diag);
  assert.equal(wheels, PY_COUNT, first.diag);
  const [saved] = sql(`SELECT bytes FROM envs WHERE dropped = 0 AND repository = '${repo}'`);
  assert.ok(saved && saved.bytes > 0, JSON.stringify(saved));

  const asked = deps.npm.requests.length + deps.py.requests.length;
  const second = await runWith('envi-second', `${TEST_COMMAND} && ls node_modules | wc -l`, { network: 'none' });
  assert.equal(second.r.status, 'succeeded', second.diag);
  assert.ok(second.has('env_restored'), second.diag);
  assert.ok(!second.has('env_saved'), second.diag);
  assert.equal(second.r.setup, null, second.diag); // no maintenance.sh: nothing ran before the agent
  assert.ok(second.tool.includes(CHECK), second.diag);
  assert.match(second.tool, new RegExp(`\\b${NPM_COUNT}\\s*$`), second.diag);
  // nothing was asked of the registries: every package came from the snapshot
  assert.equal(deps.npm.requests.length + deps.py.requests.length, asked);
});
