// Judges a run of the prerelease conformance suite with --requirements against
// expected-failures-2026.yml. Run by tests/conformance/run.sh:
//
//   node baseline.mjs --baseline FILE --results DIR --log FILE
//
// Why not the suite's own --expected-failures: with --requirements the suite applies a baseline
// only to the scenarios the revision scores, and runs the others (its `not_scored` list: the
// tasks extension, and scenarios pending against its reference server) without judging them, so
// a regression there would pass unseen. Here every scenario the run names is judged the same way,
// with the suite's own rules: a scenario fails when one of its checks is a FAILURE or a WARNING
// (a check id repeated counts once, at its worst); an entry '<scenario>' expects the scenario to
// fail, '<scenario>:<check-id>' expects that check to; a listed scenario or check that passes, or
// that did not run, is stale. LOG is the suite's output, whose "=== Running scenario: NAME ==="
// lines say what ran and "Running requirements R (N scenarios)" how many should have; DIR holds
// each scenario's checks.json (server-NAME-<time>/checks.json). A scenario that wrote none failed.
//
// The report has the suite's headings ("Expected failures (in baseline):" with "  ~ entry",
// "Stale baseline entries ..." with "  ✓ entry", "Unexpected failures (not in baseline):" with
// "  ✗ entry", and "Baseline check passed" when nothing unexpected happened), then one line
//   baseline: P passed, U unexpected, E expected, S stale
// P counts scenarios without a failing check; U and E count scenarios or, for per-check entries,
// checks. Exit status 0 when U and S are 0, else 1.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({ options: {
  baseline: { type: 'string' }, results: { type: 'string' }, log: { type: 'string' },
} });
for (const k of ['baseline', 'results', 'log'])
  if (!opt[k]) { console.error(`baseline.mjs: --${k} is required`); process.exit(2); }

// The 'server:' list of the baseline file ("  - entry" lines, comments allowed).
function serverEntries(file) {
  const entries = [];
  let on = false;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (/^\S/.test(line) && !/^#/.test(line)) on = /^server:/.test(line);
    const m = on && line.match(/^\s+-\s+([^\s#]+)/);
    if (m) entries.push(m[1]);
  }
  return entries;
}

const log = readFileSync(opt.log, 'utf8').replace(/\x1b\[[0-9;]*m/g, '');
const ran = [...log.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]);
const announced = log.match(/^Running requirements \S+ \((\d+) scenarios\)/m);

// The newest checks.json of each scenario in the results directory.
const dirs = existsSync(opt.results) ? readdirSync(opt.results).sort() : [];
function checksOf(scenario) {
  const prefix = `server-${scenario}-`;
  const dir = dirs.filter((d) => d.startsWith(prefix) && /^\d{4}-\d{2}-\d{2}T[\d-]+Z$/.test(d.slice(prefix.length))).pop();
  const file = dir && path.join(opt.results, dir, 'checks.json');
  if (!file || !existsSync(file))
    return [{ id: scenario, status: 'FAILURE', errorMessage: 'the scenario wrote no checks.json' }];
  return JSON.parse(readFileSync(file, 'utf8'));
}

// One check a check id, the worst of its repeats (INFO rows kept as they are).
function dedupe(checks) {
  const rank = (s) => (s === 'FAILURE' ? 3 : s === 'WARNING' ? 2 : s === 'SUCCESS' ? 1 : 0);
  const best = new Map();
  checks.forEach((c, i) => {
    if (c.status === 'INFO') return;
    const j = best.get(c.id);
    if (j === undefined || rank(c.status) >= rank(checks[j].status)) best.set(c.id, i);
  });
  return checks.filter((c, i) => c.status === 'INFO' || best.get(c.id) === i);
}

const failing = (c) => c.status === 'FAILURE' || c.status === 'WARNING';
const entries = serverEntries(opt.baseline);
const whole = new Set(entries.filter((e) => !e.includes(':')));
const perCheck = new Map();
for (const e of entries.filter((x) => x.includes(':'))) {
  const [s, ...rest] = e.split(':');
  if (!perCheck.has(s)) perCheck.set(s, new Set());
  perCheck.get(s).add(rest.join(':'));
}

const expected = [], stale = [], unexpected = [];
let passed = 0;
for (const scenario of ran) {
  const checks = dedupe(checksOf(scenario));
  const fails = checks.some(failing);
  if (!fails) passed++;
  if (whole.has(scenario)) {
    (fails ? expected : stale).push(scenario);
    continue;
  }
  const listed = perCheck.get(scenario);
  for (const c of checks.filter(failing)) {
    const entry = `${scenario}:${c.id}`;
    (listed?.has(c.id) ? expected : unexpected).push(entry);
  }
  for (const id of listed ?? []) {
    const c = checks.find((x) => x.id === id && x.status !== 'INFO');
    if (!c || c.status === 'SUCCESS') stale.push(`${scenario}:${id}${c ? '' : ' (no such check ran)'}`);
  }
}
for (const s of [...whole, ...perCheck.keys()])
  if (!ran.includes(s)) stale.push(`${s} (did not run)`);
if (!announced) unexpected.push('(the suite did not say how many scenarios it would run)');
else if (Number(announced[1]) !== ran.length)
  unexpected.push(`(the suite ran ${ran.length} of the ${announced[1]} scenarios it announced)`);
else if (!/^=== SUMMARY ===$/m.test(log)) unexpected.push('(the suite printed no summary)');

if (expected.length) console.log(`\nExpected failures (in baseline):\n${expected.map((n) => `  ~ ${n}`).join('\n')}`);
if (stale.length) console.log(`\nStale baseline entries (now passing - remove from baseline):\n${stale.map((n) => `  ✓ ${n}`).join('\n')}`);
if (unexpected.length) console.log(`\nUnexpected failures (not in baseline):\n${unexpected.map((n) => `  ✗ ${n}`).join('\n')}`);
const ok = !unexpected.length && !stale.length;
if (ok) console.log('\nBaseline check passed: all failures are expected.');
console.log(`baseline: ${passed} passed, ${unexpected.length} unexpected, ${expected.length} expected, ${stale.length} stale`);
process.exit(ok ? 0 : 1);
