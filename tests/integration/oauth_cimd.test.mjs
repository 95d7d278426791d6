// Client ID Metadata Documents fetched for strangers (issue 32, point 4): eight client_id
// documents that never answered, asked for by one address, held every fetch slot of the server,
// and a legitimate client's sign-in got 503. Now one requester (an IPv4 address, an IPv6 /64) and
// one host each have a few of the slots, and a document whose fetch failed is answered with that
// failure for a while rather than fetched again.
//
// Everything is on loopback (OAUTH_CIMD_ALLOW_LOOPBACK): a "hung" document server on 127.0.0.1
// that accepts connections and never answers, a good one on [::1]; requesters are told apart by
// the loopback address they connect from (127.0.0.1, 127.0.0.2, ...).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { until as waitUntil } from '../lib/runs.mjs';
import http from 'node:http';
import net from 'node:net';

import { startServer } from '../lib/server.mjs';
import { portOf, assertNoSanitizerReport } from '../lib/http.mjs';
import {
  CookieJar, pkce, authorizePath, authorizeParams, authorizeAndApprove, tokenRequest, setPassword,
  isSignInPage, registerPublic,
} from '../lib/oauth.mjs';

const PASSWORD = 'correct horse battery staple';
const CB = 'http://127.0.0.1:9/callback'; // never contacted: redirects are read, not followed

let hung, good;

// Accepts and reads, never answers; counts connections.
function hungServer() {
  const socks = new Set();
  const s = net.createServer((sock) => {
    socks.add(sock);
    s.conns++;
    sock.on('error', () => {});
    sock.on('close', () => socks.delete(sock));
  });
  s.conns = 0;
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve({
    base: `http://127.0.0.1:${s.address().port}`,
    get conns() { return s.conns; },
    close: () => { for (const x of socks) x.destroy(); s.close(); },
  })));
}

// A good document on [::1], naming CB.
function goodServer() {
  let fetched = 0;
  const s = http.createServer((req, res) => {
    fetched++;
    const id = `http://[::1]:${s.address().port}${req.url}`;
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=600' });
    res.end(JSON.stringify({ client_id: id, client_name: 'Legit Client', redirect_uris: [CB],
      token_endpoint_auth_method: 'none' }));
  });
  return new Promise((resolve) => s.listen(0, '::1', () => resolve({
    base: `http://[::1]:${s.address().port}`,
    get fetched() { return fetched; },
    close: () => { s.closeAllConnections(); s.close(); },
  })));
}

before(async () => { hung = await hungServer(); good = await goodServer(); });
after(() => { hung?.close(); good?.close(); });

// GET /authorize for client_id from the loopback address `from`: {status, text}.
function authorizeFrom(server, from, clientId) {
  const { challenge } = pkce();
  const path = authorizePath(authorizeParams(server, { client_id: clientId, redirect_uri: CB, challenge }));
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: portOf(server), path, localAddress: from, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => { text += d; });
        res.on('end', () => resolve({ status: res.statusCode, text }));
      });
    req.on('error', reject);
    req.end();
  });
}

const escapeRe = (x) => x.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// The line every refused document is logged with: its stage, the client_id as sent (escaped as
// the log writes it), the requester and the reason.
function refusedLine(stage, shownId, addr, reason) {
  return new RegExp(`oauth client-document-refused stage=${stage} client="${escapeRe(shownId)}" ` +
    `addr=${escapeRe(addr)} reason="[^\n]*${escapeRe(reason)}`);
}

// until() of tests/lib/runs.mjs, bounded for a hung server only
const until = (cond, what) => waitUntil(cond, what, 120000);

async function stopCleanly(s) {
  const { code, signal } = await s.stop();
  assertNoSanitizerReport(s.stderr(), 'server');
  assert.equal(signal, null, `server killed by ${signal}`);
  assert.equal(code, 0, `server exited ${code}`);
}

test("eight hung documents from one address and host do not keep another requester's client (another host) from signing in", async () => {
  // a long deadline, so that the hung fetches are under way for the whole test
  const server = await startServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: '1', OAUTH_CIMD_TIMEOUT_SECONDS: '60' } });
  try {
    setPassword(server, 'admin', PASSWORD);
    const base = hung.conns;
    const answered = [];
    for (let i = 0; i < 8; i++) {
      // the two that hang end with the server (a reset), after the test
      authorizeFrom(server, '127.0.0.1', `${hung.base}/greedy/${i}.json`)
        .then((r) => answered.push(r), () => {});
    }
    // two are fetched (and hang), the other six are refused at once
    await until(() => hung.conns - base >= 2 && (answered.length >= 6 || hung.conns - base >= 8),
      'the hung fetches under way and the rest answered');
    assert.equal(hung.conns - base, 2, 'fetches under way for one address');
    assert.equal(answered.length, 6);
    for (const r of answered) {
      assert.equal(r.status, 503, r.text);
      assert.match(r.text, /2 fetches asked for from this address are under way, the most one address may have; retry later/);
    }
    // another requester, whose client's document is on another host: fetched at once
    const legit = `${good.base}/client.json`;
    const first = await authorizeFrom(server, '127.0.0.2', legit);
    assert.equal(first.status, 200, first.text.slice(0, 2000));
    assert.ok(isSignInPage(first.text), first.text.slice(0, 2000));
    assert.equal(good.fetched, 1);
    // and its user signs in, approves and gets tokens (the document is kept: no second fetch)
    const jar = new CookieJar();
    const { verifier, challenge } = pkce();
    const params = authorizeParams(server, { client_id: legit, redirect_uri: CB, challenge });
    const a = await authorizeAndApprove(server, jar, params, { password: PASSWORD });
    assert.ok(a.code, `no code: ${a.location}`);
    const t = await tokenRequest(server, { grant_type: 'authorization_code', code: a.code, code_verifier: verifier,
      redirect_uri: CB, client_id: legit, resource: server.mcpUrl });
    assert.equal(t.status, 200, t.text);
    // the host's share: a third address adds two more hung fetches to 127.0.0.1, which is then
    // at its four, and a fourth address is refused for the host
    for (const n of [1, 2])
      authorizeFrom(server, '127.0.0.3', `${hung.base}/other/${n}.json`).catch(() => {});
    await until(() => hung.conns - base >= 4, 'the third address\'s fetches under way');
    const d = await authorizeFrom(server, '127.0.0.4', `${hung.base}/other/3.json`);
    assert.equal(d.status, 503, d.text);
    assert.match(d.text, /4 fetches from &#39;127\.0\.0\.1&#39; are under way, the most one host may have/);
    assert.equal(hung.conns - base, 4);
    await server.waitLog(/oauth client-document-busy client="http:\/\/127\.0\.0\.1:\d+\/other\/3\.json" addr=127\.0\.0\.4 /);
  } finally {
    await stopCleanly(server);
  }
});

test('a document whose fetch failed is answered with that failure for a while, not fetched again', async () => {
  const server = await startServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: '1', OAUTH_CIMD_TIMEOUT_SECONDS: '1' } });
  try {
    const id = `${hung.base}/remembered.json`;
    const base = hung.conns;
    const first = await authorizeFrom(server, '127.0.0.1', id);
    assert.equal(first.status, 401, first.text);
    assert.match(first.text, /no complete answer within \d+ ms of the start/);
    assert.equal(hung.conns - base, 1);
    await server.waitLog(refusedLine('after_fetch', id, '127.0.0.1', 'no complete answer within 1000 ms of the start'));
    // again, from another address: the same failure, said to be remembered, and no connection
    const again = await authorizeFrom(server, '127.0.0.2', id);
    assert.equal(hung.conns - base, 1, 'fetched again');
    assert.equal(again.status, 401, again.text);
    assert.match(again.text, /no complete answer within 1000 ms of the start/);
    assert.match(again.text, /it is not fetched again for (59|60) s/);
    // nothing was sent this time, and the log says so, with the reason of the fetch before
    await server.waitLog(refusedLine('before_fetch', id, '127.0.0.2', 'no complete answer within 1000 ms of the start (the answer of a fetch'));
  } finally {
    await stopCleanly(server);
  }
});

test('a document refused before any fetch is logged with its reason, and nothing is fetched', async () => {
  // production mode: no loopback documents; one new client an hour per address
  const server = await startServer({ env: { OAUTH_REGISTER_PER_ADDRESS: '1' } });
  try {
    const base = hung.conns, fetchedBefore = good.fetched;
    // Every host below is a loopback address literal, and the https:// ones name the hung
    // server's port: a broken shape rule then meets the address rule (public addresses only) and
    // no resolver, and past that would reach only the hung server, whose connections are counted.
    // The same shapes naming a host are checked as pure rules in tests/unit/test_cimd.c.
    const lo = hung.base.replace('http://', 'https://');
    const long = `${lo}/${'a'.repeat(2100)}.json`;
    const cases = [
      // [client_id, what the log shows of it, the reason]
      [`${good.base}/client.json`, null, "must be an https:// URL"],
      [`${hung.base}/client.json`, null, 'must be an https:// URL'],
      // the private, link-local and other address classes are checked as pure policy in
      // tests/unit/test_cimd.c
      ['https://127.0.0.1/client.json', null, 'client metadata is fetched from public addresses only'],
      ['https://[::1]/client.json', null, 'client metadata is fetched from public addresses only'],
      ['https://127.0.0.1:8443/client.json', null, 'client metadata is fetched from public addresses only'],
      [`${lo}/`, null, 'must have a path other than /'],
      [lo.replace('https://', 'https://user:pw@') + '/client.json', null, 'must not carry a user name or password'],
      [`${lo}/client.json#x`, null, 'must not have a fragment'],
      [`${lo}/../client.json`, null, 'must not have . or .. path segments'],
      [lo.replace('https://', 'HTTPS://') + '/client.json', null, 'must be an https:// URL'],
      [long, long.slice(0, 200), 'is longer than 2048 bytes'],
      // a stranger's quote or newline cannot end the value or the line
      [`${lo}/a"b\nc.json`, `${lo}/a\\"b\\x0ac.json`, 'holds characters a URL may not'],
    ];
    for (const [id, shown, reason] of cases) {
      const r = await authorizeFrom(server, '127.0.0.2', id);
      assert.equal(r.status, 401, `${id}: ${r.text.slice(0, 500)}`);
      assert.match(r.text, /could not be used/, id);
      await server.waitLog(refusedLine('before_fetch', shown ?? id, '127.0.0.2', reason));
    }
    // the quota of new clients: this address registered one this hour
    await registerPublic(server, [CB]);
    const q = await authorizeFrom(server, '127.0.0.1', `${lo}/quota.json`);
    assert.equal(q.status, 429, q.text);
    await server.waitLog(refusedLine('before_fetch', `${lo}/quota.json`, '127.0.0.1',
      'this address brought 1 new apps in the last hour; try again in'));
    assert.equal(hung.conns - base, 0, 'a connection was made');
    assert.equal(good.fetched - fetchedBefore, 0, 'a document was fetched');
    assert.doesNotMatch(server.stderr(), /client-document-refused stage=after_fetch/);
    // one line per refusal, each whole
    const lines = server.stderr().split('\n').filter((l) => l.includes('client-document-refused'));
    assert.equal(lines.length, cases.length + 1, lines.join('\n'));
  } finally {
    await stopCleanly(server);
  }
});

test('a document refused after its fetch is logged with its reason', async () => {
  const server = await startServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: '1' } });
  const bad = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ client_id: 'https://someone.else/client.json', redirect_uris: [CB] }));
  });
  await new Promise((resolve) => bad.listen(0, '127.0.0.1', resolve));
  try {
    const id = `http://127.0.0.1:${bad.address().port}/client.json`;
    const r = await authorizeFrom(server, '127.0.0.3', id);
    assert.equal(r.status, 401, r.text);
    await server.waitLog(refusedLine('after_fetch', id, '127.0.0.3', "client_id 'https://someone.else/client.json' is not the document's URL"));
  } finally {
    bad.closeAllConnections();
    bad.close();
    await stopCleanly(server);
  }
});
