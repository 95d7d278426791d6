// A receiver of notifications on 127.0.0.1, as a user's webhook endpoint or ntfy server would
// be: it records every request (headers, raw body, parsed JSON), answers with the statuses it is
// told to in turn (then 200), and counts how often it processed each Idempotency-Key (answered
// it with a 2xx), as a receiver that drops duplicates would.
import http from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';

export async function startReceiver() {
  const requests = [];
  const plan = []; // statuses to answer next: {status, headers}
  const processed = new Map(); // Idempotency-Key -> times answered with 2xx
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const { status, headers = {} } = plan.length ? plan.shift() : { status: 200 };
      const r = { method: req.method, path: req.url, headers: req.headers, raw, body: raw.toString('utf8'), status };
      try { r.json = JSON.parse(r.body); } catch { r.json = null; }
      requests.push(r);
      const key = req.headers['idempotency-key'];
      if (status >= 200 && status < 300) processed.set(key, (processed.get(key) || 0) + 1);
      res.writeHead(status, { 'content-type': 'text/plain', ...headers });
      res.end(status < 300 ? 'ok' : 'try again');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    port,
    url: (p = '/hook') => `http://127.0.0.1:${port}${p}`,
    requests,
    processed,
    // answer the next n requests with status (and headers), then 200 again
    fail(n, status = 500, headers = {}) { for (let i = 0; i < n; i++) plan.push({ status, headers }); },
    heal() { plan.length = 0; },
    // requests whose Idempotency-Key is key
    of: (key) => requests.filter((r) => r.headers['idempotency-key'] === key),
    async waitFor(pred, what, ms = 60000) {
      const t0 = Date.now();
      for (;;) {
        const found = requests.filter(pred);
        if (found.length) return found;
        if (Date.now() - t0 > ms) throw new Error(`receiver: not received in time: ${what}; got ${requests.map((q) => `${q.path} ${q.headers['x-sandbox-mcp-event']}`).join(', ')}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve); }),
  };
}

// What a receiver does with X-Sandbox-MCP-Signature: "t=<seconds>,v1=<hex>" must be the
// HMAC-SHA256, keyed with the secret's text, of "<t>.<raw body>", and t recent.
export function signatureValid(secret, header, raw, toleranceSeconds = 300) {
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header || '');
  if (!m) return false;
  const want = createHmac('sha256', secret).update(`${m[1]}.`).update(raw).digest();
  const got = Buffer.from(m[2], 'hex');
  return timingSafeEqual(want, got) && Math.abs(Date.now() / 1000 - Number(m[1])) <= toleranceSeconds;
}
