// The rotation overlap of refresh tokens (OAUTH_REFRESH_REUSE_SECONDS, OAUTH_REFRESH_REUSE_MAX;
// docs/OAUTH.md): the official SDK's OAuth client making 2 and then 5 tool calls at once after its
// access token stopped working, each call refreshing with the same refresh token, as a model's
// parallel tool calls do; all succeed and the user keeps one grant. Then what the overlap does
// not admit, each ending the grant: a reuse after the window, one reuse past the cap, a reuse by
// another client; and a confidential client's reuse without its secret, refused before the token
// is looked at.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

import { startServer, rpc, cli, tempDir, removeDataDir } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';
import {
  CookieJar, pkce, request, setPassword, register, registerPublic, authorizeParams, authorizeAndApprove,
  approveAt, signIn, tokenRequest, obtainTokens,
} from '../lib/oauth.mjs';

const PASSWORD = 'parallel calls refresh at once';
const CB = 'http://127.0.0.1:9/callback'; // never contacted: redirects are read, not followed
const PING = { jsonrpc: '2.0', id: 1, method: 'ping' };
const ACCESS = /^smcp_at_[A-Za-z0-9_-]{43}$/;
const REFRESH = /^smcp_rt_[A-Za-z0-9_-]{43}$/;

async function stopCleanly(s) {
  const { code, signal } = await s.stop();
  assertNoSanitizerReport(s.stderr(), 'server');
  assert.equal(signal, null, `server killed by ${signal}:\n${s.stderr()}`);
  assert.equal(code, 0, `server exited ${code}:\n${s.stderr()}`);
}

// The user's OAuth grants to the app named name, as `token list` shows them.
function grantsOf(srv, name) {
  const list = cli(['token', 'list', '--data-dir', srv.dataDir]);
  assert.equal(list.status, 0, list.stderr);
  return list.stdout.split('\n').filter((l) => l.includes(name) && /\boauth\b/.test(l));
}

const refresh = (srv, client_id, refresh_token, extra = {}, options) =>
  tokenRequest(srv, { grant_type: 'refresh_token', refresh_token, client_id, ...extra }, options);
const mcpStatus = async (srv, token) => (await rpc(srv, PING, { token })).status;
const revokeAccess = (srv, client_id, token) => request(srv, '/revoke', { form: { token, client_id } });
// the server's log: its lines that include what
const logLines = (srv, what) => (srv.stderr() + srv.stdout()).split('\n').filter((l) => l.includes(what));
// Those lines once there are n that pass ok: the log comes through a pipe of its own, which may
// be read after the response that followed the line. Bounded: 30 s.
async function logged(srv, what, ok = () => true, n = 1) {
  let lines = [];
  for (let i = 0; i < 1500; i++) {
    lines = logLines(srv, what).filter(ok);
    if (lines.length >= n) return lines;
    await sleep(20);
  }
  assert.fail(`${n} log lines "${what}" expected, ${lines.length} seen:\n${srv.stderr()}`);
}

// What a client keeps between runs, in memory, as in tests/e2e/oauth.test.mjs; the authorization
// URL the SDK would open in a browser is recorded, and the test opens it over HTTP.
class MemoryProvider {
  constructor(clientName) {
    this._clientName = clientName;
    this.authUrls = [];
  }

  get redirectUrl() { return CB; }
  get clientMetadata() {
    return { client_name: this._clientName, redirect_uris: [CB], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none' };
  }

  state() { return randomBytes(16).toString('base64url'); }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  redirectToAuthorization(url) { this.authUrls.push(new URL(url)); }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'tokens') this._tokens = undefined;
    if (scope === 'all' || scope === 'client') this._client = undefined;
  }
}

// A fetch for the SDK that records its token requests ({form, status}) and, once hold(n) is
// called, keeps the next n refresh requests back until all n have been made: so that every one
// of n calls at once has read the same refresh token before any refresh is answered, as when the
// calls of a real client race. Bounded by the test's timeout.
function gatedFetch() {
  let gate = null;
  const refreshes = [];
  const f = async (url, init = {}) => {
    const u = new URL(url);
    const form = init.body instanceof URLSearchParams ? init.body : new URLSearchParams(init.body ? String(init.body) : '');
    const isRefresh = (init.method || 'GET') === 'POST' && u.pathname === '/token' && form.get('grant_type') === 'refresh_token';
    const entry = isRefresh ? { form } : null;
    if (entry) refreshes.push(entry);
    if (entry && gate) {
      const g = gate;
      await new Promise((resolve) => {
        g.waiting.push(resolve);
        if (g.waiting.length === g.n) { gate = null; for (const r of g.waiting) r(); }
      });
    }
    const res = await fetch(url, init);
    if (entry) entry.status = res.status;
    return res;
  };
  f.hold = (n) => { gate = { n, waiting: [] }; };
  f.refreshes = refreshes;
  return f;
}

let server;
before(async () => {
  // a window far longer than any test here takes, so that no reuse below falls out of it on a
  // loaded machine; the cap is the default (5)
  server = await startServer({ env: { OAUTH_REFRESH_REUSE_SECONDS: '300', OAUTH_REGISTER_PER_ADDRESS: '1000' } });
  setPassword(server, 'admin', PASSWORD);
});
after(async () => { if (server) await stopCleanly(server); });

describe('parallel refreshes through the SDK', () => {
  const APP = 'Parallel Calls App';
  let provider, client, fetchFn;

  before(async () => {
    provider = new MemoryProvider(APP);
    fetchFn = gatedFetch();
    const transportOf = () => new StreamableHTTPClientTransport(new URL(server.mcpUrl), { authProvider: provider, fetch: fetchFn });
    // the SDK's own sign-in: discovery, registration, the authorization URL, then the code
    const first = new Client({ name: 'oauth-refresh-test', version: '1.0.0' });
    const transport = transportOf();
    await assert.rejects(first.connect(transport), (e) => e instanceof UnauthorizedError);
    assert.equal(provider.authUrls.length, 1);
    const authUrl = provider.authUrls[0];
    const a = await approveAt(server, new CookieJar(), authUrl.pathname + authUrl.search, { password: PASSWORD });
    assert.ok(a.code, `no code in ${a.location}`);
    await transport.finishAuth(a.code);
    await first.close();
    assert.match(provider.tokens().refresh_token, REFRESH);
    client = new Client({ name: 'oauth-refresh-test', version: '1.0.0' });
    await client.connect(transportOf());
    assert.equal((await client.callTool({ name: 'server_info', arguments: {} })).structuredContent.user, 'admin');
  });
  after(async () => { await client?.close(); });

  // The access token stops working (revoked, RFC 7009: as if it had expired, without waiting for
  // the clock), then n tool calls at once: each gets 401 and refreshes with the same token.
  async function callsAtOnce(n) {
    const before = provider.tokens();
    assert.equal((await revokeAccess(server, provider.clientInformation().client_id, before.access_token)).status, 200);
    assert.equal(await mcpStatus(server, before.access_token), 401);
    const from = fetchFn.refreshes.length;
    const reusesBefore = logLines(server, 'oauth refresh-reuse').length;
    fetchFn.hold(n);
    const results = await Promise.allSettled(Array.from({ length: n }, () => client.callTool({ name: 'server_info', arguments: {} })));
    for (const r of results) {
      assert.equal(r.status, 'fulfilled', String(r.reason?.stack ?? r.reason));
      assert.equal(r.value.structuredContent.user, 'admin');
    }
    const sent = fetchFn.refreshes.slice(from);
    assert.equal(sent.length, n, 'one refresh a call');
    for (const s of sent) {
      assert.equal(s.form.get('refresh_token'), before.refresh_token, 'every call refreshed with the same token');
      assert.equal(s.status, 200);
    }
    // one rotation, n - 1 reuses within the window, logged without a token; no replay
    const reuses = (await logged(server, 'oauth refresh-reuse', () => true, reusesBefore + n - 1)).slice(reusesBefore);
    assert.equal(reuses.length, n - 1, reuses.join('\n'));
    for (const l of reuses) {
      assert.match(l, / info oauth refresh-reuse user=admin client="[^"]+" reuse=[1-4] max=5 window_s=300$/);
      assert.doesNotMatch(l, /smcp_[ar]t_/);
    }
    assert.deepEqual(logLines(server, 'oauth replay'), []);
    // the user still has exactly one grant to the app, and its tokens work
    const grants = grantsOf(server, APP);
    assert.equal(grants.length, 1, grants.join('\n'));
    assert.match(grants[0], /\bactive\b/);
    const now = provider.tokens();
    assert.notEqual(now.refresh_token, before.refresh_token);
    assert.equal(await mcpStatus(server, now.access_token), 200);
    assert.equal((await client.callTool({ name: 'server_info', arguments: {} })).structuredContent.user, 'admin');
  }

  test('two tool calls at once after the access token stopped working: both refresh with one token, both succeed, one grant', { timeout: 120000 }, async () => {
    await callsAtOnce(2);
  });

  test('then five at once: all succeed, one grant', { timeout: 120000 }, async () => {
    await callsAtOnce(5);
  });
});

describe('what the overlap does not admit ends the grant', () => {
  let jar;
  before(async () => {
    jar = new CookieJar();
    assert.equal((await signIn(server, jar, { name: 'admin', password: PASSWORD })).status, 303);
  });

  // An app signed in, its first refresh token rotated once: {client, t0 (the first pair), r1 (the
  // rotated one)}.
  async function rotatedOnce(name, { srv = server, signedIn = jar } = {}) {
    const client = await registerPublic(srv, [CB], name);
    const { tokens: t0 } = await obtainTokens(srv, { jar: signedIn, client });
    const r1 = await refresh(srv, client.client_id, t0.refresh_token);
    assert.equal(r1.status, 200, r1.text);
    return { client, t0, r1: r1.body };
  }

  test(`the cap: five reuses within the window each get a fresh pair; the sixth is refused and the grant ends with every fork`, async () => {
    const APP = 'Capped App';
    const { client, t0, r1 } = await rotatedOnce(APP);
    const pairs = [r1];
    for (let i = 1; i <= 5; i++) {
      const r = await refresh(server, client.client_id, t0.refresh_token);
      assert.equal(r.status, 200, `reuse ${i}: ${r.text}`);
      assert.match(r.body.access_token, ACCESS);
      assert.match(r.body.refresh_token, REFRESH);
      assert.ok(pairs.every((p) => p.refresh_token !== r.body.refresh_token && p.access_token !== r.body.access_token), 'a fresh pair');
      pairs.push(r.body);
    }
    for (const p of pairs) assert.equal(await mcpStatus(server, p.access_token), 200);
    const over = await refresh(server, client.client_id, t0.refresh_token);
    assert.equal(over.status, 400);
    assert.equal(over.body.error, 'invalid_grant');
    assert.match(over.body.error_description, /grant is revoked/);
    for (const p of pairs) {
      assert.equal(await mcpStatus(server, p.access_token), 401);
      assert.equal((await refresh(server, client.client_id, p.refresh_token)).body.error, 'invalid_grant');
    }
    assert.deepEqual(grantsOf(server, APP), []);
    await logged(server, 'oauth replay', (l) => l.includes(client.client_id) && /reason="the refresh token was reused more than 5 times"/.test(l));
  });

  test('another client presenting a token rotated moments ago: refused, and the grant ends', async () => {
    const APP = 'Owner App';
    const { client, t0, r1 } = await rotatedOnce(APP);
    const stranger = await registerPublic(server, [CB], 'Stranger App');
    const stolen = await refresh(server, stranger.client_id, t0.refresh_token);
    assert.equal(stolen.status, 400);
    assert.equal(stolen.body.error, 'invalid_grant');
    assert.equal(await mcpStatus(server, r1.access_token), 401);
    assert.equal((await refresh(server, client.client_id, r1.refresh_token)).body.error, 'invalid_grant');
    assert.equal((await refresh(server, client.client_id, t0.refresh_token)).body.error, 'invalid_grant');
    assert.deepEqual(grantsOf(server, APP), []);
    await logged(server, 'oauth replay', (l) => l.includes(stranger.client_id) && /reason="the spent refresh token came from another client"/.test(l));
  });

  test('a confidential client: a reuse without its secret, or with a wrong one, is refused before the token is looked at; with it, the overlap applies', async () => {
    const APP = 'Confidential Overlap App';
    const reg = await register(server, { client_name: APP, redirect_uris: [CB], token_endpoint_auth_method: 'client_secret_post',
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] });
    assert.equal(reg.status, 201, reg.text);
    const { client_id, client_secret } = reg.body;
    const { verifier, challenge } = pkce();
    const a = await authorizeAndApprove(server, jar, authorizeParams(server, { client_id, redirect_uri: CB, challenge,
      scope: 'sandbox runs offline_access' }));
    const t0 = await tokenRequest(server, { grant_type: 'authorization_code', code: a.code, code_verifier: verifier,
      redirect_uri: CB, client_id, client_secret, resource: server.mcpUrl });
    assert.equal(t0.status, 200, t0.text);
    const r1 = await refresh(server, client_id, t0.body.refresh_token, { client_secret });
    assert.equal(r1.status, 200, r1.text);
    for (const extra of [{}, { client_secret: `${client_secret}x` }]) {
      const r = await refresh(server, client_id, t0.body.refresh_token, extra);
      assert.equal(r.status, 401, JSON.stringify(extra));
      assert.equal(r.body.error, 'invalid_client');
    }
    assert.equal(await mcpStatus(server, r1.body.access_token), 200, 'the grant stands');
    const again = await refresh(server, client_id, t0.body.refresh_token, { client_secret });
    assert.equal(again.status, 200, again.text);
    assert.equal(await mcpStatus(server, again.body.access_token), 200);
    assert.equal(grantsOf(server, APP).length, 1);
  });

  describe('after the window', () => {
    let short, shortJar;
    before(async () => {
      // a window of one second, with a cap the probe below cannot reach in it
      short = await startServer({ env: { OAUTH_REFRESH_REUSE_SECONDS: '1', OAUTH_REFRESH_REUSE_MAX: '100',
        OAUTH_REGISTER_PER_ADDRESS: '1000' } });
      setPassword(short, 'admin', PASSWORD);
      shortJar = new CookieJar();
      assert.equal((await signIn(short, shortJar, { name: 'admin', password: PASSWORD })).status, 303);
    });
    after(async () => { if (short) await stopCleanly(short); });

    test('a reuse of a rotated token after the window revokes the grant: its tokens and the next refresh fail', async () => {
      const APP = 'Late App';
      const { client, t0, r1 } = await rotatedOnce(APP, { srv: short, signedIn: shortJar });
      // A probe rotated after it, on an app of its own: once a reuse of the probe's token is no
      // longer admitted, the window of the token rotated before it has passed too.
      const probe = await rotatedOnce('Probe App', { srv: short, signedIn: shortJar });
      let last;
      for (let i = 0; i < 600; i++) {
        last = await refresh(short, probe.client.client_id, probe.t0.refresh_token);
        if (last.status !== 200) break;
        await sleep(100);
      }
      assert.equal(last.status, 400, 'the probe saw the window pass');
      assert.equal(last.body.error, 'invalid_grant');
      await logged(short, 'oauth replay', (l) => l.includes(probe.client.client_id) && /reason="the refresh token was used before"/.test(l));
      assert.equal(await mcpStatus(short, r1.access_token), 200, 'until the replay');
      const late = await refresh(short, client.client_id, t0.refresh_token);
      assert.equal(late.status, 400);
      assert.equal(late.body.error, 'invalid_grant');
      assert.match(late.body.error_description, /grant is revoked/);
      assert.equal(await mcpStatus(short, r1.access_token), 401);
      assert.equal(await mcpStatus(short, t0.access_token), 401);
      const next = await refresh(short, client.client_id, r1.refresh_token);
      assert.equal(next.status, 400);
      assert.equal(next.body.error, 'invalid_grant');
      assert.deepEqual(grantsOf(short, APP), []);
      const warn = await logged(short, 'oauth replay', (l) => l.includes(client.client_id));
      assert.equal(warn.length, 1, warn.join('\n'));
      assert.match(warn[0], / warn oauth replay client="[^"]+" what=refresh token reason="the refresh token was used before" revoked="the grant is revoked/);
      assert.doesNotMatch(short.stderr() + short.stdout(), /smcp_rt_[A-Za-z0-9_-]{43}/, 'no refresh token in the log');
    });
  });
});

test('the settings are bounded: a window over 300 s, or a cap of 0 or over 100, stops the start naming it', () => {
  const dir = tempDir();
  try {
    for (const [k, v, range] of [['OAUTH_REFRESH_REUSE_SECONDS', '301', '0 and 300'], ['OAUTH_REFRESH_REUSE_SECONDS', '-1', '0 and 300'],
      ['OAUTH_REFRESH_REUSE_MAX', '0', '1 and 100'], ['OAUTH_REFRESH_REUSE_MAX', '101', '1 and 100']]) {
      const r = cli(['serve', '--listen', '127.0.0.1:0', '--data-dir', dir, '--env-file', '/dev/null'], { env: { [k]: v }, timeout: 60000 });
      assert.equal(r.status, 2, `${k}=${v}: ${r.stderr}`);
      assert.ok(r.stderr.includes(`${k} '${v}' is not a number between ${range}`), r.stderr);
    }
  } finally {
    removeDataDir(dir);
  }
});
