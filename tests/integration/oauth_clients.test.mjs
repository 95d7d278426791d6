// Real clients' sign-in with their own Client ID Metadata Documents (issue 33, point 1). Claude
// Code's document lists http://localhost/callback and http://127.0.0.1/callback without a port,
// and Claude Code sends http://localhost:<a port of the moment>/callback: the server let the port
// vary for 127.x and [::1] only, and the user saw "The redirect_uri is not one this app
// registered". Each client's published document (tests/fixtures/cimd, where each came from is in
// its README) is served on loopback (OAUTH_CIMD_ALLOW_LOOPBACK), its client_id rewritten to the
// URL it is served from and everything else as published, and the authorization request that
// client sends is replayed: its parameters in its order, its callback host and port. Then sign-in,
// consent, the token exchange and tools/list with the token, as the client would go on.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { startServer, rpc } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';
import { CookieJar, pkce, approveAt, request, tokenRequest, setPassword } from '../lib/oauth.mjs';

const PASSWORD = 'correct horse battery staple';
const FIXTURES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'cimd');

// A port a native client's callback listener might be given: never contacted (redirects are
// read, not followed).
const randomPort = () => 1024 + Math.floor(Math.random() * (65535 - 1024));

// How each client asks: its document, the host its callback listens on and the port it takes,
// and the order of its authorization request's parameters (tests/fixtures/cimd/README.md).
const CLIENTS = {
  'Claude Code': {
    file: 'claude-code.json',
    redirect: () => `http://localhost:${randomPort()}/callback`,
    order: ['response_type', 'client_id', 'code_challenge', 'code_challenge_method', 'redirect_uri', 'state', 'scope', 'resource'],
    // the SDK asks for the resource's scopes; Claude Code adds offline_access
    scope: (supported) => [...new Set([...supported, 'offline_access'])].join(' '),
  },
  Codex: {
    file: 'codex.json',
    redirect: () => `http://127.0.0.1:${randomPort()}/callback`,
    order: ['response_type', 'client_id', 'state', 'code_challenge', 'code_challenge_method', 'redirect_uri', 'scope', 'resource'],
    scope: (supported) => supported.join(' '),
  },
  'Visual Studio Code': {
    file: 'vscode.json',
    redirect: () => 'http://127.0.0.1:33418/',
    order: ['client_id', 'response_type', 'code_challenge', 'code_challenge_method', 'scope', 'resource', 'redirect_uri', 'state'],
    scope: (supported) => supported.join(' '),
  },
};

let docs, fetched = 0;

// Every fixture on 127.0.0.1 at /<file>, its client_id the URL it is served from.
function documentServer() {
  const s = http.createServer((req, res) => {
    const name = req.url.slice(1);
    if (!Object.values(CLIENTS).some((c) => c.file === name)) {
      res.writeHead(404).end();
      return;
    }
    fetched++;
    const doc = JSON.parse(readFileSync(path.join(FIXTURES, name), 'utf8'));
    doc.client_id = `http://127.0.0.1:${s.address().port}/${name}`; // keeps its place in the order
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=600' });
    res.end(JSON.stringify(doc));
  });
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => resolve({
    url: (file) => `http://127.0.0.1:${s.address().port}/${file}`,
    close: () => { s.closeAllConnections(); s.close(); },
  })));
}

let server;
before(async () => {
  docs = await documentServer();
  server = await startServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: '1' } });
  setPassword(server, 'admin', PASSWORD);
});
after(async () => {
  docs?.close();
  if (!server) return;
  const { code, signal } = await server.stop();
  assertNoSanitizerReport(server.stderr(), 'server');
  assert.equal(signal, null, `server killed by ${signal}`);
  assert.equal(code, 0, `server exited ${code}`);
});

for (const [name, client] of Object.entries(CLIENTS)) {
  test(`${name} signs in with its published metadata document and lists the tools`, async () => {
    // discovery, as every one of them does it: the resource's metadata, then the server's
    const prm = await request(server, '/.well-known/oauth-protected-resource/mcp');
    assert.equal(prm.status, 200, prm.text);
    const as = await request(server, '/.well-known/oauth-authorization-server');
    assert.equal(as.status, 200, as.text);
    assert.equal(as.body.client_id_metadata_document_supported, true);
    assert.ok(as.body.token_endpoint_auth_methods_supported.includes('none'));

    const clientId = docs.url(client.file);
    const redirectUri = client.redirect();
    const { verifier, challenge } = pkce();
    const state = `st-${Math.random().toString(36).slice(2)}`;
    const values = {
      response_type: 'code', client_id: clientId, code_challenge: challenge, code_challenge_method: 'S256',
      redirect_uri: redirectUri, state, scope: client.scope(prm.body.scopes_supported), resource: prm.body.resource,
    };
    const q = new URLSearchParams();
    for (const k of client.order) q.append(k, values[k]);
    const authorizeUrl = new URL(as.body.authorization_endpoint);
    authorizeUrl.search = q.toString();

    const before = fetched;
    const jar = new CookieJar();
    const a = await approveAt(server, jar, authorizeUrl.pathname + authorizeUrl.search, { password: PASSWORD });
    assert.ok(a.pages.consent, 'no consent page');
    assert.equal(fetched - before, 1, 'the document was fetched once');
    // back to the very callback the client listens on, with its state and the issuer
    assert.ok(a.location.href.startsWith(`${redirectUri}?`), a.location.href);
    assert.ok(a.code, `no code: ${a.location}`);
    assert.equal(a.error, null);
    assert.equal(a.state, state);
    assert.equal(a.iss, as.body.issuer);

    const t = await tokenRequest(server, { grant_type: 'authorization_code', code: a.code, code_verifier: verifier,
      redirect_uri: redirectUri, client_id: clientId, resource: prm.body.resource });
    assert.equal(t.status, 200, t.text);
    assert.equal(t.body.token_type, 'Bearer');
    assert.ok(t.body.refresh_token, 'offline_access gives a refresh token');

    const list = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { token: t.body.access_token });
    assert.equal(list.status, 200, list.text);
    assert.ok(list.body.result.tools.length > 0, list.text);
    assert.ok(list.body.result.tools.some((x) => x.name === 'container_exec'), list.text);
  });
}
