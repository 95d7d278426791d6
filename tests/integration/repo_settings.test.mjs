// A user's settings for the runs on a repository (src/store/repo_settings.c): kept through the
// command line (src/cli/user_repo.c; the script from a file or stdin, never argv) and the account
// page (src/auth/account.c). What a run does with them is in runs_setup.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { startServer, cli, sqlRows } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';
import { CookieJar, request, forms, signIn, setPassword } from '../lib/oauth.mjs';

const PASSWORD = 'repo-page-password-1';
let server;

before(async () => {
  server = await startServer();
});

after(async () => {
  const stderr = server?.stderr() ?? '';
  await server?.stop();
  assertNoSanitizerReport(stderr, 'server');
});

const repo = (args, input) => cli(['user', 'repo', ...args, '--data-dir', server.dataDir], { input });

test('user repo set, show, list and delete; the script from a file or stdin', () => {
  const file = path.join(server.dataDir, 'oak-setup.sh');
  writeFileSync(file, 'npm ci\nmake build\n');
  let r = repo(['set', 'admin', 'Acme/Oak.git', '--setup-file', file]);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /settings of admin for acme\/oak set: a setup script, on setup failure start/);
  r = repo(['show', 'admin', 'https://github.com/acme/oak']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^repository: acme\/oak\non setup failure: start\n/);
  assert.match(r.stdout, /setup script \(18 bytes\):\nnpm ci\nmake build\n$/);
  // what set does not name is kept
  r = repo(['set', 'admin', 'acme/oak', '--on-setup-failure', 'stop']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(repo(['show', 'admin', 'acme/oak']).stdout, /on setup failure: stop\n[\s\S]*make build/);
  r = repo(['set', 'admin', 'acme/pine', '--setup-stdin'], 'echo pine\n');
  assert.equal(r.status, 0, r.stderr);
  r = repo(['list', 'admin']);
  assert.match(r.stdout, /acme\/oak +stop +script/);
  assert.match(r.stdout, /acme\/pine +start +script/);
  // an empty script: none (the repository's own)
  r = repo(['set', 'admin', 'acme/pine', '--setup-stdin'], '');
  assert.equal(r.status, 0, r.stderr);
  assert.match(repo(['show', 'admin', 'acme/pine']).stdout, /setup script: none/);
  r = repo(['delete', 'admin', 'acme/pine']);
  assert.equal(r.status, 0, r.stderr);
  r = repo(['delete', 'admin', 'acme/pine']);
  assert.equal(r.status, 1);
  assert.match(r.stderr, /no settings for repository 'acme\/pine'/);
  assert.deepEqual(sqlRows(server, 'SELECT repository, on_setup_failure FROM repo_settings ORDER BY repository'),
    [{ repository: 'acme/oak', on_setup_failure: 'stop' }]);
});

test('user repo: bad input is refused and changes nothing', () => {
  const before = sqlRows(server, 'SELECT repository, setup, on_setup_failure FROM repo_settings ORDER BY repository');
  const cases = [
    [['set', 'admin', 'acme/oak', '--setup-stdin'], 'x'.repeat(64 * 1024 + 1), /the setup script in standard input is over 65536 bytes; nothing was changed/],
    [['set', 'admin', 'acme/oak', '--setup-stdin'], 'echo \0', /not UTF-8 text/],
    [['set', 'admin', 'acme/oak', '--on-setup-failure', 'maybe'], '', /--on-setup-failure 'maybe' is not start or stop/],
    [['set', 'admin', 'acme/oak', '--setup-stdin', '--setup-file', '/dev/null'], '', /one or the other/],
    [['set', 'admin', 'acme/oak;rm', '--setup-stdin'], 'x', /invalid repository 'acme\/oak;rm'/],
    [['set', 'admin', 'oak', '--setup-stdin'], 'x', /invalid repository 'oak'/],
    [['set', 'admin', 'acme/oak', 'echo from argv'], '', /takes NAME and a repository/],
    [['show', 'admin', 'acme/oak', '--setup-stdin'], '', /apply to 'user repo set' only/],
    [['set', 'admin', 'acme/oak', '--setup-file', '/nonexistent/setup.sh'], '', /cannot open '\/nonexistent\/setup.sh'/],
    [['frob', 'admin'], '', /'user repo' takes set, show, delete or list/],
  ];
  for (const [args, input, re] of cases) {
    const r = repo(args, input);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.status} ${r.stderr}`);
    assert.match(r.stderr, re, args.join(' '));
  }
  const r = cli(['user', 'network', 'admin', '--setup-stdin', '--data-dir', server.dataDir]);
  assert.equal(r.status, 2);
  assert.match(r.stderr, /apply to 'user repo set' only/);
  assert.equal(repo(['show', 'nobody', 'acme/oak']).status, 1);
  assert.deepEqual(sqlRows(server, 'SELECT repository, setup, on_setup_failure FROM repo_settings ORDER BY repository'), before);
});

test('the account page lists, adds, edits and deletes a repository\'s settings', async () => {
  setPassword(server, 'admin', PASSWORD);
  const jar = new CookieJar();
  assert.equal((await signIn(server, jar, { name: 'admin', password: PASSWORD })).status, 303);
  const card = (html) => html.slice(html.indexOf('<section class="card" id="repositories">'));
  let page = await request(server, '/account', { jar });
  assert.match(card(page.text), /<h2>Repositories<\/h2>/);
  assert.match(card(page.text), /<strong>acme\/oak<\/strong>/);
  const add = forms(card(page.text)).find((f) => f.action === '/account/repo/set' && f.inputs.includes('repository') && !f.fields.repository);
  assert.ok(add, 'a form to add a repository');
  assert.deepEqual(Object.keys(add.fields), ['csrf']);

  // added: a browser's CRLF lines become sh's LF
  let r = await request(server, '/account/repo/set', { jar, form: { ...add.fields, repository: 'Acme/Elm',
    setup: 'apt-get install -y libfoo\r\nmake\r\n', on_setup_failure: 'stop' } });
  assert.equal(r.status, 303, r.text);
  assert.equal(r.headers.get('location'), '/account?done=repo-set');
  assert.deepEqual(sqlRows(server, "SELECT setup, on_setup_failure FROM repo_settings WHERE repository = 'acme/elm'"),
    [{ setup: 'apt-get install -y libfoo\nmake\n', on_setup_failure: 'stop' }]);
  page = await request(server, '/account?done=repo-set', { jar });
  assert.match(page.text, /The repository&#39;s settings are saved\.|The repository's settings are saved\./);
  assert.match(card(page.text), /<strong>acme\/elm<\/strong>[\s\S]*setup script of 31 bytes · on failure: stop/);

  // edited through its own form, which holds its script
  const edit = forms(card(page.text)).find((f) => f.action === '/account/repo/set' && f.fields.repository === 'acme/elm');
  assert.ok(edit, 'a form to edit acme/elm');
  assert.match(card(page.text), /<textarea name="setup"[^>]*>\napt-get install -y libfoo\nmake\n<\/textarea>/);
  r = await request(server, '/account/repo/set', { jar, form: { ...edit.fields, setup: 'make\n', on_setup_failure: 'start' } });
  assert.equal(r.status, 303, r.text);
  assert.deepEqual(sqlRows(server, "SELECT setup, on_setup_failure FROM repo_settings WHERE repository = 'acme/elm'"),
    [{ setup: 'make\n', on_setup_failure: 'start' }]);

  // refused: a bad name, a bad choice, a script past what the page takes, no CSRF token
  const count = () => sqlRows(server, 'SELECT count(*) AS n FROM repo_settings')[0].n;
  const n = count();
  r = await request(server, '/account/repo/set', { jar, form: { ...add.fields, repository: 'no-owner', setup: 'x' } });
  assert.equal(r.status, 400);
  assert.match(card(r.text), /Not saved: name the repository as owner\/name/);
  r = await request(server, '/account/repo/set', { jar, form: { ...add.fields, repository: 'acme/ash', on_setup_failure: 'maybe' } });
  assert.equal(r.status, 400);
  assert.match(card(r.text), /Not saved: when the setup fails, start or stop\./);
  r = await request(server, '/account/repo/set', { jar, form: { ...add.fields, repository: 'acme/ash', setup: 'x'.repeat(8193) } });
  assert.equal(r.status, 400);
  assert.match(r.text, /a form field is over 8192 bytes/);
  r = await request(server, '/account/repo/set', { jar, form: { repository: 'acme/ash', setup: 'x' } });
  assert.equal(r.status, 403);
  assert.equal(count(), n);

  // deleted
  page = await request(server, '/account', { jar });
  const del = forms(card(page.text)).find((f) => f.action === '/account/repo/delete' && f.fields.id === 'acme/elm');
  assert.ok(del, 'a delete button for acme/elm');
  r = await request(server, '/account/repo/delete', { jar, form: del.fields });
  assert.equal(r.status, 303, r.text);
  assert.equal(r.headers.get('location'), '/account?done=repo-deleted');
  assert.equal(count(), n - 1);
  r = await request(server, '/account/repo/delete', { jar, form: del.fields });
  assert.match(r.text, /There were no settings for that repository\./);
});
