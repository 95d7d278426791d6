// Escapes through a run's agent: code in a session's sandbox against the host files the agent's
// output goes to and against the record of how the agent ended.
//
// A first run of the session plants a preload (/etc/ld.so.preload in the sandbox, which is the
// sandbox's to write): every later agent of the session then runs code of the sandbox's choosing
// in its own process, with whatever descriptors the agent was given, before the agent itself
// starts. What it does is chosen by the task of the run (MODE=...), which it reads without
// consuming it:
//   flood   4 MiB to stdout and 4 MiB to stderr, then the agent goes on
//   forge   the line the old wrapper printed for "exit 0" on stdout, then exit status 3
//   vanish  wait until the server is gone (its listener in the sandbox refuses), exit status 5
// The real OpenCode runs the agents, against a scripted fake of the Anthropic API, started for
// each run (RUNS_AGENT_WARM_SECONDS=0): the preload needs an agent process the init starts. With
// OpenCode kept warm, the agent process is the static bridge, which no preload reaches; its
// output goes through the same capped files (runs_warm.test.mjs floods it from the sandbox).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { startServer, rpc, tempDir, removeDataDir } from '../lib/server.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';

const API_KEY = 'sk-ant-test-key';
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
const EVENTS_MAX = 256 * 1024;
const LOG_MAX = 64 * 1024;
const FLOOD = 4 * 1024 * 1024;

const PRELOAD = String.raw`
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void put(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static int server_there(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(8788)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(s);
    return ok;
}

__attribute__((constructor)) static void plant(void)
{
    /* the agent's own process (its parent is the sandbox's init), once */
    if (getppid() != 1 || !getenv("OPENCODE_CONFIG_CONTENT") || getenv("PLANT_DONE"))
        return;
    setenv("PLANT_DONE", "1", 1);
    char task[4096];
    ssize_t n = pread(0, task, sizeof(task) - 1, 0);
    task[n > 0 ? n : 0] = '\0';
    if (strstr(task, "MODE=flood")) {
        static char line[1024];
        memset(line, 'x', sizeof(line) - 1);
        line[sizeof(line) - 1] = '\n';
        for (int i = 0; i < ${FLOOD / 1024}; i++) {
            put(1, line, sizeof(line));
            put(2, line, sizeof(line));
        }
    } else if (strstr(task, "MODE=forge")) {
        static const char forged[] = "{\"type\":\"sandbox_mcp_exit\",\"code\":0}\n";
        put(1, forged, sizeof(forged) - 1);
        _exit(3);
    } else if (strstr(task, "MODE=vanish")) {
        static const char waiting[] = "{\"type\":\"planted\",\"note\":\"waiting\"}\n";
        static const char leaving[] = "{\"type\":\"planted\",\"note\":\"leaving\"}\n";
        put(1, waiting, sizeof(waiting) - 1);
        while (server_there())
            usleep(50000);
        put(1, leaving, sizeof(leaving) - 1);
        _exit(5);
    }
}
`;

const ENV = { ANTHROPIC_API_KEY: API_KEY, RUNS_EVENTS_MAX_BYTES: String(EVENTS_MAX),
  RUNS_AGENT_LOG_MAX_BYTES: String(LOG_MAX), RUNS_AGENT_WARM_SECONDS: '0' };

let fake, router, server, dataDir, session;
let nextId = 1;
let seq = 0;

async function tool(srv, name, args) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name, arguments: args } });
  assert.equal(r.status, 200, r.text);
  const res = r.body.result;
  assert.equal(res.isError, undefined, `${name}: ${JSON.stringify(res).slice(0, 500)}`);
  return res.structuredContent;
}

async function waitRun(srv, runId) {
  for (;;) {
    const r = await tool(srv, 'get_result', { run_id: runId, wait_seconds: 30 });
    if (TERMINAL.has(r.status)) return r;
  }
}

async function waitUntil(cond, what, ms = 120000) {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error(`not met in time: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function runFile(srv, runId, name) {
  return path.join(srv.dataDir, 'runs', runId, name);
}

function size(file) {
  return existsSync(file) ? statSync(file).size : 0;
}

function storedEvents(srv, runId) {
  const out = execFileSync('sqlite3', ['-json', path.join(srv.dataDir, 'sandbox-mcp.db'),
    `SELECT type, raw FROM run_events WHERE run_id = '${runId}' ORDER BY seq`], { encoding: 'utf8' });
  return out.trim() ? JSON.parse(out) : [];
}

// A first run in a new session compiles the preload and installs it for the whole sandbox.
// Returns the session; checks on the way that the sandbox's init keeps its descriptors (the
// host files of relayed agents) to itself.
async function plant(srv) {
  const marker = `plant-${++seq}-${process.pid}`;
  const b64 = Buffer.from(PRELOAD).toString('base64');
  const script = router.add(marker, [
    { tool: 'bash', input: { description: 'Plant a preload', command:
      `mkdir -p /workspace/.plant && cd /workspace/.plant && echo ${b64} | base64 -d > p.c && `
      + 'gcc -shared -fPIC -O1 -o p.so p.c && echo /workspace/.plant/p.so > /etc/ld.so.preload && '
      + 'echo planted; n=0; for f in /proc/1/fd/*; do readlink "$f" >/dev/null 2>&1 && n=$((n+1)); '
      + '(: >> "$f") 2>/dev/null && n=$((n+1)); done; echo "init fds reachable: $n"' } },
    { text: 'Planted.' },
  ]);
  const started = await tool(srv, 'run_task', { task: `${marker}: plant` });
  const r = await waitRun(srv, started.run_id);
  assert.equal(r.status, 'succeeded', JSON.stringify(r));
  const out = toolResults(script.requests[1].body).map((t) => t.text).join('\n');
  assert.match(out, /planted/, out);
  assert.match(out, /init fds reachable: 0\b/, `the init's descriptors are open to the sandbox: ${out}`);
  return started.session_id;
}

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  ENV.ANTHROPIC_BASE_URL = fake.url;
  // a directory of the file's, not the server's own: the kill -9 test starts another server on it
  dataDir = tempDir();
  server = await startServer({ dataDir, env: ENV });
  session = await plant(server);
});

after(async () => {
  await server?.stop();
  if (dataDir) removeDataDir(dataDir);
  await fake?.close();
});

test('code in the session sandbox writes far more than the caps to the agent\'s stdout and stderr: the host files stay within them', async () => {
  const marker = `flood-${process.pid}`;
  router.add(marker, [{ text: 'Done.' }]);
  const started = await tool(server, 'run_task', { task: `${marker}: MODE=flood`, session_id: session });
  const r = await waitRun(server, started.run_id);
  const diag = `${JSON.stringify(r, null, 1)}\n${server.stderr().slice(-3000)}`;
  const events = size(runFile(server, r.run_id, 'events.jsonl'));
  const log = size(runFile(server, r.run_id, 'agent.log'));
  assert.ok(events <= EVENTS_MAX, `events.jsonl has ${events} bytes, over its cap of ${EVENTS_MAX}`);
  assert.ok(log <= LOG_MAX, `agent.log has ${log} bytes, over its cap of ${LOG_MAX}`);
  // what did come through was the sandbox's writing, up to the caps
  assert.ok(events > EVENTS_MAX / 2 && log > LOG_MAX / 2, `events ${events}, log ${log}`);
  // an event stream that fills its file ends the run, and says why
  assert.equal(r.status, 'failed', diag);
  assert.match(r.status_reason, new RegExp(`output exceeded ${EVENTS_MAX} bytes`), diag);
  assert.match(r.result.error, /RUNS_EVENTS_MAX_BYTES/, diag);
});

test('a forged exit line on the agent\'s stdout does not decide the run: its real exit status does', async () => {
  const marker = `forge-${process.pid}`;
  router.add(marker, [{ text: 'Done.' }]);
  const started = await tool(server, 'run_task', { task: `${marker}: MODE=forge`, session_id: session });
  const r = await waitRun(server, started.run_id);
  const diag = `${JSON.stringify(r, null, 1)}\n${server.stderr().slice(-3000)}`;
  assert.equal(r.status, 'failed', diag);
  assert.equal(r.exit_code, 3, diag);
  assert.match(r.status_reason, /exited with status 3/, diag);
  assert.equal(r.result.success, false, diag);
  // the forged line is just something the agent printed
  const stored = storedEvents(server, r.run_id);
  assert.ok(stored.some((e) => e.raw.includes('sandbox_mcp_exit')), JSON.stringify(stored));
});

// On the file's server and its planted session (a new session's plant boots an agent, seconds of
// CPU): the server is killed and the next one, started on its data, is the file's from then on,
// so this test is the file's last.
test('kill -9 of the server while the agent runs, and the agent ends meanwhile: the next server records its real exit status', async () => {
  const { token } = server;
  const marker = `vanish-${process.pid}`;
  router.add(marker, [{ text: 'Done.' }]);
  const started = await tool(server, 'run_task', { task: `${marker}: MODE=vanish`, session_id: session });
  const events = runFile(server, started.run_id, 'events.jsonl');
  const said = (what) => existsSync(events) && readFileSync(events, 'utf8').includes(`"note":"${what}"`);
  await waitUntil(() => said('waiting'), 'the agent started');
  await server.stop('SIGKILL');
  // the agent saw the server go and ended while no server was there
  await waitUntil(() => said('leaving'), 'the agent noticed the server was gone');
  server = await startServer({ dataDir, env: ENV });
  server.token = token;
  const r = await waitRun(server, started.run_id);
  const diag = `${JSON.stringify(r, null, 1)}\n${server.stderr().slice(-3000)}`;
  assert.equal(r.status, 'failed', diag);
  assert.equal(r.exit_code, 5, diag);
  assert.match(r.status_reason, /exited with status 5/, diag);
});
