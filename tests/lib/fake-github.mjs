// A fake GitHub on loopback: git smart HTTP (git http-backend as CGI, pushes included) and the
// REST endpoints the server uses for pull requests, their conversation, reviews, checks and
// Actions logs, under /api/v3 as on GitHub Enterprise (and of GraphQL, at /api/graphql, the one
// query `gh pr view` makes). Every request must carry a token the test
// gave it (blob downloads excepted: their URL's signature is the authorization, as on GitHub);
// what arrived is recorded.
//
//   const gh = await startFakeGitHub({ tokens: ['ghp_alice'], users: { ghp_alice: 'alice' }, repos: {
//     'acme/widget': { files: { 'README.md': '# widget\n' } },   // main, one commit
//     'acme/empty': { empty: true },                             // no commits at all
//     'acme/open': { public: true },                             // cloned without a token
//   } });
//   // GITHUB_BASE_URL=gh.url  GITHUB_API_URL=gh.api  FETCH_ALLOW=127.0.0.1:<gh.port>
//   // users: a token's login (GET /user); a token without one is user-<its index in tokens>
//   gh.pulls, gh.comments (those POSTed), gh.requests ({method, path, token, kind:
//   'git'|'rest'|'blob', status, authorized (blobs)}); gh.log('acme/widget', 'branch');
//   gh.refs('acme/widget'); gh.show('acme/widget', 'main', 'README.md')
//   gh.refuse('acme/widget', 'pulls', 403, 'Resource not accessible by personal access token')
//   gh.script('POST', /\/pulls$/, [[502, { message: 'Server Error' }]])  (then answered as usual)
//     kinds: pulls, comments (issue comments), reviews, review-comments, check-runs,
//     check-suites, statuses, runs, jobs, logs
//
// A pull request review loop: what a test adds, the REST reads serve (GitHub's shapes, newest
// run first, ETag / If-None-Match 304, x-ratelimit-* headers, per_page/page with Link).
//   gh.addPull('acme/widget', { head: 'feature', base: 'main', title, login })  (or POST /pulls)
//   gh.addComment(repo, n, { login, body })                    -> issues/{n}/comments
//   gh.addReview(repo, n, { login, state: 'CHANGES_REQUESTED', body })  -> pulls/{n}/reviews
//   gh.addReviewComment(repo, n, { login, body, path, line })  -> pulls/{n}/comments
//   const run = gh.addWorkflowRun(repo, { name: 'CI', head_branch: 'feature', conclusion: 'failure',
//     jobs: [{ name: 'test', conclusion: 'failure', steps: [{ name: 'npm test', log: 'boom' }] }] });
//     -> actions/runs, actions/runs/{id}/jobs, actions/workflows/{id}, actions/jobs/{id}/logs (302 to /_blobs/...),
//        actions/runs/{id}/logs (a zip), commits/{ref}/check-runs and check-suites
//   gh.setRunConclusion(repo, run.id, 'success'); gh.addStatus(repo, sha, { state, context })
//   gh.closePull(repo, n, { merged: true }); gh.pull(repo, n)
//   await gh.sendWebhook(hookUrl, 'issue_comment', gh.payloads.issueComment(repo, n, c), { secret })
//     -> {status, body, id}; payloads: issueComment, review, reviewComment (repo, n, record),
//        workflowRun, checkSuite (repo, run), pullClosed (repo, n)
//   gh.issueComments, gh.reviews, gh.reviewComments, gh.runs, gh.statuses: all that is stored
// Mutators return the stored record (live: GitHub's field names plus repo, number, login).
import { spawnSync } from 'node:child_process';
import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { git as gitAs, gitHttpBackend } from './git.mjs';
import { zip } from './registries.mjs';

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

// GitHub's timestamps: ISO 8601 in UTC to the second.
const now = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');


// A name as the Actions log zip has it: no '/' or ':', at most 90 UTF-16 units (cli/cli's
// getJobNameForLogFilename).
const zipName = (s) => s.replace(/[/:]/g, '').slice(0, 90).trim();

// The GitHub Actions app, as check suites and runs name it.
const ACTIONS_APP = { id: 15368, slug: 'github-actions', name: 'GitHub Actions',
  owner: { login: 'github', id: 9919, type: 'Organization' } };

const REVIEW_STATES = { APPROVE: 'APPROVED', REQUEST_CHANGES: 'CHANGES_REQUESTED', COMMENT: 'COMMENTED' };

// POST payload (an object, or a string / Buffer sent as is) to target as GitHub delivers a
// webhook. Returns {status, body, id}.
export function sendWebhook(target, event, payload, { secret, id = randomUUID(), signature, hookId = 424242 } = {}) {
  const body = typeof payload === 'string' || Buffer.isBuffer(payload) ? Buffer.from(payload) : Buffer.from(JSON.stringify(payload));
  const headers = { 'Content-Type': 'application/json', 'Content-Length': body.length,
    'User-Agent': 'GitHub-Hookshot/fake', 'X-GitHub-Event': event, 'X-GitHub-Delivery': id,
    'X-GitHub-Hook-ID': String(hookId), 'X-GitHub-Hook-Installation-Target-Type': 'repository' };
  if (payload?.repository?.id) headers['X-GitHub-Hook-Installation-Target-ID'] = String(payload.repository.id);
  if (signature !== undefined) headers['X-Hub-Signature-256'] = signature;
  else if (secret !== undefined) headers['X-Hub-Signature-256'] = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  const u = new URL(target);
  return new Promise((resolve, reject) => {
    const r = (u.protocol === 'https:' ? https : http).request(u, { method: 'POST', headers, agent: false }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(parts).toString(), id }));
      res.on('error', reject);
    });
    r.on('error', reject);
    r.end(body);
  });
}

export async function startFakeGitHub({ tokens = [], repos = {}, users = {}, rateLimit = 5000 } = {}) {
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

  // {number, repo, title, body, head, base, draft, state, html_url, token, id, issue_id, login,
  //  merged, merged_at, closed_at, created_at, updated_at, head_sha (last seen), closed_by}
  const pulls = [];
  const comments = [];       // the issue comments that arrived by POST (also in issueComments)
  const issueComments = [];  // {id, repo, number, login, body, html_url, created_at, updated_at, author_association, token?}
  const reviews = [];        // {id, repo, number, login, body, state, commit_id, html_url, submitted_at, author_association}
  const reviewComments = []; // {id, repo, number, login, body, path, line, side, diff_hunk, pull_request_review_id, ...}
  const runs = [];           // {id, repo, name, head_sha, head_branch, status, conclusion, jobs: [...], suite: {id}, ...}
  const statuses = [];       // {id, repo, sha, state, context, description, target_url, login, created_at}
  const requests = [];       // {method, path, token, kind: 'git'|'rest'|'blob', status, authorized?}
  const refusals = {};       // "repo kind" -> {status, message}
  const scripted = [];       // {method, re, replies: [[status, body, headers], ...]}: answered first, in turn
  const blobs = new Map();   // signature -> {name, type, data}
  const spent = new Map();   // token -> requests counted against its rate limit
  const valid = new Set([...tokens, ...Object.keys(users)]);
  const reset = Math.floor(Date.now() / 1000) + 3600;
  let nextNumber = 1;
  let nextId = 1000001;      // GitHub-like ids, one sequence for every kind of object
  const ids = new Map();     // stable ids of users, repositories, workflows
  const idOf = (key) => { if (!ids.has(key)) ids.set(key, nextId++); return ids.get(key); };
  let url, api;

  const loginOf = (token) => users[token] ?? `user-${tokens.indexOf(token)}`;
  const bareOf = (repo) => path.join(root, `${repo}.git`);
  const ownerOf = (repo) => repo.split('/')[0];
  // the commit ref names in repo, or null
  function tip(repo, ref) {
    if (!ref || ref.startsWith('-')) return null;
    const r = spawnSync('git', ['rev-parse', '--verify', '-q', `${ref}^{commit}`], { cwd: bareOf(repo), encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim() : null;
  }
  const headSha = (p) => (p.head_sha = tip(p.repo, `refs/heads/${p.head}`) || p.head_sha || null);
  const association = (repo, login) => (login === ownerOf(repo) ? 'OWNER' : 'COLLABORATOR');
  function need(repo, number) {
    const p = pulls.find((q) => q.repo === repo && q.number === Number(number));
    if (!p) throw new Error(`fake GitHub: no pull request ${repo}#${number}`);
    return p;
  }
  const byId = (list, x) => list.find((o) => o.id === Number(typeof x === 'object' ? x.id : x));

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

  // --- the objects as GitHub's REST API and webhooks show them ---

  const userJson = (login) => ({ login, id: idOf(`user ${login}`), type: login.endsWith('[bot]') ? 'Bot' : 'User',
    site_admin: false, html_url: `${url}/${login}`, url: `${api}/users/${login}` });
  const repoJson = (repo) => ({ id: idOf(`repo ${repo}`), name: repo.split('/')[1], full_name: repo,
    private: !repos[repo].public, owner: userJson(ownerOf(repo)), html_url: `${url}/${repo}`,
    url: `${api}/repos/${repo}`, default_branch: repos[repo].head || 'main' });
  const branchJson = (repo, ref, sha) => ({ label: `${ownerOf(repo)}:${ref}`, ref, sha,
    user: userJson(ownerOf(repo)), repo: repoJson(repo) });

  function pullJson(p) {
    const a = `${api}/repos/${p.repo}`;
    return { url: `${a}/pulls/${p.number}`, id: p.id, number: p.number, html_url: p.html_url,
      diff_url: `${p.html_url}.diff`, patch_url: `${p.html_url}.patch`, issue_url: `${a}/issues/${p.number}`,
      state: p.state, locked: false, title: p.title, body: p.body, user: userJson(p.login), draft: p.draft,
      merged: p.merged, merged_at: p.merged_at, closed_at: p.closed_at, created_at: p.created_at,
      updated_at: p.updated_at, comments_url: `${a}/issues/${p.number}/comments`,
      review_comments_url: `${a}/pulls/${p.number}/comments`,
      head: branchJson(p.repo, p.head, headSha(p)), base: branchJson(p.repo, p.base, tip(p.repo, `refs/heads/${p.base}`)) };
  }
  function issueJson(p) {
    const a = `${api}/repos/${p.repo}`;
    return { url: `${a}/issues/${p.number}`, repository_url: a, html_url: p.html_url, id: p.issue_id,
      number: p.number, title: p.title, user: userJson(p.login), labels: [], state: p.state, locked: false,
      comments: issueComments.filter((c) => c.repo === p.repo && c.number === p.number).length,
      created_at: p.created_at, updated_at: p.updated_at, closed_at: p.closed_at,
      author_association: association(p.repo, p.login), body: p.body,
      pull_request: { url: `${a}/pulls/${p.number}`, html_url: p.html_url, diff_url: `${p.html_url}.diff`,
        patch_url: `${p.html_url}.patch`, merged_at: p.merged_at } };
  }
  const commentJson = (c) => ({ id: c.id, url: `${api}/repos/${c.repo}/issues/comments/${c.id}`,
    html_url: c.html_url, issue_url: `${api}/repos/${c.repo}/issues/${c.number}`, body: c.body,
    user: userJson(c.login), created_at: c.created_at, updated_at: c.updated_at, author_association: c.author_association });
  const reviewJson = (r) => ({ id: r.id, user: userJson(r.login), body: r.body, state: r.state,
    html_url: r.html_url, pull_request_url: `${api}/repos/${r.repo}/pulls/${r.number}`,
    author_association: r.author_association, submitted_at: r.submitted_at, commit_id: r.commit_id });
  const reviewCommentJson = (c) => ({ url: `${api}/repos/${c.repo}/pulls/comments/${c.id}`, id: c.id,
    pull_request_review_id: c.pull_request_review_id, diff_hunk: c.diff_hunk, path: c.path,
    commit_id: c.commit_id, original_commit_id: c.commit_id, user: userJson(c.login), body: c.body,
    created_at: c.created_at, updated_at: c.updated_at, html_url: c.html_url,
    pull_request_url: `${api}/repos/${c.repo}/pulls/${c.number}`, author_association: c.author_association,
    start_line: null, original_start_line: null, start_side: null, line: c.line, original_line: c.line,
    side: c.side, subject_type: c.line == null ? 'file' : 'line',
    ...(c.in_reply_to_id ? { in_reply_to_id: c.in_reply_to_id } : {}) });

  // the open pull requests from repo's branch, as runs and suites list them
  const pullRefs = (repo, branch) => pulls.filter((p) => p.repo === repo && p.head === branch && p.state === 'open')
    .map((p) => { const ref = (b, sha) => ({ ref: b, sha, repo: { id: idOf(`repo ${repo}`), url: `${api}/repos/${repo}`, name: repo.split('/')[1] } });
      return { url: `${api}/repos/${repo}/pulls/${p.number}`, id: p.id, number: p.number,
        head: ref(p.head, headSha(p)), base: ref(p.base, tip(repo, `refs/heads/${p.base}`)) }; });

  function runJson(r) {
    const a = `${api}/repos/${r.repo}`;
    return { id: r.id, name: r.name, display_title: r.name, path: r.path, head_branch: r.head_branch,
      head_sha: r.head_sha, run_number: r.run_number, run_attempt: r.run_attempt, event: r.event,
      status: r.status, conclusion: r.conclusion, workflow_id: r.workflow_id, check_suite_id: r.suite.id,
      url: `${a}/actions/runs/${r.id}`, html_url: r.html_url, pull_requests: pullRefs(r.repo, r.head_branch),
      created_at: r.created_at, updated_at: r.updated_at, run_started_at: r.created_at,
      actor: userJson(r.login), triggering_actor: userJson(r.login),
      jobs_url: `${a}/actions/runs/${r.id}/jobs`, logs_url: `${a}/actions/runs/${r.id}/logs`,
      check_suite_url: `${a}/check-suites/${r.suite.id}`, workflow_url: `${a}/actions/workflows/${r.workflow_id}`,
      repository: repoJson(r.repo), head_repository: repoJson(r.repo) };
  }
  const jobJson = (r, j) => ({ id: j.id, run_id: r.id, run_url: `${api}/repos/${r.repo}/actions/runs/${r.id}`,
    run_attempt: r.run_attempt, head_sha: r.head_sha, head_branch: r.head_branch,
    url: `${api}/repos/${r.repo}/actions/jobs/${j.id}`, html_url: j.html_url, status: j.status,
    conclusion: j.conclusion, created_at: r.created_at, started_at: j.started_at, completed_at: j.completed_at,
    name: j.name, steps: j.steps.map((s) => ({ name: s.name, status: s.status, conclusion: s.conclusion,
      number: s.number, started_at: j.started_at, completed_at: s.status === 'completed' ? j.completed_at : null })),
    check_run_url: `${api}/repos/${r.repo}/check-runs/${j.id}`, labels: ['ubuntu-latest'],
    runner_id: 1, runner_name: 'GitHub Actions 1', runner_group_id: 1, runner_group_name: 'GitHub Actions',
    workflow_name: r.name });
  // an Actions job is also a check run, with the same id
  const checkRunJson = (r, j) => ({ id: j.id, name: j.name, head_sha: r.head_sha, external_id: '',
    url: `${api}/repos/${r.repo}/check-runs/${j.id}`, html_url: j.html_url, details_url: j.html_url,
    status: j.status, conclusion: j.conclusion, started_at: j.started_at, completed_at: j.completed_at,
    output: { title: j.output?.title ?? null, summary: j.output?.summary ?? null, text: j.output?.text ?? null,
      annotations_count: 0, annotations_url: `${api}/repos/${r.repo}/check-runs/${j.id}/annotations` },
    check_suite: { id: r.suite.id }, app: ACTIONS_APP, pull_requests: pullRefs(r.repo, r.head_branch) });
  const suiteJson = (r) => ({ id: r.suite.id, head_branch: r.head_branch, head_sha: r.head_sha,
    status: r.status, conclusion: r.conclusion, url: `${api}/repos/${r.repo}/check-suites/${r.suite.id}`,
    before: null, after: r.head_sha, pull_requests: pullRefs(r.repo, r.head_branch), app: ACTIONS_APP,
    created_at: r.created_at, updated_at: r.updated_at, latest_check_runs_count: r.jobs.length,
    check_runs_url: `${api}/repos/${r.repo}/check-suites/${r.suite.id}/check-runs`, repository: repoJson(r.repo) });
  function combinedStatus(repo, sha) {
    const latest = new Map();
    for (const s of statuses) if (s.repo === repo && s.sha === sha) latest.set(s.context, s);
    const list = [...latest.values()].reverse();
    const state = list.some((s) => s.state === 'failure' || s.state === 'error') ? 'failure'
      : !list.length || list.some((s) => s.state === 'pending') ? 'pending' : 'success';
    return { state, sha,
      total_count: list.length, statuses: list.map((s) => ({ url: `${api}/repos/${repo}/statuses/${sha}`, id: s.id,
        state: s.state, description: s.description, target_url: s.target_url, context: s.context,
        created_at: s.created_at, updated_at: s.created_at, creator: userJson(s.login) })),
      repository: repoJson(repo), commit_url: `${api}/repos/${repo}/commits/${sha}`,
      url: `${api}/repos/${repo}/commits/${sha}/status` };
  }

  // A job's log as Actions writes it: each step a ##[group] header, then its lines, every line
  // timestamped; the step logs and the whole.
  function jobLog(j) {
    const start = Date.parse(j.started_at);
    let i = 0;
    const stamp = (l) => `${new Date(start + i++).toISOString().replace(/Z$/, '0000Z')} ${l}`;
    const steps = j.steps.map((s) => {
      const lines = String(s.log ?? '').split('\n');
      if (lines.at(-1) === '') lines.pop();
      if (s.conclusion === 'failure') lines.push('##[error]Process completed with exit code 1.');
      return [`##[group]Run ${s.name}`, '##[endgroup]', ...lines].map(stamp).join('\n') + '\n';
    });
    return { steps, text: steps.join('') };
  }
  // a redirect target for data, as GitHub hands out signed blob-storage URLs
  function blobUrl(name, type, data) {
    const sig = randomBytes(16).toString('hex');
    blobs.set(sig, { name, type, data });
    return `${url}/_blobs/${name}?sig=${sig}`;
  }

  // --- what tests add ---

  function addPull(repo, { head, base = 'main', title = head, body = null, draft = false, login, token } = {}) {
    if (!repos[repo]) throw new Error(`fake GitHub: no repository ${repo}`);
    const number = nextNumber++, t = now();
    const p = { number, repo, title, body, head, base, draft: !!draft, state: 'open',
      html_url: `${url}/${repo}/pull/${number}`, token, id: nextId++, issue_id: nextId++,
      login: login ?? (token ? loginOf(token) : ownerOf(repo)), merged: false, merged_at: null,
      closed_at: null, created_at: t, updated_at: t, head_sha: null, closed_by: null };
    headSha(p);
    pulls.push(p);
    return p;
  }
  function addComment(repo, number, { login = ownerOf(repo), body = '', author_association } = {}) {
    const p = need(repo, number), id = nextId++, t = now();
    const c = { id, repo, number: p.number, login, body, html_url: `${p.html_url}#issuecomment-${id}`,
      created_at: t, updated_at: t, author_association: author_association ?? association(repo, login) };
    issueComments.push(c);
    p.updated_at = t;
    return c;
  }
  function addReview(repo, number, { login = ownerOf(repo), state = 'COMMENTED', body = '', commit_id, author_association } = {}) {
    const p = need(repo, number), id = nextId++, t = now();
    const r = { id, repo, number: p.number, login, body, state: REVIEW_STATES[state] || state,
      commit_id: commit_id ?? headSha(p), html_url: `${p.html_url}#pullrequestreview-${id}`, submitted_at: t,
      author_association: author_association ?? association(repo, login) };
    reviews.push(r);
    p.updated_at = t;
    return r;
  }
  // without review_id, the comment comes with its own COMMENTED review, as a lone comment does on GitHub
  function addReviewComment(repo, number, { login = ownerOf(repo), body = '', path: file, line = null, side = 'RIGHT',
    diff_hunk, commit_id, review_id, in_reply_to_id, author_association } = {}) {
    const p = need(repo, number);
    const sha = commit_id ?? headSha(p);
    const review = review_id ?? addReview(repo, number, { login, commit_id: sha, author_association }).id;
    const id = nextId++, t = now();
    const c = { id, repo, number: p.number, login, body, path: file, line, side,
      diff_hunk: diff_hunk ?? `@@ -${line ?? 1},1 +${line ?? 1},1 @@`, commit_id: sha, pull_request_review_id: review,
      in_reply_to_id, html_url: `${p.html_url}#discussion_r${id}`, created_at: t, updated_at: t,
      author_association: author_association ?? association(repo, login) };
    reviewComments.push(c);
    p.updated_at = t;
    return c;
  }
  const statusOf = (conclusion) => (conclusion == null ? 'in_progress' : 'completed');
  // jobs [{name, conclusion, steps: [{name, conclusion, log}], output: {title, summary}}]; a job's
  // conclusion defaults to the run's, a step's to its job's
  function addWorkflowRun(repo, { name = 'CI', head_branch, head_sha, conclusion = null, event, login,
    run_attempt = 1, jobs = [] } = {}) {
    if (!repos[repo]) throw new Error(`fake GitHub: no repository ${repo}`);
    head_branch ??= repos[repo].head || 'main';
    head_sha ??= tip(repo, `refs/heads/${head_branch}`);
    const id = nextId++, t = now(), workflow_id = idOf(`workflow ${repo} ${name}`);
    const slug = name.toLowerCase().replace(/[^a-z0-9]+/g, '-');
    const r = { id, repo, name, head_branch, head_sha, conclusion, status: statusOf(conclusion),
      event: event ?? (pullRefs(repo, head_branch).length ? 'pull_request' : 'push'),
      login: login ?? ownerOf(repo), run_attempt, workflow_id, path: `.github/workflows/${slug}.yml`,
      run_number: runs.filter((x) => x.workflow_id === workflow_id).length + 1,
      html_url: `${url}/${repo}/actions/runs/${id}`, created_at: t, updated_at: t, suite: { id: nextId++ } };
    r.jobs = jobs.map((j) => {
      const jc = j.conclusion === undefined ? conclusion : j.conclusion, jid = nextId++;
      return { id: jid, run_id: id, name: j.name, conclusion: jc, status: statusOf(jc), output: j.output,
        html_url: `${url}/${repo}/actions/runs/${id}/job/${jid}`, started_at: t, completed_at: jc == null ? null : t,
        steps: (j.steps || []).map((s, i) => {
          const sc = s.conclusion === undefined ? jc : s.conclusion;
          return { name: s.name, number: i + 1, conclusion: sc, status: statusOf(sc), log: s.log ?? '' };
        }) };
    });
    runs.push(r);
    return r;
  }
  // the run, its suite and its unfinished jobs and steps (all of them, for null) take conclusion
  function setRunConclusion(repo, runId, conclusion) {
    const r = runs.find((x) => x.repo === repo && x.id === Number(runId));
    if (!r) throw new Error(`fake GitHub: no run ${runId} in ${repo}`);
    const t = now();
    Object.assign(r, { conclusion, status: statusOf(conclusion), updated_at: t });
    for (const j of r.jobs) {
      if (conclusion !== null && j.conclusion !== null) continue;
      Object.assign(j, { conclusion, status: statusOf(conclusion), completed_at: conclusion === null ? null : t });
      for (const s of j.steps)
        if (conclusion === null || s.conclusion === null) Object.assign(s, { conclusion, status: statusOf(conclusion) });
    }
    return r;
  }
  function addStatus(repo, sha, { state = 'pending', context = 'default', description = null, target_url = null, login } = {}) {
    const s = { id: nextId++, repo, sha, state, context, description, target_url,
      login: login ?? ownerOf(repo), created_at: now() };
    statuses.push(s);
    return s;
  }
  function closePull(repo, number, { merged = false, login } = {}) {
    const p = need(repo, number), t = now();
    headSha(p);
    return Object.assign(p, { state: 'closed', merged: !!merged, merged_at: merged ? t : null, closed_at: t,
      updated_at: t, closed_by: login ?? ownerOf(repo) });
  }

  // --- webhook payloads (the event name in each comment) ---

  const payloads = {
    // issue_comment
    issueComment(repo, number, comment) {
      const p = need(repo, number), c = byId(issueComments, comment);
      return { action: 'created', issue: issueJson(p), comment: commentJson(c), repository: repoJson(repo), sender: userJson(c.login) };
    },
    // pull_request_review
    review(repo, number, review) {
      const p = need(repo, number), r = byId(reviews, review);
      return { action: 'submitted', review: reviewJson(r), pull_request: pullJson(p), repository: repoJson(repo), sender: userJson(r.login) };
    },
    // pull_request_review_comment
    reviewComment(repo, number, comment) {
      const p = need(repo, number), c = byId(reviewComments, comment);
      return { action: 'created', comment: reviewCommentJson(c), pull_request: pullJson(p), repository: repoJson(repo), sender: userJson(c.login) };
    },
    // workflow_run
    workflowRun(repo, run) {
      const r = byId(runs, run);
      return { action: r.status === 'completed' ? 'completed' : 'in_progress', workflow_run: runJson(r),
        workflow: { id: r.workflow_id, name: r.name, path: r.path, state: 'active' },
        repository: repoJson(repo), sender: userJson(r.login) };
    },
    // check_suite (suite: the run, or its suite, or the suite's id)
    checkSuite(repo, suite) {
      const sid = Number(typeof suite === 'object' ? suite.suite?.id ?? suite.id : suite);
      const r = runs.find((x) => x.suite.id === sid || x.id === sid);
      return { action: r.status === 'completed' ? 'completed' : 'requested', check_suite: suiteJson(r),
        repository: repoJson(repo), sender: userJson(r.login) };
    },
    // pull_request
    pullClosed(repo, number) {
      const p = need(repo, number);
      return { action: 'closed', number: p.number, pull_request: pullJson(p), repository: repoJson(repo),
        sender: userJson(p.closed_by ?? ownerOf(repo)) };
    },
  };

  // --- the REST API ---

  // a page of list (per_page, page) and its Link header, as GitHub pages lists
  function paged(u, list) {
    const per = Math.min(100, Number(u.searchParams.get('per_page')) || 30);
    const page = Math.max(1, Number(u.searchParams.get('page')) || 1);
    const last = Math.max(1, Math.ceil(list.length / per));
    const at = (n) => { const v = new URL(u); v.searchParams.set('page', n); return `<${url}${v.pathname}${v.search}>`; };
    const links = [];
    if (page < last) links.push(`${at(page + 1)}; rel="next"`, `${at(last)}; rel="last"`);
    if (page > 1) links.push(`${at(1)}; rel="first"`, `${at(page - 1)}; rel="prev"`);
    return { items: list.slice((page - 1) * per, page * per), headers: links.length ? { link: links.join(', ') } : {} };
  }
  const since = (u, list) => {
    const s = Date.parse(u.searchParams.get('since'));
    return Number.isNaN(s) ? list : list.filter((o) => Date.parse(o.updated_at) >= s);
  };
  const listOf = (u, list, map) => { const { items, headers } = paged(u, list); return [200, items.map(map), headers]; };
  const wrapped = (u, key, list, map) => {
    const { items, headers } = paged(u, list);
    return [200, { total_count: list.length, [key]: items.map(map) }, headers];
  };
  const NOT_FOUND = [404, { message: 'Not Found' }];

  // [path under /repos/{owner}/{repo}/, refusal kind, {METHOD: (match, ctx) => [status, body, headers]}]
  const routes = [
    [/^pulls$/, 'pulls', {
      POST: ([], { repo, owner, body, token }) => {
        const bare = bareOf(repo);
        const exists = (b) => spawnSync('git', ['rev-parse', '--verify', '-q', `refs/heads/${b}`], { cwd: bare }).status === 0;
        const errors = [];
        if (!body.head || !exists(body.head)) errors.push({ resource: 'PullRequest', field: 'head', code: 'invalid' });
        if (!body.base || !exists(body.base)) errors.push({ resource: 'PullRequest', field: 'base', code: 'invalid' });
        if (pulls.some((p) => p.repo === repo && p.head === body.head && p.state === 'open'))
          errors.push({ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${owner}:${body.head}.` });
        if (errors.length) return [422, { message: 'Validation Failed', errors }];
        return [201, pullJson(addPull(repo, { head: body.head, base: body.base, title: body.title, body: body.body,
          draft: body.draft, token }))];
      },
      GET: ([], { repo, owner, u }) => {
        const head = u.searchParams.get('head') || '', state = u.searchParams.get('state') || 'open';
        const list = pulls.filter((p) => p.repo === repo && (!head || `${owner}:${p.head}` === head) &&
          (state === 'all' || state === p.state)).reverse();
        return listOf(u, list, pullJson);
      },
    }],
    [/^pulls\/(\d+)$/, 'pulls', { GET: ([, n], { repo }) => [200, pullJson(need(repo, n))] }],
    [/^issues\/(\d+)\/comments$/, 'comments', {
      GET: ([, n], { repo, u }) => {
        need(repo, n);
        return listOf(u, since(u, issueComments.filter((c) => c.repo === repo && c.number === Number(n))), commentJson);
      },
      POST: ([, n], { repo, body, token }) => {
        const c = addComment(repo, n, { login: loginOf(token), body: body.body });
        c.token = token;
        comments.push(c);
        return [201, commentJson(c)];
      },
    }],
    [/^pulls\/(\d+)\/reviews$/, 'reviews', {
      GET: ([, n], { repo, u }) => {
        need(repo, n);
        return listOf(u, reviews.filter((r) => r.repo === repo && r.number === Number(n)), reviewJson);
      },
    }],
    [/^pulls\/(\d+)\/comments$/, 'review-comments', {
      GET: ([, n], { repo, u }) => {
        need(repo, n);
        return listOf(u, since(u, reviewComments.filter((c) => c.repo === repo && c.number === Number(n))), reviewCommentJson);
      },
    }],
    [/^commits\/(.+)\/check-runs$/, 'check-runs', {
      GET: ([, ref], { repo, u }) => withCommit(repo, ref, (sha) => {
        const name = u.searchParams.get('check_name'), status = u.searchParams.get('status');
        const list = runs.filter((r) => r.repo === repo && r.head_sha === sha)
          .flatMap((r) => r.jobs.map((j) => [r, j])).filter(([, j]) => (!name || j.name === name) && (!status || j.status === status));
        return wrapped(u, 'check_runs', list, ([r, j]) => checkRunJson(r, j));
      }),
    }],
    [/^commits\/(.+)\/check-suites$/, 'check-suites', {
      GET: ([, ref], { repo, u }) => withCommit(repo, ref, (sha) =>
        wrapped(u, 'check_suites', runs.filter((r) => r.repo === repo && r.head_sha === sha), suiteJson)),
    }],
    [/^commits\/(.+)\/status$/, 'statuses', {
      GET: ([, ref], { repo }) => withCommit(repo, ref, (sha) => [200, combinedStatus(repo, sha)]),
    }],
    [/^actions\/runs$/, 'runs', {
      GET: ([], { repo, u }) => {
        const q = (k) => u.searchParams.get(k);
        const list = runs.filter((r) => r.repo === repo && (!q('head_sha') || r.head_sha === q('head_sha')) &&
          (!q('branch') || r.head_branch === q('branch')) && (!q('event') || r.event === q('event')) &&
          (!q('status') || r.status === q('status') || r.conclusion === q('status'))).reverse();
        return wrapped(u, 'workflow_runs', list, runJson);
      },
    }],
    [/^actions\/runs\/(\d+)$/, 'runs', { GET: ([, id], { repo }) => withRun(repo, id, (r) => [200, runJson(r)]) }],
    [/^actions\/workflows\/(\d+)$/, 'runs', {
      GET: ([, id], { repo }) => {
        const r = runs.find((x) => x.repo === repo && String(x.workflow_id) === id);
        if (!r) return [404, { message: 'Not Found' }];
        const a = `${api}/repos/${repo}`;
        return [200, { id: r.workflow_id, name: r.name, path: r.path, state: 'active',
          created_at: r.created_at, updated_at: r.updated_at, url: `${a}/actions/workflows/${r.workflow_id}`,
          html_url: `${url}/${repo}/blob/main/${r.path}`, badge_url: `${url}/${repo}/workflows/${encodeURIComponent(r.name)}/badge.svg` }];
      },
    }],
    [/^actions\/runs\/(\d+)\/jobs$/, 'jobs', {
      GET: ([, id], { repo, u }) => withRun(repo, id, (r) => wrapped(u, 'jobs', r.jobs, (j) => jobJson(r, j))),
    }],
    [/^actions\/jobs\/(\d+)$/, 'jobs', { GET: ([, id], { repo }) => withJob(repo, id, (r, j) => [200, jobJson(r, j)]) }],
    [/^actions\/jobs\/(\d+)\/logs$/, 'logs', {
      GET: ([, id], { repo }) => withJob(repo, id, (r, j) =>
        [302, undefined, { location: blobUrl(`job-${j.id}.txt`, 'text/plain; charset=utf-8', jobLog(j).text) }]),
    }],
    [/^actions\/runs\/(\d+)\/logs$/, 'logs', {
      GET: ([, id], { repo }) => withRun(repo, id, (r) => {
        // the layout gh run view --log reads: <n>_<job>.txt whole, <job>/<n>_<step>.txt per step
        const files = r.jobs.flatMap((j, i) => {
          const log = jobLog(j);
          return [{ name: `${i}_${zipName(j.name)}.txt`, data: log.text },
            ...j.steps.map((s, k) => ({ name: `${zipName(j.name)}/${s.number}_${zipName(s.name)}.txt`, data: log.steps[k] }))];
        });
        return [302, undefined, { location: blobUrl(`run-${r.id}.zip`, 'application/zip', zip(Object.fromEntries(files.map((f) => [f.name, f.data])))) }];
      }),
    }],
  ];
  function withCommit(repo, ref, f) {
    const sha = /^[0-9a-f]{40}$/i.test(ref) ? ref.toLowerCase() : tip(repo, ref);
    return sha ? f(sha) : [422, { message: `No commit found for SHA: ${ref}`, documentation_url: 'https://docs.github.com/rest' }];
  }
  function withRun(repo, id, f) {
    const r = runs.find((x) => x.repo === repo && x.id === Number(id));
    return r ? f(r) : NOT_FOUND;
  }
  function withJob(repo, id, f) {
    for (const r of runs) for (const j of r.repo === repo ? r.jobs : []) if (j.id === Number(id)) return f(r, j);
    return NOT_FOUND;
  }

  async function rest(req, res, u, token) {
    // every answer: rate-limit headers; a GET's 200 an ETag, and 304 when If-None-Match has it
    let instead = null; // a scripted answer given after the request was acted on
    const reply = (answer) => {
      let [status, body, headers = {}] = instead || answer;
      let text = body === undefined ? '' : JSON.stringify(body);
      const h = { ...headers };
      if (req.method === 'GET' && status === 200) {
        h.etag = `"${createHash('sha256').update(text).digest('hex')}"`;
        if (req.headers['if-none-match'] === h.etag) { status = 304; text = ''; }
      }
      const n = Math.min(rateLimit, (spent.get(token) || 0) + (status === 304 ? 0 : 1));
      spent.set(token, n);
      if (text) h['content-type'] = 'application/json; charset=utf-8';
      res.writeHead(status, { ...h, 'content-length': Buffer.byteLength(text), 'x-ratelimit-limit': String(rateLimit),
        'x-ratelimit-remaining': String(Math.max(0, rateLimit - n)), 'x-ratelimit-used': String(n),
        'x-ratelimit-reset': String(reset), 'x-ratelimit-resource': 'core' });
      res.end(text);
    };
    // a scripted answer (a refusal for now, a 5xx) comes before anything else; the request is
    // then as if it never arrived
    const s = scripted.find((x) => x.method === req.method && x.re.test(u.pathname) && x.replies.length);
    if (s) {
      s.seen++;
      const next = s.replies.shift();
      // {acted: [status, body]}: acted on as usual, then answered so (a 502 after the fact)
      if (next.acted) instead = next.acted;
      else {
        if (req.method === 'POST') await readBody(req);
        return reply(next);
      }
    }
    if ((spent.get(token) || 0) >= rateLimit)
      return reply([403, { message: `API rate limit exceeded for user ID ${idOf(`user ${loginOf(token)}`)}.`,
        documentation_url: 'https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting' }]);
    if (u.pathname === '/api/v3/user' && req.method === 'GET') return reply([200, userJson(loginOf(token))]);
    const m = u.pathname.match(/^\/api\/v3\/repos\/([^/]+)\/([^/]+)\/(.+)$/);
    const repo = m && `${m[1]}/${m[2]}`;
    const route = m && repos[repo] && routes.map(([re, kind, methods]) => [m[3].match(re), kind, methods]).find(([r]) => r);
    if (!route) return reply(NOT_FOUND);
    const [match, kind, methods] = route;
    const refusal = refusals[`${repo} ${kind}`];
    if (refusal) return reply([refusal.status, { message: refusal.message }]);
    const handler = methods[req.method];
    if (!handler) return reply(NOT_FOUND);
    let body = null;
    if (req.method === 'POST') {
      try { body = JSON.parse((await readBody(req)).toString() || '{}'); } catch { return reply([400, { message: 'Problems parsing JSON' }]); }
    }
    const args = [...match].map((x, i) => (i ? decodeURIComponent(x) : x));
    try {
      return reply(handler(args, { repo, owner: m[1], u, body, token }));
    } catch (e) {
      if (/^fake GitHub: no /.test(e.message)) return reply(NOT_FOUND);
      throw e;
    }
  }

  // a signed blob: no token asked (one sent is recorded), the URL's signature or 403
  function blob(req, res, u) {
    const b = blobs.get(u.searchParams.get('sig'));
    if (req.method !== 'GET' || !b || u.pathname !== `/_blobs/${b.name}`) {
      const text = '<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code>' +
        '<Message>Server failed to authenticate the request.</Message></Error>';
      res.writeHead(403, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(text) });
      return res.end(text);
    }
    res.writeHead(200, { 'content-type': b.type, 'content-length': Buffer.byteLength(b.data) });
    res.end(b.data);
  }

  // GraphQL, as far as `gh pr view` asks it: the query PullRequestByNumber, answered from what
  // the fake holds (GitHub's field names; enum values upper case, as GraphQL has them)
  async function graphql(req, res) {
    let body;
    try { body = JSON.parse((await readBody(req)).toString()); } catch { return json(res, 400, { message: 'Problems parsing JSON' }); }
    const v = body.variables || {};
    if (!/query PullRequestByNumber\b/.test(body.query || ''))
      return json(res, 200, { errors: [{ message: 'fake GitHub: only PullRequestByNumber is served' }] });
    const repo = `${v.owner}/${v.repo}`;
    const p = pulls.find((x) => x.repo === repo && x.number === v.pr_number);
    if (!p) return json(res, 200, { data: { repository: { pullRequest: null } },
      errors: [{ type: 'NOT_FOUND', path: ['repository', 'pullRequest'], message: `Could not resolve to a PullRequest with the number of ${v.pr_number}.` }] });
    const actor = (login) => ({ login, id: `U_${idOf(`user ${login}`)}`, name: login });
    const page = (nodes) => ({ nodes, pageInfo: { hasNextPage: false, endCursor: null }, totalCount: nodes.length });
    const coms = issueComments.filter((c) => c.repo === repo && c.number === p.number).map((c) => ({
      id: `IC_${c.id}`, author: actor(c.login), authorAssociation: c.author_association, body: c.body,
      createdAt: c.created_at, includesCreatedEdit: false, isMinimized: false, minimizedReason: null,
      reactionGroups: [], url: c.html_url, viewerDidAuthor: false }));
    const revs = reviews.filter((r) => r.repo === repo && r.number === p.number).map((r) => ({
      id: `PRR_${r.id}`, author: { login: r.login }, authorAssociation: r.author_association,
      submittedAt: r.submitted_at, body: r.body || '', state: r.state, commit: { oid: r.commit_id }, reactionGroups: [] }));
    return json(res, 200, { data: { repository: { pullRequest: {
      url: p.html_url, number: p.number, title: p.title, state: p.state === 'open' ? 'OPEN' : p.merged ? 'MERGED' : 'CLOSED',
      body: p.body || '', author: actor(p.login), autoMergeRequest: null, isDraft: p.draft, maintainerCanModify: false,
      mergeable: 'MERGEABLE', additions: 0, deletions: 0, commits: { totalCount: 1 }, baseRefName: p.base,
      headRefName: p.head, headRepositoryOwner: { id: 'O_1', login: ownerOf(repo), name: ownerOf(repo) },
      headRepository: { id: 'R_1', name: v.repo }, isCrossRepository: false, reviewRequests: { nodes: [] },
      reviews: page(revs), assignees: page([]), labels: page([]), projectCards: page([]), milestone: null,
      comments: page(coms), reactionGroups: [], createdAt: p.created_at, statusCheckRollup: { nodes: [] },
      id: `PR_${p.id}` } } } });
  }

  const server = http.createServer(async (req, res) => {
    const u = new URL(req.url, 'http://x');
    const token = tokenOf(req);
    const kind = u.pathname.startsWith('/api/v3/') || u.pathname === '/api/graphql' ? 'rest'
      : u.pathname.startsWith('/_blobs/') ? 'blob' : 'git';
    const rec = { method: req.method, path: u.pathname + u.search, token, kind };
    if (kind === 'blob') rec.authorized = !!req.headers.authorization;
    requests.push(rec);
    res.on('finish', () => { rec.status = res.statusCode; });
    if (kind === 'blob') return blob(req, res, u);
    // a public repository is read without a token, as on GitHub
    const m = kind === 'git' && u.pathname.match(/^\/([^/]+\/[^/]+)\.git\//);
    const anonymous = m && repos[m[1]]?.public && !u.pathname.endsWith('/git-receive-pack') &&
      u.searchParams.get('service') !== 'git-receive-pack';
    if (!anonymous && (!token || !valid.has(token))) {
      if (kind === 'rest') return json(res, 401, { message: 'Bad credentials' });
      res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"' });
      res.end('Unauthorized\n');
      return;
    }
    try {
      if (u.pathname === '/api/graphql' && req.method === 'POST') await graphql(req, res);
      else if (kind === 'rest') await rest(req, res, u, token);
      else gitHttpBackend(req, res, root, { REMOTE_USER: 'fake', ...GIT_ENV });
    } catch (e) {
      if (!res.headersSent) json(res, 500, { message: e.message });
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const port = server.address().port;
  url = `http://127.0.0.1:${port}`;
  api = `${url}/api/v3`;
  return {
    url, port, api, root, shas, pulls, comments, requests,
    issueComments, reviews, reviewComments, runs, statuses,
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
    // the next requests of method to a REST path matching re get replies ([status, body,
    // headers], or {acted: [status, body]}: acted on, then answered so), in turn; returns the
    // script, whose seen counts them
    script(method, re, replies) {
      const s = { method, re, replies: [...replies], seen: 0 };
      scripted.push(s);
      return s;
    },
    pull: (repo, number) => pulls.find((p) => p.repo === repo && p.number === Number(number)),
    addPull, addComment, addReview, addReviewComment, addWorkflowRun, setRunConclusion, addStatus, closePull,
    payloads, sendWebhook,
    close: async () => {
      server.closeAllConnections?.();
      await new Promise((r) => server.close(r));
      rmSync(root, { recursive: true, force: true });
    },
  };
}
