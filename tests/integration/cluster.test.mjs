// Three nodes sharing one PostgreSQL database behind nginx (round-robin): a user's sandbox
// lives on one node and every call reaches it through whichever node the balancer picks; the
// internal channel takes only signed calls; a node killed with SIGKILL is marked lost by the
// others, its users start afresh elsewhere, and it gives up what they took when it returns.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { rpc, sseMessages, tempDir } from '../lib/server.mjs';
import { gitAsync } from '../lib/git.mjs';
import { httpRequest, rawExchange } from '../lib/http.mjs';
import { startCluster, startBalancer, clusterRows } from '../lib/cluster.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { codexEnv } from '../lib/runs.mjs';

let cluster, lb, bob, fake, router, spread;

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  // one run fills a node and two are a user's most at once: a run held at the model shows a
  // node full, and two show a user at her limit. The runs are Codex's (codexEnv).
  cluster = await startCluster(3, { env: { ...codexEnv(fake.url),
    RUNS_ALLOW_LOCAL_REPOS: '1', RUNS_MAX_RUNNING: '1', RUNS_MAX_RUNNING_PER_USER: '2' } });
  lb = await startBalancer(cluster.nodes.map((n) => n.url.replace('http://', '')));
  const add = cluster.cli(1, ['user', 'add', 'bob']);
  assert.equal(add.status, 0, add.stderr);
  const tok = cluster.cli(2, ['token', 'create', '--user', 'bob']);
  assert.equal(tok.status, 0, tok.stderr);
  bob = tok.stdout.match(/smcp_\S+/)[0];
  spread = await newSessions();
});

after(async () => {
  await lb?.stop();
  await cluster?.stop();
  await fake?.close();
});

let nextId = 1;
async function call(name, args, { token = cluster.token, headers = {} } = {}) {
  const r = await rpc({ mcpUrl: lb.mcpUrl }, {
    jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args },
  }, { token, headers });
  assert.equal(r.status, 200, r.text);
  const msg = r.body || sseMessages(r.text).find((m) => m.id !== undefined);
  assert.ok(msg?.result, r.text);
  return { ...msg.result, text: r.text };
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
// (bounded for a run nobody ends: the failure then shows where it was and each node's log)
async function finished(runId, token) {
  const t0 = Date.now();
  for (;;) {
    const r = (await call('get_result', { run_id: runId, wait_seconds: 20 }, { token })).structuredContent;
    if (TERMINAL.has(r.status)) return r;
    if (Date.now() - t0 > 300000)
      throw new Error(`run ${runId} still ${r.status} after 5 minutes: ${JSON.stringify(r).slice(0, 600)}\n${
        cluster.nodes.map((n, i) => `--- node${i + 1} ---\n${n?.stderr().slice(-4000)}`).join('\n')}`);
  }
}
// The node a session lives on, from the shared store.
const sessionNode = (id) => clusterRows(cluster, `SELECT node_id FROM sessions WHERE id = '${id}'`)[0]?.node_id;
// A run's events as stored: numbered 1..n with none missing or twice.
function checkEvents(runId) {
  const ev = clusterRows(cluster, `SELECT seq FROM run_events WHERE run_id = '${runId}' ORDER BY seq`);
  assert.ok(ev.length > 0, `no events for ${runId}`);
  ev.forEach((e, i) => assert.equal(Number(e.seq), i + 1, `${runId}: event ${i + 1} is seq ${e.seq}`));
}

const started = (node, id) => new RegExp(`sandbox started sbx=${id} `).test(node.stderr());
const owner = (id) => cluster.nodes.findIndex((n) => n && started(n, id));

test('every node registers itself in the store, with its URL, and beats', async () => {
  for (const [i, n] of cluster.nodes.entries())
    assert.match(n.stderr(), new RegExp(`node up node=node${i + 1} url=${n.url} store=postgres forwarding=on`));
  const list = cluster.cli(0, ['node', 'list']);
  assert.equal(list.status, 0, list.stderr);
  for (const [i, n] of cluster.nodes.entries())
    assert.match(list.stdout, new RegExp(`^node${i + 1} +up +${n.url} `, 'm'));
});

test('a user\'s calls land on the node that holds the sandbox, whichever node they reach', async () => {
  const first = await call('container_exec', { command: 'echo one > /workspace/f; hostname' });
  const sbx = first.structuredContent.sandbox_id;
  const home = owner(sbx);
  assert.ok(home >= 0, 'no node started the sandbox');
  for (let i = 0; i < 6; i++) {
    const r = await call('container_exec', { command: 'cat /workspace/f' });
    assert.equal(r.structuredContent.sandbox_id, sbx);
    assert.equal(r.structuredContent.stdout, 'one\n');
  }
  // the balancer spread them: the other nodes forwarded some, and only the owner ran any
  const forwarded = cluster.nodes.map((n) => (n.stderr().match(/forward call /g) || []).length);
  assert.equal(forwarded[home], 0);
  assert.ok(forwarded.reduce((a, b) => a + b) >= 4, `forwarded: ${forwarded}`);
  for (const [i, n] of cluster.nodes.entries())
    if (i !== home) assert.ok(!started(n, sbx));
  assert.ok((cluster.nodes[home].stderr().match(/forwarded call from=node\d user=/g) || []).length >= 4);
  // files too: written through one node, read through another, and one larger than what a node
  // reads of a body before a credential (the forwarding node's proof lets it in)
  await call('container_file_write', { path: '/workspace/g.txt', content: 'written' });
  const read = await call('container_file_read', { path: '/workspace/g.txt' });
  assert.match(read.text, /written/);
  const big = 'x'.repeat(300 * 1024);
  for (let i = 0; i < 3; i++) {
    await call('container_file_write', { path: `/workspace/big${i}.txt`, content: big });
    const size = await call('container_exec', { command: `wc -c < /workspace/big${i}.txt` });
    assert.equal(size.structuredContent.stdout.trim(), String(big.length));
  }
});

test('a forwarded command streams its progress as it runs', async () => {
  const r = await rpc({ mcpUrl: lb.mcpUrl }, {
    jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name: 'container_exec', arguments: { command: 'for i in 1 2 3; do echo line$i; sleep 0.4; done' }, _meta: { progressToken: 'p1' } },
  }, { token: cluster.token });
  assert.equal(r.status, 200, r.text);
  const msgs = sseMessages(r.text);
  const progress = msgs.filter((m) => m.method === 'notifications/progress');
  assert.ok(progress.length >= 2, r.text);
  const result = msgs.find((m) => m.id !== undefined).result;
  assert.equal(result.structuredContent.stdout, 'line1\nline2\nline3\n');
});

// The internal channel's headers, made as the nodes make them (src/cluster/cluster.c), with the
// key derived from a secret the test knows.
const channelKey = (secret) => createHmac('sha256', secret).update('sandbox-mcp cluster-forward v1').digest();
const nonce = () => randomBytes(16).toString('hex');
function signCall(secret, { t = Math.floor(Date.now() / 1000), user, body, r = nonce(), path: p = '/internal/mcp' }) {
  const digest = createHash('sha256').update(body).digest('hex');
  const text = `sandbox-mcp forward v2\n${t}\n${r}\nnode9\n${user}\nadmin\n3\nPOST\n${p}\n${Buffer.byteLength(body)}\n${digest}`;
  return `t=${t},r=${r},n=node9,u=${user},m=admin,s=3,v1=${createHmac('sha256', channelKey(secret)).update(text).digest('hex')}`;
}
function signHead(secret, { t = Math.floor(Date.now() / 1000), length, r = nonce(), path: p = '/internal/mcp' }) {
  const text = `sandbox-mcp node v2\n${t}\n${r}\nnode9\nPOST\n${p}\n${length}`;
  return `t=${t},r=${r},n=node9,v1=${createHmac('sha256', channelKey(secret)).update(text).digest('hex')}`;
}
// A call on node i's internal channel, on a fresh connection: {status, headers, text, msg}.
async function internal(i, body, headers) {
  const r = await httpRequest(cluster.nodes[i], {
    path: '/internal/mcp', body,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
  });
  return { ...r, msg: r.body?.jsonrpc ? r.body : sseMessages(r.text).find((m) => m.id !== undefined) };
}
const userId = (name) => clusterRows(cluster, `SELECT id FROM users WHERE name = '${name}'`)[0].id;

test('the internal channel takes only calls signed with the cluster\'s secret, and fresh ones', async () => {
  const node = cluster.nodes[0];
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'container_exec', arguments: { command: 'id' } } });
  const post = (headers) => fetch(`${node.url}/internal/mcp`, {
    method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body,
  });
  const sign = (secret, t, user) => signCall(secret, { t, user, body });
  const now = Math.floor(Date.now() / 1000);
  const uid = /user=(usr_\w+)/.exec(node.stderr().match(/forwarded call from=node\d user=usr_\w+/)?.[0]
    || cluster.nodes.map((n) => n.stderr()).join('').match(/forwarded call from=node\d user=usr_\w+/)[0])[1];
  for (const [headers, what] of [
    [{}, 'no signature'],
    [{ 'x-smcp-signature': sign('not-the-secret-but-long-enough-0123456789', now, uid) }, 'another secret'],
    [{ 'x-smcp-signature': sign(cluster.env(0).CLUSTER_SECRET, now - 600, uid) }, 'ten minutes old'],
    [{ 'x-smcp-signature': sign(cluster.env(0).CLUSTER_SECRET, now, uid).replace(/v1=(.)/, (m, c) => `v1=${c === '0' ? '1' : '0'}`) }, 'a changed signature'],
    [{ authorization: `Bearer ${cluster.token}` }, 'a user\'s own token'],
  ]) {
    const r = await post(headers);
    assert.equal(r.status, 401, what);
    assert.match(await r.text(), /not_a_node/, what);
  }
  // signed as the nodes sign, it is served for the user the signature names
  const ok = await post({ 'x-smcp-signature': sign(cluster.env(0).CLUSTER_SECRET, now, uid) });
  assert.equal(ok.status, 200);
});

// Issue 32, point 13: a signed call was accepted again within its minute (one forwarded
// container_exec ran three times). Each signature carries a nonce the receiving node spends.
test('a captured forwarded call sent again is refused with 409, and its command ran once', async () => {
  assert.equal(cluster.cli(0, ['user', 'add', 'replay']).status, 0);
  const uid = userId('replay');
  const secret = cluster.env(0).CLUSTER_SECRET;
  const exec = (command) => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'container_exec', arguments: { command } } });
  const body = exec('echo ran >> /workspace/replayed; wc -l < /workspace/replayed');
  const headers = { 'x-smcp-signature': signCall(secret, { user: uid, body }) };
  const first = await internal(0, body, headers);
  assert.equal(first.status, 200, first.text);
  assert.equal(first.msg.result.structuredContent.stdout, '1\n', first.text);
  for (let i = 0; i < 2; i++) {
    const again = await internal(0, body, headers);
    assert.equal(again.status, 409, again.text);
    assert.equal(again.body.code, 'replayed');
  }
  await cluster.nodes[0].waitLog(/forwarded call refused err="nonce already used: a replayed call"/);
  // signed anew, the same call is served: the command had run once
  const count = exec('wc -l < /workspace/replayed');
  const check = await internal(0, count, { 'x-smcp-signature': signCall(secret, { user: uid, body: count }) });
  assert.equal(check.status, 200, check.text);
  assert.equal(check.msg.result.structuredContent.stdout, '1\n');
  // the method is signed too, and a signature without a nonce is malformed
  const bare = signCall(secret, { user: uid, body: count }).replace(/r=[0-9a-f]+,/, '');
  const r = await internal(0, count, { 'x-smcp-signature': bare });
  assert.equal(r.status, 401);
  assert.equal(r.body.code, 'not_a_node');
});

// Issue 32, point 14: the head proof covered only the time and the node, held on any path, and
// marked the whole connection authenticated: replayed, it let 40 unauthenticated 4 MiB bodies in
// (RSS 20 -> 183 MiB against a 16 MiB pre-auth total). It now admits one request, of its path
// and length, once; the connection then closes.
test('a head proof admits one forwarded body once: replayed, for another path or length, the body is refused before it is read', async () => {
  const secret = cluster.env(0).CLUSTER_SECRET;
  const node = cluster.nodes[1];
  // larger than what the gate reads before a credential (PREAUTH_REQUEST_BYTES, 64 KiB)
  const body = Buffer.alloc(1 << 20, 0x20);
  Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'ping' })).copy(body);
  const proof = signHead(secret, { length: body.length });
  const head = (p, length, proofValue) => `POST ${p} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Accept: application/json, text/event-stream\r\nx-smcp-node: ${proofValue}\r\n` +
    `x-smcp-signature: ${signCall(secret, { user: 'usr_nobody', body })}\r\nContent-Length: ${length}\r\n\r\n`;
  // the forwarded call: its body is read and served, and the connection is not kept
  const first = await rawExchange(node, [head('/internal/mcp', body.length, proof), body], { idleMs: 30000 });
  assert.match(first, /^HTTP\/1\.1 200 /, first.slice(0, 300));
  assert.match(first, /\r\nconnection: close\r\n/i, first.slice(0, 300));
  assert.match(first, /"id":7/);
  // the same proof again, on a new connection: the head alone is answered 401 by the gate,
  // with nothing of the body sent
  const again = await rawExchange(node, [head('/internal/mcp', body.length, proof)], { idleMs: 30000 });
  assert.match(again, /^HTTP\/1\.1 401 /, again.slice(0, 300));
  assert.match(again, /"code":"unauthorized"/);
  assert.match(again, /before a request body larger than the unauthenticated allowance/);
  // a fresh proof for another path, or another length, is no proof either
  for (const [p, length] of [['/mcp', body.length], ['/internal/mcp', 4 << 20]]) {
    const r = await rawExchange(node, [head(p, length, signHead(secret, { length: body.length }))], { idleMs: 30000 });
    assert.match(r, /^HTTP\/1\.1 401 /, `${p} ${length}: ${r.slice(0, 300)}`);
    assert.match(r, /"code":"unauthorized"/);
  }
});

test('runs spread across the nodes, each session\'s runs stay on its node, and any node answers for them', async () => {
  // the new sessions made in before(), through the balancer: it took turns, and each node kept
  // the session it was sent (it took the call and claimed nothing); the second was sent while the
  // first was running on another node, which counts towards the user's limit and is under it
  const nodes = spread.map((r) => sessionNode(r.session_id));
  assert.equal(new Set(nodes).size, 3, `runs on ${nodes}`);
  for (const r of spread) {
    await cluster.nodes[nodeOf(r.session_id)].waitLog(new RegExp(`run queued run=${r.run_id} `));
    assert.ok(!cluster.nodes.some((n) => n.stderr().includes(`session claimed session=${r.session_id}`)));
  }
  const [first0, second0] = spread.map((r) => runRow(r.run_id));
  assert.ok(Number(first0.started_at) <= Number(second0.created_at) && Number(second0.created_at) <= Number(first0.finished_at),
    `first ran ${first0.started_at}..${first0.finished_at}, second sent ${second0.created_at}`);
  for (const r of spread) {
    const done = await finished(r.run_id);
    assert.equal(done.status, 'succeeded', JSON.stringify(done));
    checkEvents(r.run_id);
  }
  // a second run in a session goes to the session's node, whichever node takes the call
  const first = spread[0];
  const home = sessionNode(first.session_id);
  router.add('spread-again', [{ text: 'Again.' }]);
  const again = (await call('run_task', { task: 'spread-again: once more', session_id: first.session_id })).structuredContent;
  assert.equal((await finished(again.run_id)).status, 'succeeded');
  assert.equal(sessionNode(first.session_id), home);
  const ran = cluster.nodes.findIndex((n) => new RegExp(`run queued run=${again.run_id} `).test(n.stderr()));
  assert.equal(`node${ran + 1}`, home);
  // list_runs answers through any node, and so do the run's page and its event stream, read
  // from the shared store: every event, then the end
  for (let i = 0; i < 3; i++) {
    const list = (await call('list_runs', {})).structuredContent;
    assert.ok(list.runs.some((r) => r.run_id === again.run_id));
  }
  const stored = clusterRows(cluster, `SELECT seq FROM run_events WHERE run_id = '${again.run_id}'`).length;
  for (const node of cluster.nodes) {
    const page = new URL(again.web_url);
    page.host = new URL(node.url).host;
    const html = await fetch(page);
    assert.equal(html.status, 200, `${node.url}: the page`);
    page.pathname += '/events';
    const text = await (await fetch(page)).text();
    assert.equal((text.match(/^event: run-event$/gm) || []).length, stored, `${node.url}: ${text.slice(0, 300)}`);
    assert.match(text, /event: end\ndata: \{"status":"succeeded"\}/);
  }
});

// A call straight to node i, past the balancer.
async function callAt(i, name, args, token) {
  const r = await rpc(cluster.nodes[i], {
    jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args },
  }, { token });
  assert.equal(r.status, 200, r.text);
  const msg = r.body || sseMessages(r.text).find((m) => m.id !== undefined);
  assert.ok(msg?.result, r.text);
  return msg.result;
}
const runRow = (id) => clusterRows(cluster, `SELECT status, created_at, started_at, finished_at FROM runs WHERE id = '${id}'`)[0];
// (bounded for a hung node, far beyond any wait a loaded machine makes)
async function until(what, fn, ms = 120000) {
  const t0 = Date.now();
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`not met in time: ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
// Like finished(), asked of node i alone.
async function finishedAt(i, runId, token = cluster.token) {
  for (;;) {
    const r = (await callAt(i, 'get_result', { run_id: runId, wait_seconds: 20 }, token)).structuredContent;
    if (TERMINAL.has(r.status)) return r;
  }
}
// The index of the node that holds a session.
function nodeOf(sessionId) {
  const n = sessionNode(sessionId);
  assert.match(n ?? '', /^node\d$/, `session ${sessionId} is on no node`);
  return Number(n.slice(4)) - 1;
}

// The admin's three new sessions, one a node, made through the balancer: the spread test looks
// at how they were placed, and later tests hold runs in them (a session's later run reuses its
// agent, where a new session boots one). The balancer takes turns, so each run_task reaches a
// node of its own, which has room; the first run is held at the model until the second is sent,
// so that she has one running on another node then. They are waited for on the node that holds
// each, past the balancer (whose turns the third run_task must follow) and not forwarded (the
// forwarding test counts forwarded calls).
async function newSessions() {
  const hold = router.add('spread-0', [{ hold: true, text: 'Done 0.' }]);
  const runs = [(await call('run_task', { task: 'spread-0: say done' })).structuredContent];
  await hold.waitHeld();
  router.add('spread-1', [{ text: 'Done 1.' }]);
  runs.push((await call('run_task', { task: 'spread-1: say done' })).structuredContent);
  hold.release();
  for (const r of runs) await finishedAt(nodeOf(r.session_id), r.run_id);
  router.add('spread-2', [{ text: 'Done 2.' }]);
  runs.push((await call('run_task', { task: 'spread-2: say done' })).structuredContent);
  await finishedAt(nodeOf(runs[2].session_id), runs[2].run_id);
  return runs;
}
// The one of those sessions that is on node ('node1').
function sessionOn(node) {
  const r = spread.find((x) => sessionNode(x.session_id) === node);
  assert.ok(r, `none of the sessions made in before() is on ${node}`);
  return r.session_id;
}

test('a node with no room leaves new runs to the nodes with room, and a user\'s run limit counts every node', async () => {
  // the admin's runs in her sessions on node1 and node3 (made in before()), held at the model:
  // node1 is full (RUNS_MAX_RUNNING 1), and the second starts on node3 though she has one running
  // on node1 (RUNS_MAX_RUNNING_PER_USER 2)
  assert.equal(cluster.cli(0, ['user', 'add', 'erin']).status, 0);
  const erin = cluster.cli(1, ['token', 'create', '--user', 'erin']).stdout.match(/smcp_\S+/)[0];
  const held = [];
  for (const [i, name] of [[0, 'full-first'], [2, 'full-second']]) {
    const script = router.add(name, [{ hold: true, text: `Done ${name}.` }]);
    const r = (await callAt(i, 'run_task', { task: `${name}: wait`, session_id: sessionOn(`node${i + 1}`) }, cluster.token))
      .structuredContent;
    await script.waitHeld();
    assert.equal(runRow(r.run_id).status, 'running');
    await cluster.nodes[i].waitLog(new RegExp(`run agent started run=${r.run_id} `));
    held.push({ ...r, script, token: cluster.token });
  }
  // her third, a new session sent to node2, waits unclaimed: she has two running, on two other
  // nodes
  router.add('full-third', [{ text: 'Third.' }]);
  const three = (await callAt(1, 'run_task', { task: 'full-third: go' }, cluster.token)).structuredContent;
  assert.equal(three.status, 'queued');
  assert.equal(sessionNode(three.session_id), '*');
  // and her fourth, cancelled through another node while it waits: it never runs
  const four = (await callAt(1, 'run_task', { task: 'full-fourth: never' }, cluster.token)).structuredContent;
  const cancel = await callAt(2, 'cancel_run', { run_id: four.run_id }, cluster.token);
  assert.ok(!cancel.isError, JSON.stringify(cancel));
  assert.equal(runRow(four.run_id).status, 'cancelled');
  // another user's run sent to the full node1 is claimed by node2, the node with room, though
  // it came after the admin's third: the claims passed hers over
  router.add('overflow', [{ text: 'Overflowed.' }]);
  const over = (await callAt(0, 'run_task', { task: 'overflow: go' }, erin)).structuredContent;
  const overNode = await until('overflow claimed', () => { const n = sessionNode(over.session_id); return n !== '*' && n; });
  assert.equal(overNode, 'node2');
  assert.equal((await finished(over.run_id, erin)).status, 'succeeded');
  assert.match(cluster.nodes[1].stderr(), new RegExp(`session claimed session=${over.session_id}`));
  assert.equal(sessionNode(three.session_id), '*');
  assert.equal(runRow(three.run_id).status, 'queued');
  // her first run ends: her third is claimed and runs, started after the first finished; a
  // get_result waiting on it through node1 from before the claim answers when it ends, wherever
  const waited = callAt(0, 'get_result', { run_id: three.run_id, wait_seconds: 60 }, cluster.token);
  held[0].script.release();
  let r3 = (await waited).structuredContent;
  // a loaded machine may take longer than one wait to boot the agent: the waiting call then
  // answers the run still under way, and the next wait picks up from there
  for (let i = 0; i < 20 && !TERMINAL.has(r3.status); i++)
    r3 = (await callAt(0, 'get_result', { run_id: three.run_id, wait_seconds: 60 }, cluster.token)).structuredContent;
  assert.equal(r3.status, 'succeeded', JSON.stringify(r3));
  const first = runRow(held[0].run_id), third = runRow(three.run_id);
  assert.equal(first.status, 'succeeded');
  assert.ok(Number(third.started_at) >= Number(first.finished_at), `third started ${third.started_at}, first finished ${first.finished_at}`);
  assert.notEqual(sessionNode(three.session_id), '*');
  // the cancelled one never ran; the rest finish with every event once
  const t4 = clusterRows(cluster, `SELECT status FROM run_transitions WHERE run_id = '${four.run_id}' ORDER BY rowid`).map((t) => t.status);
  assert.deepEqual(t4, ['queued', 'cancelled']);
  assert.equal(runRow(four.run_id).started_at, null);
  for (const h of held) h.script.release();
  for (const h of held) {
    assert.equal((await finished(h.run_id, h.token)).status, 'succeeded');
    checkEvents(h.run_id);
  }
  checkEvents(three.run_id);
  checkEvents(over.run_id);
});

test('a new session whose repository has an environment snapshot on one node is claimed by that node', async () => {
  const scratch = tempDir('smcp-cluster-env-');
  const repo = path.join(scratch, 'oak.git');
  const work = mkdtempSync(path.join(tmpdir(), 'smcp-cluster-work-'));
  await gitAsync(['init', '-q', '--bare', '-b', 'main', repo]);
  await gitAsync(['init', '-q', '-b', 'main', work]);
  writeFileSync(path.join(work, 'README.md'), '# oak\n');
  await gitAsync(['add', '-A'], work);
  await gitAsync(['-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'Initial commit'], work);
  await gitAsync(['push', '-q', repo, 'main'], work);
  rmSync(work, { recursive: true, force: true });
  // node3 holds a snapshot that serves bob for the repository: a row of the shared store
  const bobId = clusterRows(cluster, "SELECT id FROM users WHERE name = 'bob'")[0].id;
  clusterRows(cluster, `INSERT INTO envs(node_id, id, key, scope, user_id, repository, template, fingerprint, base, `
    + `bytes, files, created_at, last_used_at) VALUES ('node3', 'env-claim', 'k', '${bobId}', '${bobId}', '${repo}', `
    + `'debian', '', '', 1, 1, ${Date.now()}, ${Date.now()}) RETURNING id`);
  try {
    // sent to node1, which has room: it leaves the new session to node3
    router.add('env-claim', [{ text: 'Claimed.' }]);
    const r = (await callAt(0, 'run_task', { task: 'env-claim: go', repository: repo, pull_request: 'none' }, bob))
      .structuredContent;
    const node = await until('snapshot session claimed', () => { const n = sessionNode(r.session_id); return n !== '*' && n; });
    assert.equal(node, 'node3');
    assert.equal((await finished(r.run_id, bob)).status, 'succeeded');
    // with the snapshot gone, node1 keeps a new session as before
    clusterRows(cluster, "UPDATE envs SET dropped = 1 WHERE id = 'env-claim' RETURNING id");
    router.add('env-kept', [{ text: 'Kept.' }]);
    const k = (await callAt(0, 'run_task', { task: 'env-kept: go', repository: repo, pull_request: 'none' }, bob))
      .structuredContent;
    assert.equal(sessionNode(k.session_id), 'node1');
    assert.equal((await finished(k.run_id, bob)).status, 'succeeded');
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});

test('a node cut off from the others past the timeout comes back to find its run ended: it stops the agent and writes nothing more', async () => {
  // a run held at the model in the admin's session on node2 (made in before(); this test leaves
  // it ended by a lost node, and no other test uses it)
  const token = cluster.token;
  const script = router.add('cut-off', [{ hold: true, text: 'Too late.' }]);
  const run = (await callAt(1, 'run_task', { task: 'cut-off: wait', session_id: sessionOn('node2') }, token)).structuredContent;
  await script.waitHeld();
  assert.equal(sessionNode(run.session_id), 'node2');
  const pid = Number(clusterRows(cluster, `SELECT agent_pid FROM runs WHERE id = '${run.run_id}'`)[0].agent_pid);
  assert.ok(pid > 0);
  // node2 stops answering (its process is frozen), is marked lost, and its run fails
  const node = cluster.nodes[1];
  process.kill(node.proc.pid, 'SIGSTOP');
  try {
    await Promise.race([0, 2].map((i) => cluster.nodes[i].waitLog(new RegExp(`run failed run=${run.run_id} reason="node lost`), 15000)));
  } finally {
    process.kill(node.proc.pid, 'SIGCONT');
  }
  // back, it learns it was marked lost, and drops the run: the agent is gone, the run stays
  // failed as the others recorded it
  await node.waitLog(new RegExp(`run dropped run=${run.run_id} status=failed`));
  script.release();
  // the agent is killed as the run is dropped, and gone once the sandbox's init has reaped it
  // (until then `kill -0` still finds it): looked at until then, for at most 30 s
  let state = '';
  for (let i = 0; i < 300 && state !== 'gone\n'; i++) {
    if (i) await new Promise((r) => setTimeout(r, 100));
    state = (await callAt(1, 'container_exec', { session_id: run.session_id,
      command: `kill -0 ${pid} 2>/dev/null && echo alive || echo gone` }, token)).structuredContent.stdout;
  }
  assert.equal(state, 'gone\n');
  const r = (await callAt(0, 'get_result', { run_id: run.run_id }, token)).structuredContent;
  assert.equal(r.status, 'failed');
  assert.match(JSON.stringify(r), /node lost/);
  const t = clusterRows(cluster, `SELECT status FROM run_transitions WHERE run_id = '${run.run_id}' ORDER BY rowid`).map((x) => x.status);
  assert.equal(t.at(-1), 'failed');
  assert.equal(t.filter((x) => x === 'failed').length, 1);
});

test('a node killed mid-work is marked lost: its runs fail "node lost", the rest finish, its users start afresh elsewhere; back, it gives up what was taken', async () => {
  // node3 is the one killed: a user's sandbox made on it, and bob's, wherever it lands
  const victim = 2;
  const survivors = [0, 1];
  assert.equal(cluster.cli(0, ['user', 'add', 'moved']).status, 0);
  const token = cluster.cli(0, ['token', 'create', '--user', 'moved']).stdout.match(/smcp_\S+/)[0];
  const mine = (await callAt(victim, 'container_exec', { command: 'echo here > /workspace/f' }, token)).structuredContent.sandbox_id;
  await cluster.nodes[victim].waitLog(new RegExp(`sandbox started sbx=${mine} `));
  const theirs = (await call('container_exec', { command: 'echo bob > /workspace/b' }, { token: bob })).structuredContent.sandbox_id;
  // runs held at the model, one on the node to be killed and one elsewhere: the admin's, in her
  // sessions on node3 and node1 (made in before()); two running is her limit
  const held = [];
  for (const i of [victim, 0]) {
    const script = router.add(`held-${i}`, [{ hold: true, text: `Finished ${i}.` }]);
    const r = (await callAt(i, 'run_task', { task: `held-${i}: wait for the model`, session_id: sessionOn(`node${i + 1}`) },
      cluster.token)).structuredContent;
    // a node that ends meanwhile fails the test at once, with its log
    await Promise.race([script.waitHeld(), cluster.nodes[i].exited.then((e) => {
      throw new Error(`node${i + 1} ended ${JSON.stringify(e)} before its run reached the model\n--- its log ---\n${cluster.nodes[i].stderr().slice(-6000)}`);
    })]);
    held.push({ ...r, script, token: cluster.token, node: sessionNode(r.session_id) });
  }
  const doomed = held.filter((h) => h.node === `node${victim + 1}`);
  const spared = held.filter((h) => h.node !== `node${victim + 1}`);
  assert.ok(doomed.length && spared.length, JSON.stringify(held.map((h) => h.node)));
  // (a node restarted by an earlier test may have been marked lost then: the mark waited for is
  // the one after this kill)
  const lostRe = new RegExp(`node lost node=node${victim + 1} `, 'g');
  const marksBefore = survivors.map((i) => (cluster.nodes[i].stderr().match(lostRe) || []).length);
  await cluster.nodes[victim].stop('SIGKILL', { keep: true });
  await until(`node${victim + 1} marked lost`,
    () => survivors.some((i, k) => (cluster.nodes[i].stderr().match(lostRe) || []).length > marksBefore[k]), 15000);
  // its runs end failed, saying why, and any node answers so
  for (const h of doomed) {
    const r = await finished(h.run_id, h.token);
    assert.equal(r.status, 'failed', JSON.stringify(r));
    assert.match(JSON.stringify(r), /node lost/);
  }
  // the others finish, with every event once
  for (const h of spared) h.script.release();
  for (const h of spared) {
    const r = await finished(h.run_id, h.token);
    assert.equal(r.status, 'succeeded', JSON.stringify(r));
    checkEvents(h.run_id);
  }
  // the user's next command runs on a fresh sandbox on a live node: the file is gone
  const again = await call('container_exec', { command: 'ls /workspace' }, { token });
  assert.equal(again.structuredContent.sandbox_id, mine, 'the sandbox keeps its id');
  assert.equal(again.structuredContent.stdout, '');
  const newHome = survivors.find((i) => new RegExp(`sandbox taken over sbx=${mine} .*from=node${victim + 1}`).test(cluster.nodes[i].stderr()));
  assert.ok(newHome !== undefined, 'no survivor took the sandbox over');
  assert.ok(started(cluster.nodes[newHome], mine));
  // bob's sandbox, if it was on another node, is untouched
  if (owner(theirs) !== victim) {
    const b = await call('container_exec', { command: 'cat /workspace/b' }, { token: bob });
    assert.equal(b.structuredContent.stdout, 'bob\n');
  }
  // the killed node comes back: the user's sandbox is no longer its own, and goes; the failed
  // runs stay failed
  for (const h of doomed) h.script.release();
  const back = await cluster.start(victim);
  await back.waitLog(new RegExp(`sandbox removed sbx=${mine} .*reason=moved to another node`));
  assert.equal(existsSync(path.join(cluster.dirs[victim], 'sandboxes', mine)), false);
  const list = cluster.cli(newHome, ['node', 'list']);
  assert.match(list.stdout, new RegExp(`^node${victim + 1} +up `, 'm'));
  for (const h of doomed) assert.equal((await finished(h.run_id, h.token)).status, 'failed');
  // and calls through the balancer still reach the user's sandbox where it is now
  for (let i = 0; i < 3; i++)
    assert.equal((await call('container_exec', { command: 'true' }, { token })).structuredContent.sandbox_id, mine);
});
