// The host's own addresses are decided when a sandbox connects, not read once at start: an
// address the host gains while the server runs (a DHCP lease, an IPv6 privacy address, a new
// interface) is refused to a public-mode sandbox like the ones it had, although it is public,
// so whatever listens on it stays out of reach. The server runs in a network namespace this test
// makes, with only `lo` and no route: the addresses added are on that namespace's `lo` (or on a
// dummy interface where the kernel has the module), and nothing leaves the machine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';

import { inEmptyNetns } from '../lib/egress.mjs';

const self = fileURLToPath(import.meta.url);
// public addresses, only ever inside the namespace
const V4 = '1.2.3.4', V6 = '2600::1';

// Give the namespace's host V4 and V6: on a dummy interface if one can be made, else on lo.
function addAddresses() {
  let dev = 'lo';
  try {
    execFileSync('ip', ['link', 'add', 'own0', 'type', 'dummy'], { stdio: 'ignore' });
    execFileSync('ip', ['link', 'set', 'own0', 'up']);
    dev = 'own0';
  } catch { /* no dummy module: lo takes them */ }
  execFileSync('ip', ['addr', 'add', `${V4}/32`, 'dev', dev]);
  execFileSync('ip', ['addr', 'add', `${V6}/128`, 'dev', dev, 'nodad']);
  return dev;
}

async function child() {
  const { startServer, rpc } = await import('../lib/server.mjs');
  // a service of the host on every address, as a careless one listens
  const web = http.createServer((req, res) => res.end('the host answered\n'));
  await new Promise((r) => web.listen(0, '::', r));
  const port = web.address().port;
  const srv = await startServer({ env: { SANDBOX_NETWORK: 'public' } });
  let id = 1;
  const get = async (host) => {
    const url = host.includes(':') ? `http://[${host}]:${port}/` : `http://${host}:${port}/`;
    const r = await rpc(srv, { jsonrpc: '2.0', id: id++, method: 'tools/call', params: {
      name: 'container_exec', arguments: {
        command: `curl -sS --noproxy '' -x http://127.0.0.1:3128 --max-time 20 -w '\\n%{http_code}' ${url}`,
      } } });
    return r.body.result.structuredContent.stdout;
  };
  try {
    // before: public addresses with no route, which the proxy may try and cannot reach
    const before = [await get(V4), await get(V6)];
    const dev = addAddresses();
    const after = [await get(V4), await get(V6)];
    process.stdout.write(`${JSON.stringify({ before, after, dev })}\n`);
  } finally {
    await srv.stop();
    web.close();
  }
}

if (process.argv[2] === 'child') {
  await child();
} else {
  test('an address the host gains after the server started is refused to a public-mode sandbox as its own', async () => {
    const { before, after } = await inEmptyNetns(self);
    for (const b of before) assert.match(b, /\n502$/, `before: ${b}`);
    for (const [i, a] of after.entries()) {
      const host = [V4, V6][i];
      assert.match(a, /\n403$/, `${host} after it was added: ${a}`);
      assert.match(a, new RegExp(`${host.replace(/[.:]/g, '\\$&')}.*an address of this server's own host`), a);
      assert.doesNotMatch(a, /the host answered/);
    }
  });
}
