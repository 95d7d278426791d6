// Notifications: targets set with the CLI and on the account page; a webhook receiver and an
// ntfy server played by local receivers on 127.0.0.1 (NOTIFY_TEST_ALLOW_LOOPBACK lets targets be
// there); signatures checked as a receiver would; retries after failures with one Idempotency-Key;
// delivery across a restart without duplicates; the public-address rule at set and send time.
// Runs end cheaply: one is cancelled at once, one fails to clone.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmdirSync } from 'node:fs';
import path from 'node:path';

import { startServer, cli, tempDir, removeDataDir, sqlRows, addUser, dbDump } from '../lib/server.mjs';
import { assertNoSanitizerReport, parseMetrics } from '../lib/http.mjs';
import { CookieJar, request, forms, signIn, setPassword, isSignInPage } from '../lib/oauth.mjs';
import { startFake, agentRouter } from '../lib/fake-anthropic.mjs';
import { startReceiver, signatureValid } from '../lib/notify-receiver.mjs';
import { ok as okAs, until, codexEnv } from '../lib/runs.mjs';

const ENV = { NOTIFY_TEST_ALLOW_LOOPBACK: '1', NOTIFY_RETRY_SECONDS: '1' };
const EVT = /^evt_[0-9a-f]{32}$/;
const SECRET = /whsec_[A-Za-z0-9_-]{43}/;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const PASSWORD = 'notify-page-password-1';
const METRICS_TOKEN = 'notify-metrics-token';

let fake, router, server, hook, ntfy;
const secrets = []; // every signing secret shown: none may reach the log

before(async () => {
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  server = await startServer({ env: { ...ENV, ...codexEnv(fake.url), RUNS_ALLOW_LOCAL_REPOS: '1', METRICS_TOKEN } });
  hook = await startReceiver();
  ntfy = await startReceiver();
});

after(async () => {
  const stderr = server?.stderr() ?? '';
  await server?.stop();
  await hook?.close();
  await ntfy?.close();
  await fake?.close();
  assertNoSanitizerReport(stderr, 'server');
  for (const s of secrets) assert.ok(!stderr.includes(s), 'a signing secret is in the log');
});

// ---- helpers --------------------------------------------------------------------------------

function notify(dataDir, args, env = ENV) {
  return cli(['user', 'notify', ...args, '--data-dir', dataDir], { env });
}

// A target added with the CLI: {id, secret (webhooks), out}.
function addTarget(dataDir, user, kind, url) {
  const r = notify(dataDir, ['add', user, kind, url]);
  assert.equal(r.status, 0, r.stderr);
  const id = r.stdout.match(/ntf_[a-z0-9]{26}/)[0];
  const secret = r.stdout.match(SECRET)?.[0];
  if (secret) secrets.push(secret);
  return { id, secret, out: r.stdout };
}

function testEvent(dataDir, user, id) {
  const r = notify(dataDir, ['test', user, id]);
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.match(/evt_[0-9a-f]{32}/)[0];
}

// ok() of tests/lib/runs.mjs, token first, on this file's server unless told
const ok = (token, name, args, srv = server) => okAs(srv, name, args, token);

const rows = (srv, eventId) => sqlRows(srv, `SELECT state, attempts, last_error, payload FROM notify_outbox WHERE event_id = '${eventId}'`);

const ended = (srv, eventId, state) => until(() => rows(srv, eventId).find((x) => x.state === state),
  `${eventId} ${state}`);

// ---- the CLI --------------------------------------------------------------------------------

test('the CLI adds, lists and removes targets, refusing bad ones with the reason; five at most', () => {
  const dir = tempDir('smcp-notify-cli-');
  try {
    for (const u of ['alice', 'bob']) assert.equal(cli(['user', 'add', u, '--data-dir', dir]).status, 0);
    const hookUrl = 'https://hooks.example.com/in?token=tok-1234567';
    const w = addTarget(dir, 'alice', 'webhook', hookUrl);
    assert.match(w.out, /^webhook target ntf_[a-z0-9]{26} added for alice\n/);
    assert.match(w.out, /signing secret \(shown only now; keep it where the receiver checks the X-Sandbox-MCP-Signature header\):\nwhsec_/);
    const n = addTarget(dir, 'alice', 'ntfy', 'https://ntfy.sh/smcp-topic_x1');
    assert.equal(n.secret, undefined, 'an ntfy target has no secret');
    const list = () => {
      const r = notify(dir, ['list', 'alice']);
      assert.equal(r.status, 0, r.stderr);
      return r.stdout;
    };
    const listed = list();
    assert.match(listed, new RegExp(`^${w.id} +webhook +https://hooks\\.example\\.com/in\\?…\\n    added \\d{4}-`, 'm'));
    assert.match(listed, new RegExp(`^${n.id} +ntfy +https://ntfy\\.sh/smcp-topic_x1\\n`, 'm'));
    assert.ok(!listed.includes('tok-1234567') && !listed.includes(w.secret), listed);
    // the secret is sealed: not in the database in clear
    const db = dbDump(dir);
    assert.ok(!db.includes(w.secret.slice(6)), 'the signing secret is in the database in clear');

    const bad = [
      [['webhook', 'http://hooks.example.com/x'], /not added: the URL must start with https:\/\//],
      [['webhook', 'https://10.1.2.3/x'], /not added: the URL's host 10\.1\.2\.3 is a private address \(RFC 1918\); notifications go to public addresses only/],
      [['webhook', 'https://169.254.169.254/latest/meta-data'], /169\.254\.169\.254 is a link-local address/],
      [['ntfy', 'https://ntfy.sh/'], /an ntfy URL ends with its topic/],
      [['email', 'https://hooks.example.com/'], /unknown target kind 'email': webhook or ntfy/],
    ];
    for (const [args, re] of bad) {
      const r = notify(dir, ['add', 'alice', ...args]);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stdout}`);
      assert.match(r.stderr, re);
    }
    // a loopback test target only with the test setting
    const local = notify(dir, ['add', 'alice', 'webhook', 'http://127.0.0.1:9/x'], {});
    assert.equal(local.status, 2);
    assert.match(local.stderr, /must start with https:\/\//);
    assert.equal(list(), listed, 'nothing was added');

    for (let i = 0; i < 3; i++) addTarget(dir, 'alice', 'ntfy', `https://ntfy.sh/more-${i}`);
    const sixth = notify(dir, ['add', 'alice', 'ntfy', 'https://ntfy.sh/sixth']);
    assert.equal(sixth.status, 1);
    assert.match(sixth.stderr, /there are 5 notification targets already, the most a user may have; remove one first/);

    // another user's target is not theirs to remove or test
    for (const action of ['remove', 'test']) {
      const r = notify(dir, [action, 'bob', w.id]);
      assert.equal(r.status, 1);
      assert.match(r.stderr, /no notification target 'ntf_/);
    }
    assert.equal(notify(dir, ['remove', 'alice', w.id]).status, 0);
    assert.equal(notify(dir, ['remove', 'alice', w.id]).status, 1);
    assert.ok(!list().includes(w.id));
    assert.equal(notify(dir, ['list', 'nobody']).status, 1);
  } finally {
    removeDataDir(dir);
  }
});

// ---- sending --------------------------------------------------------------------------------

test('a webhook is signed, retried after two failures with one Idempotency-Key, delivered on the third attempt', async () => {
  addUser(server, 'hooked');
  const t = addTarget(server.dataDir, 'hooked', 'webhook', hook.url('/hooked?token=q-secret-77'));
  hook.fail(2, 500);
  const evt = testEvent(server.dataDir, 'hooked', t.id);
  assert.match(evt, EVT);
  await hook.waitFor((q) => q.headers['idempotency-key'] === evt && q.status === 200, 'the third attempt');
  const got = hook.of(evt);
  assert.deepEqual(got.map((q) => q.status), [500, 500, 200]);
  assert.deepEqual(got.map((q) => q.headers['x-sandbox-mcp-attempt']), ['1', '2', '3']);
  for (const q of got) {
    assert.equal(q.method, 'POST');
    assert.equal(q.path, '/hooked?token=q-secret-77');
    assert.equal(q.headers['content-type'], 'application/json');
    assert.equal(q.headers['x-sandbox-mcp-event'], 'test');
    assert.match(q.headers['user-agent'], /^sandbox-mcp\//);
    assert.ok(signatureValid(t.secret, q.headers['x-sandbox-mcp-signature'], q.raw),
      `signature ${q.headers['x-sandbox-mcp-signature']} does not verify`);
    assert.equal(q.body, got[0].body, 'every attempt sends the same event');
  }
  // the check can fail: another secret, another body or an old timestamp do not verify
  const sig = got[2].headers['x-sandbox-mcp-signature'];
  assert.ok(!signatureValid(secrets.find((s) => s !== t.secret) ?? `${t.secret}x`, sig, got[2].raw));
  assert.ok(!signatureValid(t.secret, sig, Buffer.from(got[2].body.replace('test', 'tesT'))));
  assert.ok(!signatureValid(t.secret, sig, got[2].raw, -1));
  assert.deepEqual(got[0].json, { id: evt, type: 'test', created_at: got[0].json.created_at,
    title: 'Test notification', summary: 'Notifications from sandbox-mcp reach this target.' });
  assert.match(got[0].json.created_at, ISO);

  const row = (await ended(server, evt, 'delivered'));
  assert.equal(row.attempts, 3);
  const list = notify(server.dataDir, ['list', 'hooked']).stdout;
  assert.match(list, /last delivered \d{4}-/);
  // one log line per attempt, with neither the secret nor the URL's query (the row can be read
  // before this process has read the server's last log line from its pipe)
  await server.waitLog(new RegExp(`notify attempt target=${t.id} .*outcome=delivered`));
  const lines = server.stderr().split('\n').filter((l) => l.includes(`notify attempt target=${t.id}`));
  assert.deepEqual(lines.map((l) => l.match(/outcome=(\w+)/)[1]), ['retry', 'retry', 'delivered']);
  assert.match(lines[0], /kind=webhook host=127\.0\.0\.1 event=evt_\w+ type=test attempt=1 outcome=retry status=500 .*err="the answer was HTTP 500"/);
  const log = server.stderr();
  assert.ok(!log.includes('q-secret-77'), 'the URL\'s query is in the log');
  assert.ok(!log.includes(t.secret), 'the secret is in the log');
  // counted by outcome
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const m = parseMetrics(await res.text());
  assert.ok(m.get('sandbox_mcp_notify_attempts_total{kind="webhook",outcome="retry"}') >= 2);
  assert.ok(m.get('sandbox_mcp_notify_attempts_total{kind="webhook",outcome="delivered"}') >= 1);
});

test('the end of a run is told to every target: the webhook gets the event, ntfy a titled push that opens the run page', async () => {
  const token = addUser(server, 'runner');
  const w = addTarget(server.dataDir, 'runner', 'webhook', hook.url('/runner'));
  addTarget(server.dataDir, 'runner', 'ntfy', ntfy.url('/runner-topic'));

  // cancelled at once: the cheapest end a run has
  router.add('notify-cancel', [{ hold: true, text: 'Never sent.' }]);
  const started = await ok(token, 'run_task', { task: 'notify-cancel: wait for a slow model', title: 'Notify me when it stops' });
  await ok(token, 'cancel_run', { run_id: started.run_id });
  const [event] = await hook.waitFor((q) => q.json?.run_id === started.run_id, 'the webhook event');
  assert.ok(signatureValid(w.secret, event.headers['x-sandbox-mcp-signature'], event.raw));
  const p = event.json;
  assert.match(p.id, EVT);
  assert.equal(event.headers['idempotency-key'], p.id);
  assert.equal(event.headers['x-sandbox-mcp-event'], 'run.cancelled');
  assert.deepEqual({ ...p, id: 0, created_at: 0, summary: 0 }, { id: 0, type: 'run.cancelled', created_at: 0,
    run_id: started.run_id, session_id: started.session_id, title: 'Notify me when it stops',
    status: 'cancelled', summary: 0, url: started.web_url });
  assert.match(p.created_at, ISO);
  assert.equal(typeof p.summary, 'string');
  const [push] = await ntfy.waitFor((q) => q.headers['idempotency-key'] === p.id, 'the ntfy push');
  assert.equal(push.path, '/runner-topic');
  assert.equal(push.headers.title, 'Run cancelled');
  assert.equal(push.headers.priority, '3');
  assert.equal(push.headers.tags, 'no_entry_sign');
  assert.equal(push.headers.click, started.web_url);
  assert.equal(push.headers['content-type'], 'text/plain; charset=utf-8');
  assert.equal(push.headers['x-sandbox-mcp-signature'], undefined);
  assert.match(push.body, /^Notify me when it stops\n\n/);

  // a failure is pushed with a higher priority, its reason in the message (a run of the same
  // session: its sandbox is there already)
  const emptyDir = tempDir('smcp-notify-repo-');
  const missing = path.join(emptyDir, 'does-not-exist.git');
  const failing = await ok(token, 'run_task', { task: 'notify-fail: clone nothing', title: 'Clone nothing', repository: missing,
    session_id: started.session_id });
  const [failed] = await hook.waitFor((q) => q.json?.run_id === failing.run_id, 'the failure event');
  rmdirSync(emptyDir);
  assert.equal(failed.json.type, 'run.failed');
  assert.equal(failed.json.status, 'failed');
  assert.match(failed.json.summary, /clone|repositor|not found|does not exist/i);
  const [alarm] = await ntfy.waitFor((q) => q.headers['idempotency-key'] === failed.json.id, 'the failure push');
  assert.equal(alarm.headers.title, 'Run failed');
  assert.equal(alarm.headers.priority, '4');
  assert.equal(alarm.headers.tags, 'x');
  assert.equal(alarm.headers.click, failing.web_url);
  assert.ok(alarm.body.startsWith(`Clone nothing\n\n${failed.json.summary.slice(0, 40)}`), alarm.body);
  // one event each, once
  assert.equal(hook.of(p.id).length, 1);
  assert.equal(ntfy.of(failed.json.id).length, 1);
});

test('with NOTIFY_VIEW_TOKEN=0 a notification links the run page without its view token, which opens for its owner signed in and no one else', async () => {
  const srv = await startServer({ env: { ...ENV, NOTIFY_VIEW_TOKEN: '0', ...codexEnv(fake.url) } });
  try {
    const token = addUser(srv, 'owner');
    addTarget(srv.dataDir, 'owner', 'webhook', hook.url('/bare'));
    addTarget(srv.dataDir, 'owner', 'ntfy', ntfy.url('/bare-topic'));
    router.add('notify-bare', [{ hold: true, text: 'Never sent.' }]);
    const started = await ok(token, 'run_task', { task: 'notify-bare: wait for a slow model', title: 'Bare link' }, srv);
    await ok(token, 'cancel_run', { run_id: started.run_id }, srv);
    const [event] = await hook.waitFor((q) => q.json?.run_id === started.run_id, 'the webhook event');
    const page = `${srv.url}/runs/${started.run_id}`;
    const viewToken = new URL(started.web_url).searchParams.get('t');
    assert.ok(viewToken, 'run_task still gives out the address with its token');
    assert.equal(event.json.url, page, 'the event links the page without its token');
    assert.ok(!event.raw.toString().includes(viewToken), 'the view token is in the event');
    const [push] = await ntfy.waitFor((q) => q.headers['idempotency-key'] === event.json.id, 'the ntfy push');
    assert.equal(push.headers.click, page);
    assert.ok(!JSON.stringify(push.headers).includes(viewToken) && !push.body.includes(viewToken));

    // a browser not signed in is sent to sign in, and back to the page after; the data, diff
    // and stream answer 401
    const path = new URL(page).pathname;
    let r = await request(srv, path);
    assert.equal(r.status, 303, r.text);
    assert.equal(r.headers.get('location'), `/login?return_to=${path}`);
    const anon = new CookieJar();
    r = await request(srv, r.headers.get('location'), { jar: anon });
    assert.equal(r.status, 200);
    assert.ok(isSignInPage(r.text), r.text.slice(0, 300));
    const signin = forms(r.text).find((f) => f.inputs.includes('password'));
    assert.equal(signin.fields.return_to, path);
    for (const rest of ['/data', '/diff', '/events']) {
      r = await request(srv, `${path}${rest}`);
      assert.equal(r.status, 401, `${rest}: ${r.text}`);
      assert.equal(r.body.code, 'unauthorized');
    }

    // the owner signs in on that form and is back on the page, which reads the run by the cookie
    setPassword(srv, 'owner', PASSWORD);
    r = await signIn(srv, anon, { name: 'owner', password: PASSWORD, page: (await request(srv, `/login?return_to=${path}`, { jar: anon })).text });
    assert.equal(r.status, 303, r.text);
    assert.equal(r.headers.get('location'), path);
    const jar = anon;
    r = await request(srv, path, { jar });
    assert.equal(r.status, 200);
    assert.match(r.text, /data-page="run"/);
    r = await request(srv, `${path}/data`, { jar });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.run_id, started.run_id);
    assert.equal(r.body.status, 'cancelled');
    r = await request(srv, `${path}/events`, { jar });
    assert.equal(r.status, 200);
    assert.match(r.text, /event: end\ndata: \{"status":"cancelled"\}/);
    assert.equal((await request(srv, `/sessions/${started.session_id}/data`, { jar })).status, 200);
    // a run that is not there: the same 404 as another user's
    assert.equal((await request(srv, '/runs/run_doesnotexist', { jar })).status, 404);

    // someone else signed in: 404 for all of it, never the run
    addUser(srv, 'stranger');
    setPassword(srv, 'stranger', `${PASSWORD}-2`);
    const other = new CookieJar();
    assert.equal((await signIn(srv, other, { name: 'stranger', password: `${PASSWORD}-2`, returnTo: path })).status, 303);
    for (const p of [path, `${path}/data`, `${path}/diff`, `${path}/events`, `/sessions/${started.session_id}`,
      `/sessions/${started.session_id}/data`]) {
      r = await request(srv, p, { jar: other });
      assert.equal(r.status, 404, `${p}: ${r.text.slice(0, 200)}`);
      assert.ok(!r.text.includes('Bare link') && !r.text.includes(started.session_id), r.text);
    }
    // a sign-in goes back to a run's page only by its shape: anything else goes to the account
    r = await signIn(srv, other, { name: 'stranger', password: `${PASSWORD}-2`, returnTo: `${path}/../../account?x` });
    assert.equal(r.headers.get('location'), '/account');

    // the address with the token still opens without signing in, and a wrong token is 403
    assert.equal((await request(srv, `${path}/data?t=${viewToken}`)).status, 200);
    assert.equal((await request(srv, `${path}/data?t=${viewToken}x`, { jar })).status, 403);
  } finally {
    await srv.stop();
    assertNoSanitizerReport(srv.stderr(), 'server');
  }
});

test('a target whose name resolves to a private address is refused when sent to, never connected to', async () => {
  addUser(server, 'private');
  const guard = await startReceiver(); // listening where localhost would lead
  try {
    const t = addTarget(server.dataDir, 'private', 'webhook', `https://localhost:${guard.port}/x`);
    const evt = testEvent(server.dataDir, 'private', t.id);
    const row = await ended(server, evt, 'failed');
    assert.equal(row.attempts, 1, 'refused, not retried');
    assert.match(row.last_error, /'localhost' resolves to (127\.0\.0\.1|::1), a loopback address; notifications go to public addresses only/);
    assert.equal(guard.requests.length, 0);
    const list = notify(server.dataDir, ['list', 'private']).stdout;
    assert.match(list, /last failed \d{4}-[^:]*:\d\d:[^:]*: 'localhost' resolves to/);
  } finally {
    await guard.close();
  }
});

// ---- the account page -----------------------------------------------------------------------

test('the account page adds, lists, tests and removes targets; a webhook\'s secret is shown once', async () => {
  setPassword(server, 'admin', PASSWORD);
  const jar = new CookieJar();
  assert.equal((await signIn(server, jar, { name: 'admin', password: PASSWORD })).status, 303);
  const card = (html) => html.slice(html.indexOf('<section class="card" id="notifications">'));
  let page = await request(server, '/account', { jar });
  assert.match(card(page.text), /<h2>Notifications<\/h2>/);
  assert.match(card(page.text), /No target: nothing tells you when a run ends\./);
  const add = forms(page.text).find((f) => f.action === '/account/notify/add');
  assert.ok(add, 'a form to add a target');
  assert.deepEqual(Object.keys(add.fields), ['csrf']);
  assert.ok(add.inputs.includes('url'));

  // a webhook: its secret on the page that answers, and nowhere after
  let r = await request(server, '/account/notify/add', { jar, form: { ...add.fields, kind: 'webhook', url: hook.url('/page?k=page-query-9') } });
  assert.equal(r.status, 200, r.text);
  assert.match(r.text, /<p role="status">The webhook is added\.<\/p>/);
  const secret = r.text.match(SECRET)[0];
  secrets.push(secret);
  page = await request(server, '/account', { jar });
  assert.ok(!page.text.includes(secret), 'the secret is shown again');
  assert.ok(!page.text.includes('page-query-9'), 'the URL\'s query is shown');
  assert.match(card(page.text), /<strong>Webhook<\/strong> <code>http:\/\/127\.0\.0\.1:\d+\/page\?…<\/code>/);
  assert.match(card(page.text), /nothing sent yet/);
  const testForm = forms(card(page.text)).find((f) => f.action === '/account/notify/test');
  const id = testForm.fields.id;
  assert.match(id, /^ntf_/);

  // a test: sent, signed with the secret the page showed
  r = await request(server, '/account/notify/test', { jar, form: testForm.fields });
  assert.equal(r.status, 303);
  assert.equal(r.headers.get('location'), '/account?done=notify-test');
  const [sent] = await hook.waitFor((q) => q.path === '/page?k=page-query-9', 'the test from the page');
  assert.equal(sent.json.type, 'test');
  assert.ok(signatureValid(secret, sent.headers['x-sandbox-mcp-signature'], sent.raw));
  await ended(server, sent.json.id, 'delivered');
  page = await request(server, '/account?done=notify-test', { jar });
  assert.match(page.text, /A test notification is on its way/);
  assert.match(card(page.text), /last delivered \d{4}-\d\d-\d\d \d\d:\d\d UTC/);

  // an ntfy topic: no secret, back to the page
  r = await request(server, '/account/notify/add', { jar, form: { ...add.fields, kind: 'ntfy', url: ntfy.url('/page-topic') } });
  assert.equal(r.status, 303, r.text);
  assert.equal(r.headers.get('location'), '/account?done=notify-added');

  // refused, each with its reason, nothing added
  const before = card((await request(server, '/account', { jar })).text);
  const bad = [
    [{ ...add.fields, kind: 'webhook', url: 'https://10.0.0.1/x' }, 400, /Not added: the URL&#39;s host 10\.0\.0\.1 is a private address \(RFC 1918\); notifications go to public addresses only\. Nothing was changed\./],
    [{ ...add.fields, kind: 'webhook', url: 'http://hooks.example.com/' }, 400, /must start with https:\/\//],
    [{ ...add.fields, kind: 'email', url: 'https://hooks.example.com/' }, 400, /the kind is webhook or ntfy/],
    [{ ...add.fields, kind: 'webhook' }, 400, /the URL is empty/],
    [{ ...add.fields, kind: 'webhook', url: `https://hooks.example.com/${'x'.repeat(5000)}` }, 413, /far longer than a URL may be/],
    [{ kind: 'webhook', url: 'https://hooks.example.com/' }, 403, /security token is missing/],
  ];
  for (const [form, status, re] of bad) {
    r = await request(server, '/account/notify/add', { jar, form });
    assert.equal(r.status, status, `${JSON.stringify(form).slice(0, 100)}: ${r.text.slice(0, 300)}`);
    assert.match(r.text, re);
  }
  assert.equal(card((await request(server, '/account', { jar })).text), before);
  const anon = new CookieJar();
  anon.set('smcp_csrf', add.fields.csrf);
  r = await request(server, '/account/notify/add', { jar: anon, form: { ...add.fields, kind: 'ntfy', url: 'https://ntfy.sh/x' } });
  assert.equal(r.status, 401);

  // another user's target cannot be removed or tested from here
  addUser(server, 'other-page');
  const theirs = addTarget(server.dataDir, 'other-page', 'ntfy', 'https://ntfy.sh/not-yours');
  for (const action of ['remove', 'test']) {
    r = await request(server, `/account/notify/${action}`, { jar, form: { csrf: add.fields.csrf, id: theirs.id } });
    assert.equal(r.status, 200);
    assert.match(r.text, /There is no such notification target\./);
  }
  assert.match(notify(server.dataDir, ['list', 'other-page']).stdout, new RegExp(theirs.id));
  assert.doesNotMatch(notify(server.dataDir, ['list', 'other-page']).stdout, /last /, 'nothing was sent there');

  // removed
  r = await request(server, '/account/notify/remove', { jar, form: { csrf: add.fields.csrf, id } });
  assert.equal(r.status, 303);
  assert.equal(r.headers.get('location'), '/account?done=notify-removed');
  page = await request(server, '/account', { jar });
  assert.ok(!page.text.includes(id));
  assert.ok(!server.stderr().includes('page-query-9'));
});

// ---- restarts -------------------------------------------------------------------------------

test('a notification outlives a restart, and once delivered is not sent again', async () => {
  const dir = tempDir('smcp-notify-restart-');
  const rcv = await startReceiver();
  let srv;
  try {
    srv = await startServer({ env: ENV, dataDir: dir });
    const t = addTarget(dir, 'admin', 'webhook', rcv.url('/restart'));
    rcv.fail(10000, 503, { 'retry-after': '1' });
    const evt = testEvent(dir, 'admin', t.id);
    await rcv.waitFor((q) => q.headers['idempotency-key'] === evt, 'a first attempt');
    await srv.stop();
    assertNoSanitizerReport(srv.stderr(), 'server');
    assert.equal(rows(srv, evt)[0].state, 'pending');
    rcv.heal();
    const tried = rcv.of(evt).length;

    srv = await startServer({ env: ENV, dataDir: dir });
    await rcv.waitFor((q) => q.headers['idempotency-key'] === evt && q.status === 200, 'delivery after the restart');
    await ended(srv, evt, 'delivered');
    const attempts = rcv.of(evt).map((q) => Number(q.headers['x-sandbox-mcp-attempt']));
    assert.ok(attempts.length > tried);
    assert.deepEqual(attempts, attempts.map((_, i) => i + 1), 'attempts are counted across the restart');
    for (const q of rcv.of(evt)) assert.ok(signatureValid(t.secret, q.headers['x-sandbox-mcp-signature'], q.raw));
    await srv.stop();
    assertNoSanitizerReport(srv.stderr(), 'server');

    // a third start sends what is new and nothing that was delivered
    const sent = rcv.requests.length;
    srv = await startServer({ env: ENV, dataDir: dir });
    const next = testEvent(dir, 'admin', t.id);
    await rcv.waitFor((q) => q.headers['idempotency-key'] === next && q.status === 200, 'the next event');
    assert.equal(rcv.processed.get(evt), 1, 'the delivered event was processed once');
    assert.deepEqual(rcv.requests.slice(sent).map((q) => q.headers['idempotency-key']), [next]);
    await srv.stop();
    assertNoSanitizerReport(srv.stderr(), 'server');
  } finally {
    if (srv?.proc.exitCode === null && srv.proc.signalCode === null) await srv.stop();
    await rcv.close();
    removeDataDir(dir);
  }
});
