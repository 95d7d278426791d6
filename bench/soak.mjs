// `make soak`: the release build under an hour of mixed load (tests/lib/soak.mjs), sampled every
// minute, with the slope of each sample. Writes bench/soak.md (kept in the repository, and put into
// docs/BENCHMARKS.md by bench/report.mjs) and bench/out/soak.json, and exits 1 on any error or on a
// slope that is not flat.
// SOAK_MINUTES (60), SOAK_CLIENTS (200), SOAK_USERS (8), SOAK_SAMPLE_SECONDS (60).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.SANDBOX_MCP_BIN ||= path.join(root, 'build', 'sandbox-mcp');
const { soak, slopes: slopesOf } = await import('../tests/lib/soak.mjs');

const num = (name, dflt) => Number(process.env[name] || dflt);
const opts = { minutes: num('SOAK_MINUTES', 60), clients: num('SOAK_CLIENTS', 200), users: num('SOAK_USERS', 8),
  sampleSeconds: num('SOAK_SAMPLE_SECONDS', 60) };
const f1 = (x) => (Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 1 ? x.toFixed(1) : x.toFixed(3));

// The report from a run's result: {opts, counts, errors, slopes, samples, commit}.
function report({ opts, counts: c, errors, slopes, samples, commit, date }) {
  const calls = c.list + c.exec + c.write + c.read;
  const out = [];
  const log = (s = '') => out.push(s);
  log('## Soak');
  log();
  log(`\`make soak\` (\`bench/soak.mjs\`, \`tests/lib/soak.mjs\`), its own run: ${date}, commit ${commit},`);
  log(`${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; the release build for ${opts.minutes} minutes under ${opts.clients}`);
  log(`MCP clients of ${opts.users} users (each a call, then a pause of about a second: \`tools/list\`,`);
  log('`container_exec`, `container_file_write`, `container_file_read` in turn), a steady stream of runs of the real');
  log('OpenCode against the scripted model (follow-ups in three sessions on a repository of the fake GitHub,');
  log('each pushed and commented on its pull request), 1 MiB downloads through the egress proxy, OAuth');
  log('refresh-token grants with a call on each new token, and a sandbox left idle until it stops and used');
  log(`again; sampled every ${opts.sampleSeconds} s.`);
  log();
  log(`- Work done: ${calls} MCP calls (${c.list} tools/list, ${c.exec} commands, ${c.write} writes, ${c.read} reads), ${c.runs} runs (${c.delivered} delivered), ${c.downloads} downloads, ${c.refreshes} refreshes, ${c.comebacks} returns of the idle sandbox.`);
  log(`- Errors: ${errors.length}${errors.length ? ` (first: ${errors[0].what}: ${errors[0].detail.slice(0, 200)})` : ''}.`);
  log('- Slopes: least squares over the samples after the first fifth (the warm-up). Flat means the growth');
  log('  over that span is within noise (twice the slope\'s standard error) or under the bound shown. The');
  log('  store and the data directory keep every run\'s events, page and workspace by design (until');
  log('  `RUNS_RETENTION_DAYS`): their growth is given per run.');
  log();
  log('| sample | first | last | mean | slope per minute | growth | bound | verdict |');
  log('|---|---|---|---|---|---|---|---|');
  for (const s of slopes) {
    const u = s.unit ? ` ${s.unit}` : '';
    log(`| ${s.name} | ${f1(s.first)}${u} | ${f1(s.last)}${u} | ${f1(s.mean)}${u} | ${f1(s.perMinute)}${u} | ${f1(s.growth)}${u} | ${s.kept ? '' : `${f1(s.bound)}${u}`} | ${s.kept ? `kept data: ${f1(s.perRun)}${u} per run` : s.flat ? 'flat' : '**grows**'} |`);
  }
  // the samples themselves, about ten of them
  const every = Math.max(1, Math.round(samples.length / 10));
  log();
  log('| minute | resident memory | descriptors | threads | loop lag (max) | store | WAL | data dir | runs so far |');
  log('|---|---|---|---|---|---|---|---|---|');
  samples.forEach((x, i) => {
    if (i % every && i !== samples.length - 1) return;
    log(`| ${(x.t / 60000).toFixed(0)} | ${(x.rss / 1048576).toFixed(1)} MiB | ${x.fds} | ${x.threads} | ${(x.lag * 1000).toFixed(0)} ms | ${(x.store / 1048576).toFixed(1)} MiB | ${(x.wal / 1048576).toFixed(1)} MiB | ${(x.disk / 1048576).toFixed(0)} MiB | ${x.runs} |`);
  });
  return out.join('\n') + '\n';
}

// `node bench/soak.mjs --report FILE`: the report again from a run's bench/out/soak.json
if (process.argv[2] === '--report') {
  const result = JSON.parse(readFileSync(process.argv[3], 'utf8'));
  const text = report({ commit: 'unknown', date: new Date().toISOString().slice(0, 10), ...result,
    slopes: slopesOf(result.samples, result.counts.runs) });
  writeFileSync(path.join(root, 'bench', 'soak.md'), text);
  console.log(text);
  process.exit(0);
}

let commit = 'unknown';
try { commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim(); } catch { /* not a checkout */ }
console.log(`soak: ${opts.minutes} min, ${opts.clients} clients of ${opts.users} users, a sample every ${opts.sampleSeconds} s`);
const r = await soak({ ...opts, log: (s, c) => console.log(`${(s.t / 60000).toFixed(1)} min  rss ${(s.rss / 1048576).toFixed(1)} MiB  fds ${s.fds}  threads ${s.threads}  lag ${(s.lag * 1000).toFixed(0)} ms  store ${(s.store / 1048576).toFixed(1)} MiB  wal ${(s.wal / 1048576).toFixed(1)} MiB  disk ${(s.disk / 1048576).toFixed(0)} MiB  sandboxes ${s.sandboxes}  ${JSON.stringify(c)}`) });
await r.stop();
const result = { opts, counts: r.counts, errors: r.errors, slopes: r.slopes, samples: r.samples, commit,
  date: new Date().toISOString().slice(0, 10) };
const text = report(result);

writeFileSync(path.join(root, 'bench', 'soak.md'), text);
mkdirSync(path.join(root, 'bench', 'out'), { recursive: true });
writeFileSync(path.join(root, 'bench', 'out', 'soak.json'), JSON.stringify(result, null, 1));
console.log(text);
const bad = r.errors.length > 0 || r.slopes.some((s) => !s.kept && !s.flat);
process.exit(bad ? 1 : 0);
