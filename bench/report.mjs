// Compose docs/BENCHMARKS.md from one `make bench` run: the machine and the commands, a headline
// table of every benchmark's key figures beside its peer (from bench/out/<name>.json), each
// benchmark's own section as it wrote it (bench/out/<name>.md), then bench/NOTES.md (how to read
// the figures, written by hand). Every table in the document comes from this run.
// Run by bench/run.sh: node bench/report.mjs SECONDS NAME...
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, release } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [seconds, ...names] = process.argv.slice(2);
const read = (f) => readFileSync(path.join(root, f), 'utf8');

function version(cmd, args, pattern) {
  try {
    const text = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return (text.match(pattern) || [])[1] || text.trim().split('\n')[0];
  } catch (e) {
    return ((e.stdout || '') + (e.stderr || '')).match(pattern)?.[1] || 'unknown';
  }
}

let commit = 'unknown';
try {
  commit = execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  // changes to this document itself (an earlier run's) do not count
  const dirty = execFileSync('git', ['-C', root, 'status', '--porcelain', '--untracked-files=no', '--', '.', ':!docs/BENCHMARKS.md'], { encoding: 'utf8' }).trim();
  if (dirty) commit += ' with local changes';
} catch { /* not a git checkout */ }

const cgroup = existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes') ? 'v1' : 'v2';
const minutes = Math.floor(Number(seconds) / 60), rest = Number(seconds) % 60;

const out = [];
const log = (s = '') => out.push(s);
log('# Benchmarks');
log();
log('Everything below comes from one `make bench` run (`bench/run.sh`: each `bench/*.mjs` in turn');
log('against the release build, with its peers on the same machine in the same run), written into');
log('this file by `bench/report.mjs`. Medians (p50) with p99 and the minimum for spread; ratios');
log('measured in the same run are the headline, absolute times are context. Nothing here is a');
log('pass/fail test. How to read each section, and why the figures are what they are:');
log('[the notes at the end](#notes).');
log();
log(`- Run: ${new Date().toISOString().slice(0, 10)}, commit ${commit}, ${minutes} min ${rest} s in all (target under 20 min).`);
log(`- Machine: ${cpus().length} cores (${cpus()[0].model}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${release()}, cgroup ${cgroup}.`);
log(`- Tools: Node.js ${process.version}, wrk ${version('wrk', ['-v'], /wrk (\S+)/)}, bubblewrap ${version('bwrap', ['--version'], /bubblewrap (\S+)/)}, ${version('unshare', ['--version'], /(util-linux \S+)/)}, ${version('curl', ['--version'], /^(curl \S+)/)}, ${version('tinyproxy', ['-v'], /(tinyproxy \S+)/)}, ${version('sh', ['-c', 'nginx -v 2>&1'], /(nginx\/\S+)/)}, ${version('haproxy', ['-v'], /(HAProxy version \S+)/)}.`);
log('- Reproduce: `make bench` (installs bubblewrap, util-linux, wrk, tinyproxy, nginx, haproxy and postgresql, builds the');
log('  release binary and `bench/spawntime`); one benchmark alone: `node bench/<name>.mjs [--quick]`');
log('  as root after `make bench` has built them once.');
log();
log('## Headline');
log();
log('| what | ours (p50) | peer or floor, same run (p50) | ratio | target |');
log('|---|---|---|---|---|');
for (const name of names) {
  const f = `bench/out/${name}.json`;
  if (!existsSync(path.join(root, f))) continue;
  for (const r of JSON.parse(read(f)).rows)
    log(`| ${r.what} | ${r.ours} | ${r.peer || ''} | ${r.ratio || ''} | ${r.target || ''} |`);
}
log();
for (const name of names) {
  const f = `bench/out/${name}.md`;
  if (!existsSync(path.join(root, f))) continue;
  // each section starts with its own "## " heading
  log(read(f).trimEnd());
  log();
}
// the soak's last run (`make soak`, an hour of its own), kept in the repository
if (existsSync(path.join(root, 'bench', 'soak.md'))) {
  log(read('bench/soak.md').trimEnd());
  log();
}
log(read('bench/NOTES.md').trimEnd());
// a --quick run is a preview: it does not replace the document
const dest = (process.env.BENCH_ARGS || '').includes('--quick') ? 'bench/out/BENCHMARKS.md' : 'docs/BENCHMARKS.md';
writeFileSync(path.join(root, dest), out.join('\n') + '\n');
console.log(`wrote ${dest}`);
