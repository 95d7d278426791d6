// Pictures come back as pictures: container_file_read of a whole PNG, JPEG, GIF or WebP file
// answers MCP image content with its mimeType (the base64 once, in the content), capped by the
// reply budget with a too_large error beyond; an explicit range, a file that is not a whole
// image, SVG and other bytes come back as resources. Through the official SDK client, which
// parses every result (CallToolResultSchema) and checks its structuredContent against the
// tool's outputSchema once the tools are listed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { startServer } from '../lib/server.mjs';
import { png, jpeg, gif, webp, svg } from '../lib/images.mjs';

const BUDGET = 100000; // the default REPLY_MAX_BYTES
const IMAGE_MAX = Math.floor((BUDGET - 1024 - 3072) / 4) * 3; // 71928: what fits it as base64
let server;
let client;
let readTool;

async function connect(srv) {
  const c = new Client({ name: 'images-test', version: '1.0.0' });
  await c.connect(new StreamableHTTPClientTransport(new URL(srv.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${srv.token}` } } }));
  const { tools } = await c.listTools(); // from here on callTool checks structuredContent
  return { c, tools };
}

async function call(name, args, c = client) {
  return c.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
}

async function write(path, bytes) {
  const res = await call('container_file_write', { path, content: bytes.toString('base64'), encoding: 'base64' });
  assert.notEqual(res.isError, true, JSON.stringify(res));
}

function text(res) {
  return res.content.filter((x) => x.type === 'text').map((x) => x.text).join('');
}

// What the result takes as JSON.
function cost(res) {
  return Buffer.byteLength(JSON.stringify({ content: res.content, structuredContent: res.structuredContent }));
}

before(async () => {
  server = await startServer();
  const { c, tools } = await connect(server);
  client = c;
  readTool = tools.find((t) => t.name === 'container_file_read');
});

after(async () => {
  await client?.close();
  if (!server) return;
  const { code, signal } = await server.stop();
  assert.deepEqual([code, signal], [0, null], server.stderr());
  assert.doesNotMatch(server.stderr(), /output-schema-mismatch/);
});

const KINDS = [
  ['plot.png', 'image/png', 'PNG', () => png(64, 48)],
  ['photo.jpg', 'image/jpeg', 'JPEG', jpeg],
  ['anim.gif', 'image/gif', 'GIF', gif],
  // named without an extension: the bytes decide
  ['picture', 'image/webp', 'WebP', webp],
];

test('PNG, JPEG, GIF and WebP files come back as images with their mimeType, the same bytes, once', async () => {
  for (const [name, mime, label, make] of KINDS) {
    const bytes = make();
    await write(`pics/${name}`, bytes);
    const res = await call('container_file_read', { path: `pics/${name}` });
    assert.notEqual(res.isError, true, text(res));
    assert.equal(res.content.length, 2, JSON.stringify(res.content).slice(0, 300));
    const [image, line] = res.content;
    assert.equal(image.type, 'image');
    assert.equal(image.mimeType, mime);
    assert.deepEqual(Buffer.from(image.data, 'base64'), bytes, name);
    assert.equal(line.type, 'text');
    assert.equal(line.text, `/workspace/pics/${name}: ${label} image (${mime}), ${bytes.length} bytes`);
    const sc = res.structuredContent;
    assert.deepEqual(
      [sc.type, sc.path, sc.size, sc.offset, sc.bytes, sc.truncated, sc.eof, sc.next_offset, sc.binary, sc.image, sc.mime_type],
      ['file', `/workspace/pics/${name}`, bytes.length, 0, bytes.length, false, true, bytes.length, true, true, mime]);
    // the base64 goes once: not in structuredContent too
    assert.equal(sc.base64, undefined);
    assert.ok(!JSON.stringify(sc).includes(image.data), name);
  }
  // offset 0 said outright is still a read of the whole file
  const res = await call('container_file_read', { path: 'pics/plot.png', offset: 0 });
  assert.equal(res.content[0].type, 'image');
});

test('with max_bytes or past offset 0 an image comes back as bytes, a blob resource as before', async () => {
  const bytes = png(64, 48);
  await write('ranged.png', bytes);
  let res = await call('container_file_read', { path: 'ranged.png', max_bytes: readTool.inputSchema.properties.max_bytes.maximum });
  assert.equal(res.content.length, 1);
  assert.equal(res.content[0].type, 'resource');
  assert.equal(res.content[0].resource.mimeType, 'image/png');
  assert.equal(res.content[0].resource.uri, 'file:///workspace/ranged.png');
  assert.deepEqual(Buffer.from(res.content[0].resource.blob, 'base64'), bytes);
  assert.deepEqual([res.structuredContent.binary, res.structuredContent.image, res.structuredContent.eof], [true, false, true]);

  res = await call('container_file_read', { path: 'ranged.png', offset: 100 });
  assert.equal(res.content[0].type, 'resource');
  assert.deepEqual(Buffer.from(res.content[0].resource.blob, 'base64'), bytes.subarray(100));
  assert.equal(res.content[0].resource.mimeType, 'image/png');
  assert.equal(res.structuredContent.image, false);

  res = await call('container_file_read', { path: 'ranged.png', max_bytes: 8 });
  assert.deepEqual(Buffer.from(res.content[0].resource.blob, 'base64'), bytes.subarray(0, 8));
  assert.equal(res.structuredContent.next_offset, 8);
});

test('a file that starts like an image but is cut short comes back as its bytes, and says why', async () => {
  const bytes = png(64, 48).subarray(0, 100);
  await write('cut.png', bytes);
  const res = await call('container_file_read', { path: 'cut.png' });
  assert.notEqual(res.isError, true, text(res));
  assert.equal(res.content[0].type, 'resource');
  assert.deepEqual(Buffer.from(res.content[0].resource.blob, 'base64'), bytes);
  assert.equal(res.content[1].text, '[/workspace/cut.png starts like a PNG image but does not end like one (cut short, or still being written?), so its bytes come back instead of the image]');
  assert.deepEqual([res.structuredContent.image, res.structuredContent.mime_type], [false, 'image/png']);
});

test('SVG stays text (image/svg+xml, only when the content is SVG); other bytes stay blobs; text stays text', async () => {
  const drawing = svg();
  await write('plot.svg', drawing);
  let res = await call('container_file_read', { path: 'plot.svg' });
  assert.equal(res.content.length, 1);
  assert.equal(res.content[0].type, 'resource');
  assert.equal(res.content[0].resource.mimeType, 'image/svg+xml');
  assert.equal(res.content[0].resource.text, drawing.toString());
  assert.deepEqual([res.structuredContent.binary, res.structuredContent.image], [false, false]);

  await write('notes.svg', Buffer.from('an SVG is to come here\n'));
  res = await call('container_file_read', { path: 'notes.svg' });
  assert.equal(res.content[0].resource.mimeType, 'text/plain');

  // a gzip stream and bytes without a known start
  const gz = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  const noise = Buffer.from([0, 1, 2, 0xfe, 0xff, 0x80, 0x81]);
  for (const [name, bytes, mime] of [['data.gz', gz, 'application/gzip'], ['noise.bin', noise, 'application/octet-stream']]) {
    await write(name, bytes);
    res = await call('container_file_read', { path: name });
    assert.equal(res.content.length, 1);
    assert.equal(res.content[0].type, 'resource');
    assert.equal(res.content[0].resource.mimeType, mime);
    assert.deepEqual(Buffer.from(res.content[0].resource.blob, 'base64'), bytes);
    assert.deepEqual([res.structuredContent.binary, res.structuredContent.image], [true, false]);
  }

  await write('plot.py', Buffer.from('print("plot")\n'));
  res = await call('container_file_read', { path: 'plot.py' });
  assert.equal(res.content[0].resource.text, 'print("plot")\n');
  assert.equal(res.structuredContent.image, false);
});

test('the largest image that fits the reply comes back whole; one byte more is refused with too_large, the sizes and what to do', async () => {
  assert.match(readTool.description, new RegExp(`PNG, JPEG, GIF or WebP image comes back as an image you see, whole, up to ${IMAGE_MAX} bytes`));
  assert.match(client.getInstructions(), /returns a PNG, JPEG, GIF or WebP image as an image/);

  const largest = png(40, 30, { size: IMAGE_MAX });
  await write('largest.png', largest);
  let res = await call('container_file_read', { path: 'largest.png' });
  assert.equal(res.content[0].type, 'image', text(res));
  assert.deepEqual(Buffer.from(res.content[0].data, 'base64'), largest);
  assert.ok(cost(res) <= BUDGET - 1024, `an image reply of ${cost(res)} bytes`);

  for (const [name, bytes] of [['over.png', png(40, 30, { size: IMAGE_MAX + 1 })], ['noise.png', png(200, 200, { noise: true })]]) {
    await write(name, bytes);
    res = await call('container_file_read', { path: name });
    assert.equal(res.isError, true, JSON.stringify(res).slice(0, 300));
    assert.equal(res.content.length, 1);
    assert.equal(res.structuredContent.error.code, 'too_large');
    assert.equal(res.structuredContent.error.message, text(res));
    assert.equal(text(res), `'/workspace/${name}' is a PNG image of ${bytes.length} bytes; images come back whole as images up to ${IMAGE_MAX} bytes. Save a smaller one (matplotlib: a lower dpi or figsize, or JPEG), or read its bytes as base64 blobs with max_bytes and offset`);
  }

  // its bytes, as the error says: pages of blobs that join up to the file
  const noise = png(200, 200, { noise: true });
  const parts = [];
  for (let offset = 0; ;) {
    res = await call('container_file_read', { path: 'noise.png', offset, max_bytes: IMAGE_MAX });
    assert.equal(res.content[0].type, 'resource');
    assert.ok(cost(res) <= BUDGET - 1024);
    parts.push(Buffer.from(res.content[0].resource.blob, 'base64'));
    if (res.structuredContent.eof) break;
    offset = res.structuredContent.next_offset;
  }
  assert.deepEqual(Buffer.concat(parts), noise);
});

test('a smaller REPLY_MAX_BYTES makes the image cap smaller too', async () => {
  const budget = 20000;
  const cap = Math.floor((budget - 1024 - 3072) / 4) * 3;
  const srv = await startServer({ env: { REPLY_MAX_BYTES: String(budget) } });
  const { c } = await connect(srv);
  try {
    const fits = png(40, 30, { size: cap });
    const over = png(40, 30, { size: cap + 1 });
    await call('container_file_write', { path: 'fits.png', content: fits.toString('base64'), encoding: 'base64' }, c);
    await call('container_file_write', { path: 'over.png', content: over.toString('base64'), encoding: 'base64' }, c);
    let res = await call('container_file_read', { path: 'fits.png' }, c);
    assert.equal(res.content[0].type, 'image', text(res));
    assert.ok(cost(res) <= budget - 1024, `an image reply of ${cost(res)} bytes`);
    res = await call('container_file_read', { path: 'over.png' }, c);
    assert.equal(res.structuredContent.error.code, 'too_large');
    assert.match(text(res), new RegExp(`of ${cap + 1} bytes; images come back whole as images up to ${cap} bytes`));
  } finally {
    await c.close();
    await srv.stop();
  }
});
