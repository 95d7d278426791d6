// Low-level HTTP helpers for the integration tests: requests fetch() cannot make (custom Host
// header, exact byte counts) and the headers/_meta of the stateless 2026-07-28 revision.
import http from 'node:http';
import net from 'node:net';
import assert from 'node:assert/strict';

export const MODERN = '2026-07-28';
export const META_VERSION = 'io.modelcontextprotocol/protocolVersion';
export const META_CAPS = 'io.modelcontextprotocol/clientCapabilities';
export const META_SERVERINFO = 'io.modelcontextprotocol/serverInfo';
export const META_LOGLEVEL = 'io.modelcontextprotocol/logLevel';

export function portOf(server) {
  return Number(new URL(server.url).port);
}

// One request over node:http on a fresh connection; any header may be set (Host included), and
// headers may be a flat [name, value, name, value...] array to send one name several times; from
// localAddress when given (all of 127.0.0.0/8 is loopback: a test makes several clients so).
// Resolves {status, headers, text, body} where body is the parsed JSON or null.
export function httpRequest(server, { method = 'POST', path = '/mcp', headers = {}, body, localAddress } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: portOf(server), method, path, headers, agent: false, localAddress },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => { text += d; });
        res.on('end', () => {
          let parsed = null;
          try { parsed = JSON.parse(text); } catch { /* not JSON */ }
          resolve({ status: res.statusCode, headers: res.headers, text, body: parsed });
        });
      });
    req.on('error', reject);
    req.end(body);
  });
}

// promise, or value once ms have passed, whichever comes first; the timer goes with the race, so
// that a bound far beyond the wait leaves nothing to keep the test's process alive after it.
export function within(promise, ms, value) {
  let timer;
  const late = new Promise((resolve) => { timer = setTimeout(resolve, ms, value); });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// Write raw bytes on a TCP connection and collect everything the server sends until it closes
// (or until the client gives up after idleMs without news). Write errors are ignored: the server
// may close early, e.g. after rejecting an oversized body.
export function rawExchange(server, chunks, { idleMs = 3000 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(portOf(server), '127.0.0.1');
    const got = [];
    let timer;
    const finish = () => { clearTimeout(timer); sock.destroy(); resolve(Buffer.concat(got).toString('latin1')); };
    const arm = () => { clearTimeout(timer); timer = setTimeout(finish, idleMs); };
    sock.on('data', (d) => { got.push(d); arm(); });
    sock.on('close', finish);
    sock.on('error', () => { /* reset after an early close; keep what arrived */ });
    sock.on('connect', () => {
      arm();
      for (const c of chunks) sock.write(c, () => { /* errors reported via 'error' */ });
    });
  });
}

// params._meta of a 2026-07-28 request.
export function modernMeta(extra = {}) {
  return { [META_VERSION]: MODERN, [META_CAPS]: {}, ...extra };
}

// The standard headers of a 2026-07-28 request.
export function modernHeaders(method, name) {
  return { 'mcp-protocol-version': MODERN, 'mcp-method': method, ...(name !== undefined ? { 'mcp-name': name } : {}) };
}

// A JSON-RPC request in the 2026-07-28 form: {message, headers} ready for rpc().
export function modernRequest(id, method, params = {}, { meta = {}, name } = {}) {
  const message = { jsonrpc: '2.0', id, method, params: { ...params, _meta: modernMeta(meta) } };
  const hdrName = name !== undefined ? name : params.name ?? params.uri;
  return { message, headers: modernHeaders(method, hdrName) };
}

// Sanitizer reports (ASan, LSan, UBSan) in a captured stderr fail the test with the report.
export function assertNoSanitizerReport(stderr, what = 'process') {
  const m = /(ERROR: (Address|Leak|Thread|Memory)Sanitizer|runtime error:|UndefinedBehaviorSanitizer)/.exec(stderr);
  assert.equal(m, null, `${what} printed a sanitizer report:\n${stderr}`);
}

// Parse Prometheus text into a Map of 'name{labels}' -> number.
export function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}
