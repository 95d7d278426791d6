// OAuth helpers shared by the integration and end-to-end tests, the conformance driver and the
// benchmark: a cookie jar, PKCE, the pages' forms, signing in and approving over plain HTTP
// (redirects are never followed, so every hop can be checked), and the token endpoint.
import { createHash, randomBytes } from 'node:crypto';

import { cli, FIXTURE_BIN } from './server.mjs';

// The cookies a browser would keep for one origin: Set-Cookie in, Cookie out.
export class CookieJar {
  constructor() { this.cookies = new Map(); }

  store(res) {
    for (const line of res.headers.getSetCookie?.() ?? []) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim(), value = pair.slice(eq + 1).trim();
      const maxAge = attrs.map((a) => a.trim().match(/^max-age=(-?\d+)$/i)).find(Boolean);
      if (maxAge && Number(maxAge[1]) <= 0) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  get(name) { return this.cookies.get(name); }
  set(name, value) { this.cookies.set(name, value); }
  header() { return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '); }
}

// A PKCE pair (RFC 7636, S256).
export function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export function sha256hex(s) {
  return createHash('sha256').update(s).digest('hex');
}

// One request to the server, redirects not followed. form: an object sent as
// application/x-www-form-urlencoded; json: sent as JSON. Resolves {status, headers, text, body
// (parsed JSON or null), location (absolute URL or null)}.
export async function request(server, path, { method, jar, form, json, headers = {}, body } = {}) {
  const h = { ...headers };
  if (jar && jar.cookies.size) h.cookie = jar.header();
  if (form) {
    h['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(form).toString();
  } else if (json !== undefined) {
    h['content-type'] = 'application/json';
    body = typeof json === 'string' ? json : JSON.stringify(json);
  }
  const res = await fetch(new URL(path, server.url), {
    method: method || (body !== undefined ? 'POST' : 'GET'), headers: h, body, redirect: 'manual',
  });
  jar?.store(res);
  const text = await res.text();
  let parsed = null;
  try { parsed = JSON.parse(text); } catch { /* a page */ }
  const loc = res.headers.get('location');
  return { status: res.status, headers: res.headers, text, body: parsed,
    location: loc ? new URL(loc, server.url) : null };
}

function unescapeHtml(s) {
  return s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

// The forms of a page: [{action, fields: {name: value} of its hidden inputs, inputs: [names of
// every input], buttons: [{name, value}]}].
export function forms(html) {
  const out = [];
  for (const m of html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/g)) {
    const action = unescapeHtml((m[1].match(/action="([^"]*)"/) || [])[1] ?? '');
    const fields = {}, inputs = [], buttons = [];
    for (const i of m[2].matchAll(/<input\b([^>]*)>/g)) {
      const name = (i[1].match(/name="([^"]*)"/) || [])[1];
      if (!name) continue;
      inputs.push(name);
      if (/type="hidden"/.test(i[1])) fields[name] = unescapeHtml((i[1].match(/value="([^"]*)"/) || [])[1] ?? '');
    }
    for (const b of m[2].matchAll(/<button\b([^>]*)>/g)) {
      const name = (b[1].match(/name="([^"]*)"/) || [])[1];
      if (name) buttons.push({ name, value: unescapeHtml((b[1].match(/value="([^"]*)"/) || [])[1] ?? '') });
    }
    out.push({ action, fields, inputs, buttons });
  }
  return out;
}

export const isSignInPage = (text) => /<form method="post" action="\/login"/.test(text);
export const isConsentPage = (text) => /<form method="post" action="\/authorize"/.test(text);

// Set a user's password with the CLI (stdin), on the server's data dir: a test's setup, by the
// release build (cli.test.mjs runs the command itself under the sanitizers).
export function setPassword(server, name, password) {
  const r = cli(['user', 'passwd', '--data-dir', server.dataDir, name], { input: `${password}\n`, bin: FIXTURE_BIN });
  if (r.status !== 0) throw new Error(`user passwd ${name}: ${r.status} ${r.stderr}`);
}

// Register a client (RFC 7591). Resolves the response; its body is the registration.
export function register(server, metadata) {
  return request(server, '/register', { json: metadata });
}

// Register a public client (PKCE only) with these redirect URIs; resolves its registration.
export async function registerPublic(server, redirectUris, name = 'test client') {
  const r = await register(server, { client_name: name, redirect_uris: redirectUris,
    token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'] });
  if (r.status !== 201) throw new Error(`register: ${r.status} ${r.text}`);
  return r.body;
}

// "/authorize?..." for these parameters (undefined or null ones left out).
export function authorizePath(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.set(k, v);
  return `/authorize?${q}`;
}

// The usual authorization request of a client: code flow, S256, the server's own resource.
export function authorizeParams(server, { client_id, redirect_uri, challenge, scope, state = 'st-' + randomBytes(6).toString('hex'), resource = server.mcpUrl }) {
  return { response_type: 'code', client_id, redirect_uri, code_challenge: challenge,
    code_challenge_method: 'S256', state, scope, resource };
}

// POST /login with the sign-in form's hidden fields (csrf, return_to) from page (a sign-in page's
// HTML), or with csrf from the jar and returnTo.
export async function signIn(server, jar, { name, password, code, page, returnTo }) {
  let fields;
  if (page) {
    fields = forms(page).find((f) => f.action === '/login' && f.inputs.includes(code ? 'code' : 'password'))?.fields;
    if (!fields) throw new Error(`no sign-in form on the page:\n${page.slice(0, 500)}`);
  } else {
    if (!jar.get('smcp_csrf')) await request(server, '/login', { jar });
    fields = { csrf: jar.get('smcp_csrf'), return_to: returnTo ?? '/account' };
  }
  const form = code ? { ...fields, code } : { ...fields, name, password };
  return request(server, '/login', { jar, form });
}

// POST the consent page's form (page: its HTML) with decision approve or deny.
export function decide(server, jar, page, decision = 'approve', override = {}) {
  const f = forms(page).find((x) => x.action === '/authorize');
  if (!f) throw new Error(`no consent form on the page:\n${page.slice(0, 500)}`);
  return request(server, '/authorize', { jar, form: { ...f.fields, decision, ...override } });
}

// The whole browser part of the code flow over HTTP: GET /authorize; sign in if asked (name and
// password); approve on the consent page if shown. Resolves the final redirect's response with
// {code, state, iss, error} read from its Location, and the pages seen on the way.
export function authorizeAndApprove(server, jar, params, options) {
  return approveAt(server, jar, authorizePath(params), options);
}

// The same from an authorization URL (or its path and query) as a client would open it.
export async function approveAt(server, jar, url, { name = 'admin', password } = {}) {
  const pages = {};
  let res = await request(server, url, { jar });
  if (res.status === 200 && isSignInPage(res.text)) {
    pages.signIn = res;
    const login = await signIn(server, jar, { name, password, page: res.text });
    if (login.status !== 303) throw new Error(`sign-in: ${login.status} ${login.text.slice(0, 500)}`);
    res = await request(server, login.location.pathname + login.location.search, { jar });
  }
  if (res.status === 200 && isConsentPage(res.text)) {
    pages.consent = res;
    res = await decide(server, jar, res.text, 'approve');
  }
  if (res.status !== 302 && res.status !== 303)
    throw new Error(`authorize: ${res.status} ${res.text.slice(0, 500)}`);
  const q = res.location.searchParams;
  return { ...res, pages, code: q.get('code'), state: q.get('state'), iss: q.get('iss'), error: q.get('error') };
}

// POST /token. basic: [id, secret] sent as HTTP Basic.
export function tokenRequest(server, form, { basic, headers = {} } = {}) {
  const h = { ...headers };
  if (basic) h.authorization = `Basic ${Buffer.from(`${encodeURIComponent(basic[0])}:${encodeURIComponent(basic[1])}`).toString('base64')}`;
  return request(server, '/token', { form, headers: h });
}

// Register a public client, sign in, approve and exchange the code: resolves {client, tokens,
// verifier, redirect_uri, jar}. scope: what to ask for (undefined: the server's default).
// resource: the server's canonical /mcp URL (PUBLIC_URL/mcp; by default the address it listens on).
export async function obtainTokens(server, { password, name = 'admin', scope = 'sandbox runs offline_access',
  jar = new CookieJar(), client, redirect_uri = 'http://127.0.0.1:9/callback', resource = server.mcpUrl } = {}) {
  client = client || await registerPublic(server, [redirect_uri]);
  const { verifier, challenge } = pkce();
  const a = await authorizeAndApprove(server, jar,
    authorizeParams(server, { client_id: client.client_id, redirect_uri, challenge, scope, resource }), { name, password });
  if (!a.code) throw new Error(`no code: ${a.location}`);
  const t = await tokenRequest(server, { grant_type: 'authorization_code', code: a.code, code_verifier: verifier,
    redirect_uri, client_id: client.client_id, resource });
  if (t.status !== 200) throw new Error(`token: ${t.status} ${t.text}`);
  return { client, tokens: t.body, verifier, redirect_uri, jar };
}
