// Ordinary tools inside a sandbox, unchanged, through its egress proxy: npm install from a local
// registry, pip install from a local package index, git clone over HTTPS from a local git server
// with a private CA; and, with the network off, each of them meeting the proxy's refusal.
// Nothing here leaves the machine: every upstream listens on 127.0.0.1 and is asked for by the
// name localhost, which the proxy resolves on the host from /etc/hosts.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { serverWith, toolOk, waitAttempts } from '../lib/egress.mjs';
import { startNpmRegistry, startPythonIndex, startGitServer, allowLocalhost, NPM_FIXTURE, PY_FIXTURE }
  from '../lib/registries.mjs';

// The sandbox's NO_PROXY names localhost, which is right for services inside the sandbox itself,
// but these upstreams are on the HOST's loopback: asked for localhost:PORT with NO_PROXY in place,
// a tool would connect straight to the sandbox's own loopback, where nothing listens, instead of
// going through the proxy (which resolves "localhost" on the host). So every command here runs
// with NO_PROXY and no_proxy unset.
const VIA_PROXY = 'unset NO_PROXY no_proxy; ';

async function sh(srv, command, env) {
  const r = await toolOk(srv, 'container_exec', { command: VIA_PROXY + command, timeout_ms: 120000, ...(env ? { env } : {}) });
  return r.structuredContent;
}

const out = (r) => `exit ${r.exit_code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

// The commands, the same in both modes.
const NPM_INSTALL = (registry) => 'mkdir -p /workspace/app && cd /workspace/app && ' +
  `npm install --registry ${registry} --no-audit --no-fund --no-update-notifier ${NPM_FIXTURE.name}`;
// Debian's Python refuses to install into the system (PEP 668 "externally-managed-environment"),
// so into a virtual environment, as pip's own message advises.
const VENV = 'python3 -m venv /workspace/venv';
const PIP_INSTALL = (index, flags = '') => '/workspace/venv/bin/pip install --disable-pip-version-check ' +
  `--no-cache-dir ${flags} --index-url ${index} ${PY_FIXTURE.name}`;
const GIT_CLONE = (url, flags = '') => `git ${flags} clone ${url}/repo.git /workspace/repo`;

describe('mode allowlist, exactly the test upstreams allowed', () => {
  let npm, py, git, srv;
  before(async () => {
    // upstreams first: the allow list names their random ports
    [npm, py, git] = await Promise.all([startNpmRegistry(), startPythonIndex(), startGitServer()]);
    const { allow, addrs } = await allowLocalhost([npm.port, py.port, git.port]);
    srv = await serverWith({
      SANDBOX_NETWORK: 'allowlist', SANDBOX_NETWORK_DEFAULTS: '0',
      SANDBOX_NETWORK_ALLOW: allow, SANDBOX_NETWORK_ADDRS: addrs,
    });
  });
  after(async () => {
    await srv?.stop();
    await Promise.all([npm?.close(), py?.close(), git?.close()]);
  });

  test('npm install from a local registry through the proxy, and require() uses the package', async () => {
    const r = await sh(srv, `${NPM_INSTALL(npm.url)} && ` +
      `node -e "const pad = require('${NPM_FIXTURE.name}'); console.log(JSON.stringify(pad('7', 3, '0')))" && ` +
      `node -p "require('./node_modules/${NPM_FIXTURE.name}/package.json').version" && ` +
      `node -p "JSON.parse(require('fs').readFileSync('package-lock.json')).packages['node_modules/${NPM_FIXTURE.name}'].integrity"`);
    assert.equal(r.exit_code, 0, out(r));
    assert.match(r.stdout, /added 1 package/);
    assert.ok(r.stdout.endsWith(`"007"\n1.0.0\n${npm.packages[0].integrity}\n`), out(r));
    // the registry was asked for the packument and the tarball, by the name in the URL
    assert.deepEqual(npm.requests.map((q) => `${q.method} ${q.url}`),
      [`GET /${NPM_FIXTURE.name}`, `GET /${NPM_FIXTURE.name}/-/${NPM_FIXTURE.name}-1.0.0.tgz`]);
    assert.equal(npm.requests[0].headers.host, `localhost:${npm.port}`);
    // plain HTTP through the proxy, which forwards each request on a connection of its own
    const a = await waitAttempts(srv, (x) => x.port === String(npm.port));
    assert.ok(a.length >= 2, JSON.stringify(a));
    for (const x of a) {
      assert.equal(x.method, 'GET');
      assert.equal(x.host, 'localhost');
      assert.equal(x.addr, '127.0.0.1');
      assert.equal(x.verdict, 'allowed');
    }
  });

  test('pip install from a local PEP 503 index into a venv through the proxy, and import uses the package', async () => {
    const r = await sh(srv, `${VENV} && ${PIP_INSTALL(py.url)} && ` +
      '/workspace/venv/bin/python -c "import sandbox_mcp_fixture_py as m, importlib.metadata as md; ' +
      `print(repr(m.left_pad('7', 3, '0')), md.version('${PY_FIXTURE.name}'))"`);
    assert.equal(r.exit_code, 0, out(r));
    assert.match(r.stdout, new RegExp(`Successfully installed ${PY_FIXTURE.name}-1\\.0\\.0`));
    assert.ok(r.stdout.endsWith("'007' 1.0.0\n"), out(r));
    assert.deepEqual(py.requests.map((q) => `${q.method} ${q.url}`),
      [`GET /simple/${PY_FIXTURE.name}/`, `GET /packages/${py.wheels[0].filename}`]);
    const a = await waitAttempts(srv, (x) => x.port === String(py.port));
    assert.ok(a.every((x) => x.method === 'GET' && x.host === 'localhost' && x.verdict === 'allowed'), JSON.stringify(a));
  });

  test('git clone over HTTPS from a local server: the proxy tunnels TLS untouched, so git must trust its CA', async () => {
    // Without the CA: the tunnel opens (the proxy allows it) and git itself refuses the
    // certificate, which is the server's own: the proxy does not intercept TLS.
    const bare = await sh(srv, GIT_CLONE(git.url));
    assert.equal(bare.exit_code, 128, out(bare));
    assert.match(bare.stderr, /certificate/i, out(bare));
    assert.equal(git.requests.length, 0);
    const tunnel = await waitAttempts(srv, (x) => x.port === String(git.port));
    assert.equal(tunnel[0].method, 'CONNECT');
    assert.equal(tunnel[0].verdict, 'allowed');

    // With the throwaway CA written into the sandbox and named to git, the clone succeeds.
    await toolOk(srv, 'container_file_write', { path: '/workspace/fixture-ca.pem', content: git.ca });
    const r = await sh(srv, `${GIT_CLONE(git.url, '-c http.sslCAInfo=/workspace/fixture-ca.pem')} && ` +
      'git -C /workspace/repo log --format="%H %s" && sh /workspace/repo/hello.sh');
    assert.equal(r.exit_code, 0, out(r));
    assert.equal(r.stdout, `${git.repos['repo.git']} fixture commit\nhello from the fixture repository\n`);
    assert.equal(git.requests[0].url, '/repo.git/info/refs?service=git-upload-pack');
    assert.ok(git.requests.some((q) => q.method === 'POST' && q.url === '/repo.git/git-upload-pack'));
    const a = await waitAttempts(srv, (x) => x.port === String(git.port), 2);
    assert.ok(a.length >= 2 && a.every((x) => x.method === 'CONNECT' && x.host === 'localhost' &&
      x.addr === '127.0.0.1' && x.verdict === 'allowed'), JSON.stringify(a));
  });

  test('wget and curl as they are: plain http and https through the announced proxy', async () => {
    const seenNpm = npm.requests.length, seenGit = git.requests.length;
    const r = await sh(srv, `wget -q -O - http://localhost:${npm.port}/${NPM_FIXTURE.name} | head -c 200; echo; ` +
      `wget -q -O /dev/null --ca-certificate=/workspace/fixture-ca.pem '${git.url}/repo.git/info/refs?service=git-upload-pack' && echo wget-https-ok; ` +
      `curl -sS --cacert /workspace/fixture-ca.pem -o /dev/null -w '%{http_code}\\n' '${git.url}/repo.git/info/refs?service=git-upload-pack'`);
    assert.equal(r.exit_code, 0, out(r));
    assert.match(r.stdout, new RegExp(`^\\{"_id":"${NPM_FIXTURE.name}"|^\\{\\s*"name":\\s*"${NPM_FIXTURE.name}"|"name":"${NPM_FIXTURE.name}"`), out(r));
    assert.match(r.stdout, /\nwget-https-ok\n200\n$/, out(r));
    assert.equal(npm.requests.length, seenNpm + 1);
    assert.equal(git.requests.length, seenGit + 2);
  });
});

// With the network off the proxy refuses everything, upstreams named in SANDBOX_NETWORK_ADDRS
// included. The proxy is announced in mode none too, so each tool, left as it is (NO_PROXY
// aside, as above), must fail promptly with the proxy's 403 in its output.
describe('mode none: npm, pip and git meet the proxy refusal', () => {
  const env = {};
  let npm, py, git, srv;
  before(async () => {
    [npm, py, git] = await Promise.all([startNpmRegistry(), startPythonIndex(), startGitServer()]);
    const { allow, addrs } = await allowLocalhost([npm.port, py.port, git.port]);
    srv = await serverWith({
      SANDBOX_NETWORK: 'none', SANDBOX_NETWORK_DEFAULTS: '0',
      SANDBOX_NETWORK_ALLOW: allow, SANDBOX_NETWORK_ADDRS: addrs,
    });
    await toolOk(srv, 'container_file_write', { path: '/workspace/fixture-ca.pem', content: git.ca });
  });
  after(async () => {
    await srv?.stop();
    await Promise.all([npm?.close(), py?.close(), git?.close()]);
  });

  async function refused(port, method) {
    const a = await waitAttempts(srv, (x) => x.port === String(port));
    for (const x of a) {
      assert.equal(x.method, method);
      assert.equal(x.verdict, 'denied');
      assert.equal(x.reason, 'mode_none');
      assert.equal(x.status, '403');
      assert.equal(x.addr, '-');
    }
  }

  test('npm install: E403 naming the request', async () => {
    const r = await sh(srv, NPM_INSTALL(npm.url), env);
    assert.equal(r.exit_code, 1, out(r));
    assert.match(r.stderr, /npm error code E403\n/, out(r));
    assert.match(r.stderr, new RegExp(`403 Forbidden - GET http://localhost:${npm.port}/${NPM_FIXTURE.name}\\n`), out(r));
    assert.equal(npm.requests.length, 0);
    await refused(npm.port, 'GET');
  });

  test('pip install: "No matching distribution", and with -vv the 403 behind it', async () => {
    // pip takes an index page it cannot fetch for an empty one: at its default verbosity the
    // refusal shows only as "No matching distribution found"; -vv prints the 403.
    const r = await sh(srv, `${VENV} && ${PIP_INSTALL(py.url, '-vv')}`, env);
    assert.equal(r.exit_code, 1, out(r));
    assert.match(r.stdout, new RegExp(`Could not fetch URL http://localhost:${py.port}/simple/${PY_FIXTURE.name}/: ` +
      '403 Client Error: Forbidden'), out(r));
    assert.match(r.stderr, new RegExp(`No matching distribution found for ${PY_FIXTURE.name}`), out(r));
    assert.equal(py.requests.length, 0);
    await refused(py.port, 'GET');
  });

  test('git clone: CONNECT tunnel failed, response 403', async () => {
    const r = await sh(srv, GIT_CLONE(git.url, '-c http.sslCAInfo=/workspace/fixture-ca.pem'), env);
    assert.equal(r.exit_code, 128, out(r));
    assert.match(r.stderr, new RegExp(`unable to access 'https://localhost:${git.port}/repo\\.git/': ` +
      'CONNECT tunnel failed, response 403'), out(r));
    assert.equal(git.requests.length, 0);
    await refused(git.port, 'CONNECT');
  });
});
