// The addresses a sandbox must never reach although they are not loopback: cloud metadata
// (169.254.169.254), private networks (RFC 1918), carrier-grade NAT and IPv6 unique local
// addresses, asked for through the egress proxy of a server in `public` mode, which allows any
// public address. The policy's verdict on each class is unit-tested on resolved addresses
// (tests/unit/test_netpolicy.c); this is the same through a real sandbox, its proxy and the
// record. So that a broken rule still sends nothing off this machine, the server (and with it
// every sandbox and the proxy's own connections) runs in a network namespace this test makes,
// with only `lo` and no route anywhere: a connection the proxy wrongly allowed fails with "no
// route" instead of leaving. The test's client runs in that namespace too (a child process), as
// the server's listener is there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';

import { inEmptyNetns } from '../lib/egress.mjs';

const self = fileURLToPath(import.meta.url);

// The targets, as the sandbox asks for them, with the class the refusal must name.
const TARGETS = [
  ['169.254.169.254', 80, /link-local/],
  ['10.0.0.5', 443, /private/],
  ['172.16.1.1', 443, /private/],
  ['192.168.1.1', 80, /private/],
  ['100.64.0.1', 443, /shared|carrier|CGNAT/i],
  ['fd00::1', 443, /unique local/],
  ['fe80::1', 443, /link-local/],
];

// CONNECT host:port to the sandbox's proxy, and print the whole answer.
const CONNECT = `
import os, socket
a = os.environ['AUTHORITY'].encode()
s = socket.create_connection(('127.0.0.1', 3128))
s.sendall(b'CONNECT ' + a + b' HTTP/1.1\\r\\nHost: ' + a + b'\\r\\n\\r\\n')
out = b''
while True:
    d = s.recv(4096)
    if not d: break
    out += d
print(out.decode())
`;

// In the child: start the server, try every target from a sandbox, print what came back.
async function child() {
  const { startServer, rpc } = await import('../lib/server.mjs');
  const { until } = await import('../lib/runs.mjs');
  const srv = await startServer({ env: { SANDBOX_NETWORK: 'public' } });
  try {
    const results = [];
    for (const [host, port] of TARGETS) {
      const authority = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
      const r = await rpc(srv, { jsonrpc: '2.0', id: results.length + 1, method: 'tools/call', params: {
        name: 'container_exec', arguments: { command: 'python3 -c "$PY"', env: { PY: CONNECT, AUTHORITY: authority } },
      } });
      results.push({ host, port, out: r.body.result.structuredContent.stdout });
    }
    // the server's own view: its log lines for these attempts, each logged as its connection
    // closes, which may be after the command's answer
    const lines = () => srv.stderr().split('\n').filter((l) => / egress connect /.test(l));
    const all = () => TARGETS.every(([host, port]) =>
      lines().some((l) => l.includes(`host=${host} `) && l.includes(`port=${port} `)));
    await until(all, 'a log line for every attempt').catch(() => {}); // the test says which is missing
    const log = lines();
    const routes = srv.stderr().match(/egress mode=\S+/)?.[0];
    process.stdout.write(`${JSON.stringify({ results, log, routes })}\n`);
  } finally {
    await srv.stop();
  }
}

if (process.argv[2] === 'child') {
  await child();
} else {
  test('a public-mode sandbox is refused cloud metadata, private, CGNAT, ULA and link-local addresses, saying which', async () => {
    // a namespace with loopback up and nothing else: no interface, no route out
    const { results, log } = await inEmptyNetns(self);
    assert.equal(results.length, TARGETS.length);
    for (const [i, [host, port, cls]] of TARGETS.entries()) {
      const r = results[i];
      assert.match(r.out, /^HTTP\/1\.1 403 /, `${host}: ${r.out}`);
      assert.match(r.out, new RegExp(host.replace(/[.:]/g, '\\$&')));
      assert.match(r.out, cls, `${host}: ${r.out}`);
      const line = log.find((l) => l.includes(`host=${host} `) && l.includes(`port=${port} `));
      assert.ok(line, `no log line for ${host}: ${log.join('\n')}`);
      assert.match(line, /verdict=denied reason=address status=403 up=0 down=0/);
    }
  });
}
