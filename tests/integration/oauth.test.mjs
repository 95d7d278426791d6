// The OAuth 2.1 authorization server, over plain HTTP with no redirect followed: metadata, the
// code flow and everything it refuses (PKCE, codes, redirect URIs, resources, clients, refresh
// replay, expiry, scopes, CSRF, open redirects, registrations, password guessing, sign-in
// floods from many addresses, which come from all over 127/8), the account
// page (with the user's own GitHub token) and the CLI's view of grants. The browser flow with the official SDK is in
// tests/e2e/oauth.test.mjs.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';

import { Agent, fetch as undiciFetch } from 'undici';

import { startServer, rpc, cli, tempDir, removeDataDir, sqlRows, sqlHex, dbDump, addUser } from '../lib/server.mjs';
import { assertNoSanitizerReport, parseMetrics } from '../lib/http.mjs';
import {
  CookieJar, pkce, sha256hex, request, forms, isSignInPage, isConsentPage, setPassword, register,
  registerPublic, authorizePath, authorizeParams, signIn, decide, authorizeAndApprove, tokenRequest,
  obtainTokens,
} from '../lib/oauth.mjs';

const PASSWORD = 'correct horse battery staple';
const SCOPES = ['sandbox', 'runs', 'offline_access'];
const PING = { jsonrpc: '2.0', id: 1, method: 'ping' };
const call = (name, args = {}) => ({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name, arguments: args } });
const ACCESS = /^smcp_at_[A-Za-z0-9_-]{43}$/;
const REFRESH = /^smcp_rt_[A-Za-z0-9_-]{43}$/;
const CB = 'http://127.0.0.1:9/callback'; // never contacted: redirects are read, not followed

async function stopCleanly(s) {
  const { code, signal } = await s.stop();
  assertNoSanitizerReport(s.stderr(), 'server');
  assert.equal(signal, null, `server killed by ${signal}:\n${s.stderr()}`);
  assert.equal(code, 0, `server exited ${code}:\n${s.stderr()}`);
}

let server;
let jar; // admin, signed in once: approvals below need no new sign-in
before(async () => {
  // every client below registers from 127.0.0.1: more than OAUTH_REGISTER_PER_ADDRESS's default
  // allows an address in an hour (that quota is oauth_register_flood.test.mjs's); no rotation
  // overlap, so that a refresh token replayed at once is a replay (the overlap is
  // oauth_refresh.test.mjs's)
  server = await startServer({ env: { OAUTH_REGISTER_PER_ADDRESS: '1000', OAUTH_REFRESH_REUSE_SECONDS: '0' } });
  setPassword(server, 'admin', PASSWORD);
  jar = new CookieJar();
  const r = await signIn(server, jar, { name: 'admin', password: PASSWORD });
  assert.equal(r.status, 303, r.text);
});
after(async () => { if (server) await stopCleanly(server); });

// /mcp with token: the HTTP status (and response).
const mcp = (token, message = PING) => rpc(server, message, { token });

// A client of its own and its first code (consent given by the signed-in admin).
async function codeFor({ scope = 'sandbox runs offline_access', redirect_uri = CB, name = 'test client', resource } = {}) {
  const client = await registerPublic(server, [redirect_uri], name);
  const { verifier, challenge } = pkce();
  const params = authorizeParams(server, { client_id: client.client_id, redirect_uri, challenge, scope, resource });
  const a = await authorizeAndApprove(server, jar, params);
  assert.ok(a.code, `no code in ${a.location}`);
  return { client, verifier, challenge, code: a.code, params, redirect_uri };
}

const exchange = (c, extra = {}) => tokenRequest(server, { grant_type: 'authorization_code', code: c.code,
  code_verifier: c.verifier, redirect_uri: c.redirect_uri, client_id: c.client.client_id, resource: server.mcpUrl, ...extra });

const refresh = (client, refresh_token, extra = {}) => tokenRequest(server, { grant_type: 'refresh_token',
  refresh_token, client_id: client.client_id, ...extra });

function assertFramingDenied(res, what) {
  assert.equal(res.headers.get('x-frame-options'), 'DENY', what);
  assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/, what);
}

describe('metadata', () => {
  test('protected resource metadata at both paths (RFC 9728)', async () => {
    for (const p of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const r = await request(server, p);
      assert.equal(r.status, 200, p);
      assert.match(r.headers.get('content-type'), /^application\/json/, p);
      assert.deepEqual(r.body, {
        resource: server.mcpUrl, authorization_servers: [server.url], scopes_supported: SCOPES,
        bearer_methods_supported: ['header'], resource_name: 'sandbox-mcp',
      }, p);
    }
  });

  test('authorization server metadata (RFC 8414) and its OpenID discovery alias: S256 only', async () => {
    const a = await request(server, '/.well-known/oauth-authorization-server');
    const o = await request(server, '/.well-known/openid-configuration');
    assert.equal(a.status, 200);
    assert.equal(o.status, 200);
    assert.match(a.headers.get('content-type'), /^application\/json/);
    assert.deepEqual(o.body, a.body);
    const m = a.body;
    assert.equal(m.issuer, server.url);
    assert.equal(m.authorization_endpoint, `${server.url}/authorize`);
    assert.equal(m.token_endpoint, `${server.url}/token`);
    assert.equal(m.registration_endpoint, `${server.url}/register`);
    assert.equal(m.revocation_endpoint, `${server.url}/revoke`);
    assert.deepEqual(m.response_types_supported, ['code']);
    assert.deepEqual(m.grant_types_supported, ['authorization_code', 'refresh_token']);
    assert.deepEqual(m.code_challenge_methods_supported, ['S256']);
    assert.deepEqual([...m.token_endpoint_auth_methods_supported].sort(), ['client_secret_basic', 'client_secret_post', 'none']);
    assert.deepEqual(m.scopes_supported, SCOPES);
    assert.equal(m.client_id_metadata_document_supported, true);
    assert.equal(m.authorization_response_iss_parameter_supported, true);
  });

  test('/mcp without a token: 401 naming the resource metadata and the scopes; a bad one adds invalid_token', async () => {
    const r = await mcp(null);
    assert.equal(r.status, 401);
    const h = r.headers.get('www-authenticate') ?? '';
    assert.match(h, /^Bearer /);
    assert.ok(h.includes(`resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp"`), h);
    assert.ok(h.includes('scope="sandbox runs offline_access"'), h);
    assert.doesNotMatch(h, /error=/);
    for (const token of ['smcp_at_' + 'A'.repeat(43), 'smcp_rt_' + 'A'.repeat(43), 'nonsense']) {
      const bad = await mcp(token);
      assert.equal(bad.status, 401, token);
      const b = bad.headers.get('www-authenticate') ?? '';
      assert.match(b, /error="invalid_token"/, token);
      assert.ok(b.includes(`resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp"`), b);
    }
  });
});

describe('the code flow', () => {
  test('sign-in page, consent page, code with state and iss, tokens that work on /mcp', async () => {
    const fresh = new CookieJar();
    const client = await registerPublic(server, [CB], 'Flow Test App');
    const { verifier, challenge } = pkce();
    const params = authorizeParams(server, { client_id: client.client_id, redirect_uri: CB, challenge,
      scope: 'sandbox runs offline_access', state: 'state-<&>-1' });
    // not signed in: the sign-in page, with a CSRF cookie for its forms
    const first = await request(server, authorizePath(params), { jar: fresh });
    assert.equal(first.status, 200);
    assert.ok(isSignInPage(first.text), first.text);
    assert.equal(first.location, null);
    const csrfCookie = first.headers.getSetCookie().find((c) => c.startsWith('smcp_csrf='));
    assert.ok(csrfCookie, 'a smcp_csrf cookie');
    assert.match(csrfCookie, /; HttpOnly/);
    assert.match(csrfCookie, /; SameSite=Lax/);
    assert.match(csrfCookie, /; Path=\//);
    assert.doesNotMatch(csrfCookie, /Secure/, 'http PUBLIC_URL: not Secure');
    const [pwForm, codeForm] = forms(first.text);
    assert.deepEqual(pwForm.inputs.sort(), ['csrf', 'name', 'password', 'return_to']);
    assert.ok(codeForm.inputs.includes('code'));
    assert.equal(pwForm.fields.csrf, fresh.get('smcp_csrf'));
    assert.match(pwForm.fields.return_to, /^\/authorize\?/);
    // signing in goes back to the same authorization request
    const login = await signIn(server, fresh, { name: 'admin', password: PASSWORD, page: first.text });
    assert.equal(login.status, 303, login.text);
    const back = Object.fromEntries(login.location.searchParams);
    assert.equal(login.location.pathname, '/authorize');
    for (const k of Object.keys(params)) assert.equal(back[k], params[k], k);
    const session = login.headers.getSetCookie().find((c) => c.startsWith('smcp_session='));
    assert.ok(session, 'a session cookie');
    assert.match(session, /; HttpOnly/);
    assert.match(session, /; SameSite=Lax/);
    // the consent page names the app, the user, where it goes back to and what it asks for
    const consent = await request(server, login.location.pathname + login.location.search, { jar: fresh });
    assert.equal(consent.status, 200);
    assert.ok(isConsentPage(consent.text));
    assert.match(consent.text, /Flow Test App/);
    assert.match(consent.text, /127\.0\.0\.1/);
    assert.match(consent.text, /<strong>admin<\/strong>/);
    assert.match(consent.text, /registered itself/);
    assert.match(consent.text, /\(sandbox\)/);
    assert.match(consent.text, /\(runs\)/);
    assert.match(consent.text, /\(offline_access\)/);
    // approve: back to the client with the code, state unchanged and iss
    const ok = await decide(server, fresh, consent.text, 'approve');
    assert.equal(ok.status, 303);
    assert.equal(`${ok.location.origin}${ok.location.pathname}`, CB);
    const q = ok.location.searchParams;
    assert.match(q.get('code'), /^[A-Za-z0-9_-]{43}$/);
    assert.equal(q.get('state'), 'state-<&>-1');
    assert.equal(q.get('iss'), server.url);
    const t = await tokenRequest(server, { grant_type: 'authorization_code', code: q.get('code'), code_verifier: verifier,
      redirect_uri: CB, client_id: client.client_id, resource: server.mcpUrl });
    assert.equal(t.status, 200, t.text);
    assert.match(t.headers.get('content-type'), /^application\/json/);
    assert.equal(t.body.token_type, 'Bearer');
    assert.equal(t.body.expires_in, 3600);
    assert.equal(t.body.scope, 'sandbox runs offline_access');
    assert.match(t.body.access_token, ACCESS);
    assert.match(t.body.refresh_token, REFRESH);
    const info = await mcp(t.body.access_token, call('server_info'));
    assert.equal(info.status, 200, info.text);
    assert.equal(info.body.result.structuredContent.user, 'admin');
    // the approval is remembered: the next request for the same scopes needs no consent page
    const again = await request(server, authorizePath({ ...params, code_challenge: pkce().challenge, state: 's2' }), { jar: fresh });
    assert.equal(again.status, 302, again.text);
    assert.ok(again.location.searchParams.get('code'));
    assert.equal(again.location.searchParams.get('state'), 's2');
  });

  test('no scope asked: "sandbox runs" and no refresh token; without offline_access no refresh token', async () => {
    for (const scope of [null, 'sandbox runs']) {
      const c = await codeFor({ scope });
      const t = await exchange(c);
      assert.equal(t.status, 200, t.text);
      assert.equal(t.body.scope, 'sandbox runs');
      assert.equal(t.body.refresh_token, undefined);
    }
  });

  test('Deny goes back with access_denied, state and iss', async () => {
    const client = await registerPublic(server, [CB], 'Denied App');
    const params = authorizeParams(server, { client_id: client.client_id, redirect_uri: CB, challenge: pkce().challenge, state: 'deny-me' });
    const consent = await request(server, authorizePath(params), { jar });
    assert.ok(isConsentPage(consent.text), consent.text);
    const r = await decide(server, jar, consent.text, 'deny');
    assert.equal(r.status, 303);
    assert.equal(r.location.searchParams.get('error'), 'access_denied');
    assert.equal(r.location.searchParams.get('state'), 'deny-me');
    assert.equal(r.location.searchParams.get('iss'), server.url);
    assert.equal(r.location.searchParams.get('code'), null);
  });

  test('PKCE is required, S256 only; an unknown scope or response type goes back as an error', async () => {
    // to a client the user approved: before that the errors stay on the server's page (below)
    const { client } = await codeFor();
    const base = authorizeParams(server, { client_id: client.client_id, redirect_uri: CB, challenge: pkce().challenge, state: 'pk' });
    const cases = [
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ code_challenge: undefined, code_challenge_method: undefined }, 'invalid_request'],
      [{ code_challenge_method: undefined }, 'invalid_request'],
      [{ code_challenge: 'short' }, 'invalid_request'],
      [{ scope: 'sandbox admin' }, 'invalid_scope'],
      [{ response_type: 'token' }, 'unsupported_response_type'],
    ];
    for (const [change, error] of cases) {
      const r = await request(server, authorizePath({ ...base, ...change }), { jar });
      assert.equal(r.status, 302, JSON.stringify(change));
      assert.equal(r.location.searchParams.get('error'), error, JSON.stringify(change));
      assert.equal(r.location.searchParams.get('state'), 'pk');
      assert.equal(r.location.searchParams.get('iss'), server.url);
      assert.equal(r.location.searchParams.get('code'), null);
    }
  });
});

describe('errors before approval (RFC 9700 4.11.2)', () => {
  // Anyone may register a client with a redirect URI of their own: were /authorize's errors sent
  // there before any user approved the client, a link to this server would bounce a victim to it
  // (an open redirector with this server's name on it).
  const EVIL = 'https://evil.example/landing';
  const BAD = [
    [{ response_type: 'token' }, 'unsupported_response_type'],
    [{ code_challenge_method: 'plain' }, 'invalid_request'],
    [{ scope: 'sandbox admin' }, 'invalid_scope'],
    [{ resource: 'https://other.example/mcp' }, 'invalid_target'],
    [{ state: 'x'.repeat(3000) }, 'invalid_request'],
  ];

  test('a client no user approved gets its errors on the server\'s page, signed in or not, never a redirect', async () => {
    const client = await registerPublic(server, [EVIL], 'Bouncer');
    const base = authorizeParams(server, { client_id: client.client_id, redirect_uri: EVIL, challenge: pkce().challenge, state: 'bounce' });
    for (const [change, error] of BAD) {
      for (const j of [new CookieJar(), jar]) {
        const r = await request(server, authorizePath({ ...base, ...change }), { jar: j });
        assert.equal(r.status, 400, JSON.stringify(change).slice(0, 80));
        assert.equal(r.location, null, JSON.stringify(change).slice(0, 80));
        assert.match(r.text, new RegExp(error));
        assert.ok(!isSignInPage(r.text) && !isConsentPage(r.text));
      }
    }
    assert.match(server.stderr(), /oauth authorize-refused error=unsupported_response_type .* to=page/);
  });

  test('once the signed-in user approved it, the same errors go back to it; to anyone else they stay on the page', async () => {
    const { client } = await codeFor({ redirect_uri: EVIL, name: 'Approved' });
    const base = authorizeParams(server, { client_id: client.client_id, redirect_uri: EVIL, challenge: pkce().challenge, state: 'ok' });
    for (const [change, error] of BAD.slice(0, 4)) {
      const r = await request(server, authorizePath({ ...base, ...change }), { jar });
      assert.equal(r.status, 302, JSON.stringify(change));
      assert.equal(`${r.location.origin}${r.location.pathname}`, EVIL);
      assert.equal(r.location.searchParams.get('error'), error);
      assert.equal(r.location.searchParams.get('state'), 'ok');
      // a visitor who is not signed in has approved nothing
      const stranger = await request(server, authorizePath({ ...base, ...change }), { jar: new CookieJar() });
      assert.equal(stranger.status, 400, JSON.stringify(change));
      assert.equal(stranger.location, null);
    }
  });
});

describe('codes', () => {
  test('a wrong code_verifier is refused, and it spends the code', async () => {
    const c = await codeFor();
    const wrong = await exchange(c, { code_verifier: pkce().verifier });
    assert.equal(wrong.status, 400);
    assert.equal(wrong.body.error, 'invalid_grant');
    const tooShort = await exchange(await codeFor(), { code_verifier: 'abc' });
    assert.equal(tooShort.body.error, 'invalid_grant');
    const right = await exchange(c);
    assert.equal(right.status, 400);
    assert.equal(right.body.error, 'invalid_grant');
    assert.equal(right.body.access_token, undefined);
  });

  test('a code used twice is refused, and the tokens issued from it stop working', async () => {
    const c = await codeFor();
    const first = await exchange(c);
    assert.equal(first.status, 200, first.text);
    const { access_token, refresh_token } = first.body;
    assert.equal((await mcp(access_token)).status, 200);
    const second = await exchange(c);
    assert.equal(second.status, 400);
    assert.equal(second.body.error, 'invalid_grant');
    const after = await mcp(access_token);
    assert.equal(after.status, 401);
    assert.match(after.headers.get('www-authenticate'), /error="invalid_token"/);
    const r = await refresh(c.client, refresh_token);
    assert.equal(r.status, 400);
    assert.equal(r.body.error, 'invalid_grant');
  });

  test('a code goes only to the client it was issued to', async () => {
    const c = await codeFor();
    const other = await registerPublic(server, [CB]);
    const r = await exchange(c, { client_id: other.client_id });
    assert.equal(r.status, 400);
    assert.equal(r.body.error, 'invalid_grant');
  });

  test('an unknown code, a missing verifier, an unknown grant type', async () => {
    const c = await codeFor();
    assert.equal((await exchange(c, { code: 'A'.repeat(43) })).body.error, 'invalid_grant');
    const noVerifier = await tokenRequest(server, { grant_type: 'authorization_code', code: c.code, client_id: c.client.client_id });
    assert.equal(noVerifier.status, 400);
    assert.equal(noVerifier.body.error, 'invalid_request');
    const pw = await tokenRequest(server, { grant_type: 'password', username: 'admin', password: PASSWORD, client_id: c.client.client_id });
    assert.equal(pw.status, 400);
    assert.equal(pw.body.error, 'unsupported_grant_type');
  });
});

describe('redirect URIs', () => {
  test('at /authorize: one the client did not register gets an error page, never a redirect', async () => {
    const client = await registerPublic(server, [CB, 'https://app.example/cb']);
    for (const redirect_uri of ['https://evil.example/cb', 'https://app.example/cb/other', 'https://app.example/cb?x=1',
      'http://127.0.0.1:9/elsewhere', 'http://localhost:9/callback']) {
      const params = authorizeParams(server, { client_id: client.client_id, redirect_uri, challenge: pkce().challenge });
      for (const j of [jar, new CookieJar()]) {
        const r = await request(server, authorizePath(params), { jar: j });
        assert.equal(r.status, 400, redirect_uri);
        assert.equal(r.location, null, redirect_uri);
        assert.match(r.text, /redirect_uri/);
        assert.doesNotMatch(r.text, /action="\/login"/, 'no sign-in before the redirect URI is checked');
      }
    }
    // a client with two URIs must name one
    const none = authorizeParams(server, { client_id: client.client_id, redirect_uri: undefined, challenge: pkce().challenge });
    const r = await request(server, authorizePath(none), { jar });
    assert.equal(r.status, 400);
    assert.equal(r.location, null);
  });

  test('a loopback redirect URI may use another port (RFC 8252)', async () => {
    const c = await codeFor({ redirect_uri: 'http://127.0.0.1:9/callback' });
    const client = c.client;
    const other = 'http://127.0.0.1:54321/callback';
    const r = await authorizeAndApprove(server, jar, authorizeParams(server, { client_id: client.client_id, redirect_uri: other, challenge: pkce().challenge }));
    assert.equal(`${r.location.origin}${r.location.pathname}`, other);
    assert.ok(r.code);
  });

  test('at /token: a redirect_uri other than the authorization request\'s is refused', async () => {
    const c = await codeFor();
    const r = await exchange(c, { redirect_uri: 'http://127.0.0.1:10/callback' });
    assert.equal(r.status, 400);
    assert.equal(r.body.error, 'invalid_grant');
  });
});

describe('resources', () => {
  test('at /authorize: another resource goes back with invalid_target', async () => {
    const { client } = await codeFor(); // approved: errors go back to it
    for (const resource of ['https://other.example/mcp', `${server.url}/other`, `${server.url}/mcp/`]) {
      const params = authorizeParams(server, { client_id: client.client_id, redirect_uri: CB, challenge: pkce().challenge, resource, state: 'rs' });
      const r = await request(server, authorizePath(params), { jar });
      assert.equal(r.status, 302, resource);
      assert.equal(r.location.searchParams.get('error'), 'invalid_target', resource);
      assert.equal(r.location.searchParams.get('state'), 'rs');
      assert.equal(r.location.searchParams.get('code'), null);
    }
  });

  test('at /token: another resource is invalid_target, for a code and for a refresh', async () => {
    const c = await codeFor();
    const r = await exchange(c, { resource: 'https://other.example/mcp' });
    assert.equal(r.status, 400);
    assert.equal(r.body.error, 'invalid_target');
    const c2 = await codeFor();
    const t = await exchange(c2);
    assert.equal(t.status, 200);
    const rr = await refresh(c2.client, t.body.refresh_token, { resource: 'https://other.example/mcp' });
    assert.equal(rr.status, 400);
    assert.equal(rr.body.error, 'invalid_target');
    const unnamed = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: t.body.refresh_token });
    assert.equal(unnamed.status, 401, 'a refresh names its client');
    assert.equal(unnamed.body.error, 'invalid_client');
  });
});

describe('clients', () => {
  test('an unknown client_id: 401 invalid_client at /authorize (a page, no redirect) and at /token', async () => {
    const params = authorizeParams(server, { client_id: 'cli_doesnotexist', redirect_uri: CB, challenge: pkce().challenge });
    const r = await request(server, authorizePath(params), { jar });
    assert.equal(r.status, 401);
    assert.equal(r.location, null);
    assert.match(r.text, /invalid_client/);
    const t = await tokenRequest(server, { grant_type: 'authorization_code', code: 'A'.repeat(43), code_verifier: pkce().verifier,
      redirect_uri: CB, client_id: 'cli_doesnotexist' });
    assert.equal(t.status, 401);
    assert.equal(t.body.error, 'invalid_client');
    const missing = await request(server, '/authorize?response_type=code', { jar });
    assert.equal(missing.status, 400);
    assert.equal(missing.location, null);
  });

  test('a confidential client must present its secret, a public one must not', async () => {
    const reg = await register(server, { client_name: 'Confidential', redirect_uris: [CB], token_endpoint_auth_method: 'client_secret_basic' });
    assert.equal(reg.status, 201, reg.text);
    const { client_id, client_secret } = reg.body;
    assert.match(client_secret, /^[A-Za-z0-9_-]{40,}$/);
    const { verifier, challenge } = pkce();
    const a = await authorizeAndApprove(server, jar, authorizeParams(server, { client_id, redirect_uri: CB, challenge }));
    const form = { grant_type: 'authorization_code', code: a.code, code_verifier: verifier, redirect_uri: CB };
    const none = await tokenRequest(server, { ...form, client_id });
    assert.equal(none.status, 401);
    assert.equal(none.body.error, 'invalid_client');
    const wrong = await tokenRequest(server, form, { basic: [client_id, `${client_secret}x`] });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error, 'invalid_client');
    assert.match(wrong.headers.get('www-authenticate') ?? '', /^Basic /);
    const right = await tokenRequest(server, form, { basic: [client_id, client_secret] });
    assert.equal(right.status, 200, right.text);
    // a public client that sends a secret is refused
    const c = await codeFor();
    const pub = await exchange(c, { client_secret: 'made-up' });
    assert.equal(pub.status, 401);
    assert.equal(pub.body.error, 'invalid_client');
  });
});

describe('tokens', () => {
  test('a refresh token rotates; replayed, it revokes the whole grant: every token of the app stops working and the user must approve again', async () => {
    const c = await codeFor();
    const t0 = (await exchange(c)).body;
    // a second sign-in of the same app (another device): the approval is remembered, no consent
    const { verifier, challenge } = pkce();
    const again = await authorizeAndApprove(server, jar, authorizeParams(server, {
      client_id: c.client.client_id, redirect_uri: CB, challenge, scope: 'sandbox runs offline_access' }));
    assert.ok(again.code, `no code in ${again.location}`);
    const other = (await exchange({ ...c, code: again.code, verifier })).body;
    assert.equal((await mcp(other.access_token)).status, 200);
    const r1 = await refresh(c.client, t0.refresh_token);
    assert.equal(r1.status, 200, r1.text);
    assert.match(r1.body.access_token, ACCESS);
    assert.match(r1.body.refresh_token, REFRESH);
    assert.notEqual(r1.body.refresh_token, t0.refresh_token);
    assert.notEqual(r1.body.access_token, t0.access_token);
    assert.equal(r1.body.scope, 'sandbox runs offline_access');
    assert.equal((await mcp(r1.body.access_token)).status, 200);
    // a refresh may narrow the scope, never widen it
    const narrow = await refresh(c.client, r1.body.refresh_token, { scope: 'runs' });
    assert.equal(narrow.status, 200, narrow.text);
    assert.match(narrow.body.scope, /^runs\b/);
    assert.equal((await mcp(narrow.body.access_token, call('container_exec', { command: 'true' }))).status, 403);
    const r2 = narrow.body;
    // another client presenting it cannot spend it
    const stranger = await registerPublic(server, [CB], 'stranger');
    const stolen = await refresh(stranger, r2.refresh_token);
    assert.equal(stolen.status, 400);
    assert.equal(stolen.body.error, 'invalid_grant');
    // the spent token presented again: refused, and the whole grant ends, the other device too
    const replay = await refresh(c.client, t0.refresh_token);
    assert.equal(replay.status, 400);
    assert.equal(replay.body.error, 'invalid_grant');
    for (const at of [t0.access_token, r1.body.access_token, r2.access_token, other.access_token])
      assert.equal((await mcp(at)).status, 401);
    for (const rt of [r2.refresh_token, other.refresh_token]) {
      const next = await refresh(c.client, rt);
      assert.equal(next.status, 400);
      assert.equal(next.body.error, 'invalid_grant');
    }
    // the approval is gone: the next authorization shows the consent page again
    const fresh = pkce();
    const page = await request(server, authorizePath(authorizeParams(server, {
      client_id: c.client.client_id, redirect_uri: CB, challenge: fresh.challenge, scope: 'sandbox' })), { jar });
    assert.equal(page.status, 200);
    assert.ok(isConsentPage(page.text), 'consent asked again');
  });

  test('a refresh cannot widen the scope', async () => {
    const c = await codeFor({ scope: 'runs offline_access' });
    const t = (await exchange(c)).body;
    const r = await refresh(c.client, t.refresh_token, { scope: 'sandbox runs offline_access' });
    assert.equal(r.status, 400);
    assert.equal(r.body.error, 'invalid_scope');
  });

  test('an expired access token gets 401 (its expiry moved into the past in the database); refreshing still works', async () => {
    const c = await codeFor();
    const t = (await exchange(c)).body;
    assert.equal((await mcp(t.access_token)).status, 200);
    const past = Date.now() - 1000;
    const moved = sqlRows(server, `UPDATE oauth_tokens SET expires_at = ${past} WHERE hash = '${sha256hex(t.access_token)}' AND kind = 'access' RETURNING kind`);
    assert.deepEqual(moved, [{ kind: 'access' }]);
    const r = await mcp(t.access_token);
    assert.equal(r.status, 401);
    assert.match(r.headers.get('www-authenticate'), /error="invalid_token"/);
    const fresh = await refresh(c.client, t.refresh_token);
    assert.equal(fresh.status, 200, fresh.text);
    assert.equal((await mcp(fresh.body.access_token)).status, 200);
    // an expired refresh token is refused like an unknown one
    assert.deepEqual(sqlRows(server, `UPDATE oauth_tokens SET expires_at = ${past} WHERE hash = '${sha256hex(fresh.body.refresh_token)}' RETURNING kind`), [{ kind: 'refresh' }]);
    const late = await refresh(c.client, fresh.body.refresh_token);
    assert.equal(late.status, 400);
    assert.equal(late.body.error, 'invalid_grant');
  });

  test('insufficient_scope: a runs-only token calling a container_* tool gets 403 naming the scope', async () => {
    const runsOnly = (await exchange(await codeFor({ scope: 'runs' }))).body;
    assert.equal(runsOnly.scope, 'runs');
    const r = await mcp(runsOnly.access_token, call('container_exec', { command: 'true' }));
    assert.equal(r.status, 403, r.text);
    const h = r.headers.get('www-authenticate') ?? '';
    assert.match(h, /^Bearer /);
    assert.match(h, /error="insufficient_scope"/);
    assert.match(h, /scope="sandbox"/);
    assert.ok(h.includes(`resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp"`), h);
    assert.equal(r.body.code, 'insufficient_scope');
    const listTasks = { jsonrpc: '2.0', id: 4, method: 'tasks/list', params: {} };
    for (const m of [call('list_runs'), call('server_info'), { jsonrpc: '2.0', id: 3, method: 'tools/list' }, PING, listTasks]) {
      const ok = await mcp(runsOnly.access_token, m);
      assert.equal(ok.status, 200, `${JSON.stringify(m)}: ${ok.text}`);
    }
    const sandboxOnly = (await exchange(await codeFor({ scope: 'sandbox' }))).body;
    for (const name of ['list_runs', 'get_result', 'run_task', 'cancel_run', 'deliver_run', 'answer_run']) {
      const denied = await mcp(sandboxOnly.access_token, call(name, {}));
      assert.equal(denied.status, 403, name);
      assert.match(denied.headers.get('www-authenticate'), /scope="runs"/);
    }
    // the MCP tasks are runs; a batch needs what each of its calls needs
    for (const m of [listTasks, { jsonrpc: '2.0', id: 5, method: 'tasks/get', params: { taskId: 'run_x' } },
      [PING, call('run_task', { task: 'sneak in' })]]) {
      const denied = await mcp(sandboxOnly.access_token, m);
      assert.equal(denied.status, 403, JSON.stringify(m));
      assert.match(denied.headers.get('www-authenticate'), /scope="runs"/);
    }
    // an API token keeps every scope
    assert.equal((await mcp(server.token, call('list_runs'))).status, 200);
  });

  test('token responses carry Cache-Control: no-store, answers and errors alike', async () => {
    const c = await codeFor();
    const responses = [await exchange(c), await exchange(c), await tokenRequest(server, { grant_type: 'authorization_code' }),
      await tokenRequest(server, { grant_type: 'x', client_id: c.client.client_id })];
    for (const r of responses) {
      assert.match(r.headers.get('cache-control') ?? '', /no-store/, `${r.status} ${r.text}`);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    }
    assert.deepEqual(responses.map((r) => r.status), [200, 400, 401, 400]);
  });

  test('/revoke (RFC 7009): an access token; a refresh token and its chain; only the client\'s own; unknown ones', async () => {
    const c = await codeFor();
    const t = (await exchange(c)).body;
    const revoke = (token, client_id = c.client.client_id) => request(server, '/revoke', { form: { token, client_id } });
    // another client cannot revoke it
    const other = await registerPublic(server, [CB]);
    assert.equal((await revoke(t.access_token, other.client_id)).status, 200);
    assert.equal((await mcp(t.access_token)).status, 200);
    // its own client can
    const r = await revoke(t.access_token);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, {});
    assert.equal((await mcp(t.access_token)).status, 401);
    const n = (await refresh(c.client, t.refresh_token)).body;
    assert.equal((await mcp(n.access_token)).status, 200);
    assert.equal((await revoke(n.refresh_token)).status, 200);
    assert.equal((await mcp(n.access_token)).status, 401);
    assert.equal((await refresh(c.client, n.refresh_token)).body.error, 'invalid_grant');
    assert.equal((await revoke('smcp_at_' + 'B'.repeat(43))).status, 200);
    const unknown = await request(server, '/revoke', { form: { token: n.access_token, client_id: 'cli_nobody' } });
    assert.equal(unknown.status, 401);
    assert.equal(unknown.body.error, 'invalid_client');
  });
});

describe('pages', () => {
  test('sign-in, consent, account and error pages cannot be framed', async () => {
    const client = await registerPublic(server, [CB], 'Framing App');
    const params = authorizeParams(server, { client_id: client.client_id, redirect_uri: CB, challenge: pkce().challenge });
    const signInPage = await request(server, authorizePath(params), { jar: new CookieJar() });
    assert.ok(isSignInPage(signInPage.text));
    const consent = await request(server, authorizePath(params), { jar });
    assert.ok(isConsentPage(consent.text));
    const account = await request(server, '/account', { jar });
    const error = await request(server, authorizePath({ ...params, redirect_uri: 'https://evil.example/' }), { jar });
    const login = await request(server, '/login');
    for (const [what, r] of Object.entries({ signInPage, consent, account, error, login })) {
      assertFramingDenied(r, what);
      assert.match(r.headers.get('cache-control') ?? '', /no-store/, what);
      assert.match(r.text, /<meta name="viewport"/, what);
    }
  });

  test('CSRF: POST /login, /authorize, /account/revoke and /logout without the token or with a wrong one get 403', async () => {
    const other = 'A'.repeat(43);
    // /login
    const j = new CookieJar();
    await request(server, '/login', { jar: j });
    assert.ok(j.get('smcp_csrf'));
    for (const csrf of [undefined, other]) {
      const form = { name: 'admin', password: PASSWORD, return_to: '/account', ...(csrf ? { csrf } : {}) };
      const r = await request(server, '/login', { jar: j, form });
      assert.equal(r.status, 403, `login csrf=${csrf}`);
      assert.equal(j.get('smcp_session'), undefined);
    }
    // a field that matches no cookie
    const bare = await request(server, '/login', { form: { name: 'admin', password: PASSWORD, csrf: other } });
    assert.equal(bare.status, 403);
    // /authorize: the consent form
    const client = await registerPublic(server, [CB], 'CSRF App');
    const params = authorizeParams(server, { client_id: client.client_id, redirect_uri: CB, challenge: pkce().challenge });
    const consent = await request(server, authorizePath(params), { jar });
    assert.ok(isConsentPage(consent.text));
    for (const csrf of ['', other]) {
      const r = await decide(server, jar, consent.text, 'approve', { csrf });
      assert.equal(r.status, 403, `authorize csrf=${csrf}`);
      assert.equal(r.location, null);
    }
    // /account/revoke and /logout, signed in
    const page = await request(server, '/account', { jar });
    const rev = forms(page.text).find((f) => f.action === '/account/revoke');
    assert.ok(rev, 'a revoke form on the account page');
    for (const csrf of ['', other]) {
      const r = await request(server, '/account/revoke', { jar, form: { ...rev.fields, csrf } });
      assert.equal(r.status, 403, `revoke csrf=${csrf}`);
      const out = await request(server, '/logout', { jar, form: { csrf } });
      assert.equal(out.status, 403, `logout csrf=${csrf}`);
    }
    // nothing happened: still signed in, the item still listed
    const still = await request(server, '/account', { jar });
    assert.ok(!isSignInPage(still.text));
    assert.ok(still.text.includes(`value="${rev.fields.id}"`));
  });

  test('signing out ends the session', async () => {
    const j = new CookieJar();
    assert.equal((await signIn(server, j, { name: 'admin', password: PASSWORD })).status, 303);
    const page = await request(server, '/account', { jar: j });
    const out = forms(page.text).find((f) => f.action === '/logout');
    const session = j.get('smcp_session');
    const r = await request(server, '/logout', { jar: j, form: out.fields });
    assert.equal(r.status, 303);
    assert.equal(j.get('smcp_session'), undefined);
    assert.ok(isSignInPage((await request(server, '/account', { jar: j })).text));
    // the old cookie is dead too, not just forgotten by this browser
    const old = new CookieJar();
    old.set('smcp_session', session);
    assert.ok(isSignInPage((await request(server, '/account', { jar: old })).text));
  });

  test('after signing in the browser goes only to /authorize?… or /account', async () => {
    const j = new CookieJar();
    for (const returnTo of ['https://evil.example', '//evil.example', '/\\evil.example', '/\\/evil.example',
      'javascript:alert(1)', '/account/../login', 'http://127.0.0.1/authorize?x=1', '/authorize', '']) {
      const r = await signIn(server, j, { name: 'admin', password: PASSWORD, returnTo });
      assert.equal(r.status, 303, returnTo);
      assert.equal(r.headers.get('location'), '/account', returnTo);
    }
    const page = await request(server, `/login?return_to=${encodeURIComponent('https://evil.example/')}`, { jar: j });
    assert.ok(forms(page.text).every((f) => f.fields.return_to === undefined || f.fields.return_to === '/account'));
    const good = '/authorize?client_id=cli_x&state=1';
    const r = await signIn(server, j, { name: 'admin', password: PASSWORD, returnTo: good });
    assert.equal(r.headers.get('location'), good);
  });

  test('a one-time sign-in code works once', async () => {
    const link = cli(['user', 'login-link', '--data-dir', server.dataDir, 'admin']);
    assert.equal(link.status, 0, link.stderr);
    const url = new URL(link.stdout.trim().split('\n').pop());
    assert.equal(url.pathname, '/login/link');
    const code = url.searchParams.get('t');
    assert.match(code, /^[A-Za-z0-9_-]{43}$/);
    // the link's page only shows a button (a link preview does not spend it)
    const j = new CookieJar();
    const page = await request(server, `/login/link?t=${code}`, { jar: j });
    assert.equal(page.status, 200);
    assertFramingDenied(page, 'link page');
    const form = forms(page.text).find((f) => f.action === '/login');
    assert.equal(form.fields.code, code);
    const r = await request(server, '/login', { jar: j, form: form.fields });
    assert.equal(r.status, 303, r.text);
    assert.equal(r.headers.get('location'), '/account');
    assert.ok(j.get('smcp_session'));
    const account = await request(server, '/account', { jar: j });
    assert.match(account.text, /<h1>admin<\/h1>/);
    // a second time, from another browser: refused
    const k = new CookieJar();
    const again = await signIn(server, k, { code, page: (await request(server, '/login', { jar: k })).text });
    assert.equal(again.status, 401);
    assert.equal(k.get('smcp_session'), undefined);
  });

  test('a password set with other hash limits is hashed with the current ones at its next sign-in, once', async () => {
    // set with the default 64 MiB; the server's new hashes take 19 (the tests' setting)
    addUser(server, 'rehash');
    const set = cli(['user', 'passwd', '--data-dir', server.dataDir, 'rehash'], { input: `${PASSWORD}\n`, env: { SIGNIN_PASSWORD_MEMORY_MB: '64' } });
    assert.equal(set.status, 0, set.stderr);
    const stored = () => sqlRows(server, "SELECT password_hash AS h, password_set_at AS t FROM users WHERE name = 'rehash'")[0];
    const before = stored();
    assert.match(before.h, /^\$argon2id\$v=19\$m=65536,t=2,p=1\$/);
    const first = await signIn(server, new CookieJar(), { name: 'rehash', password: PASSWORD });
    assert.equal(first.status, 303, first.text);
    await server.waitLog(/auth password-rehashed user="rehash"/);
    const after = stored();
    assert.match(after.h, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    assert.equal(String(after.t), String(before.t), 'the password keeps the time it was set');
    // the same password still signs in, and is not hashed again; a wrong one changes nothing
    const second = await signIn(server, new CookieJar(), { name: 'rehash', password: PASSWORD });
    assert.equal(second.status, 303, second.text);
    const wrong = await signIn(server, new CookieJar(), { name: 'rehash', password: 'not the password' });
    assert.equal(wrong.status, 401);
    assert.equal(stored().h, after.h);
    assert.equal(server.stderr().match(/auth password-rehashed user="rehash"/g).length, 1);
    assert.ok(!server.stderr().includes(PASSWORD));
  });
});

describe('registration (RFC 7591)', () => {
  test('accepted: https, loopback http and private-use redirect URIs; a secret only for confidential clients', async () => {
    const pub = await register(server, { client_name: 'Ok', redirect_uris: ['https://app.example/cb', 'http://127.0.0.1/cb',
      'http://[::1]:8080/cb', 'http://localhost:3000/cb', 'com.example.app:/oauth'], token_endpoint_auth_method: 'none' });
    assert.equal(pub.status, 201, pub.text);
    assert.match(pub.body.client_id, /^cli_/);
    assert.equal(pub.body.client_secret, undefined);
    assert.equal(pub.body.token_endpoint_auth_method, 'none');
    assert.match(pub.headers.get('cache-control') ?? '', /no-store/);
    const conf = await register(server, { redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_post' });
    assert.equal(conf.status, 201);
    assert.ok(conf.body.client_secret);
    const dflt = await register(server, { redirect_uris: ['https://app.example/cb'] });
    assert.equal(dflt.body.token_endpoint_auth_method, 'client_secret_basic');
  });

  test('refused: http off loopback, a fragment, a bad auth method or grant, bad JSON, too large', async () => {
    const ok = { client_name: 'x', redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'none' };
    const cases = [
      [{ ...ok, redirect_uris: ['http://app.example/cb'] }, 'invalid_redirect_uri'],
      [{ ...ok, redirect_uris: ['http://192.168.1.2/cb'] }, 'invalid_redirect_uri'],
      [{ ...ok, redirect_uris: ['https://app.example/cb#frag'] }, 'invalid_redirect_uri'],
      [{ ...ok, redirect_uris: ['https://user@app.example/cb'] }, 'invalid_redirect_uri'],
      [{ ...ok, redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
      [{ ...ok, redirect_uris: [] }, 'invalid_redirect_uri'],
      [{ ...ok, redirect_uris: undefined }, 'invalid_redirect_uri'],
      [{ ...ok, redirect_uris: Array.from({ length: 11 }, (_, i) => `https://app.example/${i}`) }, 'invalid_redirect_uri'],
      [{ ...ok, token_endpoint_auth_method: 'private_key_jwt' }, 'invalid_client_metadata'],
      [{ ...ok, grant_types: ['implicit'] }, 'invalid_client_metadata'],
      [{ ...ok, grant_types: ['client_credentials'] }, 'invalid_client_metadata'],
      [{ ...ok, response_types: ['token'] }, 'invalid_client_metadata'],
      ['{"redirect_uris": ["https://app.example/cb"]', 'invalid_client_metadata'],
      ['[]', 'invalid_client_metadata'],
      ['{"redirect_uris": ["https://a.example/cb"], "redirect_uris": ["https://b.example/cb"]}', 'invalid_client_metadata'],
      [{ ...ok, client_name: 'x'.repeat(20000) }, 'invalid_client_metadata'],
    ];
    for (const [json, error] of cases) {
      const r = await register(server, json);
      assert.equal(r.status, 400, `${JSON.stringify(json).slice(0, 100)}: ${r.text}`);
      assert.equal(r.body?.error, error, JSON.stringify(json).slice(0, 100));
      assert.equal(r.body.client_id, undefined);
    }
    const form = await request(server, '/register', { body: JSON.stringify(ok), headers: { 'content-type': 'text/plain' } });
    assert.equal(form.status, 400);
    const get = await request(server, '/register');
    assert.equal(get.status, 405);
  });
});

describe('the account page and the CLI', () => {
  test('the account page lists the connected app and an API token with last use; revoking each ends its token', async () => {
    const made = cli(['token', 'create', '--user', 'admin', '--label', 'phone-api-token', '--data-dir', server.dataDir]);
    assert.equal(made.status, 0, made.stderr);
    const apiToken = made.stdout.trim();
    assert.equal((await mcp(apiToken)).status, 200);
    const { client, tokens } = await obtainTokens(server, { jar, client: await registerPublic(server, [CB], 'Account Page App') });
    assert.equal((await mcp(tokens.access_token)).status, 200);

    const page = await request(server, '/account', { jar });
    assert.equal(page.status, 200);
    assertFramingDenied(page, 'account');
    const items = page.text.split('<li class="item">').slice(1);
    const app = items.find((i) => i.includes('Account Page App'));
    assert.ok(app, page.text);
    assert.match(app, /\(127\.0\.0\.1\)/);
    assert.match(app, /sandbox runs offline_access/);
    assert.match(app, /last used \d{4}-\d\d-\d\d \d\d:\d\d UTC/);
    const tok = items.find((i) => i.includes('phone-api-token'));
    assert.ok(tok, page.text);
    assert.ok(tok.includes(apiToken.slice(0, 12)), 'the token prefix');
    assert.ok(!tok.includes(apiToken), 'never the whole token');
    assert.match(tok, /last used \d{4}-\d\d-\d\d \d\d:\d\d UTC/);

    const appForm = forms(app)[0];
    assert.equal(appForm.fields.kind, 'client');
    assert.match(appForm.fields.id, /^grt_/);
    const r1 = await request(server, '/account/revoke', { jar, form: appForm.fields });
    assert.equal(r1.status, 200);
    assert.match(r1.text, /Revoked\./);
    assert.doesNotMatch(r1.text, /Account Page App/);
    assert.equal((await mcp(tokens.access_token)).status, 401);
    assert.equal((await refresh(client, tokens.refresh_token)).body.error, 'invalid_grant');

    const tokForm = forms(tok)[0];
    assert.equal(tokForm.fields.kind, 'token');
    const r2 = await request(server, '/account/revoke', { jar, form: tokForm.fields });
    assert.equal(r2.status, 200);
    assert.match(r2.text, /Revoked\./);
    assert.doesNotMatch(r2.text, /phone-api-token/);
    assert.equal((await mcp(apiToken)).status, 401);
    // the same again: nothing to revoke
    const r3 = await request(server, '/account/revoke', { jar, form: tokForm.fields });
    assert.match(r3.text, /already gone/);
    assert.equal((await mcp(server.token)).status, 200, 'the other API token still works');
  });

  test('another user cannot revoke what is not theirs', async () => {
    assert.equal(cli(['user', 'add', '--data-dir', server.dataDir, 'mallory']).status, 0);
    setPassword(server, 'mallory', 'mallory password 1');
    const m = new CookieJar();
    assert.equal((await signIn(server, m, { name: 'mallory', password: 'mallory password 1' })).status, 303);
    const { tokens } = await obtainTokens(server, { jar, client: await registerPublic(server, [CB], 'Not Mallory\'s') });
    const grant = forms((await request(server, '/account', { jar })).text.split('<li class="item">')
      .find((i) => i.includes('Not Mallory&#39;s'))).find((f) => f.fields.kind === 'client').fields.id;
    const r = await request(server, '/account/revoke', { jar: m, form: { csrf: m.get('smcp_csrf'), kind: 'client', id: grant } });
    assert.equal(r.status, 200);
    assert.match(r.text, /already gone/);
    assert.equal((await mcp(tokens.access_token)).status, 200);
    assert.doesNotMatch((await request(server, '/account', { jar: m })).text, /Not Mallory/);
  });

  test('the account page sets, replaces and deletes the user\'s own GitHub token, never showing it', async () => {
    const FIRST = `github_pat_11PAGE${randomBytes(12).toString('hex')}`;
    const SECOND = `ghs_Replaced+/=&%~!${randomBytes(16).toString('hex')}`; // escaped in the form
    const sent = [FIRST, SECOND];
    const row = (name = 'admin') => sqlRows(server, `SELECT ${sqlHex('sealed')} AS sealed, length(sealed) AS len, `
      + 'c.created_at, c.updated_at FROM credentials c JOIN users u ON u.id = c.user_id '
      + `WHERE u.name = '${name}' AND c.service = 'github'`)[0];
    const listed = (name = 'admin') => {
      const r = cli(['user', 'credential', 'list', name, '--data-dir', server.dataDir]);
      assert.equal(r.status, 0, r.stderr);
      return r.stdout;
    };
    const card = (html) => {
      const from = html.slice(html.indexOf('<section class="card" id="github">'));
      return from.slice(0, from.indexOf('</section>') + 10);
    };
    const dbFiles = () => dbDump(server);
    // nothing of a token sent, not even its random part, anywhere it could leak
    const assertNoToken = (text, what) => {
      for (const t of sent) {
        assert.ok(!text.includes(t), `${what} holds a token`);
        assert.ok(!text.includes(t.slice(-16)), `${what} holds part of a token`);
        assert.ok(!text.includes(encodeURIComponent(t).slice(-16)), `${what} holds part of a token`);
      }
    };
    const submit = async (j, action, form) => {
      const r = await request(server, `/account/credential/${action}`, { jar: j, form });
      assertNoToken(r.text, `${action} answer`);
      assertNoToken(r.headers.get('location') ?? '', `${action} redirect`);
      return r;
    };

    // none yet: a form to set one, a password field, no delete button
    let page = await request(server, '/account', { jar });
    assert.equal(page.status, 200);
    assert.match(card(page.text), /<h2>GitHub<\/h2>\n<p class="muted">No token is stored\.<\/p>/);
    const setForm = forms(page.text).find((f) => f.action === '/account/credential/set');
    assert.ok(setForm, 'a form to set the token');
    assert.deepEqual(Object.keys(setForm.fields).sort(), ['csrf', 'service']);
    assert.equal(setForm.fields.service, 'github');
    assert.ok(setForm.inputs.includes('token'));
    assert.match(card(page.text), /<input name="token" type="password" autocomplete="off"[^>]*>/);
    assert.doesNotMatch(card(page.text), /maxlength/, 'a pasted token is never cut short by the browser');
    assert.equal(forms(page.text).find((f) => f.action === '/account/credential/delete'), undefined);
    assert.equal(listed(), '');

    // set: POST, 303 back to /account with a fixed notice, then listed as stored with its date
    let r = await submit(jar, 'set', { ...setForm.fields, token: FIRST });
    assert.equal(r.status, 303, r.text);
    assert.equal(r.headers.get('location'), '/account?done=github-set');
    page = await request(server, '/account?done=github-set', { jar });
    assert.match(page.text, /<p role="status">Your GitHub token is saved\.<\/p>/);
    assert.match(card(page.text), /<p>A token is stored, set \d{4}-\d\d-\d\d \d\d:\d\d UTC\.<\/p>/);
    assertNoToken(page.text, 'the account page');
    assert.match(listed(), /^github +set \d{4}-\d\d-\d\dT/);
    const first = row();
    // nonce (24 bytes), the sealed token, tag (16 bytes): this token's length, and never in clear
    assert.equal(Number(first.len), 24 + FIRST.length + 16);
    assertNoToken(dbFiles(), 'the database');
    const del = forms(page.text).find((f) => f.action === '/account/credential/delete');
    assert.ok(del, 'a delete button once one is stored');
    assert.deepEqual(forms(page.text).find((f) => f.action === '/account/credential/set').inputs.sort(),
      ['csrf', 'service', 'token']);

    // replace: a new sealed value of the new token's length, set when it was first set
    r = await submit(jar, 'set', { ...setForm.fields, token: SECOND });
    assert.equal(r.status, 303, r.text);
    const second = row();
    assert.notEqual(second.sealed, first.sealed);
    assert.equal(Number(second.len), 24 + SECOND.length + 16);
    assert.equal(second.created_at, first.created_at);
    assert.ok(second.updated_at > first.updated_at);
    page = await request(server, '/account', { jar });
    assert.match(card(page.text), /A token is stored, set [^<]* UTC, replaced \d{4}-\d\d-\d\d \d\d:\d\d UTC\./);
    assert.doesNotMatch(page.text, /role="status"/, 'the notice is only on the page redirected to');
    assertNoToken(page.text + dbFiles(), 'the page and database');

    // refused, each with its reason on the page and nothing changed
    const bad = [
      [{ ...setForm.fields, token: 'two words' }, 400, /Not saved: the token holds a space\./],
      [{ ...setForm.fields, token: ' ghp_leading' }, 400, /Not saved: the token holds a space\./],
      [{ ...setForm.fields, token: `ghp_${'x'.repeat(252)}` }, 400, /Not saved: the token is longer than 255 characters\./],
      [{ ...setForm.fields, token: 'tab\there' }, 400, /Not saved: the token holds a character that is not printable ASCII\./],
      [{ ...setForm.fields, token: 'caf\u00e9' }, 400, /not printable ASCII/],
      [{ ...setForm.fields, token: '' }, 400, /Not saved: the token is empty\./],
      [{ ...setForm.fields }, 400, /Not saved: the token is empty\./],
      [{ ...setForm.fields, service: 'gitlab', token: 'ghp_valid' }, 400, /only a GitHub token/],
      [{ ...setForm.fields, token: `ghp_${'y'.repeat(5000)}` }, 413, /far longer than a token/],
    ];
    for (const [form, status, message] of bad) {
      if (form.token) sent.push(form.token);
      r = await submit(jar, 'set', form);
      assert.equal(r.status, status, `${JSON.stringify(form).slice(0, 80)}: ${r.text}`);
      assert.match(r.text, message);
      assert.match(r.text, /<p class="error" role="alert">/);
      assert.match(r.text, /Nothing was changed/);
      assert.ok(forms(r.text).some((f) => f.action === '/account/credential/set'), 'the form again, empty');
      assert.deepEqual(row(), second, JSON.stringify(form).slice(0, 80));
    }
    // without the form's CSRF token or with another one: 403, on either form
    for (const csrf of ['', 'A'.repeat(43)]) {
      r = await submit(jar, 'set', { ...setForm.fields, csrf, token: 'ghp_forged' });
      assert.equal(r.status, 403);
      assert.match(r.text, /security token is missing/);
      r = await submit(jar, 'delete', { ...del.fields, csrf });
      assert.equal(r.status, 403);
    }
    r = await submit(jar, 'set', { service: 'github', token: 'ghp_forged' });
    assert.equal(r.status, 403);
    // signed out: the sign-in page
    const anon = new CookieJar();
    anon.set('smcp_csrf', setForm.fields.csrf);
    r = await submit(anon, 'set', { ...setForm.fields, token: 'ghp_forged' });
    assert.equal(r.status, 401);
    assert.ok(isSignInPage(r.text));
    r = await submit(anon, 'delete', del.fields);
    assert.equal(r.status, 401);
    // another user's session acts on their own token only, never admin's
    assert.equal(cli(['user', 'add', '--data-dir', server.dataDir, 'carol']).status, 0);
    setPassword(server, 'carol', 'carol password 1');
    const c = new CookieJar();
    assert.equal((await signIn(server, c, { name: 'carol', password: 'carol password 1' })).status, 303);
    r = await submit(c, 'delete', { ...del.fields, csrf: c.get('smcp_csrf') });
    assert.equal(r.status, 200);
    assert.match(r.text, /There was no GitHub token to delete\./);
    r = await submit(c, 'set', { ...setForm.fields, token: 'ghp_forged' }); // admin's CSRF token
    assert.equal(r.status, 403);
    sent.push('ghp_carols_own_token');
    r = await submit(c, 'set', { service: 'github', csrf: c.get('smcp_csrf'), token: 'ghp_carols_own_token' });
    assert.equal(r.status, 303);
    assert.equal(Number(row('carol').len), 24 + 'ghp_carols_own_token'.length + 16);
    assert.deepEqual(row(), second, 'admin\'s token is untouched');
    assert.match(card((await request(server, '/account', { jar: c })).text), /A token is stored/);

    // delete: 303 back with a notice, gone from the page, the database and the CLI's list
    r = await submit(jar, 'delete', del.fields);
    assert.equal(r.status, 303, r.text);
    assert.equal(r.headers.get('location'), '/account?done=github-deleted');
    page = await request(server, '/account?done=github-deleted', { jar });
    assert.match(page.text, /<p role="status">Your GitHub token is deleted\.<\/p>/);
    assert.match(card(page.text), /No token is stored\./);
    assert.equal(forms(page.text).find((f) => f.action === '/account/credential/delete'), undefined);
    assert.equal(row(), undefined);
    assert.equal(listed(), '');
    assert.match(listed('carol'), /^github +set /, 'carol\'s stays');
    r = await submit(jar, 'delete', del.fields);
    assert.equal(r.status, 200);
    assert.match(r.text, /There was no GitHub token to delete\./);
    // only fixed words come back through the address
    // (the page's own words may say "script": its repositories card has a setup script field)
    assert.doesNotMatch((await request(server, '/account?done=%3Cscript%3E', { jar })).text, /role="status"|<script|&lt;script/);

    // the server's log names what happened and whose, never a token
    const log = server.stderr() + server.stdout();
    assertNoToken(log, 'the server log');
    assert.match(log, /auth credential-set user=admin service=github/);
    assert.match(log, /auth credential-deleted user=admin service=github/);
  });

  test('`token list` shows the OAuth grant; `token revoke grt_…` ends its tokens', async () => {
    const { tokens } = await obtainTokens(server, { jar, client: await registerPublic(server, [CB], 'CLI Listed App') });
    assert.equal((await mcp(tokens.access_token)).status, 200);
    const list = cli(['token', 'list', '--data-dir', server.dataDir]);
    assert.equal(list.status, 0, list.stderr);
    assertNoSanitizerReport(list.stderr, 'token list');
    const row = list.stdout.split('\n').find((l) => l.includes('CLI Listed App'));
    assert.ok(row, list.stdout);
    const [id, user, prefix, state] = row.split(/\s+/);
    assert.match(id, /^grt_/);
    assert.equal(user, 'admin');
    assert.equal(prefix, 'oauth');
    assert.equal(state, 'active');
    assert.ok(!list.stdout.includes(tokens.access_token.slice(8)), 'no token in the list');
    const rev = cli(['token', 'revoke', '--data-dir', server.dataDir, id]);
    assert.equal(rev.status, 0, rev.stderr);
    assert.match(rev.stdout, /revoked OAuth grant/);
    assert.equal((await mcp(tokens.access_token)).status, 401);
    assert.doesNotMatch(cli(['token', 'list', '--data-dir', server.dataDir]).stdout, /CLI Listed App/);
    const again = cli(['token', 'revoke', '--data-dir', server.dataDir, id]);
    assert.notEqual(again.status, 0);
  });
});

describe('password guessing', () => {
  let s;
  before(async () => {
    s = await startServer();
    setPassword(s, 'admin', PASSWORD);
  });
  after(async () => { if (s) await stopCleanly(s); });

  test('is throttled: 429 with Retry-After, and then even the right password is refused', async () => {
    const statuses = [];
    let throttled;
    for (let i = 0; i < 15 && !throttled; i++) {
      const j = new CookieJar();
      const r = await signIn(s, j, { name: 'admin', password: `wrong ${i}` });
      statuses.push(r.status);
      assert.equal(j.get('smcp_session'), undefined);
      if (r.status === 429) throttled = r;
      else assert.equal(r.status, 401, r.text);
    }
    assert.ok(throttled, `no 429 after ${statuses.length} wrong passwords: ${statuses}`);
    assert.ok(statuses[0] === 401, 'the first wrong password is only wrong');
    const wait = throttled.headers.get('retry-after');
    assert.match(wait ?? '', /^[1-9]\d*$/);
    assert.ok(isSignInPage(throttled.text));
    const j = new CookieJar();
    const right = await signIn(s, j, { name: 'admin', password: PASSWORD });
    assert.equal(right.status, 429);
    assert.match(right.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
    assert.equal(j.get('smcp_session'), undefined);
  });
});

// POST /login from a source address in 127/8 (all of it is loopback on Linux): as a browser
// with jar (whose cookies it sends and keeps), or as a bare client with a CSRF token of its own.
async function signInFrom(server, from, { name, password, jar }) {
  const csrf = jar?.get('smcp_csrf') ?? 'c'.repeat(43);
  const agent = new Agent({ localAddress: from });
  try {
    const res = await undiciFetch(new URL('/login', server.url), {
      method: 'POST', dispatcher: agent, redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: jar ? jar.header() : `smcp_csrf=${csrf}` },
      body: new URLSearchParams({ csrf, return_to: '/account', name, password }).toString(),
    });
    jar?.store(res);
    return { status: res.status, headers: res.headers, text: await res.text() };
  } finally {
    await agent.close();
  }
}

describe('sign-in under attack', () => {
  const METRICS_TOKEN = 'signin-metrics-token';
  let s;
  before(async () => {
    s = await startServer({ env: { METRICS_TOKEN } });
    for (const name of ['alice', 'carol', 'dave']) {
      addUser(s, name);
      setPassword(s, name, PASSWORD);
    }
  });
  after(async () => { if (s) await stopCleanly(s); });

  const metric = async (key) => parseMetrics(await (await fetch(`${s.url}/metrics`,
    { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text()).get(key) ?? 0;
  const WRONG = 'sandbox_mcp_signin_attempts_total{how="password",outcome="wrong"}';

  // A browser that signed in as name from 127.0.0.1: its jar holds the device cookie, and
  // 127.0.0.0/24 is name's own network.
  async function browserOf(name) {
    const jar = new CookieJar();
    await request(s, '/login', { jar });
    const r = await signInFrom(s, '127.0.0.1', { name, password: PASSWORD, jar });
    assert.equal(r.status, 303, r.text);
    const device = r.headers.getSetCookie().find((c) => c.startsWith('smcp_device='));
    assert.ok(device, 'a device cookie is set');
    assert.match(device, /HttpOnly/);
    assert.match(device, /SameSite=Lax/);
    assert.match(device, /Max-Age=31536000/);
    assert.doesNotMatch(device, new RegExp(name), 'the cookie does not name the user');
    return jar;
  }

  // The review: a stranger's guesses for a name made its owner get 429 from anywhere, with the
  // right password, for up to 15 minutes at a time, indefinitely.
  test('a stranger\'s guesses for alice stop neither her browser nor her own network', async () => {
    const home = await browserOf('alice');
    const statuses = [];
    for (let i = 0; i < 15 && !statuses.includes(429); i++) {
      // each guess from a network of its own: the name is what slows them
      const r = await signInFrom(s, `127.10.${i}.1`, { name: 'alice', password: `wrong ${i}` });
      statuses.push(r.status);
      assert.ok(r.status === 401 || r.status === 429, r.text);
    }
    assert.ok(statuses.includes(429), `no 429 after ${statuses.length} wrong passwords: ${statuses}`);
    // a stranger with the right password waits like the others
    const stranger = await signInFrom(s, '127.20.0.1', { name: 'alice', password: PASSWORD });
    assert.equal(stranger.status, 429);
    // her browser, from another network than hers
    const away = await signInFrom(s, '127.30.0.1', { name: 'alice', password: PASSWORD, jar: home });
    assert.equal(away.status, 303, away.text);
    assert.ok(home.get('smcp_session'));
    // a browser she never used, from her own network
    const fresh = new CookieJar();
    await request(s, '/login', { jar: fresh });
    const near = await signInFrom(s, '127.0.0.77', { name: 'alice', password: PASSWORD, jar: fresh });
    assert.equal(near.status, 303, near.text);
    // the device cookie is for alice only: with it, another name is a stranger's guess
    const other = await signInFrom(s, '127.30.0.1', { name: 'erin', password: 'wrong', jar: home });
    assert.equal(other.status, 401);
    // still judged: the browser's own wrong guesses slow it down
    const own = [];
    for (let i = 0; i < 10 && !own.includes(429); i++)
      own.push((await signInFrom(s, '127.30.0.1', { name: 'alice', password: `typo ${i}`, jar: home })).status);
    assert.ok(own.includes(429), `the browser's own guesses: ${own}`);
  });

  // The review: 18 of 30 guesses sent at once were hashed, since each counted only when it had
  // failed. Counted when it starts, a burst gets what one by one would: 5 free, then a wait of
  // 1 s doubling after each more.
  test('30 guesses at once for one name are checked no more than the throttle allows', async () => {
    const before = await metric(WRONG);
    const start = Date.now();
    const rs = await Promise.all(Array.from({ length: 30 }, (_, i) =>
      signInFrom(s, `127.40.${i}.1`, { name: 'carol', password: `wrong ${i}` })));
    const elapsed = (Date.now() - start) / 1000;
    const statuses = rs.map((r) => r.status);
    for (const st of statuses) assert.ok(st === 401 || st === 429, `${statuses}`);
    const checked = statuses.filter((st) => st === 401).length;
    // 6 at once; on a machine slow enough that the burst took seconds, one more per doubling
    const allowed = 6 + Math.floor(Math.log2(elapsed + 1));
    assert.ok(checked <= allowed, `${checked} of 30 checked (allowed ${allowed} in ${elapsed} s): ${statuses}`);
    assert.ok(checked >= 6, `${statuses}`);
    assert.equal(await metric(WRONG) - before, checked, 'the metric counts the checked ones');
  });

  // The review: 6,000 rotating addresses filled the one queue of password checks, and a real
  // user's correct sign-in failed 8 times of 8 with 503.
  test('a flood of guesses from many addresses does not keep a known user from signing in', async () => {
    const dave = await browserOf('dave');
    let stop = false, n = 0;
    const seen = { 401: 0, 429: 0, 503: 0, other: 0 };
    const flooder = async () => {
      while (!stop && n < 20000) {
        const i = n++;
        // every one from a network of its own: no per-address or per-network cap applies
        const from = `127.${60 + (i % 180)}.${Math.floor(i / 180) % 256}.1`;
        const r = await signInFrom(s, from, { name: `nobody${i}`, password: 'guess' }).catch(() => null);
        const k = r && r.status in seen ? r.status : 'other';
        seen[k]++;
      }
    };
    const flood = Array.from({ length: 40 }, flooder);
    try {
      // wait for the queue to be full: the flood sees 503 (bounded by the flood's own length)
      while (seen[503] < 5 && n < 20000) await new Promise((r) => setTimeout(r, 20));
      assert.ok(seen[503] >= 5, `the flood never filled the queue: ${JSON.stringify(seen)}`);
      for (let i = 0; i < 2; i++) {
        const r = await signInFrom(s, `127.250.${i}.1`, { name: 'dave', password: PASSWORD, jar: dave });
        assert.equal(r.status, 303, `with the device cookie, try ${i}: ${r.status} ${JSON.stringify(seen)}`);
      }
      for (let i = 0; i < 2; i++) {
        const r = await signInFrom(s, `127.0.0.${90 + i}`, { name: 'dave', password: PASSWORD });
        assert.equal(r.status, 303, `from dave's network, try ${i}: ${r.status} ${JSON.stringify(seen)}`);
      }
    } finally {
      stop = true;
      await Promise.all(flood);
    }
    assert.equal(seen.other, 0, JSON.stringify(seen));
  });
});

describe('a token issued for another resource', () => {
  const dataDir = tempDir();
  after(() => removeDataDir(dataDir));

  test('is refused once PUBLIC_URL changes (same data dir, restarted)', async () => {
    const one = 'http://127.0.0.1:7', two = 'http://127.0.0.1:8';
    let s = await startServer({ dataDir, env: { PUBLIC_URL: one } });
    let tokens;
    try {
      setPassword(s, 'admin', PASSWORD);
      const meta = await request(s, '/.well-known/oauth-protected-resource/mcp');
      assert.equal(meta.body.resource, `${one}/mcp`);
      ({ tokens } = await obtainTokens(s, { password: PASSWORD, resource: `${one}/mcp` }));
      assert.equal((await rpc(s, PING, { token: tokens.access_token })).status, 200);
    } finally { await stopCleanly(s); }
    // the same PUBLIC_URL after a restart: still good
    s = await startServer({ dataDir, env: { PUBLIC_URL: one } });
    try {
      assert.equal((await rpc(s, PING, { token: tokens.access_token })).status, 200);
    } finally { await stopCleanly(s); }
    s = await startServer({ dataDir, env: { PUBLIC_URL: two } });
    try {
      const r = await rpc(s, PING, { token: tokens.access_token });
      assert.equal(r.status, 401);
      assert.match(r.headers.get('www-authenticate'), /error="invalid_token"/);
      assert.ok(r.headers.get('www-authenticate').includes(`resource_metadata="${two}/.well-known/oauth-protected-resource/mcp"`));
    } finally { await stopCleanly(s); }
  });
});
