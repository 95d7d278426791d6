// A fake GitHub on loopback: git smart HTTP (git http-backend as CGI, pushes included) and the
// REST endpoints the server uses for pull requests and their comments, under /api/v3 as on
// GitHub Enterprise. Every request must carry a token the test gave it; what arrived is recorded.
//
//   const gh = await startFakeGitHub({ tokens: ['ghp_alice'], repos: {
//     'acme/widget': { files: { 'README.md': '# widget\n' } },   // main, one commit
//     'acme/empty': { empty: true },                             // no commits at all
//     'acme/open': { public: true },                             // cloned without a token
//   } });
//   // GITHUB_BASE_URL=gh.url  GITHUB_API_URL=gh.api  FETCH_ALLOW=127.0.0.1:<gh.port>
//   gh.pulls, gh.comments, gh.requests; gh.log('acme/widget', 'branch'); gh.refs('acme/widget')
//   gh.refuse('acme/widget', 'pulls', 403, 'Resource not accessible by personal access token')
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { git as gitAs, gitHttpBackend } from './git.mjs';

const GIT_ENV = { GIT_AUTHOR_NAME: 'Fixture', GIT_AUTHOR_EMAIL: 'fixture@example.com',
  GIT_COMMITTER_NAME: 'Fixture', GIT_COMMITTER_EMAIL: 'fixture@example.com', GIT_CONFIG_NOSYSTEM: '1' };

// `git args` in cwd as the fixture's author (tests/lib/git.mjs git()).
export const git = (args, cwd) => gitAs(args, cwd, GIT_ENV);

function readBody(req, max = 1 << 20) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let n = 0;
    req.on('data', (d) => { n += d.length; if (n > max) reject(new Error('body too large')); else parts.push(d); });
    req.on('end', () => resolve(Buffer.concat(parts)));
    req.on('error', reject);
  });
}

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export async function startFakeGitHub({ tokens = [], repos = {} } = {}) {
  const root = mkdtempSync(path.join(tmpdir(), 'smcp-github-'));
  const shas = {};
  for (const [name, spec] of Object.entries(repos)) {
    const bare = path.join(root, `${name}.git`);
    mkdirSync(path.dirname(bare), { recursive: true });
    git(['init', '-q', '--bare', '-b', spec.head || 'main', bare]);
    git(['config', 'http.receivepack', 'true'], bare);
    if (spec.empty) continue;
    const work = path.join(root, '.work', name);
    mkdirSync(work, { recursive: true });
    git(['init', '-q', '-b', 'main', work]);
    for (const [f, content] of Object.entries(spec.files || { 'README.md': `# ${name}\n` })) {
      mkdirSync(path.dirname(path.join(work, f)), { recursive: true });
      writeFileSync(path.join(work, f), content);
    }
    git(['add', '-A'], work);
    git(['commit', '-q', '-m', spec.message || 'Initial commit'], work);
    git(['push', '-q', bare, 'main'], work);
    shas[name] = git(['rev-parse', 'HEAD'], work).trim();
  }
  rmSync(path.join(root, '.work'), { recursive: true, force: true });

  const pulls = [];     // {number, repo, title, body, head, base, draft, state, html_url, token}
  const comments = [];  // {repo, number, body, token}
  const requests = [];  // {method, path, token, kind: 'git'|'rest'}
  const refusals = {};  // "repo kind" -> {status, message}
  let nextNumber = 1;
  let url;

  function tokenOf(req) {
    const a = req.headers.authorization || '';
    if (a.startsWith('Bearer ')) return a.slice(7);
    if (a.startsWith('token ')) return a.slice(6);
    if (a.startsWith('Basic ')) {
      const plain = Buffer.from(a.slice(6), 'base64').toString();
      return plain.slice(plain.indexOf(':') + 1);
    }
    return null;
  }

  function pullJson(p) {
    return { number: p.number, html_url: p.html_url, state: p.state, draft: p.draft, merged: false,
      title: p.title, body: p.body, head: { ref: p.head }, base: { ref: p.base } };
  }

  async function rest(req, res, u, token) {
    const m = u.pathname.match(/^\/api\/v3\/repos\/([^/]+)\/([^/]+)\/(pulls|issues)(?:\/(\d+))?(?:\/(comments))?$/);
    if (!m) return json(res, 404, { message: 'Not Found' });
    const repo = `${m[1]}/${m[2]}`;
    if (!repos[repo]) return json(res, 404, { message: 'Not Found' });
    const kind = m[5] ? 'comments' : m[3];
    const refusal = refusals[`${repo} ${kind}`];
    if (refusal) return json(res, refusal.status, { message: refusal.message });
    const body = req.method === 'POST' ? JSON.parse((await readBody(req)).toString() || '{}') : null;
    const bare = path.join(root, `${repo}.git`);
    if (m[3] === 'pulls' && !m[4] && req.method === 'POST') {
      const exists = (b) => spawnSync('git', ['rev-parse', '--verify', '-q', `refs/heads/${b}`], { cwd: bare }).status === 0;
      const errors = [];
      if (!body.head || !exists(body.head)) errors.push({ resource: 'PullRequest', field: 'head', code: 'invalid' });
      if (!body.base || !exists(body.base)) errors.push({ resource: 'PullRequest', field: 'base', code: 'invalid' });
      if (pulls.some((p) => p.repo === repo && p.head === body.head && p.state === 'open'))
        errors.push({ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${m[1]}:${body.head}.` });
      if (errors.length) return json(res, 422, { message: 'Validation Failed', errors });
      const number = nextNumber++;
      const p = { number, repo, title: body.title, body: body.body, head: body.head, base: body.base,
        draft: !!body.draft, state: 'open', html_url: `${url}/${repo}/pull/${number}`, token };
      pulls.push(p);
      return json(res, 201, pullJson(p));
    }
    if (m[3] === 'pulls' && !m[4] && req.method === 'GET') {
      const head = u.searchParams.get('head') || '';
      const list = pulls.filter((p) => p.repo === repo && (!head || `${m[1]}:${p.head}` === head) &&
        (u.searchParams.get('state') || 'open') === p.state);
      return json(res, 200, list.map(pullJson));
    }
    const pr = pulls.find((p) => p.repo === repo && p.number === Number(m[4]));
    if (!pr) return json(res, 404, { message: 'Not Found' });
    if (m[3] === 'pulls' && req.method === 'GET' && !m[5]) return json(res, 200, pullJson(pr));
    if (m[3] === 'issues' && m[5] && req.method === 'POST') {
      comments.push({ repo, number: pr.number, body: body.body, token });
      return json(res, 201, { id: comments.length, body: body.body });
    }
    return json(res, 404, { message: 'Not Found' });
  }

  const server = http.createServer(async (req, res) => {
    const u = new URL(req.url, 'http://x');
    const token = tokenOf(req);
    const kind = u.pathname.startsWith('/api/v3/') ? 'rest' : 'git';
    requests.push({ method: req.method, path: u.pathname + u.search, token, kind });
    // a public repository is read without a token, as on GitHub
    const m = kind === 'git' && u.pathname.match(/^\/([^/]+\/[^/]+)\.git\//);
    const anonymous = m && repos[m[1]]?.public && !u.pathname.endsWith('/git-receive-pack') &&
      u.searchParams.get('service') !== 'git-receive-pack';
    if (!anonymous && (!token || !tokens.includes(token))) {
      if (kind === 'rest') return json(res, 401, { message: 'Bad credentials' });
      res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"' });
      res.end('Unauthorized\n');
      return;
    }
    try {
      if (kind === 'rest') await rest(req, res, u, token);
      else gitHttpBackend(req, res, root, { REMOTE_USER: 'fake', ...GIT_ENV });
    } catch (e) {
      if (!res.headersSent) json(res, 500, { message: e.message });
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  url = `http://127.0.0.1:${port}`;
  return {
    url, port, api: `${url}/api/v3`, root, shas, pulls, comments, requests,
    repoUrl: (name) => `${url}/${name}.git`,
    // the subjects of branch's commits, newest first ([] when the branch does not exist)
    log(repo, branch, range) {
      const r = spawnSync('git', ['log', '--format=%H %s', range || `refs/heads/${branch}`, '--'],
        { cwd: path.join(root, `${repo}.git`), encoding: 'utf8' });
      return r.status === 0 ? r.stdout.trim().split('\n').filter(Boolean).map((l) => ({ sha: l.slice(0, 40), subject: l.slice(41) })) : [];
    },
    refs(repo) {
      return git(['for-each-ref', '--format=%(refname)'], path.join(root, `${repo}.git`)).trim().split('\n').filter(Boolean);
    },
    show(repo, ref, file) {
      return git(['show', `${ref}:${file}`], path.join(root, `${repo}.git`));
    },
    refuse(repo, kind, status, message) { refusals[`${repo} ${kind}`] = { status, message }; },
    close: async () => {
      server.closeAllConnections?.();
      await new Promise((r) => server.close(r));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
