// Push checks off the loop. A push through /proxy/github moves its branch only forward, and
// whether it does costs what the pack makes it cost: a few MiB of pack may inflate to 16 times
// the request limit. The review had four connections re-send a refused 3 MiB push and saw every
// client's /healthz go from 0.4 ms to 190 ms median (523 ms max) while the loop inflated. Here
// the same flood runs while another client's /healthz and MCP calls must answer during a check,
// a token has one check under way at a time, a refused push holds the token's next ones back
// (git shows why), and a client that leaves while its push is checked leaves nothing behind.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import zlib from 'node:zlib';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { startServer, cli, rpc } from '../lib/server.mjs';
import { startFakeGitHub, git } from '../lib/fake-github.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const GH_TOKEN = 'ghp_push_check_operator_token_0123456789';
const MIB = 1 << 20;
let gh, work;

before(async () => {
  gh = await startFakeGitHub({ tokens: [GH_TOKEN], repos: { 'acme/widget': { files: { 'README.md': '# widget\n' } } } });
  git(['branch', 'feature', 'main'], path.join(gh.root, 'acme/widget.git'));
  work = mkdtempSync(path.join(tmpdir(), 'smcp-push-'));
});

after(async () => {
  await gh?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

function serverEnv(extra) {
  return { GITHUB_BASE_URL: gh.url, GITHUB_TOKEN: GH_TOKEN, GITHUB_REPOS: 'acme/widget', ...extra };
}

// A token that may push to acme/widget's branch 'feature': minted (so the store knows its id),
// then given the repository and branch claims a delivering run's token has.
function pushToken(srv) {
  const r = cli(['proxy-token', '--user', 'admin', '--services', 'github', '--data-dir', srv.dataDir]);
  assert.equal(r.status, 0, r.stderr);
  const [head, body] = r.stdout.trim().split('.');
  const claims = { ...JSON.parse(Buffer.from(body, 'base64url')), repo: 'acme/widget', push: 'feature' };
  const raw = readFileSync(path.join(srv.dataDir, 'secrets', 'proxy_jwt_secret'), 'utf8').trim();
  const key = crypto.createHmac('sha256', raw).update('sandbox-mcp proxy-jwt v1').digest();
  const signed = `${head}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return { token: `${signed}.${crypto.createHmac('sha256', key).update(signed).digest('base64url')}`, jti: claims.jti };
}

const pkt = (s) => { const b = Buffer.from(s); return Buffer.concat([Buffer.from((b.length + 4).toString(16).padStart(4, '0')), b]); };

function entryHeader(type, size) {
  const out = [];
  let c = (type << 4) | (size % 16);
  size = Math.floor(size / 16);
  while (size > 0) { out.push(c | 0x80); c = size % 128; size = Math.floor(size / 128); }
  out.push(c);
  return Buffer.from(out);
}

// A push of refs/heads/feature to a commit that does not descend from it, with a pack whose
// blobs inflate to `inflate` bytes (just under the check's budget: the whole pack is read) from
// about `bytes` of body: one blob of random bytes and blobs of zeros, each stored once.
function refusedPush(bytes, inflate, caps = 'report-status side-band-64k ') {
  const old = gh.shas['acme/widget'];
  const commit = Buffer.from(`tree ${'4b825dc642cb6eb9a060e54bf8d69288fbee4904'}\nparent ${'1'.repeat(40)}\nauthor A <a@x> 0 +0000\ncommitter A <a@x> 0 +0000\n\nnot a descendant\n`);
  const tip = crypto.createHash('sha1').update(Buffer.concat([Buffer.from(`commit ${commit.length}\0`), commit])).digest('hex');
  const random = crypto.randomBytes(bytes);
  const zeros = 8 * MIB, zeroZ = zlib.deflateSync(Buffer.alloc(zeros), { level: 9 });
  const entries = [Buffer.concat([entryHeader(1, commit.length), zlib.deflateSync(commit)]),
    Buffer.concat([entryHeader(3, random.length), zlib.deflateSync(random, { level: 0 })])];
  for (let n = random.length; n + zeros < inflate; n += zeros) entries.push(Buffer.concat([entryHeader(3, zeros), zeroZ]));
  const head = Buffer.alloc(12);
  head.write('PACK');
  head.writeUInt32BE(2, 4);
  head.writeUInt32BE(entries.length, 8);
  const pack = Buffer.concat([head, ...entries]);
  const sum = crypto.createHash('sha1').update(pack).digest();
  return Buffer.concat([pkt(`${old} ${tip} refs/heads/feature\0${caps}agent=test\n`), Buffer.from('0000'), pack, sum]);
}

function postPush(srv, token, body) {
  return fetch(`${srv.url}/proxy/github/acme/widget.git/git-receive-pack`, {
    method: 'POST', body,
    headers: { 'content-type': 'application/x-git-receive-pack-request',
      authorization: `Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}` },
  }).then(async (r) => ({ status: r.status, type: r.headers.get('content-type'), retry: r.headers.get('retry-after'), text: await r.text() }));
}

function run(cmd, args, opts = {}) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { ...opts, env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@x' } });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

// A clone of acme/widget whose HEAD is a commit on top of feature (a fast-forward), or with
// `orphan` a commit that shares no history with it.
async function cloneWith(name, { orphan = false } = {}) {
  const dir = path.join(work, name);
  assert.equal((await run('git', ['clone', '-q', path.join(gh.root, 'acme/widget.git'), dir])).status, 0);
  if (orphan) await run('git', ['-C', dir, 'checkout', '-q', '--orphan', 'other']);
  assert.equal((await run('git', ['-C', dir, 'commit', '-q', '--allow-empty', '-m', name])).status, 0);
  return dir;
}

function gitPush(srv, dir, token, refspec) {
  const url = `${srv.url}/proxy/github/acme/widget.git`.replace('http://', `http://x-access-token:${token}@`);
  return run('git', ['-c', 'credential.helper=', '-C', dir, 'push', url, refspec]);
}

const featureTip = () => git(['rev-parse', 'feature'], path.join(gh.root, 'acme/widget.git')).trim();

test('four connections re-send a refused 3 MiB push (review: /healthz 0.4 ms -> 190 ms median): /healthz and MCP answer while a check runs; a second push of the token is refused while its first is checked', async () => {
  // costly checks: a 3 MiB push that inflates to 300 MiB (64 MiB bodies may inflate to 1 GiB)
  const srv = await startServer({ env: serverEnv({ MAX_REQUEST_BYTES: '67108864', PROXY_MAX_REQUEST_BYTES: '67108864',
    PROXY_PUSH_BACKOFF_SECONDS: '0' }) });
  let stop = false, flood = [];
  try {
    const body = refusedPush(3 * MIB, 300 * MIB);
    const dir = await cloneWith('busy');
    const flooders = [1, 2, 3, 4].map(() => pushToken(srv));
    let refused = 0;
    const answers = [], failures = [];
    flood = flooders.map(async ({ token }) => {
      for (let i = 0; i < 1000 && !stop; i++) {
        try {
          const r = await postPush(srv, token, body);
          answers.push(r);
          if (r.status === 200 && /ng refs\/heads\/feature only fast-forward/.test(r.text)) refused++;
        } catch (e) {
          failures.push(e.cause?.message || e.message); // a connection the server cut
        }
      }
    });
    // the probe's own push: once it is queued, everything below happens while it is checked
    const probe = pushToken(srv);
    let heavyDone = false;
    const heavy = postPush(srv, probe.token, body).then((r) => r, (e) => ({ status: 0, text: e.cause?.message || e.message }))
      .then((r) => { heavyDone = true; return r; });
    // (on the loop, as before, it is answered, or its connection cut, without ever being queued)
    const queued = new RegExp(`proxy push check queued user=\\S+ run=- jti=${probe.jti} bytes=\\d+`);
    for (let i = 0; i < 6000 && !heavyDone && !queued.test(srv.stderr()); i++) await new Promise((r) => setTimeout(r, 20));
    assert.match(srv.stderr(), queued, `the probe's push was not queued for a check: ${JSON.stringify(await Promise.race([heavy, 'unanswered']))}`);
    // git's second push on the same token is refused at once, and git says why
    const second = await gitPush(srv, dir, probe.token, 'HEAD:refs/heads/feature');
    assert.notEqual(second.status, 0);
    assert.match(second.stderr, /! \[remote rejected\] HEAD -> feature \(another push with this token is being checked: retry once it is answered\)/);
    // another client's calls answer, all of them, while the probe's push is still being checked
    let healthz = 0, mcp = 0;
    for (let i = 0; i < 20; i++) {
      const h = await fetch(`${srv.url}/healthz`);
      await h.arrayBuffer();
      if (h.status === 200) healthz++;
      if (i % 5 === 0) {
        const r = await rpc(srv, { jsonrpc: '2.0', id: i, method: 'tools/list' });
        if (r.status === 200 && Array.isArray(r.body?.result?.tools)) mcp++;
      }
    }
    assert.equal(heavyDone, false, 'the probe\'s push was answered before the other calls were');
    assert.equal(healthz, 20);
    assert.equal(mcp, 4);
    const h = await heavy;
    assert.equal(h.status, 200, h.text);
    assert.equal(h.type, 'application/x-git-receive-pack-result');
    assert.match(h.text, /ng refs\/heads\/feature only fast-forward pushes to 'feature' are allowed: [0-9a-f]{12} does not descend from [0-9a-f]{12}/);
    stop = true;
    await Promise.all(flood);
    assert.deepEqual(failures, []);
    assert.ok(refused >= 4, `refused ${refused} of ${answers.length}: ${answers.map((a) => a.status + ' ' + a.text.slice(0, 120)).join('\n')}`);
    assert.equal(featureTip(), gh.shas['acme/widget']);
    // a fast-forward push of the same token goes through now that its check is done
    const ok = await gitPush(srv, dir, probe.token, 'HEAD:refs/heads/feature');
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(featureTip(), git(['-C', dir, 'rev-parse', 'HEAD']).trim());
    git(['update-ref', 'refs/heads/feature', gh.shas['acme/widget']], path.join(gh.root, 'acme/widget.git'));
  } finally {
    stop = true;
    await srv.stop();
    await Promise.all(flood);
  }
  assertNoSanitizerReport(srv.stderr(), 'server');
});

test('a refused push holds the token\'s next pushes back, and git shows for how long and why', async () => {
  const srv = await startServer({ env: serverEnv({ PROXY_PUSH_BACKOFF_SECONDS: '30', PROXY_PUSH_BACKOFF_MAX_SECONDS: '120' }) });
  try {
    const { token } = pushToken(srv);
    const rewrite = await cloneWith('rewrite', { orphan: true });
    const first = await gitPush(srv, rewrite, token, '+HEAD:refs/heads/feature');
    assert.notEqual(first.status, 0);
    assert.match(first.stderr, /! \[remote rejected\] HEAD -> feature \(only fast-forward pushes to 'feature' are allowed: [0-9a-f]{12} does not descend from [0-9a-f]{12} \(pushes with this token are now refused for 30 s\)\)/);
    // even a fast-forward is refused while the token is held back, without a check
    const forward = await cloneWith('forward');
    const again = await gitPush(srv, forward, token, 'HEAD:refs/heads/feature');
    assert.notEqual(again.status, 0);
    assert.match(again.stderr, /! \[remote rejected\] HEAD -> feature \(pushes with this token are held back for 30 s after a refused push \(the wait doubles with each refused push, up to 120 s\): retry in \d+ s; the last was refused: [0-9a-f]{12} does not descend from [0-9a-f]{12}\)/);
    assert.equal(featureTip(), gh.shas['acme/widget']);
    await srv.waitLog(/proxy push refused user=\S+ run=- repo=acme\/widget why="pushes with this token are held back for 30 s[^"]*" code=push_held_back/);
    // a client that does not ask for git's report gets 429 with Retry-After
    const raw = await postPush(srv, token, refusedPush(1024, 1024, ''));
    assert.equal(raw.status, 429);
    assert.ok(Number(raw.retry) >= 1 && Number(raw.retry) <= 30, raw.retry);
    assert.equal(JSON.parse(raw.text).code, 'push_held_back');
    // another token is not held back
    const other = pushToken(srv);
    const ok = await gitPush(srv, forward, other.token, 'HEAD:refs/heads/feature');
    assert.equal(ok.status, 0, ok.stderr);
    git(['update-ref', 'refs/heads/feature', gh.shas['acme/widget']], path.join(gh.root, 'acme/widget.git'));
  } finally {
    await srv.stop();
  }
  assertNoSanitizerReport(srv.stderr(), 'server');
});

test('a client that goes away while its push is checked: the answer is dropped, the token is free again once the check ends', async () => {
  const srv = await startServer({ env: serverEnv({ MAX_REQUEST_BYTES: '67108864', PROXY_MAX_REQUEST_BYTES: '67108864',
    PROXY_PUSH_BACKOFF_SECONDS: '0', PROXY_PUSH_CHECKS: '1' }) });
  try {
    const body = refusedPush(3 * MIB, 300 * MIB);
    // one thread, kept busy by other tokens' pushes, so the leaving client's check waits its turn
    const ahead = [];
    for (const busy of [pushToken(srv), pushToken(srv)]) {
      ahead.push(postPush(srv, busy.token, body));
      await srv.waitLog(new RegExp(`proxy push check queued user=\\S+ run=- jti=${busy.jti} `), 60000);
    }
    const { token, jti } = pushToken(srv);
    const sock = net.connect(Number(new URL(srv.url).port), '127.0.0.1');
    await new Promise((r) => sock.on('connect', r));
    sock.on('error', () => {});
    sock.write(`POST /proxy/github/acme/widget.git/git-receive-pack HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-git-receive-pack-request\r\n` +
      `authorization: Basic ${Buffer.from(`x-access-token:${token}`).toString('base64')}\r\ncontent-length: ${body.length}\r\n\r\n`);
    sock.write(body);
    await srv.waitLog(new RegExp(`proxy push check queued user=\\S+ run=- jti=${jti} `), 60000);
    sock.destroy();
    await srv.waitLog(new RegExp(`proxy push check dropped user=\\S+ run=- jti=${jti} reason=client-gone`), 120000);
    for (const a of await Promise.all(ahead)) assert.equal(a.status, 200);
    // the token's next push is checked again (and refused as a rewrite), the server unharmed
    const r = await postPush(srv, token, refusedPush(1024, 1024));
    assert.equal(r.status, 200);
    assert.match(r.text, /ng refs\/heads\/feature only fast-forward/);
    assert.equal((await fetch(`${srv.url}/healthz`)).status, 200);
  } finally {
    await srv.stop();
  }
  assertNoSanitizerReport(srv.stderr(), 'server');
});
