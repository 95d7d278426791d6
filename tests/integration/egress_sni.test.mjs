// Fronting through an allowed name. Behind a shared front (a CDN), the site is picked by the
// TLS ClientHello's server name (SNI) or, for plain HTTP, by the Host header, not by the
// address: a proxy that judged only the name asked for would let an allowed name reach every
// other site on the same front. In allowlist mode a CONNECT tunnel to a name must therefore begin
// with a ClientHello naming that name (no SNI, another name, an encrypted client hello, or bytes
// that are not TLS: refused, with a TLS access_denied alert where they were TLS), and an
// absolute-form request reaches its upstream with Host rewritten to the authority judged. The
// proxy reads at most 16 KiB of a tunnel's beginning for its hello, within 10 seconds.
// The upstreams are on 127.0.0.1, reached as `localhost` (allowed, with its addresses named in
// SANDBOX_NETWORK_ADDRS); nothing leaves the machine.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import tls from 'node:tls';

import { rpc } from '../lib/server.mjs';
import { makeCA } from '../lib/tls.mjs';
import { serverWith, attempts, waitAttempts } from '../lib/egress.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// In the sandbox: tunnels through the proxy to localhost:PORT, one per case, each a TLS
// handshake with the given SNI (None: no SNI) or raw bytes; prints what each got.
const TUNNELS = `
import json, os, socket, ssl, struct
port = int(os.environ['PORT'])

def ext(t, body): return struct.pack('>HH', t, len(body)) + body
def hello(exts):
    body = b'\\x03\\x03' + b'\\x07' * 32 + b'\\x00' + b'\\x00\\x02\\x13\\x01' + b'\\x01\\x00'
    body += struct.pack('>H', len(exts)) + exts
    hs = b'\\x01' + struct.pack('>I', len(body))[1:] + body
    return b'\\x16\\x03\\x01' + struct.pack('>H', len(hs)) + hs
name = b'localhost'
sni = ext(0, struct.pack('>H', len(name) + 3) + b'\\x00' + struct.pack('>H', len(name)) + name)
ECH = hello(sni + ext(0xfe0d, b'\\x00' * 40))

# a hello of 4 KiB in records of one byte each: 24 KiB on the wire, past the 16 KiB read
hs = b'\\x01\\x00\\x10\\x00' + b'\\x00' * 4096
HUGE = b''.join(b'\\x16\\x03\\x01\\x00\\x01' + hs[i:i + 1] for i in range(len(hs)))

def tunnel(server_name=None, raw=None):
    s = socket.create_connection(('127.0.0.1', 3128))
    s.settimeout(30)
    s.sendall(('CONNECT localhost:%d HTTP/1.1\\r\\nHost: localhost:%d\\r\\n\\r\\n' % (port, port)).encode())
    head = b''
    while not head.endswith(b'\\r\\n\\r\\n'):
        d = s.recv(1)
        if not d: break
        head += d
    r = {'status': head.split(b'\\r\\n')[0].decode()}
    if raw is not None:
        s.sendall(raw)
        got = b''
        try:
            while True:
                d = s.recv(100)
                if not d: break
                got += d
        except OSError as e:
            r['error'] = str(e)
        r['got'] = got.hex()
        return r
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        t = ctx.wrap_socket(s, server_hostname=server_name)
        t.sendall(b'hello')
        r['answer'] = t.recv(100).decode()
    except (OSError, ssl.SSLError) as e:
        r['error'] = str(e)
    return r

print(json.dumps({
    'match': tunnel('localhost'),
    'other': tunnel('other.example'),
    'none': tunnel(None),
    'ech': tunnel(raw=ECH),
    'plain': tunnel(raw=b'GET / HTTP/1.1\\r\\nHost: other.example\\r\\n\\r\\n'),
    'huge': tunnel(raw=HUGE),
    'late': tunnel(raw=ECH[:10]),
}))
`;

let ca, front, web, srv;
const handshakes = [];
const seen = [];

before(async () => {
  ca = makeCA();
  const cert = ca.issue('front');
  // the front: one TLS server for every name, as a CDN's edge is
  front = tls.createServer({ key: cert.key, cert: cert.cert }, (s) => {
    handshakes.push(s.servername || '');
    s.on('error', () => {});
    s.once('data', () => s.end(`front serves ${s.servername || '(no name)'}\n`));
  });
  front.on('tlsClientError', () => {});
  web = http.createServer((req, res) => {
    seen.push(req.headers);
    res.end(`site ${req.headers.host}\n`);
  });
  await new Promise((r) => front.listen(0, '127.0.0.1', r));
  await new Promise((r) => web.listen(0, '127.0.0.1', r));
  const tp = front.address().port, wp = web.address().port;
  srv = await serverWith({
    SANDBOX_NETWORK: 'allowlist',
    SANDBOX_NETWORK_DEFAULTS: '0',
    SANDBOX_NETWORK_ALLOW: `localhost:${tp},localhost:${wp}`,
    SANDBOX_NETWORK_ADDRS: `localhost:${tp},localhost:${wp}`,
  });
});

after(async () => {
  await srv?.stop();
  front?.close();
  web?.closeAllConnections();
  web?.close();
  ca?.remove();
});

async function exec(command, env = {}) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: {
    name: 'container_exec', arguments: { command, env } } });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.body.result.isError, undefined, JSON.stringify(r.body.result));
  return r.body.result.structuredContent;
}

test('allowlist: a tunnel to an allowed name passes only a ClientHello naming it (other SNI, no SNI, ECH, plain HTTP, a hello past 16 KiB or late refused)', async () => {
  const port = front.address().port;
  const r = await exec('python3 -c "$PY"', { PY: TUNNELS, PORT: String(port) });
  assert.equal(r.exit_code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  for (const k of Object.keys(out)) assert.equal(out[k].status, 'HTTP/1.1 200 Connection Established', k);
  assert.equal(out.match.answer, 'front serves localhost\n', JSON.stringify(out.match));
  // refused: the client's TLS sees the proxy's access_denied alert, and the front nothing
  assert.match(out.other.error, /ACCESS_DENIED|access denied/i, JSON.stringify(out.other));
  assert.match(out.none.error, /ACCESS_DENIED|access denied/i, JSON.stringify(out.none));
  assert.equal(out.ech.got, '15030300020231', JSON.stringify(out.ech));
  assert.equal(out.plain.got, '', JSON.stringify(out.plain)); // not TLS: closed, no alert
  // the caps: at most 16 KiB read for the hello, and a deadline for it (10 s)
  // (the proxy closes with the rest unread, so the kernel may reset the tunnel before the
  // client has read the alert)
  assert.ok(out.huge.got === '15030300020231' || /reset/i.test(out.huge.error), JSON.stringify(out.huge));
  assert.equal(out.late.got, '15030300020231', JSON.stringify(out.late));
  assert.deepEqual(handshakes, ['localhost']);
  // recorded as refusals with the reason sni, one per refused tunnel (each line follows its
  // connection's end)
  let denied = [];
  for (let i = 0; i < 200 && denied.length < 6; i++) {
    denied = attempts(srv).filter((a) => a.port === String(port) && a.verdict === 'denied');
    if (denied.length < 6) await sleep(50);
  }
  assert.equal(denied.length, 6, JSON.stringify(attempts(srv)));
  for (const a of denied) assert.equal(a.reason, 'sni', JSON.stringify(a));
  const ok = await waitAttempts(srv, (a) => a.port === String(port) && a.verdict === 'allowed');
  assert.equal(ok[0].reason, 'ok');
});

test('allowlist: an absolute-form request reaches its upstream with Host rewritten to the authority judged', async () => {
  const port = web.address().port;
  const r = await exec(`curl -sS --noproxy '' -x http://127.0.0.1:3128 --max-time 30 -H 'Host: other.example' http://localhost:${port}/page`);
  assert.equal(r.exit_code, 0, r.stderr);
  assert.equal(r.stdout, `site localhost:${port}\n`);
  const req = seen.at(-1);
  assert.equal(req.host, `localhost:${port}`);
  // one Host only
  assert.equal(Object.keys(req).filter((k) => k === 'host').length, 1);
});
