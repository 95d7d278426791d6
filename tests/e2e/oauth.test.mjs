// End-to-end OAuth: the official MCP TypeScript SDK client (its OAuthClientProvider, auth() and
// transport.finishAuth()) against the real server, with the sign-in and consent pages driven in
// headless Chromium (playwright-core) at phone width, and the redirect caught by a loopback HTTP
// server of the test's own, as a desktop or CLI client does (RFC 8252). Once with Dynamic Client
// Registration, once with a Client ID Metadata Document served on 127.0.0.1. Screenshots go to
// tests/out/screenshots/.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

import { startServer, rpc } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';
import { setPassword, request } from '../lib/oauth.mjs';

const shots = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'out', 'screenshots');
const PHONE = { width: 390, height: 844 };
const PASSWORD = 'a phone-sized passphrase';
const ACCESS = /^smcp_at_[A-Za-z0-9_-]{43}$/;
const REFRESH = /^smcp_rt_[A-Za-z0-9_-]{43}$/;

let browser;
before(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  });
});
after(async () => { await browser?.close(); });

async function stopCleanly(server) {
  const { code, signal } = await server.stop();
  assertNoSanitizerReport(server.stderr(), 'server');
  assert.equal(signal, null, `server killed by ${signal}:\n${server.stderr()}`);
  assert.equal(code, 0, `server exited ${code}:\n${server.stderr()}`);
}

// A loopback HTTP server: GET /callback is the client's redirect URI; other paths are served
// from routes ({path: [contentType, body]}). Every request is recorded.
async function loopbackServer(routes = {}) {
  const seen = [];
  let waiting = [];
  const srv = http.createServer((req, res) => {
    const url = new URL(req.url, `http://${req.headers.host}`);
    seen.push(url);
    if (url.pathname === '/callback') {
      res.writeHead(200, { 'content-type': 'text/html' });
      // an icon of its own, so that the browser asks this test server for no /favicon.ico
      res.end('<!doctype html><link rel="icon" href="data:,"><title>done</title><p>You can close this window.</p>');
      const w = waiting;
      waiting = [];
      for (const resolve of w) resolve(url);
      return;
    }
    const route = routes[url.pathname];
    if (!route) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'content-type': route[0], 'cache-control': 'max-age=60' });
    res.end(route[1]);
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${srv.address().port}`;
  return {
    base,
    seen,
    nextCallback: () => new Promise((resolve) => waiting.push(resolve)),
    close: () => new Promise((resolve) => { srv.closeAllConnections?.(); srv.close(resolve); }),
  };
}

// What a real client keeps between runs, in memory; redirectToAuthorization records the URL
// (the test opens it in Chromium, as a client opens the system browser).
class TestProvider {
  constructor({ redirectUrl, clientName, clientInformation }) {
    this._redirectUrl = redirectUrl;
    this._clientName = clientName;
    this._client = clientInformation;
    this.saved = [];
    this.authUrls = [];
    this.invalidated = [];
  }

  get redirectUrl() { return this._redirectUrl; }

  get clientMetadata() {
    return { client_name: this._clientName, redirect_uris: [this._redirectUrl], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none' };
  }

  state() { this.lastState = randomBytes(16).toString('base64url'); return this.lastState; }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this.override ?? this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; this.override = undefined; this.saved.push(tokens); }
  redirectToAuthorization(url) { this.authUrls.push(new URL(url)); }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  invalidateCredentials(scope) {
    this.invalidated.push(scope);
    if (scope === 'all' || scope === 'tokens') { this._tokens = undefined; this.override = undefined; }
    if (scope === 'all' || scope === 'client') this._client = undefined;
  }
}

// A fetch that records what the SDK asks for: "METHOD /path" and token request bodies.
function recordingFetch(log) {
  return async (url, init = {}) => {
    const u = new URL(url);
    log.push({ what: `${init.method || 'GET'} ${u.pathname}`, body: init.body ? String(init.body) : '' });
    return fetch(url, init);
  };
}

function transportFor(server, provider, log) {
  return new StreamableHTTPClientTransport(new URL(server.mcpUrl), { authProvider: provider, fetch: recordingFetch(log) });
}

// The page is no wider than the phone: nothing to scroll sideways.
async function assertNoHorizontalOverflow(page, what) {
  const widths = await page.evaluate(() => ({
    doc: document.documentElement.scrollWidth, body: document.body.scrollWidth, view: window.innerWidth,
    wide: [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5)
      .map((e) => `${e.tagName.toLowerCase()}.${e.className}`).slice(0, 5),
  }));
  assert.equal(widths.view, PHONE.width, what);
  assert.ok(widths.doc <= PHONE.width && widths.body <= PHONE.width, `${what}: ${JSON.stringify(widths)}`);
  assert.deepEqual(widths.wide, [], `${what}: elements past the right edge`);
}

// Open authUrl on a phone-sized page in context; sign in with the password if the sign-in page
// shows, then Approve on the consent page (check(page) runs on it first, before the
// screenshots). Resolves the callback URL the browser was sent to.
async function signInAndApprove(context, authUrl, callbacks, { shot, check = async () => {} }) {
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  // errors of the server's own pages (scripts, and resources they or the browser asked of it);
  // the app's callback page is the app's concern
  page.on('console', (m) => {
    if (m.type() === 'error' && (m.location().url || page.url()).startsWith(authUrl.origin))
      problems.push(`console: ${m.text()} (${m.location().url})`);
  });
  const arrived = callbacks.nextCallback();
  const res = await page.goto(authUrl.href);
  assert.equal(res.status(), 200);
  const signIn = page.locator('form:has(input[name="password"])');
  assert.equal(await signIn.count(), 1, 'the sign-in form');
  assert.match(await page.textContent('h1'), /Sign in/);
  await assertNoHorizontalOverflow(page, 'sign-in page');
  await page.screenshot({ path: path.join(shots, `${shot}-signin-phone.png`), fullPage: true });
  await signIn.locator('input[name="name"]').fill('admin');
  await signIn.locator('input[name="password"]').fill(PASSWORD);
  await Promise.all([page.waitForURL(/\/authorize\?/), signIn.locator('button[type="submit"]').click()]);
  await page.waitForSelector('form[action="/authorize"] button[value="approve"]');
  await check(page);
  await assertNoHorizontalOverflow(page, 'consent page');
  await page.screenshot({ path: path.join(shots, `${shot}-consent-phone.png`), fullPage: true });
  await page.click('button[value="approve"]');
  const url = await arrived;
  await page.waitForURL((u) => u.pathname === '/callback');
  assert.deepEqual(problems, []);
  await page.close();
  return url;
}

describe('the SDK client with Dynamic Client Registration', () => {
  let server, callbacks, provider, context, client;
  const log = [];

  before(async () => {
    server = await startServer();
    setPassword(server, 'admin', PASSWORD);
    callbacks = await loopbackServer();
    provider = new TestProvider({ redirectUrl: `${callbacks.base}/callback`, clientName: 'SDK E2E Client' });
    context = await browser.newContext({ viewport: PHONE });
  });
  after(async () => {
    await client?.close();
    await context?.close();
    await callbacks?.close();
    if (server) await stopCleanly(server);
  });

  test('discovery from the 401, registration, PKCE, sign-in and consent in Chromium, finishAuth', async () => {
    const first = new Client({ name: 'sandbox-mcp-oauth-e2e', version: '1.0.0' });
    const transport = transportFor(server, provider, log);
    await assert.rejects(first.connect(transport), (e) => e instanceof UnauthorizedError);
    // what the SDK did after the 401: both metadata documents, then registration; no token yet
    const asked = log.map((l) => l.what);
    assert.equal(asked[0], 'POST /mcp');
    assert.ok(asked.includes('GET /.well-known/oauth-protected-resource/mcp'), asked.join(', '));
    assert.ok(asked.includes('GET /.well-known/oauth-authorization-server'), asked.join(', '));
    assert.ok(asked.includes('POST /register'), asked.join(', '));
    assert.ok(!asked.includes('POST /token'));
    const registered = provider.clientInformation();
    assert.match(registered.client_id, /^cli_/);
    assert.equal(registered.client_secret, undefined, 'a public client');
    // the authorization request it built
    assert.equal(provider.authUrls.length, 1);
    const authUrl = provider.authUrls[0];
    assert.equal(`${authUrl.origin}${authUrl.pathname}`, `${server.url}/authorize`);
    const q = authUrl.searchParams;
    assert.equal(q.get('client_id'), registered.client_id);
    assert.equal(q.get('response_type'), 'code');
    assert.equal(q.get('code_challenge_method'), 'S256');
    assert.match(q.get('code_challenge'), /^[A-Za-z0-9_-]{43}$/);
    assert.equal(q.get('redirect_uri'), provider.redirectUrl);
    assert.equal(q.get('resource'), server.mcpUrl);
    assert.equal(q.get('scope'), 'sandbox runs offline_access', 'the scope of the 401\'s challenge');
    assert.equal(q.get('state'), provider.lastState);

    const cb = await signInAndApprove(context, authUrl, callbacks, {
      shot: 'oauth',
      check: async (page) => {
        assert.equal(await page.textContent('h1 .client'), 'SDK E2E Client');
        const body = await page.textContent('main');
        assert.match(body, /go back to 127\.0\.0\.1/);
        assert.match(body, /registered itself/);
        assert.match(body, /\(sandbox\)/);
        assert.match(body, /\(offline_access\)/);
      },
    });
    assert.equal(cb.searchParams.get('state'), provider.lastState);
    assert.equal(cb.searchParams.get('iss'), server.url);
    const code = cb.searchParams.get('code');
    assert.ok(code);

    await transport.finishAuth(code);
    const tokens = provider.tokens();
    assert.match(tokens.access_token, ACCESS);
    assert.match(tokens.refresh_token, REFRESH);
    assert.equal(tokens.token_type, 'Bearer');
    assert.equal(tokens.scope, 'sandbox runs offline_access');
    const exchange = log.find((l) => l.what === 'POST /token');
    assert.match(exchange.body, /grant_type=authorization_code/);
    assert.match(exchange.body, /code_verifier=/);
    await first.close();
  });

  test('real /mcp calls with the access token: tools/list, server_info, container_exec (sandbox scope)', async () => {
    client = new Client({ name: 'sandbox-mcp-oauth-e2e', version: '1.0.0' });
    await client.connect(transportFor(server, provider, log));
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === 'container_exec'));
    const info = await client.callTool({ name: 'server_info', arguments: {} });
    assert.equal(info.structuredContent.user, 'admin');
    const run = await client.callTool({ name: 'container_exec', arguments: { command: 'echo signed in with oauth' } });
    assert.notEqual(run.isError, true, JSON.stringify(run));
    assert.equal(run.structuredContent.exit_code, 0);
    assert.equal(run.structuredContent.stdout, 'signed in with oauth\n');
  });

  test('an access token the server refuses: the SDK refreshes, and the refresh token rotates', async () => {
    const before = provider.tokens();
    const tokenCalls = log.filter((l) => l.what === 'POST /token').length;
    provider.override = { ...before, access_token: `smcp_at_${'A'.repeat(43)}` };
    const info = await client.callTool({ name: 'server_info', arguments: {} });
    assert.equal(info.structuredContent.user, 'admin');
    const refreshes = log.filter((l) => l.what === 'POST /token').slice(tokenCalls);
    assert.equal(refreshes.length, 1);
    assert.match(refreshes[0].body, /grant_type=refresh_token/);
    const now = provider.tokens();
    assert.match(now.access_token, ACCESS);
    assert.match(now.refresh_token, REFRESH);
    assert.notEqual(now.access_token, before.access_token);
    assert.notEqual(now.refresh_token, before.refresh_token);
    assert.equal((await rpc(server, { jsonrpc: '2.0', id: 1, method: 'ping' }, { token: now.access_token })).status, 200);
  });

  test('revocation (RFC 7009): the token gets 401; with its refresh token gone too, the SDK asks again and the remembered approval answers', async () => {
    const { access_token, refresh_token } = provider.tokens();
    const client_id = provider.clientInformation().client_id;
    const revoke = (token) => request(server, '/revoke', { form: { token, client_id, token_type_hint: 'access_token' } });
    assert.equal((await revoke(access_token)).status, 200);
    const r = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'ping' }, { token: access_token });
    assert.equal(r.status, 401);
    assert.match(r.headers.get('www-authenticate'), /error="invalid_token"/);
    assert.equal((await revoke(refresh_token)).status, 200);
    // the SDK's refresh is refused, so it starts a new authorization
    await assert.rejects(client.callTool({ name: 'server_info', arguments: {} }), (e) => e instanceof UnauthorizedError);
    assert.deepEqual(provider.invalidated, ['tokens']);
    assert.equal(provider.authUrls.length, 2);
    // this browser is signed in and the app approved for these scopes: straight back, no page
    const page = await context.newPage();
    const arrived = callbacks.nextCallback();
    await page.goto(provider.authUrls[1].href);
    const cb = await arrived;
    await page.close();
    assert.equal(cb.searchParams.get('state'), provider.lastState);
    await client.transport.finishAuth(cb.searchParams.get('code'));
    const info = await client.callTool({ name: 'server_info', arguments: {} });
    assert.equal(info.structuredContent.user, 'admin');
  });
});

describe('the SDK client with a Client ID Metadata Document on 127.0.0.1', () => {
  let server, site, provider, context, docUrl;
  const log = [];

  before(async () => {
    server = await startServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: '1' } });
    setPassword(server, 'admin', PASSWORD);
    // the document names the loopback server's own /callback, so the site is both
    const routes = {};
    site = await loopbackServer(routes);
    docUrl = `${site.base}/oauth/client-metadata.json`;
    routes['/oauth/client-metadata.json'] = ['application/json', JSON.stringify({
      client_id: docUrl, client_name: 'CIMD E2E Client', client_uri: 'https://client.example',
      redirect_uris: [`${site.base}/callback`], grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'], token_endpoint_auth_method: 'none',
    })];
    // The SDK takes OAuthClientProvider.clientMetadataUrl only when it is https, which no test
    // can serve on loopback; a client_id that is the document's URL, given as the provider's
    // client information, is the same request on the wire: no registration, client_id = URL.
    provider = new TestProvider({ redirectUrl: `${site.base}/callback`, clientName: 'unused', clientInformation: { client_id: docUrl } });
    context = await browser.newContext({ viewport: PHONE });
  });
  after(async () => {
    await context?.close();
    await site?.close();
    if (server) await stopCleanly(server);
  });

  test('the server fetches the document, the consent page names its host, and the client gets tokens', async () => {
    const first = new Client({ name: 'sandbox-mcp-oauth-e2e', version: '1.0.0' });
    const transport = transportFor(server, provider, log);
    await assert.rejects(first.connect(transport), (e) => e instanceof UnauthorizedError);
    assert.ok(!log.some((l) => l.what === 'POST /register'), 'no registration');
    const authUrl = provider.authUrls[0];
    assert.equal(authUrl.searchParams.get('client_id'), docUrl);

    const cb = await signInAndApprove(context, authUrl, site, {
      shot: 'oauth-cimd',
      check: async (page) => {
        assert.equal(await page.textContent('h1 .client'), 'CIMD E2E Client');
        const body = await page.textContent('main');
        assert.match(body, /identified by 127\.0\.0\.1/);
        assert.match(body, /go back to 127\.0\.0\.1/);
      },
    });
    assert.ok(site.seen.some((u) => u.pathname === '/oauth/client-metadata.json'), 'the document was fetched');
    assert.equal(cb.searchParams.get('iss'), server.url);
    await transport.finishAuth(cb.searchParams.get('code'));
    assert.match(provider.tokens().access_token, ACCESS);
    await first.close();

    const client = new Client({ name: 'sandbox-mcp-oauth-e2e', version: '1.0.0' });
    await client.connect(transportFor(server, provider, log));
    try {
      const info = await client.callTool({ name: 'server_info', arguments: {} });
      assert.equal(info.structuredContent.user, 'admin');
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === 'run_task'));
    } finally {
      await client.close();
    }
  });
});
