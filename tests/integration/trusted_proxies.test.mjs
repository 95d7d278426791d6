// Per-address limits behind a reverse proxy or tunnel. Caddy, cloudflared and tailscale serve
// connect from 127.0.0.1 and name the client in X-Forwarded-For; without TRUSTED_PROXIES every
// client then had the proxy's address, so one stranger's registrations (or sign-in guesses)
// used up the quota of everyone. With TRUSTED_PROXIES=127.0.0.1 the server counts the address
// the proxy forwarded, walking X-Forwarded-For from the right; a client that is not a trusted
// proxy is counted by its own address, whatever it sends, and without the setting the header
// is never read.
//
// The addresses are loopback ones (all of 127/8 is on lo): requests leave from 127.0.0.1 (the
// "proxy") or 127.0.0.2 (a stranger connecting directly) by binding the client's socket.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { startServer } from '../lib/server.mjs';
import { assertNoSanitizerReport, httpRequest } from '../lib/http.mjs';

const CB = 'http://127.0.0.1:9/callback'; // never contacted

// POST /register from localAddress with the X-Forwarded-For values xff (an array: one header
// each); resolves {status, headers, text, body}.
function registerFrom(server, localAddress, xff = []) {
  const body = JSON.stringify({ client_name: 'c', redirect_uris: [CB], token_endpoint_auth_method: 'none' });
  const headers = [['content-type', 'application/json'], ['content-length', String(Buffer.byteLength(body))]];
  for (const v of xff) headers.push(['x-forwarded-for', v]);
  return httpRequest(server, { path: '/register', headers: headers.flat(), body, localAddress });
}

async function stopCleanly(s) {
  const { code, signal } = await s.stop();
  assertNoSanitizerReport(s.stderr(), 'server');
  assert.equal(signal, null, `server killed by ${signal}:\n${s.stderr()}`);
  assert.equal(code, 0, `server exited ${code}:\n${s.stderr()}`);
}

describe('TRUSTED_PROXIES=127.0.0.1', () => {
  let server;
  before(async () => {
    server = await startServer({ env: { TRUSTED_PROXIES: '127.0.0.1', OAUTH_REGISTER_PER_ADDRESS: '2' } });
  });
  after(async () => { if (server) await stopCleanly(server); });

  test('the quota of one forwarded address does not refuse another forwarded through the same proxy', async () => {
    for (let i = 0; i < 2; i++)
      assert.equal((await registerFrom(server, '127.0.0.1', ['203.0.113.1'])).status, 201);
    const refused = await registerFrom(server, '127.0.0.1', ['203.0.113.1']);
    assert.equal(refused.status, 429, refused.text);
    assert.match(refused.body.error_description, /this address registered 2 clients in the last hour/);
    // the refusal names the client, not the proxy
    await server.waitLog(/oauth registrations-refused addr=203\.0\.113\.1 /);
    assert.doesNotMatch(server.stderr(), /registrations-refused addr=127\.0\.0\.1 /);
    // another client behind the same proxy registers as ever
    const other = await registerFrom(server, '127.0.0.1', ['203.0.113.2']);
    assert.equal(other.status, 201, other.text);
    assert.match(server.stderr(), /http listening .* trusted_proxies=1\b/);
  });

  test('a client cannot pick its address: entries it wrote left of the one the proxy appended do not count', async () => {
    // "spoofed, real": the proxy appended 203.0.113.1 (refused above); what the client wrote
    // before it is not read, whether in the same header or an earlier one
    const chained = await registerFrom(server, '127.0.0.1', ['198.51.100.9, 203.0.113.1']);
    assert.equal(chained.status, 429, chained.text);
    const twoHeaders = await registerFrom(server, '127.0.0.1', ['198.51.100.9', '203.0.113.1']);
    assert.equal(twoHeaders.status, 429, twoHeaders.text);
    // nor does naming the trusted proxy itself in between
    const viaProxy = await registerFrom(server, '127.0.0.1', ['198.51.100.9, 127.0.0.1, 203.0.113.1']);
    assert.equal(viaProxy.status, 429, viaProxy.text);
    // IPv6 with brackets and a port, and its /64 as one address
    for (const v of ['[2001:db8:1:2::7]:4431', '2001:db8:1:2::8'])
      assert.equal((await registerFrom(server, '127.0.0.1', [v])).status, 201);
    assert.equal((await registerFrom(server, '127.0.0.1', ['[2001:db8:1:2::9]'])).status, 429);
    await server.waitLog(/oauth registrations-refused addr=2001:db8:1:2::\/64 /);
  });

  test('an entry that is no address stops the walk at the proxy; it never counts as a client of its own', async () => {
    // a garbage entry right of the client leaves the proxy's own address as the client:
    // 127.0.0.1's quota, shared by such requests, never a fresh one a client could choose
    for (let i = 0; i < 2; i++)
      assert.equal((await registerFrom(server, '127.0.0.1', [`203.0.113.${50 + i}, unknown`])).status, 201);
    const r = await registerFrom(server, '127.0.0.1', ['203.0.113.52, bogus']);
    assert.equal(r.status, 429, r.text);
    await server.waitLog(/oauth registrations-refused addr=127\.0\.0\.1 /);
  });

  test('a client that is not a trusted proxy is counted by its own address, its X-Forwarded-For ignored', async () => {
    for (let i = 0; i < 2; i++)
      assert.equal((await registerFrom(server, '127.0.0.2', [`203.0.113.${10 + i}`])).status, 201);
    const r = await registerFrom(server, '127.0.0.2', ['203.0.113.12']);
    assert.equal(r.status, 429, r.text);
    await server.waitLog(/oauth registrations-refused addr=127\.0\.0\.2 /);
    assert.doesNotMatch(server.stderr(), /addr=203\.0\.113\.1[0-2] /);
  });
});

describe('TRUSTED_PROXIES unset', () => {
  let server;
  before(async () => { server = await startServer({ env: { OAUTH_REGISTER_PER_ADDRESS: '2' } }); });
  after(async () => { if (server) await stopCleanly(server); });

  test('X-Forwarded-For is never read: every request from 127.0.0.1 shares its quota', async () => {
    for (let i = 0; i < 2; i++)
      assert.equal((await registerFrom(server, '127.0.0.1', [`203.0.113.${20 + i}`])).status, 201);
    const r = await registerFrom(server, '127.0.0.1', ['203.0.113.22']);
    assert.equal(r.status, 429, r.text);
    await server.waitLog(/oauth registrations-refused addr=127\.0\.0\.1 /);
  });
});

// The error a server started with env stops with (a server that starts anyway is stopped).
async function startFailure(env) {
  let server;
  try {
    server = await startServer({ env });
  } catch (e) {
    return e.message;
  }
  await server.stop();
  assert.fail(`the server started with ${JSON.stringify(env)}`);
}

test('a TRUSTED_PROXIES entry that is no address or CIDR stops the start, naming it', async () => {
  assert.match(await startFailure({ TRUSTED_PROXIES: '127.0.0.1, 10.0.0.0/33' }),
    /TRUSTED_PROXIES entry '10\.0\.0\.0\/33' is not an IPv4 or IPv6 address or CIDR/);
  const msg = await startFailure({ TRUSTED_PROXIES: 'localhost' });
  assert.match(msg, /TRUSTED_PROXIES entry 'localhost'/);
  assertNoSanitizerReport(msg, 'server');
});
