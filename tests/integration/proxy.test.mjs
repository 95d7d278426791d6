// The LLM and git proxy against a local fake upstream speaking the real wire formats.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import https from 'node:https';
import net from 'node:net';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startServer, cli, tempDir, removeDataDir } from '../lib/server.mjs';
import { startFake, messageEvents } from '../lib/fake-anthropic.mjs';
import { makeCA } from '../lib/tls.mjs';
import { startGitServer } from '../lib/git.mjs';
import { until } from '../lib/runs.mjs';

const REAL_KEY = 'sk-ant-real-key-never-shown-0123456789';
const REAL_GITHUB = 'ghp_real_github_token_never_shown_42';
let fake, server, secret;

function mint(services = 'anthropic', ttl = '10m') {
  const r = cli(['proxy-token', '--user', 'admin', '--services', services, '--ttl', ttl, '--data-dir', server.dataDir],
    { env: { PROXY_JWT_SECRET: '' } });
  assert.equal(r.status, 0, r.stderr);
  return { token: r.stdout.trim(), jti: r.stderr.match(/proxy token (jti_\S+)/)[1] };
}

const b64u = (x) => Buffer.from(typeof x === 'string' ? x : JSON.stringify(x)).toString('base64url');
function forge(header, claims, key = secret) {
  const head = `${b64u(header)}.${b64u(claims)}`;
  const sig = crypto.createHmac('sha256', key).update(head).digest('base64url');
  return `${head}.${sig}`;
}

function proxyUrl(p) {
  return `${server.url}/proxy${p}`;
}

async function post(p, token, body = { model: 'claude-fake', max_tokens: 10, messages: [] }, headers = {}) {
  return fetch(proxyUrl(p), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { 'x-api-key': token } : {}), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

before(async () => {
  fake = await startFake();
  server = await startServer({ env: {
    ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: REAL_KEY,
    OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'sk-openai-real',
    PROXY_MAX_REQUEST_BYTES: '65536', PROXY_STALL_SECONDS: '1',
  } });
  // proxy tokens are signed with a key derived from the server's secret for that purpose alone
  const raw = readFileSync(path.join(server.dataDir, 'secrets', 'proxy_jwt_secret'), 'utf8').trim();
  secret = crypto.createHmac('sha256', raw).update('sandbox-mcp proxy-jwt v1').digest();
});

after(async () => {
  await server.stop();
  await fake.close();
});

test('a streamed reply passes through live: the client sees the first event before the upstream sends the last', async () => {
  let release;
  const gate = new Promise((r) => { release = r; });
  fake.handle(async (req, res) => {
    const ev = messageEvents({ input: 11, output: 22 });
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(ev[0]);
    await gate; // wait until the client has seen the first event
    for (const e of ev.slice(1)) res.write(e);
    res.end();
  });
  const { token } = mint();
  const res = await post('/anthropic/v1/messages', token, { model: 'm', stream: true, max_tokens: 5, messages: [] });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /text\/event-stream/);
  const reader = res.body.getReader();
  let text = '';
  while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
  assert.match(text, /^event: message_start\n/);
  assert.doesNotMatch(text, /message_stop/);
  release();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  assert.match(text, /event: message_stop/);
  fake.handle(undefined);
});

test('the real key replaces the token on the way up; the token never reaches the upstream', async () => {
  fake.handle((req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"usage":{"input_tokens":3,"output_tokens":4}}'); });
  const before = fake.requests.length;
  const { token } = mint();
  const res = await post('/anthropic/v1/messages?beta=true', token, { model: 'm', messages: [] }, { 'anthropic-version': '2023-06-01' });
  assert.equal(res.status, 200);
  const seen = fake.requests.slice(before);
  assert.equal(seen.length, 1);
  assert.equal(seen[0].url, '/v1/messages?beta=true');
  assert.equal(seen[0].headers['x-api-key'], REAL_KEY);
  assert.equal(seen[0].headers['anthropic-version'], '2023-06-01');
  assert.equal(seen[0].headers.authorization, undefined);
  const everything = JSON.stringify(seen);
  assert.ok(!everything.includes(token), 'the proxy token reached the upstream');
  assert.ok(!everything.includes(token.split('.')[2]), 'the token signature reached the upstream');
  const body = await res.text();
  assert.ok(!body.includes(REAL_KEY));
});

test('a plain reply keeps the upstream\'s Content-Length; one cut short fails at the client', async () => {
  const { token } = mint();
  const json = '{"usage":{"input_tokens":1,"output_tokens":2}}';
  fake.handle((req, res) => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': json.length }); res.end(json); });
  let res = await post('/anthropic/v1/messages', token);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-length'), String(json.length));
  assert.equal(res.headers.get('transfer-encoding'), null);
  assert.equal(await res.text(), json);
  // the upstream promises 100 bytes, sends 10 and closes: the client must not take 10 for the reply
  fake.handle((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 100 });
    res.write('0123456789');
    setTimeout(() => res.socket.destroy(), 50);
  });
  res = await post('/anthropic/v1/messages', token);
  assert.equal(res.status, 200);
  await assert.rejects(res.text());
  fake.handle(undefined);
});

test('usage from streamed and plain replies is added to the token in SQLite', async () => {
  const { token, jti } = mint();
  fake.handle((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of messageEvents({ input: 100, output: 40 })) res.write(e);
    res.end();
  });
  await (await post('/anthropic/v1/messages', token, { stream: true })).text();
  fake.handle((req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ usage: { input_tokens: 5, output_tokens: 6 } })); });
  await (await post('/anthropic/v1/messages', token)).text();
  // written in batches, within a second
  const usage = () => spawnSync('sqlite3', [path.join(server.dataDir, 'sandbox-mcp.db'),
    `SELECT requests, input_tokens, output_tokens FROM proxy_tokens WHERE jti = '${jti}'`], { encoding: 'utf8' }).stdout.trim();
  await until(() => usage() === '2|105|46', 'the usage written').catch(() => {});
  assert.equal(usage(), '2|105|46');
});

test('usage not yet written when the server stops is written as it stops', async () => {
  const own = await startServer({ env: { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: REAL_KEY } });
  const r = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--ttl', '10m', '--data-dir', own.dataDir]);
  const jti = r.stderr.match(/proxy token (jti_\S+)/)[1];
  const db = path.join(own.dataDir, 'sandbox-mcp.db');
  try {
    fake.handle((req, res) => { res.writeHead(200, { 'content-type': 'application/json' }); res.end(JSON.stringify({ usage: { input_tokens: 7, output_tokens: 3 } })); });
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${own.url}/proxy/anthropic/v1/messages`, { method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': r.stdout.trim() }, body: '{}' });
      assert.equal(res.status, 200);
      await res.text();
    }
    const { code } = await own.stop('SIGTERM', { keep: true });
    assert.equal(code, 0, own.stderr());
    const row = spawnSync('sqlite3', [db, `SELECT requests, input_tokens, output_tokens FROM proxy_tokens WHERE jti = '${jti}'`], { encoding: 'utf8' });
    assert.equal(row.stdout.trim(), '3|21|9');
  } finally {
    fake.handle(undefined);
    removeDataDir(own.dataDir);
  }
});

test('rejections: missing, none, other algorithms, bad signature, expired, unknown', async () => {
  let res = await post('/anthropic/v1/messages', null);
  assert.equal(res.status, 401);
  assert.equal((await res.json()).code, 'missing_token');
  const now = Math.floor(Date.now() / 1000);
  const claims = { user: 'x', iat: now, exp: now + 600, jti: 'jti_forged', svc: ['anthropic'] };
  const none = `${b64u({ alg: 'none', typ: 'JWT' })}.${b64u(claims)}.`;
  for (const tok of [none, forge({ alg: 'HS512' }, claims), forge({ alg: 'HS256' }, claims, 'wrong-key'),
    forge({ alg: 'HS256' }, { ...claims, exp: now - 5 }), forge({ alg: 'HS256' }, claims), 'garbage']) {
    res = await post('/anthropic/v1/messages', tok);
    assert.equal(res.status, 401, tok);
    const body = await res.json();
    assert.equal(body.code, 'invalid_token');
    assert.equal(typeof body.error, 'string');
  }
});

test('a revoked token (its run ended) is 403; a service not granted is 403', async () => {
  const { token, jti } = mint();
  assert.equal(cli(['proxy-token', 'revoke', jti, '--data-dir', server.dataDir]).status, 0);
  let res = await post('/anthropic/v1/messages', token);
  assert.equal(res.status, 403);
  assert.equal((await res.json()).code, 'token_revoked');
  const other = mint('github');
  res = await post('/anthropic/v1/messages', other.token);
  assert.equal(res.status, 403);
  assert.equal((await res.json()).code, 'service_not_granted');
});

test('a token bound to a sandbox is refused on another listener', async () => {
  const now = Math.floor(Date.now() / 1000);
  const jti = `jti_sbx_${now}`;
  const db = path.join(server.dataDir, 'sandbox-mcp.db');
  const uid = spawnSync('sqlite3', [db, "SELECT id FROM users WHERE name = 'admin'"], { encoding: 'utf8' }).stdout.trim();
  spawnSync('sqlite3', [db, `INSERT INTO proxy_tokens(jti, user_id, sandbox_id, services, created_at, expires_at) VALUES ('${jti}', '${uid}', 'sbx_other', 'anthropic', ${now}, ${now + 600})`]);
  const tok = forge({ alg: 'HS256', typ: 'JWT' }, { user: uid, iat: now, exp: now + 600, jti, sbx: 'sbx_other', svc: ['anthropic'] });
  const res = await post('/anthropic/v1/messages', tok);
  assert.equal(res.status, 403);
  assert.equal((await res.json()).code, 'wrong_listener');
});

test('unknown service 404, path not allowed 400, method not allowed 405, too large 413', async () => {
  const { token } = mint();
  let res = await post('/nope/v1/messages', token);
  assert.equal(res.status, 404);
  assert.equal((await res.json()).code, 'unknown_service');
  for (const p of ['/anthropic/v1/organizations', '/anthropic/v1/messages/../admin', '/anthropic/v1/messages/%2e%2e/x']) {
    res = await post(p, token);
    assert.equal(res.status, 400, p);
    assert.equal((await res.json()).code, 'path_not_allowed');
  }
  res = await fetch(proxyUrl('/anthropic/v1/messages'), { method: 'DELETE', headers: { 'x-api-key': token } });
  assert.equal(res.status, 405);
  res = await post('/anthropic/v1/messages', token, 'x'.repeat(70000));
  assert.equal(res.status, 413);
});

test('an unreachable upstream is 502, a stalled one 504', async () => {
  const oa = mint('openai');
  let res = await fetch(proxyUrl('/openai/v1/models'), { headers: { authorization: `Bearer ${oa.token}` } });
  assert.equal(res.status, 502);
  assert.equal((await res.json()).code, 'bad_gateway');
  fake.handle(() => { /* never answers */ });
  const { token } = mint();
  res = await post('/anthropic/v1/messages', token);
  assert.equal(res.status, 504);
  assert.equal((await res.json()).code, 'upstream_timeout');
  fake.handle(undefined);
});

test('the client going away closes the upstream connection', async () => {
  let sawFirst;
  const first = new Promise((r) => { sawFirst = r; });
  let pinger;
  fake.handle((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(messageEvents()[0]);
    sawFirst();
    // a long generation: Anthropic keeps the stream alive with ping events
    pinger = setInterval(() => res.write('event: ping\ndata: {"type": "ping"}\n\n'), 100);
    res.on('close', () => clearInterval(pinger));
  });
  const { token } = mint();
  // a raw client that reads the first event and then disappears
  const sock = net.connect(new URL(server.url).port, '127.0.0.1');
  const body = '{"stream":true,"marker":"client-goes-away"}';
  sock.write(`POST /proxy/anthropic/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${token}\r\n` +
    `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  let got = '';
  await new Promise((resolve) => sock.on('data', (d) => { got += d; if (got.includes('message_start')) resolve(); }));
  await first;
  sock.destroy();
  const mine = () => fake.closed.some((r) => r.body.includes('client-goes-away'));
  const logged = () => /proxy aborted service=anthropic .*reason=client-gone/.test(server.stderr());
  await until(() => mine() && logged(), 'the upstream closed and the abort logged').catch(() => {});
  clearInterval(pinger);
  fake.handle(undefined);
  assert.ok(mine(), 'upstream did not see the connection close');
  assert.ok(logged(), 'the proxy did not log the abort');
});

test('a client that goes away before any answer (the model still thinking) closes the upstream too', async () => {
  let arrived;
  const seen = new Promise((r) => { arrived = r; });
  // the upstream answers nothing at all until the connection goes
  fake.handle((req, res, body) => { if (body.includes('gone-before-answer')) arrived(); });
  const { token } = mint();
  const sock = net.connect(new URL(server.url).port, '127.0.0.1');
  const body = '{"stream":true,"marker":"gone-before-answer"}';
  sock.write(`POST /proxy/anthropic/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${token}\r\n` +
    `content-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  await seen;
  sock.destroy();
  const mine = () => fake.closed.some((r) => r.body.includes('gone-before-answer'));
  await until(mine, 'the upstream closed').catch(() => {});
  fake.handle(undefined);
  assert.ok(mine(), 'upstream did not see the connection close');
});

test('upstream connections are kept: requests share one, and one the upstream dropped is replaced', async () => {
  const conns = new WeakMap();
  let nconns = 0;
  fake.handle((req, res, body) => {
    if (!conns.has(req.socket)) conns.set(req.socket, { id: nconns++, served: 0 });
    const c = conns.get(req.socket);
    // an upstream that closed a kept connection as the request went out on it
    if (body.includes('drop-kept') && c.served > 0) { req.socket.destroy(); return; }
    c.served++;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ conn: c.id }));
  });
  try {
    const { token } = mint();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await (await post('/anthropic/v1/messages', token)).json()).conn);
    assert.equal(new Set(ids).size, 1, `one connection for all: ${ids}`);
    const before = fake.requests.length;
    const res = await post('/anthropic/v1/messages', token, { marker: 'drop-kept' });
    assert.equal(res.status, 200);
    assert.notEqual((await res.json()).conn, ids[0]);
    assert.equal(fake.requests.length, before + 2, 'sent again on a new connection');
  } finally {
    fake.handle(undefined);
  }
});

test('a client that reads slowly holds the upstream back rather than have the proxy take it all', async () => {
  const own = await startServer({ env: { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: REAL_KEY } });
  const size = 64 << 20; // far more than the proxy buffers and the sockets between hold
  let upstreamDone = false;
  fake.handle((req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
    const chunk = Buffer.alloc(1 << 16, 'x');
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end(() => { upstreamDone = true; });
    };
    pump();
  });
  try {
    const r = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--data-dir', own.dataDir]);
    const sock = net.connect(new URL(own.url).port, '127.0.0.1');
    sock.pause();
    sock.write(`POST /proxy/anthropic/v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${r.stdout.trim()}\r\n` +
      'content-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}');
    // The proxy says when it stops reading the upstream for a client that takes nothing, with
    // what it had read by then: far less than the body.
    const [, held] = await own.waitLog(/proxy upstream held service=anthropic user=\S+ run=\S+ reason=slow-client bytes=(\d+)/);
    assert.ok(Number(held) < size, `held after ${held} bytes of ${size}`);
    assert.equal(upstreamDone, false, 'the upstream sent it all while the client read nothing');
    let got = 0;
    sock.on('data', (d) => { got += d.length; });
    await new Promise((resolve) => { sock.on('end', resolve); sock.resume(); });
    assert.ok(upstreamDone);
    assert.ok(got > size && got < size + 1024, `${got} bytes for a body of ${size}`);
  } finally {
    fake.handle(undefined);
    await own.stop();
  }
});

test('an https upstream must present a certificate from a trusted CA that names it', async () => {
  const trusted = makeCA(), unknown = makeCA();
  const good = trusted.issue('up'), stranger = unknown.issue('up'); // for localhost and 127.0.0.1
  const serve = async (cert, host) => {
    const s = https.createServer({ cert: cert.cert, key: cert.key }, (req, res) => {
      req.resume();
      req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"ok":true}'); });
    });
    await new Promise((r) => s.listen(0, host, r));
    return s;
  };
  const ok = await serve(good, '127.0.0.1'), otherName = await serve(good, '127.0.0.2'), otherCA = await serve(stranger, '127.0.0.1');
  const own = await startServer({ env: {
    SSL_CERT_FILE: trusted.caFile, // OpenSSL's own variable: the CA store the server trusts
    ANTHROPIC_BASE_URL: `https://localhost:${ok.address().port}`, ANTHROPIC_API_KEY: REAL_KEY,
    OPENAI_BASE_URL: `https://127.0.0.2:${otherName.address().port}`, OPENAI_API_KEY: 'sk-openai-real',
    OPENROUTER_BASE_URL: `https://127.0.0.1:${otherCA.address().port}`, OPENROUTER_API_KEY: 'sk-or-real',
  } });
  try {
    const token = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic,openai,openrouter',
      '--data-dir', own.dataDir]).stdout.trim();
    for (let i = 0; i < 2; i++) { // the second on the kept connection
      const res = await fetch(`${own.url}/proxy/anthropic/v1/messages`, { method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': token }, body: '{}' });
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '{"ok":true}');
    }
    for (const p of ['/openai/v1/models', '/openrouter/api/v1/models']) {
      const res = await fetch(`${own.url}/proxy${p}`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 502, p);
      assert.equal((await res.json()).code, 'bad_gateway');
    }
    assert.match(own.stderr(), /proxy upstream failed service=openai .*err="hostname mismatch"/);
    assert.match(own.stderr(), /proxy upstream failed service=openrouter .*err="unable to get local issuer certificate"/);
  } finally {
    await own.stop();
    for (const s of [ok, otherName, otherCA]) s.close();
    trusted.remove();
    unknown.remove();
  }
});

test('the upstream client: chunked answers decoded and kept, close and bad framing end the connection, an idle one the upstream writes on is dropped', async () => {
  // A raw upstream, so that the framing is exactly what each case says. The body's marker picks
  // the answer; every answer names the connection it came on.
  let nconns = 0;
  const sockets = [];
  const raw = net.createServer((sock) => {
    const id = nconns++;
    sockets[id] = { closed: false };
    sock.on('close', () => { sockets[id].closed = true; });
    let buf = '';
    sock.on('data', (d) => {
      buf += d;
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] || 0);
        if (buf.length < end + 4 + len) return;
        const body = buf.slice(end + 4, end + 4 + len);
        buf = buf.slice(end + 4 + len);
        const json = JSON.stringify({ conn: id });
        const mark = /"marker":"([a-z-]+)"/.exec(body)?.[1];
        if (mark === 'chunked') {
          const a = json.slice(0, 4), b = json.slice(4);
          sock.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n` +
            `${a.length.toString(16)};ext=1\r\n${a}\r\n${b.length.toString(16)}\r\n${b}\r\n0\r\nx-trailer: t\r\n\r\n`);
        } else if (mark === 'close') {
          sock.end(`HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: ${json.length}\r\n\r\n${json}`);
        } else if (mark === 'until-close') {
          sock.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n${json}`);
        } else if (mark === 'two-lengths') {
          sock.write(`HTTP/1.1 200 OK\r\ncontent-length: ${json.length}\r\ncontent-length: ${json.length + 1}\r\n\r\n${json}`);
        } else if (mark === 'then-junk') {
          sock.write(`HTTP/1.1 200 OK\r\ncontent-length: ${json.length}\r\n\r\n${json}`);
          setImmediate(() => sock.write('HTTP/1.1 200 OK\r\n\r\nunasked'));
        } else {
          sock.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ndate: Thu, 01 Jan 1970 00:00:00 GMT\r\n` +
            `server: upstream/1\r\ncontent-length: ${json.length}\r\n\r\n${json}`);
        }
      }
    });
  });
  await new Promise((r) => raw.listen(0, '127.0.0.1', r));
  const own = await startServer({ env: { ANTHROPIC_BASE_URL: `http://127.0.0.1:${raw.address().port}`, ANTHROPIC_API_KEY: REAL_KEY } });
  try {
    const token = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--data-dir', own.dataDir]).stdout.trim();
    const ask = async (marker) => {
      const res = await fetch(`${own.url}/proxy/anthropic/v1/messages`, { method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': token }, body: JSON.stringify({ marker }) });
      return { status: res.status, headers: res.headers, body: await res.json() };
    };
    // chunked, its extension and trailer dropped, twice on the one connection
    const c1 = await ask('chunked'), c2 = await ask('chunked');
    assert.equal(c1.status, 200);
    assert.deepEqual(c1.body, { conn: 0 });
    assert.deepEqual(c2.body, { conn: 0 }, 'a chunked answer leaves the connection kept');
    // Connection: close is honoured: the next request opens another
    assert.deepEqual((await ask('close')).body, { conn: 0 });
    await until(() => sockets[0].closed, 'the connection closed after connection: close');
    const plain = await ask('plain');
    assert.deepEqual(plain.body, { conn: 1 });
    // the answer has one Date and one Server, the proxy's
    assert.equal(plain.headers.get('date').match(/GMT/g).length, 1, plain.headers.get('date'));
    assert.doesNotMatch(plain.headers.get('date'), /1970/);
    assert.equal(plain.headers.get('server'), 'sandbox-mcp');
    // a body that ends with the connection
    assert.deepEqual((await ask('until-close')).body, { conn: 1 });
    await until(() => sockets[1].closed, 'the connection closed after a body to the close');
    // an idle connection on which the upstream sends what nothing asked for is closed at once
    assert.deepEqual((await ask('then-junk')).body, { conn: 2 });
    await until(() => sockets[2].closed, 'the connection closed after unasked bytes on an idle connection');
    assert.deepEqual((await ask('plain')).body, { conn: 3 });
    // two lengths: a 502, and the connection is not used again
    const bad = await ask('two-lengths');
    assert.equal(bad.status, 502);
    assert.equal(bad.body.code, 'bad_gateway');
    assert.equal(bad.body.error, "upstream 'anthropic' failed: the upstream's answer is not valid HTTP/1.1");
    await until(() => sockets[3].closed, 'the connection closed after two lengths');
    assert.deepEqual((await ask('plain')).body, { conn: 4 });
    assert.match(own.stderr(), /proxy upstream failed service=anthropic .*err="the upstream's answer is not valid HTTP\/1.1"/);
  } finally {
    await own.stop();
    raw.close();
  }
});

test('neither the real key nor any token appears in the server log', () => {
  const log = server.stderr();
  assert.ok(!log.includes(REAL_KEY));
  assert.ok(!/eyJ[\w-]+\.eyJ[\w-]+\./.test(log), 'a JWT appears in the log');
});

// Run a command without blocking this process's event loop (the fake servers live in it).
function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

// A git smart-HTTP server standing in for GitHub that answers 401 to any other Authorization
// than expectAuth.
function startGitHub(root, expectAuth) {
  return startGitServer(root, { route: (req, res) => {
    if ((req.headers.authorization || '') === expectAuth) return false;
    res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' });
    res.end('auth');
    return true;
  } });
}

test('git clone through the github service, with the token as the Basic password', async () => {
  const dir = tempDir('smcp-git-');
  try {
    const repo = path.join(dir, 'acme', 'widget.git');
    mkdirSync(path.dirname(repo), { recursive: true });
    const work = path.join(dir, 'work');
    const git = (args, cwd) => spawnSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@x' } });
    assert.equal(git(['init', '-q', '--bare', repo]).status, 0);
    assert.equal(git(['init', '-q', work]).status, 0);
    git(['-C', work, 'commit', '-q', '--allow-empty', '-m', 'first commit']);
    assert.equal(git(['-C', work, 'push', '-q', repo, 'HEAD:refs/heads/main']).status, 0);
    git(['-C', repo, 'symbolic-ref', 'HEAD', 'refs/heads/main']);
    const gh = await startGitHub(dir, `Basic ${Buffer.from(`x-access-token:${REAL_GITHUB}`).toString('base64')}`);
    const srv = await startServer({ env: { GITHUB_BASE_URL: gh.url, GITHUB_TOKEN: REAL_GITHUB, GITHUB_REPOS: 'acme/widget' } });
    try {
      const r = cli(['proxy-token', '--user', 'admin', '--services', 'github', '--data-dir', srv.dataDir]);
      const token = r.stdout.trim();
      const url = `${srv.url}/proxy/github/acme/widget.git`;
      const clone = await run('git', ['-c', 'credential.helper=', 'clone', '-q', url.replace('http://', `http://x-access-token:${token}@`), path.join(dir, 'clone')],
        { env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
      assert.equal(clone.status, 0, clone.stderr);
      const log = spawnSync('git', ['-C', path.join(dir, 'clone'), 'log', '--format=%s'], { encoding: 'utf8' });
      assert.equal(log.stdout, 'first commit\n');
      // without a token git is asked for credentials and fails
      const anon = await run('git', ['-c', 'credential.helper=', 'ls-remote', url], { env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
      assert.notEqual(anon.status, 0);
      // a token without a branch to push (the operator's here) pushes nothing, and says so
      const before = spawnSync('git', ['-C', repo, 'rev-parse', 'main'], { encoding: 'utf8' }).stdout;
      git(['-C', path.join(dir, 'clone'), 'commit', '-q', '--allow-empty', '-m', 'second']);
      const push = await run('git', ['-c', 'credential.helper=', '-C', path.join(dir, 'clone'), 'push', '-q',
        url.replace('http://', `http://x-access-token:${token}@`), 'HEAD:refs/heads/main'], { env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
      assert.notEqual(push.status, 0);
      assert.equal(spawnSync('git', ['-C', repo, 'rev-parse', 'main'], { encoding: 'utf8' }).stdout, before);
      const info = await fetch(`${url}/info/refs?service=git-receive-pack`, {
        headers: { authorization: `Basic ${Buffer.from(`x:${token}`).toString('base64')}` } });
      assert.equal(info.status, 403);
      assert.equal((await info.json()).code, 'push_not_allowed');
      await srv.waitLog(/proxy push refused user=\S+ run=- repo=acme\/widget why="this token pushes nothing/);
      assert.ok(!srv.stderr().includes(REAL_GITHUB));
    } finally {
      await srv.stop();
      await gh.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('from inside a sandbox through its own listener at 127.0.0.1:8788', async () => {
  const call = async (name, args, token = server.token) => {
    const r = await fetch(server.mcpUrl, { method: 'POST', headers: {
      'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }) });
    return (await r.json()).result;
  };
  const sbx = (await call('container_ping', {})).structuredContent.sandbox_id;
  const r = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--sandbox', sbx, '--data-dir', server.dataDir]);
  assert.equal(r.status, 0, r.stderr);
  const bound = r.stdout.trim();
  const before = fake.requests.length;
  // the token travels in the environment, not in the command line
  const inside = await call('container_exec', {
    command: 'curl -sN -m 10 -H "x-api-key: $TOK" -H "content-type: application/json" http://127.0.0.1:8788/proxy/anthropic/v1/messages -d \'{"stream":true}\'',
    env: { TOK: bound } });
  assert.equal(inside.structuredContent.exit_code, 0, JSON.stringify(inside));
  assert.match(inside.structuredContent.stdout, /event: message_start[\s\S]*event: message_stop/);
  assert.equal(fake.requests.length, before + 1);
  assert.equal(fake.requests.at(-1).headers['x-api-key'], REAL_KEY);
  // nothing of the real key reaches the sandbox: not in what it got back, not in its environment
  assert.ok(!JSON.stringify(inside).includes(REAL_KEY));
  const env = await call('container_exec', { command: 'cat /proc/self/environ | tr "\\0" "\\n"; env' });
  assert.ok(!env.structuredContent.stdout.includes(REAL_KEY));
  assert.ok(!env.structuredContent.stdout.includes('sk-openai-real'));
  // the same token on the main listener, and a main-listener token inside, are refused
  let res = await post('/anthropic/v1/messages', bound);
  assert.equal(res.status, 403);
  assert.equal((await res.json()).code, 'wrong_listener');
  const { token } = mint();
  const wrong = await call('container_exec', {
    command: 'curl -s -m 5 -H "x-api-key: $TOK" http://127.0.0.1:8788/proxy/anthropic/v1/messages -d "{}"',
    env: { TOK: token } });
  assert.match(wrong.structuredContent.stdout, /"code":"wrong_listener"/);
  // only /proxy is served there
  const other = await call('container_exec', { command: 'curl -s -m 5 http://127.0.0.1:8788/mcp -d "{}"' });
  assert.match(other.structuredContent.stdout, /"code":"not_found"/);
});
