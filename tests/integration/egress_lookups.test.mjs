// Name lookups shared out (issue 32, point 11): the per-owner quota of the resolver's threads
// counted a sandbox, not a user, and the server's own fetches drew from the same pool, so one
// user's four sandboxes asking for names that never answer took all 32 lookups, and other users
// and client metadata fetches got 503. Now a user's sandboxes share one quota, users leave a
// reserve to the server's own fetches, and a caller is answered at the lookup's deadline while
// the thread, still counted, finishes on its own.
//
// Names that never answer need a DNS server that never answers: the server runs in a network
// namespace this test makes (only `lo`, no route anywhere) and a mount namespace where
// /etc/resolv.conf names a stub on 127.0.0.1:53 (run by the test's child, in that namespace) and
// /etc/nsswitch.conf says `files dns`, so no query can reach another resolver or leave the
// machine. The stub never answers names that start with "hang-" and answers every other name
// "no such name" at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { until as waitUntil } from '../lib/runs.mjs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { inEmptyNetns } from '../lib/egress.mjs';

const self = fileURLToPath(import.meta.url);

// CONNECT to every authority in $AUTHORITIES at once through the sandbox's proxy; print each
// answer (the proxy closes after a refusal) on a line as it ends, after the authority.
const CONNECT_ALL = `
import os, socket, selectors
sel = selectors.DefaultSelector()
for a in os.environ['AUTHORITIES'].split():
    s = socket.create_connection(('127.0.0.1', 3128))
    s.sendall(('CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % (a, a)).encode())
    sel.register(s, selectors.EVENT_READ, [a, b''])
left = len(sel.get_map())
while left:
    for key, _ in sel.select():
        d = key.fileobj.recv(4096)
        key.data[1] += d
        if not d:
            print(key.data[0], key.data[1].decode(errors='replace').replace('\\r\\n', ' | ').replace('\\n', ' ') or 'closed', flush=True)
            sel.unregister(key.fileobj)
            key.fileobj.close()
            left -= 1
`;

// The DNS stub: holds "hang-" queries, answers the rest NXDOMAIN. names: every name asked.
async function dnsStub() {
  const dgram = await import('node:dgram');
  const sock = dgram.createSocket('udp4');
  const names = new Map(); // name -> queries seen
  sock.on('message', (msg, rinfo) => {
    if (msg.length < 12) return;
    const labels = [];
    let i = 12;
    while (i < msg.length && msg[i] !== 0 && labels.length < 64) {
      labels.push(msg.subarray(i + 1, i + 1 + msg[i]).toString('latin1'));
      i += 1 + msg[i];
    }
    const name = labels.join('.').toLowerCase();
    names.set(name, (names.get(name) || 0) + 1);
    if (name.startsWith('hang-')) return;
    // the query's header and question, as an answer: QR, RA, NXDOMAIN, no records
    const out = Buffer.from(msg.subarray(0, i + 5));
    out[2] = 0x80 | (msg[2] & 0x01);
    out[3] = 0x83;
    out.writeUInt16BE(1, 4);
    out.fill(0, 6, 12);
    sock.send(out, rinfo.port, rinfo.address);
  });
  await new Promise((r) => sock.bind(53, '127.0.0.1', r));
  return { names, close: () => sock.close() };
}

// until() of tests/lib/runs.mjs, bounded for a hung server only
const until = (cond, what) => waitUntil(cond, what, 120000);

// In the child: the stub, the server, the attack, and what everyone else got, as JSON.
async function child() {
  const { startServer, rpc, addUser } = await import('../lib/server.mjs');
  const { request, pkce, authorizePath, authorizeParams } = await import('../lib/oauth.mjs');
  const dns = await dnsStub();
  const srv = await startServer({ env: {
    SANDBOX_NETWORK: 'public', NAME_LOOKUP_TIMEOUT_SECONDS: '2',
    OPENCODE_BIN: '/nonexistent/opencode', ANTHROPIC_API_KEY: 'sk-ant-test-key',
    ANTHROPIC_BASE_URL: 'http://127.0.0.1:9',
  } });
  let id = 1;
  const call = async (name, args, token = srv.token) => {
    const r = await rpc(srv, { jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name, arguments: args } }, { token });
    if (r.status !== 200 || r.body.result?.isError) throw new Error(`${name}: ${r.status} ${r.text}`);
    return r.body.result.structuredContent;
  };
  const out = {};
  try {
    // alice's four sandboxes: her own and three run sessions' (the runs fail without an agent,
    // their sessions' sandboxes stay)
    const sessions = [undefined];
    for (let i = 0; i < 3; i++) sessions.push((await call('run_task', { task: `session ${i}` })).session_id);
    for (const s of sessions) await call('container_exec', { command: 'true', ...(s ? { session_id: s } : {}) });
    // each asks for eight names that never answer, all at once, in the background
    for (const [n, s] of sessions.entries()) {
      const auths = Array.from({ length: 8 }, (_, i) => `hang-${n}-${i}.test:443`).join(' ');
      await call('container_exec', { command: 'nohup python3 -c "$PY" > /tmp/hung.out 2>&1 &',
        env: { PY: CONNECT_ALL, AUTHORITIES: auths }, ...(s ? { session_id: s } : {}) });
    }
    // every one of the 32 reached the resolver or was refused for want of a lookup
    const busy = () => (srv.stderr().match(/egress connect .*host=hang-\S+ .*reason=busy/g) || []).length;
    const hung = () => [...dns.names.keys()].filter((n) => n.startsWith('hang-')).length;
    await until(() => hung() + busy() >= 32, 'the hung names asked for or refused');
    out.hung = hung();
    out.busy = busy();
    // the callers of the hung lookups are answered at the deadline ...
    await until(() => (srv.stderr().match(/egress connect .*host=hang-\S+ .*reason=timeout/g) || []).length >= out.hung,
      'the hung lookups answered at their deadline');
    out.timeouts = srv.stderr().match(/egress connect .*host=hang-\S+ .*reason=timeout.*/g);
    // what the sandboxes' programs were answered
    out.answers = [];
    for (const s of sessions)
      out.answers.push(...(await call('container_exec', { command: 'cat /tmp/hung.out',
        ...(s ? { session_id: s } : {}) })).stdout.trim().split('\n'));
    // ... while their threads, still waiting for the stub, still count for alice
    out.again = (await call('container_exec', { command: 'python3 -c "$PY"',
      env: { PY: CONNECT_ALL, AUTHORITIES: 'hang-again.test:443' } })).stdout;
    // another user's sandbox resolves (the stub says no such name, at once)
    const bob = addUser(srv, 'bob');
    out.bob = (await call('container_exec', { command: 'python3 -c "$PY"',
      env: { PY: CONNECT_ALL, AUTHORITIES: 'ok-bob.test:443' } }, bob)).stdout;
    // and a client metadata document's name is resolved for a stranger
    const { challenge } = pkce();
    const r = await request(srv, authorizePath(authorizeParams(srv, {
      client_id: 'https://cimd-ok.test/client.json', redirect_uri: 'http://127.0.0.1:9/cb', challenge })));
    out.cimd = { status: r.status, text: r.text };
    out.asked = Object.fromEntries(dns.names);
  } finally {
    await srv.stop();
    dns.close();
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

if (process.argv[2] === 'child') {
  await child();
} else {
  test("one user's four sandboxes on names that never answer take neither other users' lookups nor client metadata's", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'smcp-dns-'));
    try {
      writeFileSync(path.join(dir, 'resolv.conf'), 'nameserver 127.0.0.1\noptions timeout:30 attempts:5\n');
      writeFileSync(path.join(dir, 'nsswitch.conf'), 'hosts: files dns\n');
      // a namespace with loopback up and nothing else, and the stub as the only resolver
      const r = await inEmptyNetns(self, {
        mount: true,
        setup: `mount --bind "${dir}/resolv.conf" /etc/resolv.conf && ` +
          `mount --bind "${dir}/nsswitch.conf" /etc/nsswitch.conf && `,
      });
      // bob's name was looked up: "no such name", not "busy"
      assert.match(r.bob, /^ok-bob\.test:443 HTTP\/1\.1 502 /, r.bob);
      assert.ok(r.asked['ok-bob.test'] > 0);
      // and so was the client metadata document's
      assert.equal(r.cimd.status, 401, r.cimd.text);
      assert.match(r.cimd.text, /cannot resolve &#39;cimd-ok\.test&#39;: Name or service not known/);
      assert.ok(r.asked['cimd-ok.test'] > 0);
      // alice's sandboxes together had eight lookups; the other 24 were refused, saying why
      assert.equal(r.hung, 8, JSON.stringify(r.asked));
      assert.equal(r.busy, 24);
      // each of the eight was answered at its deadline, 2 s, the rest at once
      assert.equal(r.timeouts.length, 8);
      for (const l of r.timeouts) assert.match(l, /status=504 /);
      assert.equal(r.answers.length, 32);
      const late = r.answers.filter((l) => / HTTP\/1\.1 504 .*cannot resolve '[^']+' within 2000 ms/.test(l));
      const busy = r.answers.filter((l) => / HTTP\/1\.1 503 .*8 name lookups of this user's sandboxes and runs are under way/.test(l));
      assert.equal(late.length, 8, r.answers.join('\n'));
      assert.equal(busy.length, 24, r.answers.join('\n'));
      // a lookup whose caller was answered still counts until its thread ends
      assert.match(r.again, /^hang-again\.test:443 HTTP\/1\.1 503 .*8 name lookups of this user's sandboxes and runs are under way/);
      assert.equal(r.asked['hang-again.test'], undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
