// A local stand-in for the Anthropic Messages API (and anything else a test points the proxy
// at): it speaks the real wire format, SSE streaming included, and does what each test scripts.
// Every request is recorded (method, url, headers, body) so tests can check what reached it.
import http from 'node:http';

// Anthropic's streaming shape for a short reply.
export function messageEvents({ input = 25, output = 7, text = 'Hello!' } = {}) {
  const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  return [
    ev('message_start', { message: { id: 'msg_fake', type: 'message', role: 'assistant', content: [],
      model: 'claude-fake', stop_reason: null, usage: { input_tokens: input, output_tokens: 1 } } }),
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ev('ping', {}),
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }),
    ev('content_block_stop', { index: 0 }),
    ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: output } }),
    ev('message_stop', {}),
  ];
}

export function messageJson({ input = 25, output = 7, text = 'Hello!' } = {}) {
  return { id: 'msg_fake', type: 'message', role: 'assistant', model: 'claude-fake',
    content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null,
    usage: { input_tokens: input, output_tokens: output } };
}

// Start the fake on a random loopback port. handler(req, res, body) answers; the default
// replies like the Messages API (streaming when the body asks for it).
export async function startFake(handler) {
  const requests = [];
  const closed = [];
  let current = handler || defaultHandler;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const rec = { method: req.method, url: req.url, headers: req.headers, body };
      requests.push(rec);
      res.on('close', () => { if (!res.writableFinished) closed.push(rec); });
      current(req, res, body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    closed, // requests whose connection closed before the response finished
    handle(h) { current = h || defaultHandler; },
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve); }),
  };
}

export function defaultHandler(req, res, body) {
  let parsed = {};
  try { parsed = JSON.parse(body || '{}'); } catch { /* not JSON */ }
  if (parsed.stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const e of messageEvents()) res.write(e);
    res.end();
    return;
  }
  const out = JSON.stringify(messageJson());
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
  res.end(out);
}
