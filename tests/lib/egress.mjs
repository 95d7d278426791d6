// Helpers for the egress suites: a server with its own network settings, a tool call that must
// succeed, the egress proxy's log lines of a server, as objects, and a test run again in a network
// namespace of its own.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { rpc, startServer, tempDir } from './server.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A server with vars (SANDBOX_NETWORK and the like) in its env file and, the same, in its
// environment, which wins over the file: the harness's own SANDBOX_NETWORK=none (no test reaches
// past this machine by default) must not win here. env adds to the environment only. The env
// file's directory goes with the server.
export async function serverWith(vars, env = {}) {
  const dir = tempDir('smcp-egress-');
  const file = path.join(dir, 'egress.env');
  writeFileSync(file, Object.entries(vars).map(([k, v]) => `${k}=${v}\n`).join(''));
  const srv = await startServer({ args: ['--env-file', file], env: { ...vars, ...env } });
  const stop = srv.stop.bind(srv);
  srv.stop = async (...a) => { const r = await stop(...a); rmSync(dir, { recursive: true, force: true }); return r; };
  return srv;
}

// Call tool name with args on srv; its result, which must not be an error.
export async function toolOk(srv, name, args = {}) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.isError, undefined, JSON.stringify(r.body.result));
  return r.body.result;
}

// The `egress connect` lines a server logged, as objects of their key=value pairs.
export function attempts(srv) {
  return srv.stderr().split('\n').filter((l) => / egress connect /.test(l)).map((l) => {
    const o = {};
    for (const m of l.matchAll(/(\w+)=(\S*)/g)) o[m[1]] = m[2];
    return o;
  });
}

// The lines for which pred holds, once there is one (the line follows the connection's end).
// (min: how many such records to wait for; a record is logged as its connection ends, which may
// come after the command that made it has returned)
export async function waitAttempts(srv, pred, min = 1) {
  for (let i = 0; i < 600; i++) {
    const a = attempts(srv).filter(pred);
    if (a.length >= min) return a;
    await sleep(50);
  }
  assert.fail(`no such egress record in:\n${attempts(srv).map((a) => JSON.stringify(a)).join('\n')}`);
}

// Run the test file self again, as `node self child`, in a network namespace of its own with
// only loopback up and no route (and a mount namespace of its own when mount), after the shell
// commands setup (each ending in "&& "). The child prints one line of JSON, its findings, and
// nothing else: resolves with it parsed, after checking that the namespace had no route at all.
export async function inEmptyNetns(self, { mount = false, setup = '' } = {}) {
  const proc = spawn('unshare', ['--net', ...(mount ? ['--mount'] : []), 'sh', '-c',
    `ip link set lo up && ${setup}ip route show && exec "$0" "$@"`, process.execPath, self, 'child'],
  { stdio: ['ignore', 'pipe', 'pipe'], env: process.env });
  let out = '', err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  const code = await new Promise((r) => proc.on('exit', r));
  assert.equal(code, 0, `child failed: ${err.slice(-4000)}\n${out.slice(-2000)}`);
  const lines = out.trim().split('\n');
  // `ip route show` printed nothing before the JSON: the namespace has no route at all
  assert.equal(lines.length, 1, `the namespace has routes: ${out}`);
  return JSON.parse(lines[0]);
}
