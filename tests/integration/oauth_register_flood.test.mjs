// Dynamic Client Registration under a flood. One address once reached the 10,000-client cap in
// 92 s, after which every real client (Claude, ChatGPT) got 503 for a day. Now an address (IPv4,
// IPv6 /64) may register OAUTH_REGISTER_PER_ADDRESS clients an hour (429 beyond, while other
// addresses go on), and when OAUTH_CLIENTS_MAX clients no user approved are kept, the oldest of
// them makes room for the newcomer: a client a user approved is never the one evicted.
//
// The addresses are loopback ones (all of 127/8 is on lo): requests leave from 127.0.0.1 or
// 127.0.0.2 by binding the client's socket.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { startServer } from '../lib/server.mjs';
import { assertNoSanitizerReport, httpRequest } from '../lib/http.mjs';
import {
  CookieJar, pkce, request, setPassword, signIn, authorizePath, authorizeParams, authorizeAndApprove,
  tokenRequest, isConsentPage,
} from '../lib/oauth.mjs';

const PASSWORD = 'correct horse battery staple';
const CB = 'http://127.0.0.1:9/callback'; // never contacted

// A request from localAddress (GET, or POST with json); resolves {status, headers, text, body}.
function sendFrom(server, localAddress, path, json) {
  const body = json === undefined ? undefined : JSON.stringify(json);
  const headers = body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {};
  return httpRequest(server, { method: body ? 'POST' : 'GET', path, headers, body, localAddress });
}

const registerFrom = (server, localAddress, name = 'flood') => sendFrom(server, localAddress, '/register',
  { client_name: name, redirect_uris: [CB], token_endpoint_auth_method: 'none' });

async function stopCleanly(s) {
  const { code, signal } = await s.stop();
  assertNoSanitizerReport(s.stderr(), 'server');
  assert.equal(signal, null, `server killed by ${signal}:\n${s.stderr()}`);
  assert.equal(code, 0, `server exited ${code}:\n${s.stderr()}`);
}

describe('per-address quota', () => {
  let server;
  before(async () => { server = await startServer({ env: { OAUTH_REGISTER_PER_ADDRESS: '5' } }); });
  after(async () => { if (server) await stopCleanly(server); });

  test('one address registering in a loop gets 429 with Retry-After after its quota; another address still registers', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await registerFrom(server, '127.0.0.1');
      assert.equal(r.status, 201, r.text);
      assert.match(r.body.client_id, /^cli_/);
    }
    for (let i = 0; i < 3; i++) {
      const r = await registerFrom(server, '127.0.0.1');
      assert.equal(r.status, 429, r.text);
      assert.equal(r.body.error, 'temporarily_unavailable');
      assert.match(r.body.error_description, /this address registered 5 clients in the last hour; try again in \d+ s/);
      const retry = Number(r.headers['retry-after']);
      assert.ok(retry > 0 && retry <= 3600, `Retry-After ${r.headers['retry-after']}`);
      assert.equal(r.headers['cache-control'], 'no-store');
    }
    // the greedy address's quota is its own: a real client elsewhere registers as ever
    const other = await registerFrom(server, '127.0.0.2', 'Claude');
    assert.equal(other.status, 201, other.text);
    assert.equal(other.body.client_name, 'Claude');
    assert.equal((await registerFrom(server, '127.0.0.1')).status, 429);
    assert.match(server.stderr(), /oauth registrations-refused addr=127\.0\.0\.1 per_hour=5 retry_after=\d+/);
    assert.doesNotMatch(server.stderr(), /registrations-refused addr=127\.0\.0\.2/);
  });
});

describe('per-address quota for Client ID Metadata Documents', () => {
  // A new document URL is a new client as much as a registration is: the same quota applies to
  // the documents an address makes the server fetch and keep, and it is checked before fetching.
  let server, site;
  const fetched = [];
  before(async () => {
    site = http.createServer((req, res) => {
      fetched.push(req.url);
      const id = `http://127.0.0.1:${site.address().port}${req.url}`;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ client_id: id, client_name: `Doc ${req.url}`, redirect_uris: [CB],
        token_endpoint_auth_method: 'none' }));
    });
    await new Promise((resolve) => site.listen(0, '127.0.0.1', resolve));
    server = await startServer({ env: { OAUTH_REGISTER_PER_ADDRESS: '2', OAUTH_CIMD_ALLOW_LOOPBACK: '1' } });
  });
  after(async () => {
    if (server) await stopCleanly(server);
    await new Promise((resolve) => site?.close(resolve));
  });

  const authorizeFrom = (addr, n) => sendFrom(server, addr, authorizePath(authorizeParams(server, {
    client_id: `http://127.0.0.1:${site.address().port}/doc/${n}`, redirect_uri: CB, challenge: pkce().challenge })));

  test('an address past its quota of new documents gets a 429 page and no fetch; a known document and another address go on', async () => {
    for (const n of [1, 2]) {
      const r = await authorizeFrom('127.0.0.1', n);
      assert.equal(r.status, 200, r.text.slice(0, 300)); // the sign-in page: the document was taken
    }
    const refused = await authorizeFrom('127.0.0.1', 3);
    assert.equal(refused.status, 429);
    assert.match(refused.text, /this address brought 2 new apps in the last hour/);
    assert.deepEqual(fetched, ['/doc/1', '/doc/2']);
    // a document already kept is no new client
    assert.equal((await authorizeFrom('127.0.0.1', 1)).status, 200);
    assert.equal((await authorizeFrom('127.0.0.2', 3)).status, 200);
    assert.deepEqual(fetched, ['/doc/1', '/doc/2', '/doc/3']);
  });
});

describe('the table of unapproved clients', () => {
  let server, jar;
  before(async () => {
    server = await startServer({ env: { OAUTH_CLIENTS_MAX: '3', OAUTH_REGISTER_PER_ADDRESS: '1000' } });
    setPassword(server, 'admin', PASSWORD);
    jar = new CookieJar();
    const r = await signIn(server, jar, { name: 'admin', password: PASSWORD });
    assert.equal(r.status, 303, r.text);
  });
  after(async () => { if (server) await stopCleanly(server); });

  // /authorize for client_id: 'consent' (known, not yet approved), 'code' (approved), 'unknown'.
  async function state(client_id) {
    const r = await request(server, authorizePath(authorizeParams(server, { client_id, redirect_uri: CB, challenge: pkce().challenge })), { jar });
    if (r.status === 401 && /invalid_client/.test(r.text)) return 'unknown';
    if (r.status === 200 && isConsentPage(r.text)) return 'consent';
    if (r.status === 302 && r.location.searchParams.get('code')) return 'code';
    return `${r.status} ${r.text.slice(0, 200)}`;
  }

  test('when full, a new registration evicts the oldest unapproved one; an approved client survives any flood', async () => {
    // the oldest client of all, approved by the admin
    const approved = await registerFrom(server, '127.0.0.2', 'Approved');
    assert.equal(approved.status, 201);
    const { verifier, challenge } = pkce();
    const params = authorizeParams(server, { client_id: approved.body.client_id, redirect_uri: CB, challenge,
      scope: 'sandbox runs offline_access' });
    const a = await authorizeAndApprove(server, jar, params);
    assert.ok(a.code, `no code in ${a.location}`);
    const t = await tokenRequest(server, { grant_type: 'authorization_code', code: a.code, code_verifier: verifier,
      redirect_uri: CB, client_id: approved.body.client_id, resource: server.mcpUrl });
    assert.equal(t.status, 200, t.text);

    // three unapproved ones fill the table
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const r = await registerFrom(server, '127.0.0.1');
      assert.equal(r.status, 201, r.text);
      ids.push(r.body.client_id);
    }
    for (const id of ids) assert.equal(await state(id), 'consent', id);
    // the fourth is not refused: the oldest unapproved makes room
    const fourth = await registerFrom(server, '127.0.0.1');
    assert.equal(fourth.status, 201, fourth.text);
    assert.equal(await state(ids[0]), 'unknown');
    for (const id of [ids[1], ids[2], fourth.body.client_id]) assert.equal(await state(id), 'consent', id);
    assert.match(server.stderr(), new RegExp(`oauth client-evicted client="${ids[0]}" unapproved=3 max=3`));

    // a flood pushes out only unapproved clients, never the approved one
    for (let i = 0; i < 10; i++) assert.equal((await registerFrom(server, '127.0.0.1')).status, 201);
    assert.equal(await state(approved.body.client_id), 'code');
    const refreshed = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: t.body.refresh_token,
      client_id: approved.body.client_id });
    assert.equal(refreshed.status, 200, refreshed.text);
    for (const id of [...ids, fourth.body.client_id]) assert.equal(await state(id), 'unknown', id);
  });
});
