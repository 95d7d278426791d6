// The prerelease conformance suite's authorization-server scenarios against a running sandbox-mcp,
// with the browser's part played here. Run by tests/conformance/run.sh:
//
//   node authorization.mjs --issuer URL --node NODE --cli CLI --baseline FILE --user NAME
//                          --password PASSWORD [--out DIR]
//
// It registers a public client by DCR with the redirect URI http://127.0.0.1:PORT/callback (a
// free port), then runs `conformance authorization` without --scenario, so that both scenarios
// run in order (authorization-server-metadata-endpoint, then authorization-code-grant, which
// reads the metadata the first one fetched; run alone it has none). When the suite prints the
// authorization URL and waits for a browser, this signs in with the password and approves over
// HTTP, as tests/lib/oauth.mjs does everywhere, and delivers the redirect to the suite's callback
// server. The suite's exchange at /token is its own.
//
// The suite has no expected-failures option for these scenarios, so the baseline is applied here:
// the 'authorization' list of FILE names scenarios that may fail. The report ends the way the
// suite's own baseline report does (run.sh counts it the same way): "Expected failures (in
// baseline):" with "  ~ name", "Stale baseline entries ..." with "  ✓ name", "Unexpected failures
// (not in baseline):" with "  ✗ name", and "Baseline check passed" when nothing unexpected
// happened. Exit status 0 then, 1 otherwise.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { parseArgs } from 'node:util';

import { CookieJar, approveAt, registerPublic } from '../lib/oauth.mjs';

const { values: opt } = parseArgs({ options: {
  issuer: { type: 'string' }, node: { type: 'string' }, cli: { type: 'string' }, baseline: { type: 'string' },
  user: { type: 'string', default: 'admin' }, password: { type: 'string' }, out: { type: 'string' },
} });
for (const k of ['issuer', 'node', 'cli', 'baseline', 'password'])
  if (!opt[k]) { console.error(`authorization.mjs: --${k} is required`); process.exit(2); }

const server = { url: opt.issuer, mcpUrl: `${opt.issuer}/mcp` };

// The 'authorization:' list of the baseline file ("  - name" lines, comments allowed).
function baselineList(file) {
  const names = [];
  let on = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\S/.test(line)) on = /^authorization:/.test(line);
    const m = on && line.match(/^\s+-\s+(\S+)/);
    if (m) names.push(m[1]);
  }
  return names;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

const expected = new Set(baselineList(opt.baseline));
const port = await freePort();
const client = await registerPublic(server, [`http://127.0.0.1:${port}/callback`], 'MCP conformance suite');
console.log(`authorization: client ${client.client_id}, callback port ${port}`);

const args = [opt.cli, 'authorization', '--url', opt.issuer, '--client-id', client.client_id,
  '--resource', server.mcpUrl, '-p', String(port), ...(opt.out ? ['-o', opt.out] : [])];
const env = { ...process.env };
delete env.NODE_OPTIONS; // no bearer-token shim: the suite's token request must go as it sends it
const suite = spawn(opt.node, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
let output = '';
let driven = null;
const onData = (chunk) => {
  const text = chunk.toString();
  process.stdout.write(text);
  output += text;
  if (driven) return;
  const m = output.match(/^(https?:\/\/\S+\/authorize\?\S+)$/m);
  if (!m) return;
  driven = (async () => {
    const r = await approveAt(server, new CookieJar(), m[1], { name: opt.user, password: opt.password });
    console.log(`authorization: signed in and approved; redirected to ${r.location.origin}${r.location.pathname}`);
    const cb = await fetch(r.location);
    await cb.text();
  })().catch((e) => {
    // the suite would wait five minutes for a callback that cannot come
    console.log(`authorization: driving the browser's part failed: ${e.stack || e}`);
    suite.kill('SIGTERM');
  });
};
suite.stdout.on('data', onData);
suite.stderr.on('data', onData);
const status = await new Promise((resolve) => suite.on('exit', (code, signal) => resolve(signal ? 128 : code)));
await driven;

// "✓ name: N passed, M failed" or "✗ name: ..." lines of the suite's summary.
const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
const summary = plain.slice(plain.lastIndexOf('=== SUMMARY ==='));
const results = [...summary.matchAll(/^([✓✗]) (\S+): /gm)].map((m) => ({ name: m[2], ok: m[1] === '✓' }));
const unexpected = [], stale = [], known = [];
for (const r of results) {
  if (expected.has(r.name)) (r.ok ? stale : known).push(r.name);
  else if (!r.ok) unexpected.push(r.name);
}
if (!results.length) unexpected.push('(the suite printed no summary)');
else if (status !== 0 && !unexpected.length && !known.length) unexpected.push(`(the suite exited ${status})`);
if (known.length) console.log(`\nExpected failures (in baseline):\n${known.map((n) => `  ~ ${n}`).join('\n')}`);
if (stale.length) console.log(`\nStale baseline entries (now passing - remove from baseline):\n${stale.map((n) => `  ✓ ${n}`).join('\n')}`);
if (unexpected.length) console.log(`\nUnexpected failures (not in baseline):\n${unexpected.map((n) => `  ✗ ${n}`).join('\n')}`);
const ok = !unexpected.length && !stale.length;
if (ok) console.log('\nBaseline check passed: all failures are expected.');
process.exit(ok ? 0 : 1);
