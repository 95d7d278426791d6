// OAuth benchmark: what a /mcp call costs with an OAuth access token against the same call with
// an API token, on the same server in the same run, interleaved so that the machine's drift weighs
// on both alike. Three measures: latency of `tools/call server_info` (a checked token is cached,
// so this is the steady state; also with a token lacking a tool scope, whose calls are parsed
// once more to find the scope they need), the first call with a token never seen before (the
// check goes to SQLite), and throughput under wrk at 16 connections.
// Run: node bench/oauth.mjs [--quick]   (uses build/sandbox-mcp and wrk; all traffic on loopback)
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { summarize, timeIt, fmt, mcpClient, writeHeadline } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, cli } = await import('../tests/lib/server.mjs');
const { setPassword, obtainTokens, tokenRequest } = await import('../tests/lib/oauth.mjs');

const quick = process.argv.includes('--quick');
const CALLS = quick ? 1000 : 5000;  // latency: calls per token, the tokens taking turns call by call
const FRESH = quick ? 50 : 200;     // first calls with new tokens, per kind
const WRK_PAIRS = quick ? 4 : 10;   // throughput: pairs of wrk runs, one per token, order alternating
const WRK_SECONDS = quick ? 1 : 2;  // per wrk run
const CONNS = 16;
const TARGET = 1.10;                // OAuth costs at most 10% more
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };

if (spawnSync('wrk', ['--version'], { encoding: 'utf8' }).error) {
  console.error('oauth bench: wrk not found (Debian package `wrk`; `make bench` installs it)');
  process.exit(1);
}

const PASSWORD = 'bench password, loopback only';
const SERVER_INFO = { method: 'tools/call', params: { name: 'server_info', arguments: {} } };
const work = mkdtempSync(path.join(tmpdir(), 'oauth-bench-'));
const server = await startServer();
try {
  setPassword(server, 'admin', PASSWORD);
  const { client, tokens } = await obtainTokens(server, { password: PASSWORD, scope: 'sandbox runs offline_access' });
  const narrow = await obtainTokens(server, { password: PASSWORD, scope: 'runs' });
  const kinds = { api: server.token, oauth: tokens.access_token, narrow: narrow.tokens.access_token };
  const c = mcpClient(server);
  for (const [k, t] of Object.entries(kinds)) {
    const r = await c.post(SERVER_INFO, t);
    if (r.result?.structuredContent?.user !== 'admin') throw new Error(`${k} token: ${JSON.stringify(r).slice(0, 300)}`);
  }

  // --- steady state: the same token again and again ---
  for (let i = 0; i < 200; i++) for (const t of Object.values(kinds)) await c.post(SERVER_INFO, t);
  const steady = { api: [], oauth: [], narrow: [] };
  const turns = [['api', 'oauth', 'narrow'], ['oauth', 'narrow', 'api'], ['narrow', 'api', 'oauth']];
  for (let i = 0; i < CALLS; i++)
    for (const k of turns[i % 3]) steady[k].push(await timeIt(() => c.post(SERVER_INFO, kinds[k])));

  // --- first use: every call with a token the server has not checked before ---
  const fresh = { api: [], oauth: [] };
  for (let i = 0; i < FRESH; i++) {
    const made = cli(['token', 'create', '--user', 'admin', '--label', `bench ${i}`, '--data-dir', server.dataDir]);
    if (made.status !== 0) throw new Error(`token create: ${made.stderr}`);
    fresh.api.push(made.stdout.trim());
  }
  let rt = tokens.refresh_token;
  for (let i = 0; i < FRESH; i++) {
    const r = await tokenRequest(server, { grant_type: 'refresh_token', refresh_token: rt, client_id: client.client_id });
    if (r.status !== 200) throw new Error(`refresh: ${r.status} ${r.text}`);
    fresh.oauth.push(r.body.access_token);
    rt = r.body.refresh_token;
  }
  const first = { api: [], oauth: [] };
  for (let i = 0; i < FRESH; i++) {
    for (const k of i % 2 ? ['oauth', 'api'] : ['api', 'oauth']) {
      let reply;
      first[k].push(await timeIt(async () => { reply = await c.post(SERVER_INFO, fresh[k][i]); }));
      if (reply.result?.structuredContent?.user !== 'admin') throw new Error(`fresh ${k} token ${i}: ${JSON.stringify(reply).slice(0, 200)}`);
    }
  }
  c.close();

  // --- throughput: wrk, pairs of short runs (api, oauth, then oauth, api, ...) ---
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, ...SERVER_INFO });
  const script = (k) => {
    const f = path.join(work, `${k}.lua`);
    writeFileSync(f, `wrk.method = "POST"
wrk.body = [==[${body}]==]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
wrk.headers["Authorization"] = "Bearer ${kinds[k]}"
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"errors":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout))
end
`);
    return f;
  };
  const runWrk = (k, seconds) => new Promise((resolve, reject) => {
    const p = spawn('wrk', ['-t', '2', '-c', String(CONNS), '-d', `${seconds}s`, '--timeout', '5s', '-s', script(k), server.mcpUrl],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let so = '', se = '';
    p.stdout.on('data', (d) => { so += d; });
    p.stderr.on('data', (d) => { se += d; });
    p.on('error', reject);
    p.on('exit', (code) => {
      const m = so.match(/^WRKJSON (.*)$/m);
      if (code !== 0 || !m) return reject(new Error(`wrk exited ${code}: ${se}${so.slice(0, 1000)}`));
      resolve(JSON.parse(m[1]));
    });
  });
  await runWrk('api', 1);
  await runWrk('oauth', 1);
  const wrk = { api: [], oauth: [] };
  for (let i = 0; i < WRK_PAIRS; i++) {
    for (const k of i % 2 ? ['oauth', 'api'] : ['api', 'oauth']) {
      await new Promise((r) => setTimeout(r, 200));
      wrk[k].push(await runWrk(k, WRK_SECONDS));
    }
  }
  const rate = (r) => r.requests / (r.duration_us / 1e6);
  const rps = (k) => wrk[k].reduce((a, r) => a + r.requests, 0) / (wrk[k].reduce((a, r) => a + r.duration_us, 0) / 1e6);
  const pairRatios = wrk.api.map((r, i) => rate(r) / rate(wrk.oauth[i])).sort((a, b) => a - b);

  const s = { api: summarize(steady.api), oauth: summarize(steady.oauth), narrow: summarize(steady.narrow) };
  const f = { api: summarize(first.api), oauth: summarize(first.oauth) };
  const ratio = { steady: s.oauth.p50 / s.api.p50, narrow: s.narrow.p50 / s.api.p50, first: f.oauth.p50 / f.api.p50,
    rps: rps('api') / rps('oauth') };
  const met = (x) => (x <= TARGET ? 'met' : '**not met**');

  log('## OAuth tokens on /mcp');
  log();
  log(`Machine: ${cpus().length} cores (${cpus()[0].model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB. Command: \`node bench/oauth.mjs${quick ? ' --quick' : ''}\`.`);
  log('One server, its first user with an API token (`smcp_…`, from the first start) and an OAuth access token (`smcp_at_…`, from the code flow with PKCE, scopes `sandbox runs offline_access`).');
  log('A third token, OAuth with the scope `runs` only, shows the cost of a token that lacks a tool scope: the server parses such a `tools/call` once more to learn the scope it needs.');
  log(`Call: \`tools/call server_info\` over POST /mcp. Latency: node:http over one keep-alive connection, ${CALLS} calls per token, the tokens taking turns call by call. ` +
    `First use: ${FRESH} new tokens of each kind (API tokens from \`token create\`, access tokens from refreshes of one grant), one call each, alternating. ` +
    `Throughput: wrk, ${CONNS} keep-alive connections, ${WRK_PAIRS} pairs of ${WRK_SECONDS} s runs, one run per token, the order reversed each pair, pooled.`);
  log();
  log('| what | token | calls | p50 ms | p90 ms | p99 ms | min ms |');
  log('|---|---|---|---|---|---|---|');
  const label = { api: 'API token', oauth: 'OAuth access token', narrow: 'OAuth access token, `runs` only' };
  for (const [what, sum] of [['same token again (cached check)', s], ['first use of a new token (checked in SQLite)', f]])
    for (const k of Object.keys(sum))
      log(`| ${what} | ${label[k]} | ${sum[k].n} | ${fmt(sum[k].p50)} | ${fmt(sum[k].p90)} | ${fmt(sum[k].p99)} | ${fmt(sum[k].min)} |`);
  log();
  log(`| throughput at ${CONNS} connections | requests/s | slowest and fastest run | errors |`);
  log('|---|---|---|---|');
  for (const k of ['api', 'oauth']) {
    const rates = wrk[k].map(rate);
    log(`| ${label[k]} | ${rps(k).toFixed(0)} | ${Math.min(...rates).toFixed(0)}, ${Math.max(...rates).toFixed(0)} | ${wrk[k].reduce((a, r) => a + r.errors, 0)} |`);
  }
  log();
  log(`Per pair of runs, API requests/s over OAuth requests/s: median ${pairRatios[Math.floor(pairRatios.length / 2)].toFixed(2)}x, ` +
    `from ${pairRatios[0].toFixed(2)}x to ${pairRatios[pairRatios.length - 1].toFixed(2)}x (how much the machine moved during the run).`);
  log();
  log(`Ratios, OAuth over API token (same run): latency p50 ${ratio.steady.toFixed(2)}x (\`runs\` only: ${ratio.narrow.toFixed(2)}x), ` +
    `first use p50 ${ratio.first.toFixed(2)}x, time per request under load (API requests/s over OAuth requests/s) ${ratio.rps.toFixed(2)}x.`);
  log(`Target, OAuth costs at most 10% more (every ratio at most ${TARGET.toFixed(2)}x): ` +
    `latency ${met(ratio.steady)} (\`runs\` only: ${met(ratio.narrow)}), first use ${met(ratio.first)}, throughput ${met(ratio.rps)}.`);
  writeHeadline([{
    what: '`tools/call` with an OAuth access token: latency / first use / requests/s at 16 connections',
    ours: `${fmt(s.oauth.p50)} ms / ${fmt(f.oauth.p50)} ms / ${rps('oauth').toFixed(0)}`,
    peer: `API token: ${fmt(s.api.p50)} ms / ${fmt(f.api.p50)} ms / ${rps('api').toFixed(0)}`,
    ratio: `${ratio.steady.toFixed(2)}x / ${ratio.first.toFixed(2)}x / ${ratio.rps.toFixed(2)}x`,
    target: `at most 1.10x: ${Object.values(ratio).every((x) => x <= TARGET) ? 'met' : '**not met**'}`,
  }]);
  const bad = server.stderr().split('\n').filter((l) => /^\S+ (warn|error) |Sanitizer|runtime error/.test(l));
  if (bad.length) console.error(bad.slice(0, 20).join('\n'));
} finally {
  await server.stop();
  rmSync(work, { recursive: true, force: true });
}

if (process.env.BENCH_OUT) writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
