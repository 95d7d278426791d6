// HTTPS on the main listener: HTTP/1.1 and HTTP/2 chosen by ALPN, configuration errors, the
// certificate read again on SIGHUP, and the admission gate over TLS (the 401 before an HTTP/1.1
// body, HTTP/2 connections without a token closed past their allowance). Certificates come from
// a throwaway CA made with the openssl command. Memory is judged by the server's peak resident
// size (VmHWM), never by how long anything took.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';

import { startServer, rpc, cli, tempDir, removeDataDir, sseMessages } from '../lib/server.mjs';
import { portOf, assertNoSanitizerReport, within } from '../lib/http.mjs';
import { makeCA } from '../lib/tls.mjs';

const MiB = 1024 * 1024;
// ASan keeps freed memory in a quarantine (256 MiB by default), which would count as resident;
// a small one keeps the peak about what the server holds.
const ASAN_OPTIONS = 'detect_leaks=1:abort_on_error=1:quarantine_size_mb=16';
const PING = { jsonrpc: '2.0', id: 1, method: 'ping' };
const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function status(pid) {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name) => Number(text.match(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm'))[1]);
  return { rss: kb('VmRSS') * 1024, hwm: kb('VmHWM') * 1024 };
}

// Wait until the server's log matches re (the server is running, so it comes or the test times
// out).
async function logged(srv, re) {
  while (!re.test(srv.stderr())) await sleep(20);
}

// A TLS connection; resolves with the socket once the handshake is done.
function tlsConnect(srv, options = {}) {
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: '127.0.0.1', port: portOf(srv), ca: srv.ca, ...options });
    sock.once('secureConnect', () => resolve(sock));
    sock.once('error', reject);
  });
}

// The serial number of the certificate a new connection is shown.
async function servedSerial(srv) {
  const sock = await tlsConnect(srv);
  const serial = sock.getPeerCertificate().serialNumber;
  sock.destroy();
  return serial.toLowerCase();
}

// Send raw bytes on a TLS connection and collect what arrives until the server closes it or
// limitMs passes.
async function tlsExchange(srv, chunks, { limitMs = 5000, alpn = ['http/1.1'] } = {}) {
  const sock = await tlsConnect(srv, alpn ? { ALPNProtocols: alpn } : {});
  const got = [];
  sock.on('data', (d) => got.push(d));
  sock.on('error', () => { /* a reset after the answer: keep what arrived */ });
  const closed = new Promise((r) => sock.once('close', r));
  for (const c of chunks) sock.write(c);
  await within(closed, limitMs);
  sock.destroy();
  return { alpn: sock.alpnProtocol, text: Buffer.concat(got).toString('latin1') };
}

function h2connect(srv) {
  return new Promise((resolve, reject) => {
    const session = http2.connect(srv.url, { ca: srv.ca });
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

// One request on an HTTP/2 session: {status, headers, text}.
function h2request(session, { method = 'GET', path: p = '/healthz', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = session.request({ ':method': method, ':path': p, ...headers });
    let text = '';
    let head;
    req.setEncoding('utf8');
    req.on('response', (h) => { head = h; });
    req.on('data', (d) => { text += d; });
    req.on('end', () => resolve({ status: head?.[':status'], headers: head, text }));
    req.on('error', reject);
    req.end(body);
  });
}

// The JSON-RPC message of an /mcp answer, JSON or SSE.
function mcpMessage(res) {
  return /text\/event-stream/.test(res.headers['content-type'] || '')
    ? sseMessages(res.text).at(-1) : JSON.parse(res.text);
}

let ca;
before(() => { ca = makeCA(); });
after(() => ca?.remove());

describe('HTTPS', () => {
  let srv;
  before(async () => {
    const c = ca.issue('server');
    srv = await startServer({ tls: { cert: c.certFile, key: c.keyFile, ca: ca.caFile }, env: { ASAN_OPTIONS } });
  });
  after(async () => { await srv?.stop(); });

  test('the listener says it serves TLS, with its certificate', () => {
    assert.match(srv.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    assert.match(srv.stderr(), /http listening addr=\S+ tls=on /);
    assert.match(srv.stderr(), /http tls cert=\S+server\.pem subject="\/CN=localhost" not_after="/);
    assert.match(srv.stderr(), /serve start .*public_url=https:\/\/127\.0\.0\.1:/);
  });

  test('HTTP/1.1 by ALPN, and without ALPN: /healthz and /mcp', async () => {
    const res = await new Promise((resolve, reject) => {
      https.get(`${srv.url}/healthz`, { ca: srv.ca, ALPNProtocols: ['http/1.1'], agent: false }, (r) => {
        let text = '';
        r.on('data', (d) => { text += d; });
        r.on('end', () => resolve({ r, text }));
      }).on('error', reject);
    });
    assert.equal(res.r.socket.alpnProtocol, 'http/1.1');
    assert.equal(res.r.httpVersion, '1.1');
    assert.equal(res.r.statusCode, 200);
    assert.equal(JSON.parse(res.text).status, 'ok');

    const plain = await tlsExchange(srv, ['GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'],
      { alpn: null });
    assert.equal(plain.alpn, false);
    assert.match(plain.text, /^HTTP\/1\.1 200 /);

    const r = await rpc(srv, PING);
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.body.result, {});
    assert.equal((await rpc(srv, PING, { token: null })).status, 401);
  });

  test('HTTP/2 by ALPN: /healthz, /mcp with a token, 401 without', async () => {
    const session = await h2connect(srv);
    try {
      assert.equal(session.alpnProtocol, 'h2');
      const health = await h2request(session);
      assert.equal(health.status, 200);
      assert.equal(JSON.parse(health.text).status, 'ok');
      const ok = await h2request(session, { method: 'POST', path: '/mcp', body: JSON.stringify(PING),
        headers: { ...MCP_HEADERS, authorization: `Bearer ${srv.token}` } });
      assert.equal(ok.status, 200, ok.text);
      assert.deepEqual(mcpMessage(ok).result, {});
      const denied = await h2request(session, { method: 'POST', path: '/mcp', body: JSON.stringify(PING),
        headers: MCP_HEADERS });
      assert.equal(denied.status, 401);
      assert.match(denied.headers['www-authenticate'], /^Bearer /);
    } finally {
      session.close();
    }
  });

  test('plain HTTP to the TLS port gets no HTTP answer', async () => {
    const plainUrl = srv.url.replace(/^https:/, 'http:');
    await assert.rejects(new Promise((resolve, reject) => {
      http.get(`${plainUrl}/healthz`, { agent: false }, (r) => resolve(r.statusCode)).on('error', reject);
    }));
  });

  test('HTTP/1.1 over TLS: a large body without a token is answered 401 after its head alone', async () => {
    const head = 'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
      `Accept: application/json, text/event-stream\r\nContent-Length: ${4 * MiB}\r\n\r\n`;
    const { alpn, text } = await tlsExchange(srv, [head]);
    assert.equal(alpn, 'http/1.1');
    assert.match(text, /^HTTP\/1\.1 401 /, `reply: ${text.slice(0, 200)}`);
    assert.match(text, /\r\nWWW-Authenticate: Bearer realm="sandbox-mcp"\r\n/i);
    assert.match(text, /"code":"unauthorized"/);
  });

  test('HTTP/2 with a token: a first request of 3 MB (container_file_write) is served', async () => {
    const session = await h2connect(srv);
    try {
      // 3 MB: under the write limit (3133440 bytes: what a 4 MiB request carries as base64)
      const content = 'x'.repeat(3000000);
      const call = (id, name, args) => h2request(session, { method: 'POST', path: '/mcp',
        headers: { ...MCP_HEADERS, authorization: `Bearer ${srv.token}` },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } }) });
      const w = await call(1, 'container_file_write', { path: 'big.txt', content });
      assert.equal(w.status, 200, w.text.slice(0, 500));
      assert.notEqual(mcpMessage(w).result?.isError, true, w.text.slice(0, 500));
      const e = await call(2, 'container_exec', { command: 'wc -c < big.txt' });
      assert.equal(e.status, 200, e.text.slice(0, 500));
      assert.equal(mcpMessage(e).result.structuredContent.stdout.trim(), String(content.length));
    } finally {
      session.close();
    }
  });

  test('the server logged no sanitizer report', () => {
    assert.equal(srv.proc.exitCode, null, srv.stderr().slice(-4000));
    assertNoSanitizerReport(srv.stderr(), 'server');
  });
});

describe('HTTP/2 connections without a token', () => {
  let srv;
  before(async () => {
    const c = ca.issue('flood');
    srv = await startServer({ tls: { cert: c.certFile, key: c.keyFile, ca: ca.caFile }, env: { ASAN_OPTIONS } });
  });
  after(async () => { await srv?.stop(); });

  test('12 connections streaming 4 MiB on each of 6 streams they never end: closed, memory bounded, others served', async () => {
    const pid = srv.proc.pid;
    const start = status(pid);
    const body = Buffer.alloc(4 * MiB - 1, 0x20);
    const sessions = await Promise.all(Array.from({ length: 12 }, () => h2connect(srv)));
    const closed = sessions.map((s) => new Promise((r) => s.once('close', r)));
    for (const s of sessions) {
      s.on('error', () => { /* closed by the server */ });
      for (let i = 0; i < 6; i++) {
        const req = s.request({ ':method': 'POST', ':path': '/mcp', ...MCP_HEADERS });
        req.on('error', () => { /* the connection went away */ });
        req.write(body); // all but the last byte of what a 4 MiB body would be, and no end
      }
    }
    const done = await Promise.all(closed.map((p) => within(p.then(() => true), 20000, false)));
    const end = status(pid);
    for (const s of sessions) s.destroy();
    const grew = end.hwm - start.rss;
    console.log(`h2 flood: ${done.filter(Boolean).length}/12 closed; rss ${start.rss / MiB | 0} MiB -> peak ${end.hwm / MiB | 0} MiB`);
    assert.deepEqual(done, Array(12).fill(true), 'every connection was closed by the server');
    // h2o alone would buffer up to 4 MiB for each of the 72 streams
    assert.ok(grew < 100 * MiB, `server peak resident size grew ${grew / MiB | 0} MiB`);
    await srv.waitLog(/http refused reason=unauthorized/);
    const r = await rpc(srv, PING);
    assert.equal(r.status, 200);
  });

  test('the server logged no sanitizer report', () => {
    assert.equal(srv.proc.exitCode, null, srv.stderr().slice(-4000));
    assertNoSanitizerReport(srv.stderr(), 'server');
  });
});

describe('HTTP/2 request after request', () => {
  let srv;
  before(async () => {
    const c = ca.issue('requests');
    srv = await startServer({ tls: { cert: c.certFile, key: c.keyFile, ca: ca.caFile },
      env: { PREAUTH_REQUEST_BYTES: '4096' } });
  });
  after(async () => { await srv?.stop(); });

  // Requests of /healthz, 8 at a time, until one fails or n have been answered; then whether
  // the server closed the connection.
  async function healthzUntilClosed(session, n, headers = {}) {
    const closed = new Promise((r) => session.once('close', () => r(true)));
    session.on('error', () => { /* closed by the server */ });
    let answered = 0, failed = false;
    for (let sent = 0; sent < n && !failed; sent += 8) {
      const batch = await Promise.allSettled(Array.from({ length: 8 }, () => h2request(session, { headers })));
      for (const b of batch) {
        if (b.status === 'fulfilled' && b.value.status === 200) answered++;
        else failed = true;
      }
    }
    return { closed: failed && await within(closed, 10000, false), answered };
  }

  test('a connection without a token is closed once its requests pass the allowance; one with a token is not', async () => {
    const anon = await h2connect(srv);
    const a = await healthzUntilClosed(anon, 5000);
    anon.destroy();
    assert.equal(a.closed, true, `${a.answered} requests answered and the connection still open`);
    assert.ok(a.answered > 10, `only ${a.answered} requests answered`);

    const mine = await h2connect(srv);
    const m = await healthzUntilClosed(mine, a.answered + 200, { authorization: `Bearer ${srv.token}` });
    const open = !m.closed;
    mine.close();
    assert.equal(open, true, 'the authenticated connection was closed');
    assert.ok(m.answered >= a.answered + 200, `${m.answered} answered`);
  });
});

describe('TLS handshakes', () => {
  let srv;
  before(async () => {
    const c = ca.issue('handshakes');
    srv = await startServer({ tls: { cert: c.certFile, key: c.keyFile, ca: ca.caFile }, env: { MAX_CONNECTIONS: '8' } });
  });
  after(async () => { await srv?.stop(); });

  test('connections that never finish their handshake make room for a new one past MAX_CONNECTIONS, and are closed by the head deadline', async () => {
    const idle = await Promise.all(Array.from({ length: 8 }, () => new Promise((resolve, reject) => {
      const sock = net.connect(portOf(srv), '127.0.0.1');
      const closed = new Promise((r) => sock.once('close', () => r(true)));
      sock.on('error', () => { /* reset by the server */ });
      sock.once('connect', () => resolve({ sock, closed }));
      sock.once('error', reject);
    })));
    // the listener is full of them: the oldest is closed for the newcomer
    const mine = await tlsConnect(srv);
    mine.destroy();
    await logged(srv, /http refused reason=evicted/);
    // PREAUTH_HEAD_SECONDS (3 s); the server closes them, the client does not
    const gone = await Promise.all(idle.map((c) => within(c.closed, 60000, false)));
    assert.deepEqual(gone, Array(8).fill(true));
    const r = await rpc(srv, PING);
    assert.equal(r.status, 200);
    assertNoSanitizerReport(srv.stderr(), 'server');
  });
});

describe('SIGHUP', () => {
  let srv, first, second, live;
  before(async () => {
    first = ca.issue('first', { cn: 'first', serial: 'a001' });
    second = ca.issue('second', { cn: 'second', serial: 'b002' });
    live = { cert: path.join(ca.dir, 'live.pem'), key: path.join(ca.dir, 'live.key') };
    copyFileSync(first.certFile, live.cert);
    copyFileSync(first.keyFile, live.key);
    srv = await startServer({ tls: { ...live, ca: ca.caFile } });
  });
  after(async () => { await srv?.stop(); });

  test('new connections get the new certificate, open ones go on, a broken one keeps the old', async () => {
    assert.equal(await servedSerial(srv), 'a001');
    // an HTTP/2 session and a kept-alive HTTP/1.1 connection, open across the reloads
    const session = await h2connect(srv);
    assert.equal((await h2request(session)).status, 200);
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: srv.ca });
    const get = () => new Promise((resolve, reject) => {
      const req = https.get(`${srv.url}/healthz`, { agent, headers: { authorization: `Bearer ${srv.token}` } }, (r) => {
        const serial = r.socket.getPeerCertificate().serialNumber;
        r.resume();
        r.on('end', () => resolve({ status: r.statusCode, reused: req.reusedSocket, serial }));
      });
      req.on('error', reject);
    });
    assert.equal((await get()).status, 200);

    copyFileSync(second.certFile, live.cert);
    copyFileSync(second.keyFile, live.key);
    srv.proc.kill('SIGHUP');
    await logged(srv, /http tls reloaded cert=\S+live\.pem subject="\/CN=second"/);
    assert.equal(await servedSerial(srv), 'b002');
    const h2 = await h2request(session);
    assert.equal(h2.status, 200);
    assert.equal(session.socket.getPeerCertificate().serialNumber.toLowerCase(), 'a001');
    const h1 = await get();
    assert.deepEqual({ ...h1, serial: h1.serial.toLowerCase() }, { status: 200, reused: true, serial: 'a001' });

    writeFileSync(live.cert, 'not a certificate\n');
    srv.proc.kill('SIGHUP');
    await logged(srv, /http tls reload-failed err="cannot load TLS certificate '\S+live\.pem': no PEM data in it"/);
    assert.equal(await servedSerial(srv), 'b002');
    assert.equal((await h2request(session)).status, 200);
    assert.equal((await get()).status, 200);
    session.close();
    agent.destroy();
    assert.equal(srv.proc.exitCode, null, 'SIGHUP stopped the server');
  });

  test('SIGTERM still stops it cleanly', async () => {
    const { code, signal } = await srv.stop();
    srv = null;
    assert.equal(signal, null);
    assert.equal(code, 0);
  });
});

describe('TLS configuration errors', () => {
  let dir;
  before(() => { dir = tempDir(); });
  after(() => { removeDataDir(dir); });

  const serve = (args, env = {}) => cli(['serve', '--listen', '127.0.0.1:0', '--data-dir', dir, ...args],
    { env, timeout: 60000 });

  test('a certificate without a key, a missing key, a key that is none, a mismatched key, a certificate that is none: serve exits non-zero saying so', () => {
    const a = ca.issue('conf-a'), b = ca.issue('conf-b');
    const cases = [
      [[], { TLS_CERT: a.certFile }, /TLS_CERT and TLS_KEY \(--tls-cert, --tls-key\) must be set together: TLS_KEY is missing/],
      [['--tls-key', a.keyFile], {}, /TLS_CERT is missing/],
      [['--tls-cert', a.certFile, '--tls-key', path.join(ca.dir, 'absent.key')], {}, /cannot read TLS key '\S+absent\.key': No such file or directory/],
      [['--tls-cert', a.certFile, '--tls-key', a.certFile], {}, /cannot load TLS key '\S+conf-a\.pem': not a PEM private key/],
      [['--tls-cert', a.certFile, '--tls-key', b.keyFile], {}, /TLS key '\S+conf-b\.key' does not match certificate '\S+conf-a\.pem'/],
      [['--tls-cert', ca.caFile.replace(/ca\.pem$/, 'conf-a.csr'), '--tls-key', a.keyFile], {}, /cannot load TLS certificate '\S+conf-a\.csr': no PEM data in it/],
    ];
    for (const [args, env, want] of cases) {
      const r = serve(args, env);
      assert.ok(r.status !== 0 && r.status !== null, `exit ${r.status} for ${args.join(' ')}:\n${r.stderr}`);
      assert.match(r.stderr, want);
      assertNoSanitizerReport(r.stderr, 'serve');
    }
  });
});
