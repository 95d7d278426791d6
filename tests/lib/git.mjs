// Git for the tests: a git command that must succeed, bare repositories for runs to clone, and a
// git smart-HTTP server on loopback (git http-backend as CGI) standing in for GitHub or any other
// git host. What a test that runs beside others (describe with concurrency) calls is
// asynchronous: a synchronous child process stops the test's event loop, and with it the other
// tests' requests half-sent, which the server then rightly closes (PREAUTH_HEAD_SECONDS).
import { execFile, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';

// An identity for the commits the tests make, and no system configuration.
export const GIT_ENV = { GIT_AUTHOR_NAME: 'Tester', GIT_AUTHOR_EMAIL: 'tester@example.com',
  GIT_COMMITTER_NAME: 'Tester', GIT_COMMITTER_EMAIL: 'tester@example.com', GIT_CONFIG_NOSYSTEM: '1' };

// `git args` in cwd, synchronously; returns its stdout, throws with its stderr if it fails.
// For setup that runs alone (before hooks, tests that run one at a time).
export function git(args, cwd, env = {}) {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV, ...env } });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

// git() without blocking the event loop.
export function gitAsync(args, cwd, env = {}) {
  return new Promise((resolve, reject) => {
    execFile('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...GIT_ENV, ...env } },
      (e, stdout, stderr) => (e ? reject(new Error(`git ${args.join(' ')}: ${stderr || e.message}`)) : resolve(stdout)));
  });
}

// A bare repository at bare (a path ending in .git) whose HEAD names main, with one commit on
// main ("message", adding README.md with readme) and, with feature, a branch feature one commit
// further ("Add feature", adding feature.txt "feature work\n"). Returns bare.
export async function bareRepo(bare, { readme = `# ${path.basename(bare, '.git')}\n`, message = 'Initial commit',
  feature = false } = {}) {
  const work = mkdtempSync(path.join(tmpdir(), 'smcp-work-'));
  try {
    mkdirSync(path.dirname(bare), { recursive: true });
    await gitAsync(['init', '-q', '--bare', bare]);
    await gitAsync(['symbolic-ref', 'HEAD', 'refs/heads/main'], bare);
    await gitAsync(['init', '-q', '-b', 'main', work]);
    writeFileSync(path.join(work, 'README.md'), readme);
    await gitAsync(['add', 'README.md'], work);
    await gitAsync(['commit', '-q', '-m', message], work);
    await gitAsync(['push', '-q', bare, 'main'], work);
    if (feature) {
      await gitAsync(['checkout', '-q', '-b', 'feature'], work);
      writeFileSync(path.join(work, 'feature.txt'), 'feature work\n');
      await gitAsync(['add', 'feature.txt'], work);
      await gitAsync(['commit', '-q', '-m', 'Add feature'], work);
      await gitAsync(['push', '-q', bare, 'feature'], work);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return bare;
}

// A bare repository at bare whose main has one commit with files ({path: text}).
export async function repoWithFiles(bare, files) {
  const work = mkdtempSync(path.join(tmpdir(), 'smcp-work-'));
  try {
    mkdirSync(path.dirname(bare), { recursive: true });
    await gitAsync(['init', '-q', '--bare', bare]);
    await gitAsync(['symbolic-ref', 'HEAD', 'refs/heads/main'], bare);
    await gitAsync(['init', '-q', '-b', 'main', work]);
    for (const [p, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(work, p)), { recursive: true });
      writeFileSync(path.join(work, p), text);
    }
    await gitAsync(['add', '-A'], work);
    await gitAsync(['commit', '-q', '-m', 'Initial commit'], work);
    await gitAsync(['push', '-q', bare, 'HEAD:main'], work);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return bare;
}

// Answer req with `git http-backend` (git's smart HTTP as CGI) serving the repositories under
// root; env adds to the CGI's environment (REMOTE_USER lets it accept pushes).
export function gitHttpBackend(req, res, root, env = {}) {
  const u = new URL(req.url, 'http://x');
  const cgi = spawn('git', ['http-backend'], { env: {
    ...process.env, GIT_PROJECT_ROOT: root, GIT_HTTP_EXPORT_ALL: '1', PATH_INFO: u.pathname,
    QUERY_STRING: u.search.slice(1), REQUEST_METHOD: req.method,
    CONTENT_TYPE: req.headers['content-type'] || '', REMOTE_ADDR: '127.0.0.1',
    HTTP_CONTENT_ENCODING: req.headers['content-encoding'] || '',
    GIT_PROTOCOL: req.headers['git-protocol'] || '', ...env,
  } });
  const fail = (status, text) => { res.writeHead(status, { 'content-type': 'text/plain' }); res.end(text); };
  cgi.on('error', (e) => { if (!res.headersSent) fail(500, `git http-backend: ${e.message}\n`); });
  req.pipe(cgi.stdin);
  cgi.stdin.on('error', () => {});
  let head = Buffer.alloc(0), sent = false;
  cgi.stdout.on('data', (d) => {
    if (sent) { res.write(d); return; }
    head = Buffer.concat([head, d]);
    const crlf = head.indexOf('\r\n\r\n'), lf = head.indexOf('\n\n');
    const i = crlf >= 0 ? crlf : lf;
    if (i < 0) return;
    let status = 200;
    const headers = {};
    for (const l of head.subarray(0, i).toString().split(/\r?\n/)) {
      const c = l.indexOf(':');
      if (c < 0) continue;
      const k = l.slice(0, c).trim(), v = l.slice(c + 1).trim();
      if (k.toLowerCase() === 'status') status = parseInt(v, 10);
      else headers[k] = v;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(i + (crlf >= 0 ? 4 : 2)));
    sent = true;
  });
  cgi.stdout.on('end', () => {
    if (res.headersSent && !sent) return;
    if (!sent) fail(502, 'git http-backend gave no answer\n');
    else res.end();
  });
}

// A git smart-HTTP server on loopback serving the repositories under root. Every request is
// recorded ({method, url, auth}); route(req, res, url), when given, may answer a request itself
// (returning true) before git does. Returns {url, port, requests, seen(prefix), close()}.
export async function startGitServer(root, { route } = {}) {
  const requests = [];
  const srv = http.createServer((req, res) => {
    requests.push({ method: req.method, url: req.url, auth: req.headers.authorization || null });
    if (route && route(req, res, new URL(req.url, 'http://x'))) return;
    gitHttpBackend(req, res, root, { REMOTE_USER: 'x' });
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    port: srv.address().port,
    requests,
    seen: (p) => requests.filter((r) => new URL(r.url, 'http://x').pathname.startsWith(p)),
    close: () => new Promise((r) => { srv.closeAllConnections?.(); srv.close(r); }),
  };
}
