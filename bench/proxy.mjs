// Proxy benchmarks: latency the proxy adds over calling the (fake) upstream directly, time to the
// first streamed byte, and 1,000 streams held open at once with the memory they cost.
// Run: node bench/proxy.mjs [--quick]   (uses build/sandbox-mcp; all traffic on loopback)
import path from 'node:path';
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { summarize, timeIt, fmt, writeHeadline } from './lib.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN = path.resolve(process.env.SANDBOX_MCP_BIN || path.join(root, 'build', 'sandbox-mcp'));
const { startServer, cli } = await import('../tests/lib/server.mjs');
// undici (installed for the tests by `make deps`) lets the client hold 1,000+ connections.
const { Agent, setGlobalDispatcher } = await import(path.join(root, 'tests', 'node_modules', 'undici', 'index.js'));
const { startFake, messageEvents, messageJson } = await import('../tests/lib/fake-anthropic.mjs');

setGlobalDispatcher(new Agent({ connections: 2000, pipelining: 1, keepAliveTimeout: 60000 }));
const quick = process.argv.includes('--quick');
const N = quick ? 300 : 3000;
const STREAMS = quick ? 200 : 1000;
const out = [];
const log = (s = '') => { out.push(s); console.log(s); };
const headline = [];
const row = (name, s) => log(`| ${name} | ${s.n} | ${fmt(s.p50)} | ${fmt(s.p99)} | ${fmt(s.min)} |`);
const rss = (pid) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+)/m)[1]) * 1024;

const small = JSON.stringify(messageJson());
let holds = [];
const fake = await startFake((req, res, body) => {
  if (body.includes('"hold"')) {
    // a long generation: first event now, then pings until the bench lets go
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(messageEvents()[0]);
    holds.push(res);
    return;
  }
  if (body.includes('"stream"')) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of messageEvents()) res.write(e);
    res.end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(small) });
  res.end(small);
});
fake.requests.length = 0;

const server = await startServer({ env: { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: 'sk-bench' } });
const token = cli(['proxy-token', '--user', 'admin', '--services', 'anthropic', '--ttl', '1h', '--data-dir', server.dataDir]).stdout.trim();
const headers = { 'content-type': 'application/json', 'x-api-key': token, 'anthropic-version': '2023-06-01' };
const req = (base, body) => fetch(`${base}/v1/messages`, { method: 'POST', headers, body });
const direct = fake.url, proxied = `${server.url}/proxy/anthropic`;

try {
  log('## Proxy');
  log();
  log(`Machine: ${cpus().length} cores (${cpus()[0].model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB. Command: \`node bench/proxy.mjs${quick ? ' --quick' : ''}\`.`);
  log('Peer: the same fake Anthropic upstream called directly by the same client (Node.js `fetch`, keep-alive).');
  log();
  log('| what | requests | p50 ms | p99 ms | min ms |');
  log('|---|---|---|---|---|');
  const body = JSON.stringify({ model: 'claude-fake', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] });
  for (let i = 0; i < 200; i++) { await (await req(direct, body)).text(); await (await req(proxied, body)).text(); }
  const d = [], p = [];
  for (let i = 0; i < N; i++) {
    d.push(await timeIt(async () => (await req(direct, body)).text()));
    p.push(await timeIt(async () => (await req(proxied, body)).text()));
  }
  const ds = summarize(d), ps = summarize(p);
  row('plain reply, directly to the upstream (peer)', ds);
  row('plain reply through the proxy (token check, key swap, libcurl)', ps);
  const sbody = JSON.stringify({ model: 'claude-fake', stream: true, max_tokens: 16, messages: [] });
  const ttfb = async (base) => {
    let t = 0;
    const t0 = performance.now();
    const res = await req(base, sbody);
    const reader = res.body.getReader();
    await reader.read();
    t = performance.now() - t0;
    while (!(await reader.read()).done);
    return t;
  };
  const fd = [], fp = [];
  for (let i = 0; i < Math.min(N, 1000); i++) { fd.push(await ttfb(direct)); fp.push(await ttfb(proxied)); }
  row('streamed reply, first byte, directly (peer)', summarize(fd));
  row('streamed reply, first byte, through the proxy', summarize(fp));
  log();
  const addPlain = ps.p50 - ds.p50, addFirst = summarize(fp).p50 - summarize(fd).p50;
  log(`Added latency (p50 through the proxy minus p50 direct, same run): ${addPlain.toFixed(3)} ms for a plain reply, ${addFirst.toFixed(3)} ms to the first streamed byte.`);
  headline.push({ what: 'proxy, added latency: plain reply / first streamed byte', ours: `${addPlain.toFixed(2)} ms / ${addFirst.toFixed(2)} ms`,
    peer: `the fake upstream called directly: ${fmt(ds.p50)} ms / ${fmt(summarize(fd).p50)} ms`,
    target: `under 0.5 ms: ${Math.max(addPlain, addFirst) < 0.5 ? 'met' : addPlain < 0.5 || addFirst < 0.5 ? '**met for one of the two**' : '**not met**'}` });
  log();

  // Many streams at once.
  const rss0 = rss(server.proc.pid);
  holds = [];
  const hold = JSON.stringify({ hold: true, stream: true });
  const t0 = performance.now();
  const readers = await Promise.all(Array.from({ length: STREAMS }, async () => {
    const res = await req(proxied, hold);
    const reader = res.body.getReader();
    const first = await reader.read();
    return { res, reader, ok: res.status === 200 && !first.done };
  }));
  const openMs = performance.now() - t0;
  const ok = readers.filter((r) => r.ok).length;
  const rss1 = rss(server.proc.pid);
  for (const h of holds) { h.write('event: ping\ndata: {"type":"ping"}\n\n'); }
  const pinged = (await Promise.all(readers.map((r) => r.reader.read()))).filter((x) => !x.done).length;
  for (const h of holds) { for (const e of messageEvents().slice(1)) h.write(e); h.end(); }
  let ended = 0;
  await Promise.all(readers.map(async (r) => { while (!(await r.reader.read()).done); ended++; }));
  log(`| concurrent streams | opened with first event | received a later event | ended cleanly | time to open all | server RSS held | per stream |`);
  log('|---|---|---|---|---|---|---|');
  log(`| ${STREAMS} | ${ok} | ${pinged} | ${ended} | ${openMs.toFixed(0)} ms | ${((rss1 - rss0) / 2 ** 20).toFixed(1)} MiB | ${((rss1 - rss0) / STREAMS / 1024).toFixed(1)} KiB |`);
  log();
  log('Each held stream is a client connection, an upstream connection through libcurl and their buffers; nothing else is kept per stream.');
  headline.push({ what: `proxy, ${STREAMS} concurrent streams`, ours: `${ok} opened, ${pinged} progressed, ${ended} ended; ${((rss1 - rss0) / STREAMS / 1024).toFixed(1)} KiB server RSS each`,
    target: STREAMS < 1000 ? 'a quick run holds fewer than 1,000' : `1,000 concurrent streams: ${ok === STREAMS && pinged === STREAMS && ended === STREAMS ? 'met' : '**not met**'}` });
  writeHeadline(headline);
} finally {
  await server.stop();
  await fake.close();
}

if (process.env.BENCH_OUT) {
  const { writeFileSync } = await import('node:fs');
  writeFileSync(process.env.BENCH_OUT, out.join('\n') + '\n');
}
