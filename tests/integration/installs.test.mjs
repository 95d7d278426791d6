// Installing as a model would, in a sandbox on the debian template: `pip install X`,
// `npm install -g X`, `pnpm add X` and `apt-get install -y X`, typed plainly, through the
// sandbox's egress proxy to local stand-ins for PyPI, the npm registry and a Debian mirror.
// The only thing set up beforehand is where those are, written into the tools' own configuration
// files as an operator's mirror would be. Each install must work (import it, run its command from
// PATH), land in the sandbox's own writable layer (the shared template on disk is unchanged) and
// be gone once container_initialize has started the sandbox over. And apt, with no update first,
// finds a package in the lists the template keeps and meets the refusal of Debian's mirror, which
// this policy leaves out.
//
// Nothing here leaves the machine: every upstream listens on 127.0.0.2, a loopback address of the
// host that the sandbox's NO_PROXY does not name (it lists its own localhost and 127.0.0.1), so
// the tools go through the proxy as they are; the policy allows exactly those ports, and refuses
// Debian's mirror by its name, before any lookup.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

import { debianTemplate, TEMPLATES_DIR } from '../lib/server.mjs';
import { serverWith, toolOk, waitAttempts } from '../lib/egress.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';
import {
  startNpmRegistry, startPythonIndex, startAptRepository,
  NPM_FIXTURE, PY_FIXTURE, DEB_FIXTURE,
} from '../lib/registries.mjs';

const ROOTFS = path.join(TEMPLATES_DIR, 'debian', 'rootfs');
const HOST = '127.0.0.2';

// A Python package with a console script, and an npm package with a command and a dependency.
const PY_TOOL = {
  ...PY_FIXTURE,
  files: {
    'sandbox_mcp_fixture_py/__init__.py': PY_FIXTURE.files['sandbox_mcp_fixture_py/__init__.py'] +
      '\n\ndef main():\n' +
      '    import sys\n' +
      '    print(left_pad(sys.argv[1], 3, "0"))\n',
  },
  scripts: { 'fixture-pad': 'sandbox_mcp_fixture_py:main' },
};
const NPM_TOOL = {
  name: 'sandbox-mcp-fixture-cli',
  version: '1.0.0',
  dependencies: { [NPM_FIXTURE.name]: '^1.0.0' },
  bin: { 'fixture-greet': 'cli.js' },
  files: {
    'index.js': `'use strict';\nconst pad = require('${NPM_FIXTURE.name}');\n` +
      "module.exports = (s) => 'hello ' + pad(s, 3, '0');\n",
    'cli.js': "#!/usr/bin/env node\nconsole.log(require('./')(process.argv[2]));\n",
  },
};

async function sh(srv, command) {
  const r = await toolOk(srv, 'container_exec', { command, timeout_ms: 240000 });
  return r.structuredContent;
}

const out = (r) => `exit ${r.exit_code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

// What installs would change in a tree: every name (with its size) under the directories
// pip, npm, pnpm and dpkg write to, and the package managers' state files.
function fingerprint(root) {
  const h = createHash('sha256');
  const walk = (rel) => {
    let st;
    try { st = lstatSync(path.join(root, rel)); } catch { h.update(`${rel} -\n`); return; }
    h.update(`${rel} ${st.mode} ${st.isDirectory() ? '' : st.size}\n`);
    if (st.isDirectory()) for (const e of readdirSync(path.join(root, rel)).sort()) walk(path.join(rel, e));
  };
  for (const d of ['usr/local', 'root', 'workspace', 'etc/apt', 'var/lib/apt/lists', 'var/cache/apt'])
    walk(d);
  h.update(readdirSync(path.join(root, 'usr/bin')).sort().join('\n'));
  for (const f of ['etc/pip.conf', 'var/lib/dpkg/status']) h.update(readFileSync(path.join(root, f)));
  return h.digest('hex');
}

describe('installing on the debian template through the egress proxy, registries allowed', () => {
  let npm, py, apt, srv, sbx, pristine;
  // The sandbox's writable layer on the host (its disk image is mounted there).
  const upper = (rel) => path.join(srv.dataDir, 'sandboxes', sbx, 'disk', 'upper', rel);

  before(async () => {
    const template = await debianTemplate();
    pristine = fingerprint(ROOTFS);
    [npm, py, apt] = await Promise.all([
      startNpmRegistry({ packages: [NPM_FIXTURE, NPM_TOOL], host: HOST }),
      startPythonIndex({ packages: [PY_TOOL], host: HOST }),
      startAptRepository({ host: HOST }),
    ]);
    srv = await serverWith({
      SANDBOX_NETWORK: 'allowlist', SANDBOX_NETWORK_DEFAULTS: '0',
      SANDBOX_NETWORK_ADDRS: [npm.port, py.port, apt.port].map((p) => `${HOST}:${p}`).join(','),
    }, template);
    const ping = (await toolOk(srv, 'container_ping')).structuredContent;
    assert.equal(ping.template, 'debian', JSON.stringify(ping));
    sbx = ping.sandbox_id;

    // The mirrors, where each tool looks for its registry: pip's index in /etc/pip.conf (beside
    // the template's own settings), npm's and pnpm's in ~/.npmrc, and an apt source whose lists
    // apt fetches once, from that source alone, as the template's build does from its mirror.
    const setup = await sh(srv, `echo 'index-url = ${py.url}' >> /etc/pip.conf && ` +
      `echo 'registry=${npm.url}' > /root/.npmrc && ` +
      `echo 'deb [trusted=yes] ${apt.url} ./' > /etc/apt/sources.list.d/mirror.list && ` +
      'apt-get -q update -o Dir::Etc::SourceList=/etc/apt/sources.list.d/mirror.list ' +
      '-o Dir::Etc::SourceParts=/dev/null -o APT::Get::List-Cleanup=false');
    assert.equal(setup.exit_code, 0, out(setup));
  });
  after(async () => {
    await srv?.stop();
    await Promise.all([npm?.close(), py?.close(), apt?.close()]);
    if (srv) assertNoSanitizerReport(srv.stderr());
  });

  test('pip install X: into the system as root, no venv, no flag; its module imports and its script is on PATH', async () => {
    const r = await sh(srv, `pip install ${PY_FIXTURE.name}`);
    assert.equal(r.exit_code, 0, out(r));
    assert.match(r.stdout, new RegExp(`^Looking in indexes: ${py.url}\n`), out(r));
    assert.match(r.stdout, new RegExp(`\nSuccessfully installed ${PY_FIXTURE.name}-1\\.0\\.0\n$`), out(r));
    // no refusal (PEP 668) and no warning about root
    assert.doesNotMatch(r.stdout + r.stderr, /externally-managed|Running pip as the 'root' user/, out(r));

    const use = await sh(srv, 'command -v fixture-pad && fixture-pad 7 && ' +
      "python3 -c 'import sandbox_mcp_fixture_py as m; print(m.__file__); print(m.left_pad(\"5\", 2, \"-\"))'");
    assert.equal(use.exit_code, 0, out(use));
    const m = use.stdout.match(/^\/usr\/local\/bin\/fixture-pad\n007\n(\/usr\/local\/lib\/python3\.\d+\/dist-packages)\/sandbox_mcp_fixture_py\/__init__\.py\n-5\n$/);
    assert.ok(m, out(use));
    assert.deepEqual(py.requests.map((q) => `${q.method} ${q.url}`),
      [`GET /simple/${PY_FIXTURE.name}/`, `GET /packages/${py.wheels[0].filename}`]);
    const a = await waitAttempts(srv, (x) => x.port === String(py.port));
    assert.ok(a.every((x) => x.method === 'GET' && x.host === HOST && x.verdict === 'allowed'), JSON.stringify(a));

    // in the sandbox's layer, not in the template
    for (const f of ['usr/local/bin/fixture-pad', `${m[1].slice(1)}/sandbox_mcp_fixture_py/__init__.py`]) {
      assert.ok(existsSync(upper(f)), `${f} in the sandbox's layer`);
      assert.ok(!existsSync(path.join(ROOTFS, f)), `${f} not in the template`);
    }
  });

  test('npm install -g X: with its dependency, its command on PATH', async () => {
    const r = await sh(srv, `npm install -g ${NPM_TOOL.name}`);
    assert.equal(r.exit_code, 0, out(r));
    assert.match(r.stdout, /added 2 packages/, out(r));
    const use = await sh(srv, 'command -v fixture-greet && fixture-greet 7 && npm ls -g --depth=1 --parseable');
    assert.equal(use.exit_code, 0, out(use));
    assert.match(use.stdout, /^\/usr\/local\/bin\/fixture-greet\nhello 007\n/, out(use));
    assert.match(use.stdout, new RegExp(`\n/usr/local/lib/node_modules/${NPM_TOOL.name}\n`), out(use));
    assert.ok(npm.requests.some((q) => q.url === `/${NPM_TOOL.name}`));
    assert.ok(npm.requests.some((q) => q.url === `/${NPM_FIXTURE.name}/-/${NPM_FIXTURE.name}-1.0.0.tgz`));

    assert.ok(lstatSync(upper('usr/local/bin/fixture-greet')).isSymbolicLink());
    assert.ok(existsSync(upper(`usr/local/lib/node_modules/${NPM_TOOL.name}/cli.js`)));
    assert.ok(!existsSync(path.join(ROOTFS, `usr/local/lib/node_modules/${NPM_TOOL.name}`)));
    assert.ok(!existsSync(path.join(ROOTFS, 'usr/local/bin/fixture-greet')));
  });

  test('pnpm add X in a project, without pnpm setup: the dependency and its command resolve', async () => {
    const r = await sh(srv, `mkdir -p /workspace/app && cd /workspace/app && pnpm add ${NPM_TOOL.name}`);
    assert.equal(r.exit_code, 0, out(r));
    assert.match(r.stdout, new RegExp(`\\+ ${NPM_TOOL.name} 1\\.0\\.0\n`), out(r));
    const use = await sh(srv, 'cd /workspace/app && pnpm exec fixture-greet 5 && ' +
      `node -e "console.log(require('${NPM_TOOL.name}')('9'))" && ` +
      `node -p "require('./package.json').dependencies['${NPM_TOOL.name}']"`);
    assert.equal(use.exit_code, 0, out(use));
    assert.equal(use.stdout, 'hello 005\nhello 009\n^1.0.0\n', out(use));
    // the lock file names the dependency's dependency, resolved from the registry
    const lock = await sh(srv, 'cat /workspace/app/pnpm-lock.yaml');
    assert.match(lock.stdout, new RegExp(`\n  ${NPM_FIXTURE.name}@1\\.0\\.0:\n`), out(lock));
    assert.ok(existsSync(path.join(srv.dataDir, 'sandboxes', sbx, 'disk', 'workspace', 'app', 'node_modules', NPM_TOOL.name)));
  });

  test('pnpm add -g X, without pnpm setup: its command on PATH', async () => {
    const r = await sh(srv, `npm uninstall -g ${NPM_TOOL.name} && pnpm add -g ${NPM_TOOL.name}`);
    assert.equal(r.exit_code, 0, out(r));
    const use = await sh(srv, 'command -v fixture-greet && fixture-greet 3');
    assert.equal(use.exit_code, 0, out(use));
    assert.equal(use.stdout, '/usr/local/bin/fixture-greet\nhello 003\n', out(use));
    assert.ok(!existsSync(path.join(ROOTFS, 'usr/local/bin/fixture-greet')));
  });

  test('apt-get install -y X: dpkg installs it as root, its program on PATH', async () => {
    const r = await sh(srv, `apt-get install -y ${DEB_FIXTURE.name}`);
    assert.equal(r.exit_code, 0, out(r));
    // plain lines: dpkg writes to apt's pipe, not a terminal of apt's own (Dpkg::Use-Pty)
    assert.match(r.stdout, new RegExp(`\nSetting up ${DEB_FIXTURE.name} \\(1\\.0\\.0\\) \\.\\.\\.\n$`), out(r));
    assert.doesNotMatch(r.stdout, /\r/, out(r));
    // no errors or warnings, and no debconf looking for a terminal (DEBIAN_FRONTEND is set)
    assert.doesNotMatch(r.stderr, /^E:|^W:|debconf/m, out(r));
    const use = await sh(srv, `command -v ${DEB_FIXTURE.name} && ${DEB_FIXTURE.name} one two && ` +
      `dpkg-query -W -f '\${Status} \${Version}\\n' ${DEB_FIXTURE.name}`);
    assert.equal(use.exit_code, 0, out(use));
    assert.equal(use.stdout, `/usr/bin/${DEB_FIXTURE.name}\nhello from the fixture package: one two\n` +
      'install ok installed 1.0.0\n', out(use));
    // apt's downloader fetched the package through the proxy
    assert.ok(apt.requests.some((q) => q.url === `/./${apt.debs[0].filename}`), JSON.stringify(apt.requests));
    const a = await waitAttempts(srv, (x) => x.port === String(apt.port));
    assert.ok(a.every((x) => x.method === 'GET' && x.host === HOST && x.verdict === 'allowed'), JSON.stringify(a));

    assert.ok(existsSync(upper(`usr/bin/${DEB_FIXTURE.name}`)));
    assert.match(readFileSync(upper('var/lib/dpkg/status'), 'utf8'), new RegExp(`^Package: ${DEB_FIXTURE.name}$`, 'm'));
    assert.ok(!existsSync(path.join(ROOTFS, `usr/bin/${DEB_FIXTURE.name}`)));
    assert.doesNotMatch(readFileSync(path.join(ROOTFS, 'var/lib/dpkg/status'), 'utf8'), new RegExp(DEB_FIXTURE.name));
  });

  test("apt-get install -y of a package from the template's kept lists goes to Debian's mirror, which this policy refuses by name", async () => {
    // No `apt-get update` first: the lists the template's build fetched say where `hello` is.
    const r = await sh(srv, 'apt-get install -y hello');
    assert.equal(r.exit_code, 100, out(r));
    assert.match(r.stdout, /\nErr:1 http:\/\/deb\.debian\.org\/debian \w+\/main \w+ hello \w+ \S+\n {2}403 {2}Forbidden \[IP: 127\.0\.0\.1 3128\]\n/, out(r));
    assert.match(r.stderr, /^E: Failed to fetch http:\/\/deb\.debian\.org\/debian\/pool\/main\/h\/hello\/hello_\S+\.deb {2}403 {2}Forbidden \[IP: 127\.0\.0\.1 3128\]$/m, out(r));
    const a = await waitAttempts(srv, (x) => x.host === 'deb.debian.org');
    assert.ok(a.every((x) => x.verdict === 'denied' && x.reason === 'not_listed' && x.addr === '-'), JSON.stringify(a));
  });

  test('the template on disk is as it was before the installs', () => {
    assert.equal(fingerprint(ROOTFS), pristine);
  });

  test('container_initialize starts the sandbox over: every install and the mirrors are gone', async () => {
    await toolOk(srv, 'container_initialize');
    const r = await sh(srv, `for c in fixture-pad fixture-greet ${DEB_FIXTURE.name}; do command -v $c || echo "no $c"; done; ` +
      "python3 -c 'import sandbox_mcp_fixture_py' 2>/dev/null || echo no module; " +
      `ls /usr/local/lib/node_modules; dpkg-query -W ${DEB_FIXTURE.name} 2>/dev/null || echo no package; ` +
      'ls -A /workspace /etc/apt/sources.list.d; test -e /root/.npmrc || echo no npmrc; cat /etc/pip.conf');
    assert.equal(r.exit_code, 0, out(r));
    // what the template itself has globally: npm and pnpm
    const globals = readdirSync(path.join(ROOTFS, 'usr/local/lib/node_modules')).sort().join('\n');
    assert.equal(r.stdout, `no fixture-pad\nno fixture-greet\nno ${DEB_FIXTURE.name}\nno module\n${globals}\n` +
      'no package\n/etc/apt/sources.list.d:\n\n/workspace:\nno npmrc\n' +
      readFileSync(path.join(ROOTFS, 'etc/pip.conf'), 'utf8'), out(r));
    sbx = (await toolOk(srv, 'container_ping')).structuredContent.sandbox_id;
    assert.ok(existsSync(upper('.')));
    assert.ok(!existsSync(upper('usr/local/bin/fixture-pad')));
    assert.ok(!existsSync(upper(`usr/bin/${DEB_FIXTURE.name}`)));
  });
});
