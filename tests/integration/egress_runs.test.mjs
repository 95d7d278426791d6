// A sandbox's network as runs and users see it: the mode a run is given (run_task's `network`,
// never wider than the user's setting or the server's), the user's setting for the container_*
// tools (`sandbox-mcp user network`), and the record of every attempt: get_result's `network`
// summary (hosts reached, attempts refused with their reason), the run page's data and /metrics.
// The agent is the real Codex (runs.codexEnv), scripted by the fake model; its commands make the
// attempts. Nothing leaves the machine: the server is in allow-list mode with nothing on its
// list but names of loopback services (localhost:<port>), so a name the test did not list is
// refused before any lookup, and every name that is looked up is localhost.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';

import { startServer, rpc, cli, sqlRows } from '../lib/server.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { codexEnv } from '../lib/runs.mjs';
import { parseMetrics } from '../lib/http.mjs';
import { startNpmRegistry, NPM_FIXTURE } from '../lib/registries.mjs';

const METRICS_TOKEN = 'egress-runs-metrics';
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
// Through the proxy explicitly (NO_PROXY names localhost, right for the sandbox's own services);
// -p makes curl tunnel with CONNECT even for http:// URLs.
const VIA = "curl -sS --noproxy '' -x http://127.0.0.1:3128 --max-time 20";

let fake, router, srv, web, svc, ports, npm;
let nextId = 1;
// The session of the first run, which the later runs of the same user go to (its sandbox and warm
// agent; a new session boots one, seconds of CPU): a run's network is its own, whatever the
// session's runs before it had. Undefined if that test failed before its run, and the later ones
// make their own.
let session;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

async function tool(name, args, token = srv.token) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } },
    { token });
  assert.equal(r.status, 200, r.text);
  return r.body.result;
}

async function ok(name, args, token) {
  const r = await tool(name, args, token);
  assert.equal(r.isError, undefined, `${name}: ${JSON.stringify(r).slice(0, 800)}`);
  return r.structuredContent;
}

async function waitRun(runId, token) {
  for (;;) {
    const r = await ok('get_result', { run_id: runId, wait_seconds: 30 }, token);
    if (TERMINAL.has(r.status)) return r;
  }
}

function addUser(name) {
  assert.equal(cli(['user', 'add', name, '--data-dir', srv.dataDir]).status, 0);
  const tok = cli(['token', 'create', '--user', name, '--data-dir', srv.dataDir]);
  assert.equal(tok.status, 0, tok.stderr);
  return tok.stdout.trim();
}

function userNetwork(name, mode) {
  const r = cli(['user', 'network', name, ...(mode ? [mode] : []), '--data-dir', srv.dataDir], {
    env: { SANDBOX_NETWORK: 'allowlist' } });
  return r;
}

// A run whose agent runs one bash command and then answers; returns the run's final result and
// what the bash tool printed.
async function agentRun(marker, command, extra = {}, token) {
  const script = router.add(marker, [
    { tool: 'bash', input: { command, description: 'Try the network' } },
    { text: 'Tried it.' },
  ]);
  const r = await ok('run_task', { task: `Try the network (${marker})`, ...extra }, token);
  const done = await waitRun(r.run_id, token);
  assert.equal(done.status, 'succeeded', JSON.stringify(done));
  // this run's tool results: a run in a session that had runs before carries their conversation,
  // whose results its first request already has
  const earlier = new Set(toolResults(script.requests[0].body).map((t) => t.tool_use_id));
  const out = script.requests.flatMap((q) => toolResults(q.body)).filter((t) => !earlier.has(t.tool_use_id))
    .map((t) => t.text).join('\n');
  return { run: done, out };
}

const denied = (net, host, port) => net.denied.find((d) => d.host === host && d.port === port);

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  web = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`hello from upstream ${req.url}\n`);
  });
  svc = net.createServer((s) => s.end('a loopback service\n'));
  await Promise.all([new Promise((r) => web.listen(0, '127.0.0.1', r)), new Promise((r) => svc.listen(0, '127.0.0.1', r))]);
  npm = await startNpmRegistry();
  ports = { web: web.address().port, svc: svc.address().port, server: await freePort(), unlisted: await freePort(),
    npm: npm.port };
  const env = {
    ...codexEnv(fake.url),
    METRICS_TOKEN,
    SANDBOX_NETWORK: 'allowlist',
    SANDBOX_NETWORK_DEFAULTS: '0',
    // names the sandbox may ask for: all localhost, so every lookup stays on this machine
    SANDBOX_NETWORK_ALLOW: `localhost:${ports.web},localhost:${ports.svc},localhost:${ports.server},localhost:${ports.npm}`,
    // and of the addresses they resolve to, only the web upstream's and the registry's
    SANDBOX_NETWORK_ADDRS: `127.0.0.1:${ports.web},127.0.0.1:${ports.npm}`,
  };
  srv = await startServer({ env, args: ['--listen', `127.0.0.1:${ports.server}`] });
  assert.ok(srv.url.endsWith(`:${ports.server}`), srv.url);
});

after(async () => {
  if (process.env.SHOW_STDERR) console.log(srv?.stderr());
  await srv?.stop();
  await fake?.close();
  web?.close();
  svc?.close();
  await npm?.close();
});

test('a run installs a dependency from the package registry and runs the test that needs it', async () => {
  const dir = '/workspace/padder';
  const script = router.add('net-npm-4e9', [
    { tool: 'write', input: { filePath: `${dir}/package.json`, content: `${JSON.stringify({
      name: 'padder', version: '0.1.0', private: true, scripts: { test: 'node test.js' },
      dependencies: { [NPM_FIXTURE.name]: NPM_FIXTURE.version } }, null, 2)}\n` } },
    { tool: 'write', input: { filePath: `${dir}/test.js`, content: [
      "const assert = require('node:assert');",
      `const pad = require('${NPM_FIXTURE.name}');`,
      "assert.strictEqual(pad('7', 3, '0'), '007');",
      "console.log('padder test passed');", ''].join('\n') } },
    // the registry is a loopback service named localhost, which NO_PROXY would keep from the
    // proxy (right for the sandbox's own services); a real registry's name is not on that list
    { tool: 'bash', input: { description: 'Install and test', command: `cd ${dir} && unset NO_PROXY no_proxy && `
      + `npm install --registry http://localhost:${ports.npm}/ --no-audit --no-fund --no-update-notifier && npm test --no-update-notifier` } },
    { text: 'Installed the dependency; the test passes.' },
  ]);
  const r = await ok('run_task', { task: 'Install the dependencies and run the tests (net-npm-4e9)' });
  session = r.session_id;
  const run = await waitRun(r.run_id);
  assert.equal(run.status, 'succeeded', JSON.stringify(run));
  const out = script.requests.flatMap((q) => toolResults(q.body)).map((t) => t.text).join('\n');
  assert.match(out, /added 1 package/, out);
  assert.match(out, /padder test passed/, out);
  // the registry saw the package document and the tarball, through the proxy
  const paths = npm.requests.map((q) => q.url);
  assert.ok(paths.includes(`/${NPM_FIXTURE.name}`), paths.join(' '));
  assert.ok(paths.some((p) => p.endsWith(`${NPM_FIXTURE.name}-${NPM_FIXTURE.version}.tgz`)), paths.join(' '));
  const reached = run.network.reached.find((h) => h.host === 'localhost' && h.port === ports.npm);
  assert.ok(reached && reached.connections >= 2, JSON.stringify(run.network));
  assert.ok(reached.bytes_down > 0);
  assert.equal(run.network.denied_attempts, 0, JSON.stringify(run.network.denied));
});

test("a run's network summary: the host it reached with bytes, and every refusal with its reason", async () => {
  const command = [
    `${VIA} http://localhost:${ports.web}/hello`,
    `${VIA} -p http://localhost:${ports.svc}/ ; echo "svc=$?"`,      // a name resolving to 127.0.0.1
    `${VIA} -p http://localhost:${ports.server}/healthz ; echo "server=$?"`, // the server's own port
    `${VIA} -p http://127.0.0.1:${ports.svc}/ ; echo "literal=$?"`,  // a host loopback service by address
    `${VIA} -p http://127.0.0.2:80/ ; echo "unlisted=$?"`,           // a host not on the list
    `${VIA} -p http://localhost:${ports.unlisted}/ ; echo "port=$?"`, // a port not allowed
    `${VIA} -p http://localhost:${ports.svc}/ ; echo "again=$?"`,
  ].join('; ');
  const { run, out } = await agentRun('net-summary-5c1', command, { session_id: session });
  assert.match(out, /hello from upstream \/hello/);
  assert.match(out, /403/);
  assert.doesNotMatch(out, /a loopback service/);
  const net = run.network;
  assert.equal(net.mode, 'allowlist');
  assert.equal(net.connections, 1, JSON.stringify(net));
  assert.deepEqual(net.reached.map((h) => [h.host, h.port, h.connections]), [['localhost', ports.web, 1]]);
  assert.ok(net.reached[0].bytes_down > 'hello from upstream /hello\n'.length, JSON.stringify(net.reached));
  assert.ok(net.reached[0].bytes_up > 0);
  assert.equal(net.bytes_down, net.reached[0].bytes_down);

  const byName = denied(net, 'localhost', ports.svc);
  // 127.0.0.1 is loopback and also an address of this host: either reason, the address named
  assert.ok(['address', 'self'].includes(byName.reason), JSON.stringify(byName));
  assert.equal(byName.attempts, 2);
  assert.match(byName.message, /127\.0\.0\.1/);
  const own = denied(net, 'localhost', ports.server);
  assert.ok(['address', 'self'].includes(own.reason), JSON.stringify(own));
  assert.match(own.message, /127\.0\.0\.1/);
  const literal = denied(net, '127.0.0.1', ports.svc);
  assert.equal(literal.reason, 'not_listed');
  assert.match(literal.message, /SANDBOX_NETWORK_ADDRS|not on|allow/i);
  assert.equal(denied(net, '127.0.0.2', 80).reason, 'not_listed');
  const port = denied(net, 'localhost', ports.unlisted);
  assert.equal(port.reason, 'port');
  assert.match(port.message, new RegExp(String(ports.unlisted)));
  assert.equal(net.denied_attempts, 6);
  assert.equal(net.failed_attempts, 0);

  // the text of get_result says it too, for a client that reads only the text
  const res = await tool('get_result', { run_id: run.run_id });
  assert.match(res.content[0].text, new RegExp(`Network \\(allowlist\\): reached localhost:${ports.web}; 6 attempts refused \\(.*localhost:${ports.unlisted} port`));

  // the run page shows the same (its data)
  const url = new URL(run.web_url);
  const data = await (await fetch(`${srv.url}/runs/${run.run_id}/data${url.search}`)).json();
  assert.deepEqual(data.network, net);

  // /metrics counts them
  const m = parseMetrics(await (await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text());
  assert.ok(m.get('sandbox_mcp_egress_connections_total{verdict="allowed",reason="ok"}') >= 1);
  assert.ok(m.get('sandbox_mcp_egress_connections_total{verdict="denied",reason="port"}') >= 1);
  assert.ok(m.get('sandbox_mcp_egress_connections_total{verdict="denied",reason="not_listed"}') >= 2);
  assert.ok(m.get('sandbox_mcp_egress_bytes_total{direction="down"}') >= net.bytes_down);

  // and the store keeps each attempt's destination, outcome and bytes for the run
  const rows = sqlRows(srv,
    `SELECT host, port, verdict, reason, attempts FROM egress_attempts WHERE run_id = '${run.run_id}' ORDER BY host, port`);
  assert.equal(rows.reduce((n, r) => n + r.attempts, 0), 7);
});

test("run_task's network narrows the run's sandbox: none refuses everything, and saying so", async () => {
  const { run, out } = await agentRun('net-none-8d2', `${VIA} http://localhost:${ports.web}/hello; echo "rc=$?"`,
    { network: 'none', session_id: session });
  assert.doesNotMatch(out, /hello from upstream/);
  assert.match(out, /this sandbox has no network/);
  assert.equal(run.network.mode, 'none');
  assert.equal(run.network.connections, 0);
  const d = denied(run.network, 'localhost', ports.web);
  assert.equal(d.reason, 'mode_none');
  assert.match(d.message, /no network/i);
});

test("a run may not ask for more network than the server gives, and bad modes are named", async () => {
  let r = await tool('run_task', { task: 'x', network: 'public' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /wider|allowlist/);
  r = await tool('run_task', { task: 'x', network: 'everything' });
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /network/);
});

test("a user's setting narrows their container sandbox and their runs; the CLI refuses to widen", async () => {
  const carol = addUser('carol-net');
  const exec = (command) => ok('container_exec', { command }, carol);
  let r = await exec(`${VIA} http://localhost:${ports.web}/hello`);
  assert.equal(r.stdout, 'hello from upstream /hello\n', r.stderr);

  let c = userNetwork('carol-net', 'public');
  assert.notEqual(c.status, 0);
  assert.match(c.stderr, /wider/);
  c = userNetwork('carol-net', 'none');
  assert.equal(c.status, 0, c.stderr);
  assert.match(c.stdout, /network none/);

  r = await exec(`${VIA} -i http://localhost:${ports.web}/hello`);
  assert.match(r.stdout, /^HTTP\/1\.1 403/);
  assert.match(r.stdout, /no network/i);
  // a run of hers gets none as well, and cannot ask for more
  const more = await tool('run_task', { task: 'x', network: 'allowlist' }, carol);
  assert.equal(more.isError, true);
  assert.match(more.content[0].text, /wider.*none|none/);
  const { run } = await agentRun('net-user-none-3a7', `${VIA} http://localhost:${ports.web}/hello`, {}, carol);
  assert.equal(run.network.mode, 'none');
  assert.equal(denied(run.network, 'localhost', ports.web).reason, 'mode_none');

  c = userNetwork('carol-net', 'default');
  assert.equal(c.status, 0, c.stderr);
  assert.match(c.stdout, /network allowlist/);
  r = await exec(`${VIA} http://localhost:${ports.web}/back`);
  assert.equal(r.stdout, 'hello from upstream /back\n', r.stderr);
});

test("a tunnel still open when its sandbox is wiped is recorded as it closes, as the user's", async () => {
  const dave = addUser('dave-net');
  const userId = sqlRows(srv, "SELECT id FROM users WHERE name = 'dave-net'")[0].id;
  const hold = `
import socket, time
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'CONNECT localhost:${ports.web} HTTP/1.1\\r\\n\\r\\n')
print(s.recv(100).decode().split('\\r\\n')[0], flush=True)
time.sleep(600)
`;
  const r = await ok('container_exec', { command: '(python3 -c "$PY" > /tmp/hold.out 2>&1 &); '
    + 'for i in $(seq 100); do [ -s /tmp/hold.out ] && break; sleep 0.1; done; cat /tmp/hold.out',
  env: { PY: hold } }, dave);
  assert.match(r.stdout, /^HTTP\/1\.1 200/, r.stdout + r.stderr);
  await ok('container_initialize', {}, dave);
  const rows = () => sqlRows(srv, `SELECT host, port, verdict, attempts FROM egress_attempts WHERE user_id = '${userId}'`);
  for (let i = 0; i < 50 && !rows().length; i++) await new Promise((res) => setTimeout(res, 100));
  assert.deepEqual(rows(), [{ host: 'localhost', port: ports.web, verdict: 'allowed', attempts: 1 }]);
});
