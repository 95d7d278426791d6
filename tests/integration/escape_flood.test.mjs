// Floods against the server's memory and descriptors: a sandbox flooding its own proxy listener
// (127.0.0.1:8788 inside it) and unauthenticated clients on the main listener, with what must
// keep working meanwhile; /metrics only for its token; the descriptor limit raised at start;
// many commands under way at once. Memory is judged by the server's peak resident size (VmHWM)
// or, for what it sets aside, its data size (VmData), never by how long anything took.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';

import { startServer, rpc, cli } from '../lib/server.mjs';
import { portOf, assertNoSanitizerReport, within } from '../lib/http.mjs';
import { startFake } from '../lib/fake-anthropic.mjs';

const MiB = 1024 * 1024;
// ASan keeps freed memory in a quarantine (256 MiB by default), which would count as resident;
// a small one keeps the peak about what the server holds.
const ASAN_OPTIONS = 'detect_leaks=1:abort_on_error=1:quarantine_size_mb=16';
let nextId = 1;

function status(pid) {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name) => Number(text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))[1]);
  return { rss: kb('VmRSS') * 1024, hwm: kb('VmHWM') * 1024 };
}

const fdCount = (pid) => readdirSync(`/proc/${pid}/fd`).length;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function tool(srv, name, args = {}, token = srv.token) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } },
    { token });
  assert.equal(r.status, 200, r.text);
  return r.body.result;
}

// Open a raw connection; resolves with {sock, data(), closed} once connected.
function connect(srv) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(portOf(srv), '127.0.0.1');
    const got = [];
    let closedResolve;
    const closed = new Promise((r) => { closedResolve = r; });
    sock.on('data', (d) => got.push(d));
    sock.on('error', () => { /* reset by the server: what arrived is kept */ });
    sock.on('close', () => closedResolve());
    sock.once('connect', () => resolve({ sock, closed, data: () => Buffer.concat(got).toString('latin1') }));
    sock.once('error', reject);
  });
}

// Read one HTTP/1.1 response (with Content-Length) from a connection that stays open.
function readResponse(c, from) {
  return new Promise((resolve, reject) => {
    const check = () => {
      const text = c.data().slice(from);
      const end = text.indexOf('\r\n\r\n');
      if (end >= 0) {
        const len = Number((text.match(/\r\ncontent-length: *(\d+)/i) || [0, 0])[1]);
        if (text.length >= end + 4 + len) { clearInterval(timer); resolve(text.slice(0, end + 4 + len)); }
      }
    };
    const timer = setInterval(check, 5);
    c.closed.then(() => { check(); clearInterval(timer); reject(new Error(`closed: ${c.data().slice(from)}`)); });
  });
}

// A flood from inside a sandbox: N connections to its proxy listener; the first NBODY announce a
// body of CL bytes without a token and send all of it but the last byte, the others send the
// start of a head and hold it; closed ones are opened again, for DUR seconds. Prints JSON stats.
const FLOOD_PY = `
import json, os, select, socket, time
N, NBODY, CL, DUR = (int(os.environ[k]) for k in ('N', 'NBODY', 'CL', 'DUR'))
head = ('POST /proxy/anthropic/v1/messages HTTP/1.1\\r\\nHost: 127.0.0.1:8788\\r\\n'
        'Content-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n' % CL).encode()
big = memoryview(head + b' ' * (CL - 1))
part = memoryview(head[:24])
poller = select.poll()
conns = {}
st = dict(opened=0, closed=0, answered=0, s401=0, connect_errors=0, max_open=0)
def open_one(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(('127.0.0.1', 8788))
    except BlockingIOError:
        pass
    except OSError:
        st['connect_errors'] += 1; s.close(); return
    conns[s.fileno()] = [s, big if i < NBODY else part, 0, i, False]
    poller.register(s, select.POLLOUT | select.POLLIN)
    st['opened'] += 1
def drop(fd):
    c = conns.pop(fd)
    poller.unregister(fd)
    c[0].close()
    st['closed'] += 1
    free.append(c[3])
free = list(range(N))
end = time.time() + DUR
next_fill = 0
while time.time() < end:
    if free and time.time() >= next_fill:
        batch, free[:] = free[:], []
        for i in batch: open_one(i)
        next_fill = time.time() + 0.25
    st['max_open'] = max(st['max_open'], len(conns))
    for fd, ev in poller.poll(100):
        c = conns.get(fd)
        if not c: continue
        if ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
            try:
                d = c[0].recv(65536)
            except (BlockingIOError, InterruptedError):
                d = None
            except OSError:
                d = b''
            if d:
                if not c[4]:
                    c[4] = True; st['answered'] += 1
                    if d.startswith(b'HTTP/1.1 401'): st['s401'] += 1
                continue
            if d == b'':
                drop(fd); continue
        if ev & select.POLLOUT and c[2] < len(c[1]):
            try:
                c[2] += c[0].send(c[1][c[2]:c[2] + 262144])
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                drop(fd); continue
            if c[2] >= len(c[1]):
                poller.modify(fd, select.POLLIN)
print(json.dumps(st), flush=True)
`;

describe('a sandbox floods its own proxy listener', () => {
  let srv, fake, bob;
  before(async () => {
    fake = await startFake();
    // the soft descriptor limit most services start with
    srv = await startServer({ wrap: ['prlimit', '--nofile=1024:', '--'], env: {
      ASAN_OPTIONS, ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: 'sk-ant-flood-test',
    } });
    assert.equal(cli(['user', 'add', 'bob', '--data-dir', srv.dataDir]).status, 0);
    const tok = cli(['token', 'create', '--user', 'bob', '--data-dir', srv.dataDir]);
    assert.equal(tok.status, 0, tok.stderr);
    bob = tok.stdout.trim();
  });
  after(async () => {
    await srv?.stop();
    await fake?.close();
  });

  test('the server raised its descriptor soft limit to the hard limit at start', () => {
    const line = readFileSync(`/proc/${srv.proc.pid}/limits`, 'utf8').split('\n')
      .find((l) => l.startsWith('Max open files'));
    const [soft, hard] = line.trim().split(/\s+/).slice(3, 5);
    assert.equal(soft, hard, line);
    assert.ok(hard === 'unlimited' || Number(hard) > 1024, line);
    assert.match(srv.stderr(), /serve nofile soft=\d+ hard=\d+ was=1024/);
  });

  test("thousands of connections and unauthenticated bodies: another user's exec and /healthz keep answering, memory and descriptors stay bounded", async () => {
    const ping = await tool(srv, 'container_ping');
    assert.equal(ping.isError, undefined, JSON.stringify(ping));
    const warm = await tool(srv, 'container_exec', { command: 'echo warm' }, bob);
    assert.equal(warm.structuredContent?.exit_code, 0, JSON.stringify(warm));
    const pid = srv.proc.pid;
    const start = status(pid);

    const flood = tool(srv, 'container_exec', {
      command: 'ulimit -n 4096; exec python3 -c "$PY"', timeout_ms: 120000,
      env: { PY: FLOOD_PY, N: '1500', NBODY: '300', CL: String(MiB), DUR: '25' },
    });
    // while it runs: a few rounds of another user's exec and /healthz
    let maxFds = 0;
    await sleep(5000);
    for (let round = 0; round < 4; round++) {
      maxFds = Math.max(maxFds, fdCount(pid));
      const health = await fetch(`${srv.url}/healthz`, { signal: AbortSignal.timeout(30000) });
      assert.equal(health.status, 200);
      assert.equal((await health.json()).status, 'ok');
      const r = await tool(srv, 'container_exec', { command: 'echo still-here' }, bob);
      assert.equal(r.isError, undefined, JSON.stringify(r));
      assert.equal(r.structuredContent.exit_code, 0, JSON.stringify(r));
      assert.equal(r.structuredContent.stdout, 'still-here\n');
      maxFds = Math.max(maxFds, fdCount(pid));
      await sleep(2000);
    }
    const res = await flood;
    const end = status(pid);
    const grew = end.hwm - start.rss;
    console.log(`flood: ${res.structuredContent?.stdout?.trim()} rss ${start.rss / MiB | 0} MiB -> peak ` +
      `${end.hwm / MiB | 0} MiB, fds up to ${maxFds}`);
    assert.equal(res.isError, undefined, JSON.stringify(res));
    assert.equal(res.structuredContent.exit_code, 0, JSON.stringify(res.structuredContent));
    const st = JSON.parse(res.structuredContent.stdout);
    assert.ok(st.opened >= 1500, JSON.stringify(st));
    assert.ok(grew < 200 * MiB, `server peak resident size grew ${grew / MiB | 0} MiB`);
    // the sandbox's connections are capped well below the descriptors it could otherwise take
    assert.ok(maxFds < 400, `server had ${maxFds} descriptors open`);
    // and it refused bodies with 401 instead of reading them
    assert.ok(st.s401 > 0, JSON.stringify(st));
  });

  test('with a valid proxy token a large body through the sandbox listener still reaches the upstream', async () => {
    const sbx = (await tool(srv, 'container_ping')).structuredContent.sandbox_id;
    const m = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--sandbox', sbx,
      '--data-dir', srv.dataDir]);
    assert.equal(m.status, 0, m.stderr);
    const before_ = fake.requests.length;
    const r = await tool(srv, 'container_exec', {
      command: 'python3 -c "$PY"',
      env: { TOK: m.stdout.trim(), PY: `
import json, os, urllib.request
body = json.dumps({'model': 'claude-fake', 'max_tokens': 5, 'messages': [], 'pad': 'x' * (3 << 20)}).encode()
req = urllib.request.Request('http://127.0.0.1:8788/proxy/anthropic/v1/messages', data=body,
    headers={'x-api-key': os.environ['TOK'], 'content-type': 'application/json'})
print(urllib.request.urlopen(req, timeout=30).status)
` },
    });
    assert.equal(r.structuredContent?.exit_code, 0, JSON.stringify(r));
    assert.equal(r.structuredContent.stdout.trim(), '200');
    assert.equal(fake.requests.length, before_ + 1);
    assert.ok(fake.requests.at(-1).body.length > 3 * MiB);
  });

  test('the server is still running and logged no sanitizer report', () => {
    assert.equal(srv.proc.exitCode, null, srv.stderr().slice(-4000));
    assertNoSanitizerReport(srv.stderr(), 'server');
  });
});

describe('unauthenticated clients on the main listener', () => {
  let srv;
  const METRICS_TOKEN = 'flood-metrics-token';
  before(async () => {
    srv = await startServer({ env: { ASAN_OPTIONS, METRICS_TOKEN } });
  });
  after(async () => { await srv?.stop(); });

  const head = (len, token) => `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Accept: application/json, text/event-stream\r\n${token ? `Authorization: Bearer ${token}\r\n` : ''}` +
    `Content-Length: ${len}\r\n\r\n`;

  test('a large body without a token gets 401 after its head alone, and one with the token is served', async () => {
    const c = await connect(srv);
    c.sock.write(head(4 * MiB));
    // nothing of the body is sent: the answer comes from the head
    await within(c.closed, 5000);
    c.sock.destroy();
    assert.match(c.data(), /^HTTP\/1\.1 401 /, `reply: ${c.data().slice(0, 200)}`);
    assert.match(c.data(), /\r\nWWW-Authenticate: Bearer realm="sandbox-mcp"\r\n/i);

    const body = Buffer.alloc(4 * MiB, 0x20);
    Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'ping' })).copy(body);
    const ok = await connect(srv);
    ok.sock.write(head(body.length, srv.token));
    ok.sock.write(body);
    const reply = await readResponse(ok, 0);
    ok.sock.destroy();
    assert.match(reply, /^HTTP\/1\.1 200 /, reply.slice(0, 200));
    assert.match(reply, /"id":"big","result":\{\}/);
  });

  test('80 connections sending 4 MiB bodies without a token: refused, memory bounded, the token holder served', async () => {
    const pid = srv.proc.pid;
    const start = status(pid);
    const body = Buffer.alloc(4 * MiB - 1, 0x20);
    const conns = await Promise.all(Array.from({ length: 80 }, () => connect(srv)));
    for (const c of conns) {
      c.sock.write(head(4 * MiB));
      c.sock.write(body); // all but the last byte
    }
    // every one is answered and closed, or given up on after a while
    await Promise.all(conns.map((c) => within(c.closed, 15000)));
    const end = status(pid);
    for (const c of conns) c.sock.destroy();
    const refused = conns.filter((c) => /^HTTP\/1\.1 401 /.test(c.data())).length;
    const grew = end.hwm - start.rss;
    console.log(`main listener: ${refused}/80 saw the 401; rss ${start.rss / MiB | 0} MiB -> peak ${end.hwm / MiB | 0} MiB`);
    assert.equal(refused, 80);
    assert.ok(grew < 100 * MiB, `server peak resident size grew ${grew / MiB | 0} MiB`);
    const r = await rpc(srv, { jsonrpc: '2.0', id: 1, method: 'ping' });
    assert.equal(r.status, 200);
  });

  test('a connection whose first request carried no token serves only that request', async () => {
    // a second request pipelined behind an unauthenticated one would pass unchecked
    const c = await connect(srv);
    c.sock.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' + head(32 * 1024) + ' '.repeat(32 * 1024));
    await within(c.closed, 5000);
    c.sock.destroy();
    const replies = c.data().match(/^HTTP\/1\.1 \d+ /gm) || [];
    assert.deepEqual(replies, ['HTTP/1.1 200 '], c.data().slice(0, 400));
    assert.match(c.data(), /\r\nconnection: close\r\n/i);
  });

  test('/metrics without its token is refused, with it served', async () => {
    let res = await fetch(`${srv.url}/metrics`);
    assert.equal(res.status, 401);
    assert.match(res.headers.get('www-authenticate') || '', /^Bearer /);
    res = await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${srv.token}` } });
    assert.equal(res.status, 401, 'a user token is not the metrics token');
    res = await fetch(`${srv.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    assert.equal(res.status, 200);
    assert.match(await res.text(), /^sandbox_mcp_http_connections \d+$/m);
  });

  test('the server is still running and logged no sanitizer report', () => {
    assert.equal(srv.proc.exitCode, null, srv.stderr().slice(-4000));
    assertNoSanitizerReport(srv.stderr(), 'server');
  });
});

describe('a cap on connections', () => {
  let srv;
  before(async () => {
    srv = await startServer({ env: { MAX_CONNECTIONS: '40' } });
  });
  after(async () => { await srv?.stop(); });

  const ping = (srv, id) => `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Accept: application/json, text/event-stream\r\nAuthorization: Bearer ${srv.token}\r\n` +
    `Content-Length: ${JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' }).length}\r\n\r\n` +
    JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' });

  test('past MAX_CONNECTIONS a new connection closes one that has sent no request head; an authenticated one keeps working', async () => {
    const mine = await connect(srv);
    mine.sock.write(ping(srv, 1));
    const first = await readResponse(mine, 0);
    assert.match(first, /^HTTP\/1\.1 200 /);
    assert.match(first, /\r\nconnection: keep-alive\r\n/i);
    // idle connections up to and past the cap: each one past it takes the place of the oldest
    const idle = await Promise.all(Array.from({ length: 60 }, () => connect(srv)));
    const probe = await connect(srv);
    probe.sock.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await within(probe.closed, 5000);
    assert.match(probe.data(), /^HTTP\/1\.1 200 /, 'a connection past the cap was not served');
    // the authenticated connection still answers
    mine.sock.write(ping(srv, 2));
    const second = await readResponse(mine, first.length);
    assert.match(second, /^HTTP\/1\.1 200 /);
    assert.match(second, /"id":2,"result":\{\}/);
    for (const c of [mine, probe, ...idle]) c.sock.destroy();
    await Promise.all([mine, probe, ...idle].map((c) => c.closed));
    assert.match(srv.stderr(), /http refused reason=evicted/);
  });

  test('past MAX_CONNECTIONS of authenticated connections a new one is closed unanswered; they keep working', async () => {
    // The server notices the previous test's closed sockets on its next loop turns; until then a
    // new connection may find no room. Retry, bounded.
    const mine = [];
    for (let i = 0; i < 200 && mine.length < 40; i++) {
      const c = await connect(srv).catch(() => null);
      if (!c) continue;
      c.sock.write(ping(srv, 1));
      await Promise.race([c.closed, readResponse(c, 0).catch(() => null)]);
      if (/^HTTP\/1\.1 200 /.test(c.data())) mine.push(c);
      else { c.sock.destroy(); await sleep(20); }
    }
    assert.equal(mine.length, 40, 'the listener did not take 40 authenticated connections');
    const probe = await connect(srv);
    probe.sock.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await within(probe.closed, 5000);
    assert.equal(probe.data(), '', 'a connection past a cap of authenticated ones was served');
    const from = mine[0].data().length;
    mine[0].sock.write(ping(srv, 2));
    assert.match(await readResponse(mine[0], from), /"id":2,"result":\{\}/);
    for (const c of [probe, ...mine]) c.sock.destroy();
    await Promise.all([probe, ...mine].map((c) => c.closed));
    assert.match(srv.stderr(), /http refused reason=connections/);
  });

  test('/metrics is not served without METRICS_TOKEN', async () => {
    // The server notices the previous test's closed sockets on its next loop turns; until then a new
    // connection may still be past the cap and closed unanswered. Retry, bounded.
    let res;
    for (let i = 0; i < 100 && !res; i++) {
      res = await fetch(`${srv.url}/metrics`).catch(() => null);
      if (!res) await sleep(100);
    }
    assert.ok(res, 'the server never accepted a connection again after the idle ones closed');
    assert.equal(res.status, 404);
  });
});

describe('commands under way', () => {
  let srv;
  before(async () => {
    // the largest output cap: what the server set aside for each command at that cap would show
    srv = await startServer({ env: { ASAN_OPTIONS, EXEC_OUTPUT_BYTES: String(64 * MiB) } });
  });
  after(async () => { await srv?.stop(); });

  test('many commands that print little hold memory for what they print, not for the output cap', async () => {
    const vmData = () => Number(readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8').match(/^VmData:\s+(\d+) kB/m)[1]) * 1024;
    await tool(srv, 'container_exec', { command: 'true' });
    const base = vmData();
    let peak = base, running = true;
    const sampler = (async () => {
      while (running) { peak = Math.max(peak, vmData()); await sleep(20); }
    })();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) =>
      tool(srv, 'container_exec', { command: `sleep 2; echo done ${i}` })));
    running = false;
    await sampler;
    results.forEach((r, i) => assert.equal(r.structuredContent.stdout, `done ${i}\n`, JSON.stringify(r)));
    // 20 commands at once, each of which could print 2 x 64 MiB: a buffer of the cap for each
    // stream of each would be 2.5 GiB; what they print takes next to nothing
    assert.ok(peak - base < 256 * MiB, `the server's data grew by ${((peak - base) / MiB).toFixed(0)} MiB`);
  });
});
