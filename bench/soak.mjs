// `make soak`: the release build under an hour of mixed load (tests/lib/soak.mjs), sampled every
// minute, with the slope of each sample. Writes bench/soak.md (kept in the repository, and put into
// docs/BENCHMARKS.md by bench/report.mjs) and bench/out/soak.json, and exits 1 on any error or on a
// slope that is not flat.
// SOAK_MINUTES (60), SOAK_CLIENTS (200), SOAK_USERS (8), SOAK_SAMPLE_SECONDS (60).
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN ||= path.join(root, 'build', 'sandbox-mcp');
const { soak } = await import('../tests/lib/soak.mjs');

const num = (name, dflt) => Number(process.env[name] || dflt);
const opts = { minutes: num('SOAK_MINUTES', 60), clients: num('SOAK_CLIENTS', 200), users: num('SOAK_USERS', 8),
  sampleSeconds: num('SOAK_SAMPLE_SECONDS', 60) };
const f1 = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toFixed(1) : x.toFixed(3));

console.log(`soak: ${opts.minutes} min, ${opts.clients} clients of ${opts.users} users, a sample every ${opts.sampleSeconds} s`);
const r = await soak({ ...opts, log: (s, c) => console.log(`${(s.t / 60000).toFixed(1)} min  rss ${(s.rss / 1048576).toFixed(1)} MiB  fds ${s.fds}  threads ${s.threads}  lag ${(s.lag * 1000).toFixed(0)} ms  store ${(s.store / 1048576).toFixed(1)} MiB  wal ${(s.wal / 1048576).toFixed(1)} MiB  disk ${(s.disk / 1048576).toFixed(0)} MiB  sandboxes ${s.sandboxes}  ${JSON.stringify(c)}`) });
await r.stop();

let commit = 'unknown';
try { commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(); } catch { /* not a checkout */ }
const c = r.counts;
const calls = c.list + c.exec + c.write + c.read;
const out = [];
const log = (s = '') => out.push(s);
log('## Soak');
log();
log(`\`make soak\` (\`bench/soak.mjs\`, \`tests/lib/soak.mjs\`), its own run: ${new Date().toISOString().slice(0, 10)}, commit ${commit},`);
log(`${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; the release build for ${opts.minutes} minutes under ${opts.clients}`);
log(`MCP clients of ${opts.users} users (each a call, then a pause of about a second: \`tools/list\`,`);
log('`container_exec`, `container_file_write`, `container_file_read` in turn), a steady stream of runs of the real');
log('OpenCode against the scripted model (follow-ups in three sessions on a repository of the fake GitHub,');
log('each pushed and commented on its pull request), 1 MiB downloads through the egress proxy, OAuth');
log('refresh-token grants with a call on each new token, and a sandbox left idle until it stops and used');
log(`again; sampled every ${opts.sampleSeconds} s.`);
log();
log(`- Work done: ${calls} MCP calls (${c.list} tools/list, ${c.exec} commands, ${c.write} writes, ${c.read} reads), ${c.runs} runs (${c.delivered} delivered), ${c.downloads} downloads, ${c.refreshes} refreshes, ${c.comebacks} returns of the idle sandbox.`);
log(`- Errors: ${r.errors.length}${r.errors.length ? ` (first: ${r.errors[0].what}: ${r.errors[0].detail.slice(0, 200)})` : ''}.`);
log('- Slopes: least squares over the samples after the first fifth (the warm-up). Flat means the growth');
log('  over that span is within noise (twice the slope\'s standard error) or under the bound shown. The');
log('  store and the data directory keep every run\'s events, page and workspace by design (until');
log('  `RUNS_RETENTION_DAYS`): their growth is given per run.');
log();
log('| sample | first | last | mean | slope per minute | growth | bound | verdict |');
log('|---|---|---|---|---|---|---|---|');
for (const s of r.slopes) {
  const u = s.unit ? ` ${s.unit}` : '';
  log(`| ${s.name} | ${f1(s.first)}${u} | ${f1(s.last)}${u} | ${f1(s.mean)}${u} | ${f1(s.perMinute)}${u} | ${f1(s.growth)}${u} | ${s.kept ? '' : `${f1(s.bound)}${u}`} | ${s.kept ? `kept data: ${f1(s.perRun)}${u} per run` : s.flat ? 'flat' : '**grows**'} |`);
}
const text = out.join('\n') + '\n';
writeFileSync(path.join(root, 'bench', 'soak.md'), text);
mkdirSync(path.join(root, 'bench', 'out'), { recursive: true });
writeFileSync(path.join(root, 'bench', 'out', 'soak.json'), JSON.stringify({ opts, counts: c, errors: r.errors, slopes: r.slopes, samples: r.samples }, null, 1));
console.log(text);
const bad = r.errors.length > 0 || r.slopes.some((s) => !s.kept && !s.flat);
process.exit(bad ? 1 : 0);
