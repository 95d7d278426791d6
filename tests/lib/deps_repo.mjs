// A repository with real dependencies, for the environment snapshot test and benchmark: a few
// dozen small npm packages (some depending on others) and a few wheels, served by the tests' own
// registries on 127.0.0.2 (a loopback address a sandbox's NO_PROXY does not name, so its tools go
// through the egress proxy as they would to a registry elsewhere), and a bare repository whose
// package.json and package-lock.json (made by the host's npm against that registry),
// requirements.txt and .sandbox-mcp/setup.sh (`npm ci`, `pip install --target .pydeps`) install
// them. `npm test && python3 check.py` needs every one of them and prints CHECK lines.
//
//   const deps = await startDepsRegistries();   // {npm, py, addrs (for SANDBOX_NETWORK_ADDRS), close()}
//   const bare = await depsRepo(dir, deps);           // dir/deps.git
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { startNpmRegistry, startPythonIndex } from './registries.mjs';

export const HOST = '127.0.0.2';
export const NPM_COUNT = 24;
export const PY_COUNT = 6;
// What `npm test && python3 check.py` prints when every dependency was found.
export const CHECK = `CHECK npm ${NPM_COUNT} ok\nCHECK python ${PY_COUNT} ok`;
export const TEST_COMMAND = 'npm test --silent && python3 check.py';

// Some text, so that a package is more than its manifest (a few KiB each, as small ones are).
const filler = (name) => `// ${name}: a table the package ships\nmodule.exports.table = [\n`
  + Array.from({ length: 96 }, (_, i) => `  ${JSON.stringify(`${name}-${i}`.padEnd(40, '.'))},\n`).join('') + '];\n';

// Package i depends on i+1 when i is a multiple of 3, and on i+2 when a multiple of 4: chains that
// npm must resolve from the packuments.
function npmPackages() {
  const pkgs = [];
  for (let i = 0; i < NPM_COUNT; i++) {
    const name = `smcp-fixture-n${i}`;
    const deps = [];
    if (i % 3 === 0 && i + 1 < NPM_COUNT) deps.push(i + 1);
    if (i % 4 === 0 && i + 2 < NPM_COUNT) deps.push(i + 2);
    const dependencies = Object.fromEntries(deps.map((d) => [`smcp-fixture-n${d}`, '^1.0.0']));
    pkgs.push({
      name, version: '1.0.0', ...(deps.length ? { dependencies } : {}),
      files: {
        'index.js': "'use strict';\n"
          + deps.map((d) => `const d${d} = require('smcp-fixture-n${d}');\n`).join('')
          + `module.exports = function value() { return ${i}${deps.map((d) => ` + d${d}()`).join('')}; };\n`,
        'lib/table.js': filler(name),
      },
    });
  }
  return pkgs;
}

// Wheel i requires wheel i+1 for the even ones.
function pyPackages() {
  return Array.from({ length: PY_COUNT }, (_, i) => ({
    name: `smcp-fixture-py${i}`, version: '1.0.0',
    ...(i % 2 === 0 && i + 1 < PY_COUNT ? { requires: [`smcp-fixture-py${i + 1}>=1.0`] } : {}),
    files: {
      [`smcp_fixture_py${i}/__init__.py`]: `"""A package served by a test index."""\n\nVALUE = ${i}\n`,
      [`smcp_fixture_py${i}/table.py`]: `TABLE = [\n${Array.from({ length: 96 }, (_, k) => `    "py${i}-${k}",\n`).join('')}]\n`,
    },
  }));
}

// The npm registry and the Python index, on HOST.
export async function startDepsRegistries() {
  const [npm, py] = await Promise.all([
    startNpmRegistry({ packages: npmPackages(), host: HOST }),
    startPythonIndex({ packages: pyPackages(), host: HOST }),
  ]);
  return { npm, py, addrs: `${HOST}:${npm.port},${HOST}:${py.port}`,
    close: () => Promise.all([npm.close(), py.close()]) };
}

// Not spawnSync: the registries answer from this process's event loop.
function run(cmd, args, cwd, env = {}) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { out += d; });
    p.on('error', reject);
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')}: ${code}\n${out}`))));
  });
}

// The bare repository dir/<name>.git, one commit on main, whose files install what deps serves.
export async function depsRepo(dir, deps, name = 'deps') {
  const work = mkdtempSync(path.join(dir, `${name}-work-`));
  const bare = path.join(dir, `${name}.git`);
  const pkg = {
    name, version: '1.0.0', private: true, scripts: { test: 'node test.js' },
    dependencies: Object.fromEntries(Array.from({ length: NPM_COUNT }, (_, i) => [`smcp-fixture-n${i}`, '^1.0.0'])),
  };
  const files = {
    'package.json': `${JSON.stringify(pkg, null, 2)}\n`,
    '.npmrc': `registry=${deps.npm.url}\nupdate-notifier=false\naudit=false\nfund=false\n`,
    '.gitignore': 'node_modules/\n.pydeps/\n',
    'test.js': "'use strict';\nconst assert = require('node:assert');\nlet sum = 0;\n"
      + `for (let i = 0; i < ${NPM_COUNT}; i++) {\n`
      + '  const value = require(`smcp-fixture-n${i}`);\n'
      + "  assert.strictEqual(typeof value(), 'number');\n"
      + '  sum += require(`smcp-fixture-n${i}/lib/table.js`).table.length;\n}\n'
      + `assert.strictEqual(sum, ${NPM_COUNT * 96});\nconsole.log('CHECK npm ${NPM_COUNT} ok');\n`,
    'requirements.txt': Array.from({ length: PY_COUNT }, (_, i) => `smcp-fixture-py${i}==1.0.0\n`).join(''),
    'check.py': 'import importlib, os, sys\n'
      + "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '.pydeps'))\n"
      + `for i in range(${PY_COUNT}):\n`
      + "    m = importlib.import_module(f'smcp_fixture_py{i}')\n"
      + "    assert m.VALUE == i and len(importlib.import_module(f'smcp_fixture_py{i}.table').TABLE) == 96\n"
      + `print('CHECK python ${PY_COUNT} ok')\n`,
    '.sandbox-mcp/setup.sh': 'set -e\nnpm ci\n'
      + `python3 -m pip install --disable-pip-version-check --no-cache-dir --index-url ${deps.py.url} `
      + '--target .pydeps -r requirements.txt\n',
  };
  try {
    for (const [p, text] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(work, p)), { recursive: true });
      writeFileSync(path.join(work, p), text);
    }
    // the lock file as a developer's npm makes it, against the same registry
    const cache = path.join(work, '.npm-cache');
    await run('npm', ['install', '--package-lock-only', '--cache', cache, '--no-update-notifier'], work,
      { HTTP_PROXY: '', HTTPS_PROXY: '', http_proxy: '', https_proxy: '' });
    rmSync(cache, { recursive: true, force: true });
    const lock = JSON.parse(readFileSync(path.join(work, 'package-lock.json'), 'utf8'));
    if (Object.keys(lock.packages).length !== NPM_COUNT + 1) throw new Error('package-lock.json: unexpected packages');
    const env = { GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t',
      GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' };
    await run('git', ['init', '-q', '-b', 'main'], work, env);
    await run('git', ['add', '-A'], work, env);
    await run('git', ['commit', '-q', '-m', 'Initial commit'], work, env);
    await run('git', ['clone', '-q', '--bare', work, bare], dir, env);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return bare;
}
