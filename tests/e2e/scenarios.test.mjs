// End-to-end: what users ask of a sandbox, on the default debian template, driven with the
// official MCP SDK client the way an assistant calls the tools (write a script, run it, read what
// it made), and the same asks as coding runs of the real OpenCode, scripted by the fake model:
//   1. "Create a visualization using matplotlib. Run it in the container": a plot saved as PNG,
//      read back as an image;
//   2. "Clone this repo, set it up and run the tests": a repository cloned from a local git
//      server, its dependencies installed from a local package index or registry, its tests run,
//      the one failing test found in the output;
//   3. "Analyze this data using Python": a CSV summarized with pandas, the numbers checked
//      against ones computed here.
// Nothing leaves the machine: the git server, the Python index and the npm registry listen on
// 127.0.0.2, the only addresses the sandboxes' egress proxy lets through (SANDBOX_NETWORK_ADDRS)
// and the only one runs clone from (FETCH_ALLOW). 127.0.0.2, unlike localhost and 127.0.0.1, is
// not on the sandboxes' NO_PROXY, so git, pip and npm reach it through the proxy as they are, as
// they would a registry elsewhere.
import { describe, test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { until } from '../lib/runs.mjs';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { startServer, debianTemplate, sqlRows, TEMPLATES_DIR } from '../lib/server.mjs';
import { startFake, agentRouter, toolResults } from '../lib/fake-anthropic.mjs';
import { startNpmRegistry, startPythonIndex, startGitServer, NPM_FIXTURE, PY_FIXTURE } from '../lib/registries.mjs';

const HOST = '127.0.0.2';
const LONG = { timeout: 300000 }; // the SDK's wait for a reply: installs and runs take a while

// ---- what the scenarios work on ---------------------------------------------------------------

// (1) A plot a model would write: no backend chosen (matplotlib takes Agg without a display).
const PLOT_PY = `import numpy as np
import matplotlib.pyplot as plt

x = np.linspace(0, 4 * np.pi, 400)
fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
ax.plot(x, np.sin(x), label="sin(x)")
ax.plot(x, np.cos(x), label="cos(x)")
ax.set_title("Waves")
ax.set_xlabel("x")
ax.legend()
fig.savefig("/workspace/plot.png")
print("saved /workspace/plot.png")
`;
const PLOT_SIZE = { width: 800, height: 500 };

// (2) A Python project whose tests need a package from the index named in its requirements;
// median() is wrong for an even count, so exactly one of its four tests fails.
const pythonRepo = (indexUrl) => ({
  'README.md': '# textstats\n\nSmall statistics for text reports.\n\n    pip install -r requirements.txt\n' +
    '    python3 -m unittest -v\n',
  'requirements.txt': `--index-url ${indexUrl}\n${PY_FIXTURE.name}==${PY_FIXTURE.version}\n`,
  'textstats/__init__.py': '"""Small statistics over lists of numbers, and labels padded for tables."""\n' +
    'from sandbox_mcp_fixture_py import left_pad\n\n\n' +
    'def mean(xs):\n    return sum(xs) / len(xs)\n\n\n' +
    'def median(xs):\n    s = sorted(xs)\n    return s[len(s) // 2]\n\n\n' +
    'def label(n, width=4):\n    return left_pad(n, width, "0")\n',
  'tests/__init__.py': '',
  'tests/test_textstats.py': 'import unittest\n\nfrom textstats import label, mean, median\n\n\n' +
    'class TestTextstats(unittest.TestCase):\n' +
    '    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3, 4]), 2.5)\n\n' +
    '    def test_median_odd(self):\n        self.assertEqual(median([3, 1, 2]), 2)\n\n' +
    '    def test_median_even(self):\n        self.assertEqual(median([4, 1, 3, 2]), 2.5)\n\n' +
    '    def test_label(self):\n        self.assertEqual(label(7), "0007")\n\n\n' +
    'if __name__ == "__main__":\n    unittest.main()\n',
});
const PY_FAILING = 'test_median_even';

// (2) as a run: a Node project with its registry in its .npmrc; column() pads one short.
const nodeRepo = (registryUrl) => ({
  'README.md': '# padlib\n\nPadding helpers for plain-text tables.\n\n    npm install\n    npm test\n',
  '.npmrc': `registry=${registryUrl}\n`,
  'package.json': `${JSON.stringify({ name: 'padlib', version: '1.0.0', private: true, main: 'index.js',
    scripts: { test: 'node --test' }, dependencies: { [NPM_FIXTURE.name]: NPM_FIXTURE.version } }, null, 2)}\n`,
  'index.js': `'use strict';\nconst leftPad = require('${NPM_FIXTURE.name}');\n\n` +
    '// Cents as dollars and cents: 1205 -> "12.05".\n' +
    "exports.money = (cents) => `${Math.floor(cents / 100)}.${leftPad(cents % 100, 2, '0')}`;\n\n" +
    '// A five-digit code: 42 -> "00042".\n' +
    "exports.code = (n) => leftPad(n, 5, '0');\n\n" +
    "// Every row right-aligned to the longest one's width.\n" +
    'exports.column = (rows) => {\n' +
    '  const width = Math.max(...rows.map((r) => r.length));\n' +
    '  return rows.map((r) => leftPad(r, width - 1));\n' +
    '};\n',
  'test/padlib.test.js': "'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert');\n" +
    "const { money, code, column } = require('..');\n\n" +
    "test('money formats cents', () => assert.strictEqual(money(1205), '12.05'));\n" +
    "test('code pads to five digits', () => assert.strictEqual(code(42), '00042'));\n" +
    "test('column right-aligns every row', () => assert.deepStrictEqual(column(['a', 'bbb']), ['  a', 'bbb']));\n",
});
const NODE_FAILING = 'column right-aligns every row';

// (3) Sales: 24 orders over four regions, prices in quarters so that every sum is exact.
const REGIONS = ['north', 'south', 'east', 'west'];
const PRODUCTS = ['tea', 'coffee', 'cocoa'];
const ORDERS = Array.from({ length: 24 }, (_, i) => ({
  date: `2024-03-${String(1 + i).padStart(2, '0')}`,
  region: REGIONS[(i + 2 * (i >> 3) + (i % 5 === 0)) % 4], // 3, 7, 8 and 6 orders
  product: PRODUCTS[i % 3],
  units: 1 + ((i * 11) % 17),
  price: 2 + 0.25 * ((i * 5) % 13),
}));
const SALES_CSV = 'date,region,product,units,price\n' +
  ORDERS.map((o) => `${o.date},${o.region},${o.product},${o.units},${o.price.toFixed(2)}`).join('\n') + '\n';
const ANALYZE_PY = `import pandas as pd

df = pd.read_csv("sales.csv")
df["revenue"] = df["units"] * df["price"]
by_region = df.groupby("region").agg(
    orders=("units", "size"),
    units=("units", "sum"),
    revenue=("revenue", "sum"),
    mean_price=("price", "mean"),
)
print(by_region.round(2).to_string())
print()
print(df["units"].describe().round(3).to_string())
`;

// What the summary must say, computed here: per region, and units' describe() (numpy's linear
// quantiles, the sample standard deviation).
function expectedSummary() {
  const regions = {};
  for (const r of [...REGIONS].sort()) {
    const os = ORDERS.filter((o) => o.region === r);
    regions[r] = {
      orders: os.length,
      units: os.reduce((n, o) => n + o.units, 0),
      revenue: os.reduce((n, o) => n + o.units * o.price, 0),
      mean_price: os.reduce((n, o) => n + o.price, 0) / os.length,
    };
  }
  const u = ORDERS.map((o) => o.units).sort((a, b) => a - b);
  const n = u.length;
  const mean = u.reduce((a, b) => a + b, 0) / n;
  const q = (p) => {
    const pos = (n - 1) * p, lo = Math.floor(pos);
    return lo + 1 < n ? u[lo] + (u[lo + 1] - u[lo]) * (pos - lo) : u[lo];
  };
  const describe = { count: n, mean, std: Math.sqrt(u.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)),
    min: u[0], '25%': q(0.25), '50%': q(0.5), '75%': q(0.75), max: u[n - 1] };
  return { regions, describe };
}

// Check the script's printed summary against expectedSummary(), to the decimals printed.
function assertSummary(out) {
  const want = expectedSummary();
  const lines = out.split('\n');
  const near = (got, exp, decimals, what) =>
    assert.ok(Math.abs(got - exp) <= 0.5 * 10 ** -decimals + 1e-9, `${what}: printed ${got}, expected ${exp}\n${out}`);
  const header = lines.find((l) => /^\s+orders\s+units\s+revenue\s+mean_price\s*$/.test(l));
  assert.ok(header, `no table header in:\n${out}`);
  for (const [region, w] of Object.entries(want.regions)) {
    const row = lines.find((l) => l.startsWith(`${region} `));
    assert.ok(row, `no row for ${region} in:\n${out}`);
    const [orders, units, revenue, meanPrice] = row.trim().split(/\s+/).slice(1).map(Number);
    assert.equal(orders, w.orders, `${region} orders\n${out}`);
    assert.equal(units, w.units, `${region} units\n${out}`);
    near(revenue, w.revenue, 2, `${region} revenue`);
    near(meanPrice, w.mean_price, 2, `${region} mean_price`);
  }
  for (const [stat, exp] of Object.entries(want.describe)) {
    const row = lines.find((l) => l.startsWith(`${stat} `));
    assert.ok(row, `no ${stat} in:\n${out}`);
    near(Number(row.trim().split(/\s+/)[1]), exp, 3, `units ${stat}`);
  }
}

// A PNG's size from its IHDR, checked whole: signature, chunk order, and image data that
// inflates to exactly one filter byte and width pixels a row, height rows.
function pngInfo(buf) {
  assert.deepEqual([...buf.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'PNG signature');
  let off = 8;
  const chunks = [];
  while (off + 8 <= buf.length) {
    const len = buf.readUInt32BE(off);
    chunks.push({ type: buf.toString('latin1', off + 4, off + 8), data: buf.subarray(off + 8, off + 8 + len) });
    off += 12 + len;
  }
  assert.equal(chunks[0].type, 'IHDR');
  assert.equal(chunks.at(-1).type, 'IEND');
  const ihdr = chunks[0].data;
  const info = { width: ihdr.readUInt32BE(0), height: ihdr.readUInt32BE(4), depth: ihdr[8], color: ihdr[9] };
  const channels = { 0: 1, 2: 3, 4: 2, 6: 4 }[info.color];
  assert.ok(channels && info.depth === 8 && ihdr[12] === 0, `unexpected IHDR ${JSON.stringify(info)}`);
  const raw = zlib.inflateSync(Buffer.concat(chunks.filter((c) => c.type === 'IDAT').map((c) => c.data)));
  assert.equal(raw.length, info.height * (1 + info.width * channels), 'image data size');
  // not one flat colour: a plot has lines and text on its background
  const rows = new Set();
  for (let y = 0; y < info.height; y++) {
    const start = y * (1 + info.width * channels);
    rows.add(raw.subarray(start, start + 1 + info.width * channels).toString('base64'));
  }
  assert.ok(rows.size > 20, `only ${rows.size} distinct rows`);
  return info;
}

// ---- the server, its client and the local upstreams ------------------------------------------

let server, client, fake, router, git, pyIndex, npm, suite;

async function connect() {
  const c = new Client({ name: 'sandbox-mcp-scenarios', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${server.token}` } },
  }));
  return c;
}

// A tool call that must succeed; returns the whole result.
async function call(name, args, opts = LONG) {
  const res = await client.callTool({ name, arguments: args }, undefined, opts);
  assert.notEqual(res.isError, true, `${name} ${JSON.stringify(args).slice(0, 300)}: ${JSON.stringify(res).slice(0, 2000)}`);
  return res;
}

async function exec(command, extra = {}) {
  return (await call('container_exec', { command, timeout_ms: 240000, ...extra })).structuredContent;
}

const shown = (r) => `exit ${r.exit_code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;

// container_file_read of a PNG: one image content item; returns its bytes.
async function readImage(args) {
  const res = await call('container_file_read', args);
  const images = res.content.filter((c) => c.type === 'image');
  assert.equal(images.length, 1, JSON.stringify(res).slice(0, 1000));
  assert.equal(images[0].mimeType, 'image/png');
  return Buffer.from(images[0].data, 'base64');
}

before(async () => {
  const template = await debianTemplate();
  // the suite the template was built from (trixie, or bookworm where the mirror lacks it)
  suite = readFileSync(path.join(TEMPLATES_DIR, 'debian', 'recipe'), 'utf8').match(/^suite (\w+)$/m)[1];
  [pyIndex, npm] = await Promise.all([startPythonIndex({ host: HOST }), startNpmRegistry({ host: HOST })]);
  git = await startGitServer({ host: HOST, tls: false, repos: {
    'textstats.git': { files: pythonRepo(pyIndex.url), message: 'textstats: mean, median and labels' },
    'padlib.git': { files: nodeRepo(npm.url), message: 'padlib: money, codes and columns' },
    'sales.git': { files: { 'README.md': '# sales\n\nOrders for March 2024.\n', 'sales.csv': SALES_CSV },
      message: 'March orders' },
  } });
  fake = await startFake();
  router = agentRouter();
  fake.handle(router);
  server = await startServer({ env: {
    ...template,
    ANTHROPIC_API_KEY: 'sk-ant-test-key', ANTHROPIC_BASE_URL: fake.url,
    SANDBOX_NETWORK: 'allowlist', SANDBOX_NETWORK_DEFAULTS: '0',
    SANDBOX_NETWORK_ADDRS: [git.port, pyIndex.port, npm.port].map((p) => `${HOST}:${p}`).join(','),
    FETCH_ALLOW: `${HOST}:${git.port}`,
  } });
  client = await connect();
});

after(async () => {
  if (process.env.SHOW_STDERR) console.log(server?.stderr());
  await client?.close();
  if (server) {
    const { code, signal } = await server.stop();
    assert.equal(signal, null, `server killed by ${signal}:\n${server.stderr().slice(-4000)}`);
    assert.equal(code, 0, `server exited ${code}:\n${server.stderr().slice(-4000)}`);
  }
  await Promise.all([fake?.close(), git?.close(), pyIndex?.close(), npm?.close()]);
});

// ---- through the container tools -------------------------------------------------------------

describe('an assistant with the container tools', () => {
  test('the sandbox runs on the debian template', async () => {
    const ping = (await call('container_ping', {})).structuredContent;
    assert.equal(ping.template, 'debian', JSON.stringify(ping));
    assert.equal(ping.template_note, undefined, JSON.stringify(ping));
    const r = await exec('. /etc/os-release && echo "$ID $VERSION_CODENAME" && python3 -c "import pandas, matplotlib, scipy"');
    assert.equal(r.exit_code, 0, shown(r));
    assert.equal(r.stdout, `debian ${suite}\n`);
  });

  test('"Create a visualization using matplotlib": the plot comes back as a PNG image', async (t) => {
    await call('container_file_write', { path: '/workspace/plot.py', content: PLOT_PY });
    const r = await exec('python3 plot.py', { cwd: '/workspace' });
    assert.equal(r.exit_code, 0, shown(r));
    assert.equal(r.stdout, 'saved /workspace/plot.png\n');
    const png = await readImage({ path: '/workspace/plot.png' });
    const info = pngInfo(png);
    assert.deepEqual({ width: info.width, height: info.height }, PLOT_SIZE);
    t.diagnostic(`plot.png: ${png.length} bytes`);
    // the bytes are the file's
    const size = await exec('stat -c %s /workspace/plot.png');
    assert.equal(Number(size.stdout), png.length);
  });

  test('"Clone this repo, set it up and run the tests": cloned, installed from the index, one test fails', async () => {
    const repo = `http://${HOST}:${git.port}/textstats.git`;
    const clone = await exec(`git clone ${repo}`, { cwd: '/workspace' });
    assert.equal(clone.exit_code, 0, shown(clone));
    const log = await exec('git log --format=%s && ls', { cwd: '/workspace/textstats' });
    assert.equal(log.stdout, 'textstats: mean, median and labels\nREADME.md\nrequirements.txt\ntests\ntextstats\n');

    const install = await exec('pip install -r requirements.txt', { cwd: '/workspace/textstats' });
    assert.equal(install.exit_code, 0, shown(install));
    assert.match(install.stdout, new RegExp(`Successfully installed ${PY_FIXTURE.name}-${PY_FIXTURE.version}`), shown(install));
    assert.deepEqual(pyIndex.requests.map((q) => q.url),
      [`/simple/${PY_FIXTURE.name}/`, `/packages/${pyIndex.wheels[0].filename}`]);

    const t = await exec('python3 -m unittest -v', { cwd: '/workspace/textstats' });
    assert.equal(t.exit_code, 1, shown(t));
    const verdicts = Object.fromEntries([...t.stderr.matchAll(/^(test_\w+) \(.*\) \.\.\. (\w+)$/gm)].map((m) => [m[1], m[2]]));
    assert.deepEqual(verdicts, { test_label: 'ok', test_mean: 'ok', [PY_FAILING]: 'FAIL', test_median_odd: 'ok' }, shown(t));
    assert.deepEqual([...t.stderr.matchAll(/^FAIL: (\w+) /gm)].map((m) => m[1]), [PY_FAILING], shown(t));
    assert.match(t.stderr, /AssertionError: 3 != 2\.5\n/);
    assert.match(t.stderr, /^Ran 4 tests in /m);
    assert.match(t.stderr, /^FAILED \(failures=1\)$/m);
    // git went through the egress proxy (info/refs, then upload-pack: a connection each, logged
    // as it closes), and nothing was refused
    const egress = () => server.stderr().split('\n').filter((l) => / egress connect /.test(l) && l.includes(` port=${git.port} `));
    await until(() => egress().length >= 2, 'two egress connections logged').catch(() => {});
    assert.ok(egress().length >= 2 && egress().every((l) => / verdict=allowed /.test(l)), egress().join('\n'));
  });

  test('"Analyze this data using Python": a CSV summarized with pandas, the numbers right', async () => {
    await call('container_file_write', { path: '/workspace/data/sales.csv', content: SALES_CSV });
    await call('container_file_write', { path: '/workspace/data/analyze.py', content: ANALYZE_PY });
    const r = await exec('python3 analyze.py', { cwd: '/workspace/data' });
    assert.equal(r.exit_code, 0, shown(r));
    assertSummary(r.stdout);
  });
});

// ---- as coding runs --------------------------------------------------------------------------

// Start a run of task (which carries marker, for the fake's router), wait for it to end, and
// return {run, script, out}: out is what the agent's tools printed, as the model was sent it.
async function agentRun(marker, task, steps, extra = {}) {
  const script = router.add(marker, steps);
  const started = await call('run_task', { task: `${task} (${marker})`, ...extra });
  const runId = started.structuredContent.run_id;
  let run;
  do {
    run = (await call('get_result', { run_id: runId, wait_seconds: 30 }, { timeout: 90000 })).structuredContent;
  } while (run.status === 'queued' || run.status === 'running');
  assert.equal(run.status, 'succeeded', JSON.stringify(run, null, 1));
  assert.equal(script.remaining, 0, JSON.stringify(run));
  // this run's tool results: a run in a session that had runs before carries their conversation,
  // whose results its first request already has
  const earlier = new Set(toolResults(script.requests[0].body).map((t) => t.tool_use_id));
  const out = script.requests.flatMap((q) => toolResults(q.body)).filter((t) => !earlier.has(t.tool_use_id))
    .map((t) => t.text).join('\n');
  return { run, script, out };
}

// The run's bash tool calls as its events recorded them: [{command, output}].
function bashEvents(runId) {
  return sqlRows(server, `SELECT raw FROM run_events WHERE run_id = '${runId}' AND type = 'tool_use' ORDER BY seq`)
    .map((e) => JSON.parse(e.raw).part).filter((p) => p.tool === 'bash')
    .map((p) => {
      assert.equal(p.state.status, 'completed', JSON.stringify(p));
      return { command: p.state.input.command, output: p.state.output };
    });
}

// The run's sandbox (its session's) is on the debian template.
async function assertOnDebian(run) {
  const ping = (await call('container_ping', { session_id: run.session_id })).structuredContent;
  assert.equal(ping.template, 'debian', JSON.stringify(ping));
}

// The runs go on in one session, so on one warm agent (every new session boots one, seconds of
// CPU): the first run makes it, and a run on a repository clones it into the session's workspace
// as a new session's first run would. The tests go one at a time, so that each has the session to
// itself.
describe('the same asks as OpenCode runs', { concurrency: 1 }, () => {
  // undefined until a run has made it (if the first test failed before its run, the next makes it)
  let session;
  // agentRun in the group's session
  async function inSession(marker, task, steps, extra = {}) {
    const got = await agentRun(marker, task, steps, session ? { ...extra, session_id: session } : extra);
    if (session) assert.equal(got.run.session_id, session);
    session ??= got.run.session_id;
    return got;
  }
  // A test that failed half-way may leave a run of its own in the session: cancelled, so that the
  // next test's run does not wait behind it.
  afterEach(async () => {
    if (!session) return;
    for (const status of ['queued', 'running'])
      for (const r of (await call('list_runs', { session_id: session, status, limit: 100 })).structuredContent.runs)
        await call('cancel_run', { run_id: r.run_id });
  });

  test('a run makes a matplotlib plot; the session\'s sandbox gives it back as an image', async () => {
    const { run, out } = await inSession('scn-plot-5b1', 'Create a visualization using matplotlib. Run it in the container.', [
      { text: 'I will write a plotting script.', tool: 'write', input: { filePath: '/workspace/plot.py', content: PLOT_PY } },
      { tool: 'bash', input: { command: 'cd /workspace && python3 plot.py', description: 'Run the plot script' } },
      { text: 'The plot of sin(x) and cos(x) is in /workspace/plot.png.' },
    ]);
    assert.match(out, /saved \/workspace\/plot\.png/, out);
    const [bash] = bashEvents(run.run_id);
    assert.equal(bash.command, 'cd /workspace && python3 plot.py');
    assert.match(bash.output, /saved \/workspace\/plot\.png/, JSON.stringify(bash));
    assert.equal(run.result.summary, 'The plot of sin(x) and cos(x) is in /workspace/plot.png.');
    await assertOnDebian(run);
    const info = pngInfo(await readImage({ path: '/workspace/plot.png', session_id: run.session_id }));
    assert.deepEqual({ width: info.width, height: info.height }, PLOT_SIZE);
  });

  test('a run clones a repository, installs it from the registry, runs its tests and names the failing one', async () => {
    const seen = npm.requests.length;
    const repository = `http://${HOST}:${git.port}/padlib.git`;
    const { run, out } = await inSession('scn-tests-9e4', 'Clone and explore this repo. Set up and run the tests.', [
      { tool: 'bash', input: { command: 'cat README.md && ls', description: 'Look at the repository' } },
      { tool: 'bash', input: { command: 'npm install && npm test', description: 'Install and run the tests' } },
      { text: `Two tests pass; one fails: "${NODE_FAILING}" (column() pads one character short).` },
    ], { repository });
    assert.equal(run.repository, repository);
    assert.match(out, /# padlib\n/, out);
    const [, tests] = bashEvents(run.run_id);
    assert.equal(tests.command, 'npm install && npm test');
    for (const o of [out, tests.output]) {
      assert.match(o, /added 1 package/, o);
      // node --test: TAP when not on a terminal, spec on newer Node
      assert.match(o, new RegExp(`(not ok \\d+ - |✖ )${NODE_FAILING}`), o);
      assert.equal([...o.matchAll(/^not ok \d+ - (.*)$/gm)].length <= 1, true, o);
      assert.match(o, /(#|ℹ) pass 2\n/, o);
      assert.match(o, /(#|ℹ) fail 1\n/, o);
    }
    // the package document and the tarball (npm asks for an audit beside them)
    const asked = npm.requests.slice(seen).map((q) => q.url);
    for (const u of [`/${NPM_FIXTURE.name}`, `/${NPM_FIXTURE.name}/-/${NPM_FIXTURE.name}-${NPM_FIXTURE.version}.tgz`])
      assert.ok(asked.includes(u), asked.join(' '));
    const reached = run.network.reached.find((h) => h.host === HOST && h.port === npm.port);
    assert.ok(reached && reached.connections >= 2, JSON.stringify(run.network));
    assert.equal(run.network.denied_attempts, 0, JSON.stringify(run.network));
    await assertOnDebian(run);
  });

  test('a run analyses a repository\'s CSV with pandas and prints the summary', async () => {
    const repository = `http://${HOST}:${git.port}/sales.git`;
    const { run, out } = await inSession('scn-data-2c8', 'Analyze this data using Python: revenue by region.', [
      { tool: 'bash', input: { command: 'head -3 sales.csv && wc -l sales.csv', description: 'Look at the data' } },
      { tool: 'write', input: { filePath: '/workspace/sales/analyze.py', content: ANALYZE_PY } },
      { tool: 'bash', input: { command: 'python3 analyze.py', description: 'Summarize the sales' } },
      { text: 'Revenue by region is in the table above.' },
    ], { repository });
    assert.match(out, /^date,region,product,units,price\n/m, out);
    assert.match(out, /^25 sales\.csv$/m, out);
    const [, summary] = bashEvents(run.run_id);
    assert.equal(summary.command, 'python3 analyze.py');
    assertSummary(summary.output);
    assertSummary(out);
    await assertOnDebian(run);
  });
});
