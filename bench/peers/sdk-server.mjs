// Peer for bench/mcp.mjs: the official TypeScript SDK's stateless Streamable HTTP server, the way
// the SDK's own stateless example runs it (a new Server and transport for every request), on plain
// node:http, answering JSON (enableJsonResponse) and checking a constant Bearer token.
// Reads {"token": "...", "tools": [...]} on stdin, listens on a random loopback port and prints
// "listening http://127.0.0.1:<port>" on stdout. tools/list returns exactly the given list.
// Run by bench/mcp.mjs; the SDK comes from the test dependencies (`make deps`), imported by path.
import http from 'node:http';
import { Server } from '../../tests/node_modules/@modelcontextprotocol/sdk/dist/esm/server/index.js';
import { StreamableHTTPServerTransport } from '../../tests/node_modules/@modelcontextprotocol/sdk/dist/esm/server/streamableHttp.js';
import { ListToolsRequestSchema } from '../../tests/node_modules/@modelcontextprotocol/sdk/dist/esm/types.js';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { token, tools } = JSON.parse(input);
const expected = `Bearer ${token}`;

function getServer() {
  const server = new Server({ name: 'sdk-peer', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  return server;
}

function jsonError(res, status, code, message, extra = {}) {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...extra });
  res.end(body);
}

const httpServer = http.createServer(async (req, res) => {
  const url = req.url.split('?')[0];
  if (url !== '/mcp') return jsonError(res, 404, -32000, 'Not found');
  if (req.headers.authorization !== expected)
    return jsonError(res, 401, -32001, 'Unauthorized', { 'www-authenticate': 'Bearer' });
  if (req.method !== 'POST') return jsonError(res, 405, -32000, 'Method not allowed.', { allow: 'POST' });
  const server = getServer();
  try {
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    await transport.handleRequest(req, res);
    res.on('close', () => {
      transport.close();
      server.close();
    });
  } catch (e) {
    console.error('sdk-peer: error handling request:', e);
    if (!res.headersSent) jsonError(res, 500, -32603, 'Internal server error');
  }
});
httpServer.listen(0, '127.0.0.1', () => {
  console.log(`listening http://127.0.0.1:${httpServer.address().port}`);
});
process.on('SIGTERM', () => httpServer.close(() => process.exit(0)));
// Do not outlive the bench if it dies without stopping us.
const parent = process.ppid;
setInterval(() => { if (process.ppid !== parent) process.exit(0); }, 1000).unref();
