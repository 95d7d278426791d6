// Shared helpers for the benchmarks: start the release binary, time calls, summarize.
import { performance } from 'node:perf_hooks';

export function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

export function summarize(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99),
    min: s[0], max: s[s.length - 1] };
}

export async function timeIt(fn) {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

export function fmt(ms) {
  return ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2);
}
