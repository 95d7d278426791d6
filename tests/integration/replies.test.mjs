// Reply sizes: container_exec and container_file_read results stay within the reply budget
// (REPLY_MAX_BYTES) as serialized JSON, say what they left out and where to read on; the output
// a reply cuts is kept in the sandbox under /var/tmp/exec-output (the newest 8 files); request
// bodies over MAX_REQUEST_BYTES get a JSON-RPC error naming the limit; FILE_MAX_BYTES agrees with
// the request cap.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, rpc } from '../lib/server.mjs';
import { rawExchange } from '../lib/http.mjs';

const BUDGET = 100000; // the default REPLY_MAX_BYTES
let server;
let nextId = 1;

async function call(srv, name, args = {}) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });
  assert.equal(r.status, 200, r.text.slice(0, 500));
  assert.ok(r.body && r.body.result, r.text.slice(0, 500));
  return r.body.result;
}

// What the result takes as JSON (the server escapes only what JSON requires, as JSON.stringify).
function cost(result) {
  return Buffer.byteLength(JSON.stringify(result));
}

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
}

function seq(from, to) {
  let s = '';
  for (let i = from; i <= to; i++) s += `${i}\n`;
  return s;
}

// Read a file from offset to its end the way a model would: each reply names the next offset.
async function readAll(srv, path, offset, budget) {
  let out = '';
  let calls = 0;
  for (;;) {
    const res = await call(srv, 'container_file_read', { path, offset });
    assert.equal(res.isError, undefined, text(res));
    assert.ok(cost(res) <= budget, `a read of ${cost(res)} bytes is over the budget ${budget}`);
    const sc = res.structuredContent;
    assert.equal(sc.offset, offset);
    out += res.content[0].resource.text;
    assert.equal(sc.next_offset, offset + sc.bytes);
    calls++;
    if (sc.eof) {
      assert.equal(sc.truncated, false);
      assert.equal(res.content.length, 1, 'no continuation note at the end');
      return { out, calls };
    }
    const note = res.content[1].text;
    assert.match(note, new RegExp(`${sc.size - sc.next_offset} more bytes \\(the file has ${sc.size}\\)`));
    assert.ok(note.includes(`container_file_read {"path": "${path}", "offset": ${sc.next_offset}}`), note);
    offset = sc.next_offset;
  }
}

before(async () => {
  server = await startServer();
});

after(async () => {
  await server.stop();
});

test('a large output is cut to fit the reply: head and tail shown, the rest kept in a file that container_file_read pages through', async () => {
  const full = seq(1, 100000); // 588895 bytes: all of it kept by the sandbox
  const res = await call(server, 'container_exec', { command: 'seq 1 100000' });
  assert.ok(cost(res) <= BUDGET, `reply of ${cost(res)} bytes`);
  const sc = res.structuredContent;
  assert.equal(sc.exit_code, 0);
  assert.equal(sc.stdout_bytes, full.length);
  assert.equal(sc.stdout_truncated, true);
  assert.equal(sc.truncated, true);
  assert.match(sc.stdout_file, /^\/var\/tmp\/exec-output\/\d{8}T\d{6}\.\d{3}Z-[\w-]{4}\.stdout$/);
  assert.equal(sc.stderr_file, null);
  assert.equal(sc.stderr_file_offset, null);
  const head = sc.stdout_file_offset;
  assert.ok(head > 10000 && head < BUDGET / 2, `head of ${head} bytes`);
  // structuredContent: head and tail of the output around a short note
  assert.ok(sc.stdout.startsWith(full.slice(0, head)));
  assert.match(sc.stdout, /\n\[\.\.\. \d+ bytes not shown: read stdout_file from its offset \.\.\.\]\n/);
  const tail = sc.stdout.slice(sc.stdout.indexOf('...]\n') + 5);
  assert.ok(full.endsWith(tail) && tail.endsWith('100000\n'));
  // cut at line breaks
  assert.equal(full[head - 1], '\n');
  assert.equal(full[full.length - tail.length - 1], '\n');
  // the text the model reads: what was cut, where the rest is and how to read on
  const t = text(res);
  const tailAt = full.length - tail.length;
  assert.ok(t.includes(`--- stdout (${full.length} bytes written; shown: the first ${head} and the last ${tail.length}) ---\n`), t.slice(0, 300));
  assert.ok(t.includes(`\n${full.slice(0, head)}[... ${tailAt - head} bytes not shown. The sandbox keeps this stdout in ${sc.stdout_file} (${full.length} bytes): ` +
    `continue with container_file_read {"path": "${sc.stdout_file}", "offset": ${head}}; the part shown below starts at offset ${tailAt}. ...]\n${tail}`));
  assert.doesNotMatch(t, /not kept/);
  // the file holds the whole output; the reads the replies point to give all of it
  const { out, calls } = await readAll(server, sc.stdout_file, head, BUDGET);
  assert.ok(calls >= 7, `${calls} reads`);
  assert.equal(full.slice(0, head) + out, full);
});

test('output past what the sandbox keeps: the file holds its head and tail, and the text says the middle is gone', async () => {
  const res = await call(server, 'container_exec', {
    command: 'seq 1 1000000; seq 1 1000000 > /tmp/full; echo done >&2' });
  assert.ok(cost(res) <= BUDGET, `reply of ${cost(res)} bytes`);
  const sc = res.structuredContent;
  assert.equal(sc.stdout_bytes, 6888896);
  assert.equal(sc.stderr, 'done\n');
  assert.equal(sc.stderr_truncated, false);
  const t = text(res);
  assert.match(t, /That file holds the first and last 524288 bytes the command wrote; the 5840320 between them were not kept \(redirect the output to a file to keep all of it\)/);
  assert.match(t, /--- stderr ---\ndone\n$/);
  const marker = '\n[... 5840320 bytes omitted ...]\n';
  const check = await call(server, 'container_exec', {
    command: `f=${sc.stdout_file}; wc -c < $f; head -c 524288 /tmp/full > /tmp/h; head -c 524288 $f | cmp - /tmp/h && echo head-same; ` +
      `tail -c 524288 /tmp/full > /tmp/t; tail -c 524288 $f | cmp - /tmp/t && echo tail-same; ` +
      `head -c ${524288 + marker.length} $f | tail -c ${marker.length}` });
  assert.equal(check.structuredContent.stdout, `${1048576 + marker.length}\nhead-same\ntail-same\n${marker}`);
  assert.ok(t.includes(`(${1048576 + marker.length} bytes): continue with container_file_read {"path": "${sc.stdout_file}", "offset": ${sc.stdout_file_offset}}`));
});

test('a small output is unchanged and kept nowhere', async () => {
  const res = await call(server, 'container_exec', { command: 'echo out; echo err >&2' });
  assert.match(text(res), /^exit code 0 \(\d+ ms\)\n--- stdout ---\nout\n--- stderr ---\nerr\n$/);
  const sc = res.structuredContent;
  assert.equal(sc.stdout, 'out\n');
  assert.equal(sc.stderr, 'err\n');
  assert.equal(sc.truncated, false);
  for (const k of ['stdout_file', 'stdout_file_offset', 'stderr_file', 'stderr_file_offset'])
    assert.equal(sc[k], null, k);
});

test('both streams large: each is cut and kept in its own file, and the reply still fits', async () => {
  const res = await call(server, 'container_exec', { command: 'seq 1 60000; seq 1 60000 >&2' });
  assert.ok(cost(res) <= BUDGET, `reply of ${cost(res)} bytes`);
  const sc = res.structuredContent;
  assert.match(sc.stdout_file, /\.stdout$/);
  assert.equal(sc.stderr_file, sc.stdout_file.replace(/\.stdout$/, '.stderr'));
  const full = seq(1, 60000);
  // both get about the same room
  assert.ok(Math.abs(sc.stdout_file_offset - sc.stderr_file_offset) < 2000);
  const { out } = await readAll(server, sc.stderr_file, sc.stderr_file_offset, BUDGET);
  assert.equal(full.slice(0, sc.stderr_file_offset) + out, full);
});

test('file reads stop at the budget and say where to continue; past the end says so', async () => {
  // 250000 bytes of text whose every byte costs two in JSON
  await call(server, 'container_exec', { command: 'head -c 250000 /dev/zero | tr "\\0" "\\"" > quotes.txt; head -c 200000 /dev/urandom > noise.bin' });
  let res = await call(server, 'container_file_read', { path: 'quotes.txt' });
  assert.ok(cost(res) <= BUDGET, `read of ${cost(res)} bytes`);
  let sc = res.structuredContent;
  assert.equal(sc.truncated, true);
  assert.equal(sc.eof, false);
  assert.ok(sc.bytes > 30000 && sc.bytes < BUDGET / 2, `${sc.bytes} bytes`);
  assert.equal(res.content[0].resource.text, '"'.repeat(sc.bytes));
  assert.equal(res.content[1].type, 'text');
  assert.equal(res.content[1].text, `[... ${250000 - sc.bytes} more bytes (the file has 250000): continue with container_file_read {"path": "/workspace/quotes.txt", "offset": ${sc.next_offset}}]`);
  const { out } = await readAll(server, '/workspace/quotes.txt', sc.next_offset, BUDGET);
  assert.equal(sc.bytes + out.length, 250000);

  // binary content: base64 within the budget, and the pages join up to the file
  const schema = (await rpc(server, { jsonrpc: '2.0', id: nextId++, method: 'tools/list' }))
    .body.result.tools.find((x) => x.name === 'container_file_read').inputSchema.properties.max_bytes;
  const readMax = schema.maximum;
  assert.equal(readMax, Math.floor((BUDGET - 1024 - 3072) / 4) * 3);
  let offset = 0;
  const parts = [];
  for (;;) {
    res = await call(server, 'container_file_read', { path: 'noise.bin', offset });
    assert.ok(cost(res) <= BUDGET, `read of ${cost(res)} bytes`);
    sc = res.structuredContent;
    assert.equal(sc.binary, true);
    assert.ok(sc.bytes <= readMax);
    parts.push(Buffer.from(res.content[0].resource.blob, 'base64'));
    if (sc.eof) break;
    assert.match(res.content[1].text, new RegExp(`"offset": ${sc.next_offset}\\}\\]$`));
    offset = sc.next_offset;
  }
  assert.equal(Buffer.concat(parts).length, 200000);
  const sum = await call(server, 'container_exec', { command: 'md5sum < noise.bin' });
  const { createHash } = await import('node:crypto');
  assert.equal(sum.structuredContent.stdout.split(' ')[0], createHash('md5').update(Buffer.concat(parts)).digest('hex'));

  // an explicit max_bytes is honoured, and one past the largest is refused by the schema
  res = await call(server, 'container_file_read', { path: 'quotes.txt', offset: 10, max_bytes: 5 });
  assert.equal(res.content[0].resource.text, '"""""');
  assert.equal(res.structuredContent.next_offset, 15);
  res = await call(server, 'container_file_read', { path: 'quotes.txt', max_bytes: readMax + 1 });
  assert.equal(res.isError, true);
  assert.match(text(res), /max_bytes/);

  res = await call(server, 'container_file_read', { path: 'quotes.txt', offset: 300000 });
  assert.equal(res.structuredContent.eof, true);
  assert.equal(res.structuredContent.bytes, 0);
  assert.equal(res.content[1].text, '[nothing to read: offset 300000 is at or past the end of the file (250000 bytes)]');
});

test('a listing that would not fit is cut to fit, and says so', async () => {
  await call(server, 'container_exec', { command: 'mkdir -p /workspace/many && cd /workspace/many && for i in $(seq 1 3000); do : > file-with-a-longish-name-$i.txt; done' });
  const res = await call(server, 'container_files_list', { path: 'many', max_entries: 3000 });
  assert.ok(cost(res) <= BUDGET, `listing of ${cost(res)} bytes`);
  const sc = res.structuredContent;
  assert.equal(sc.truncated, true);
  assert.ok(sc.entries.length > 100 && sc.entries.length < 3000, `${sc.entries.length} entries`);
  assert.equal(sc.count, sc.entries.length);
  assert.match(text(res), new RegExp(`\\[\\.\\.\\. ${3000 - sc.entries.length} more entries not shown, to keep this reply small`));
});

test('a smaller REPLY_MAX_BYTES is honoured; only the newest 8 kept outputs stay in the sandbox', async () => {
  const budget = 20000;
  const srv = await startServer({ env: { REPLY_MAX_BYTES: String(budget) } });
  try {
    const tools = (await rpc(srv, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).body.result.tools;
    const read = tools.find((x) => x.name === 'container_file_read');
    assert.equal(read.inputSchema.properties.max_bytes.maximum, Math.floor((budget - 1024 - 3072) / 4) * 3);
    const files = [];
    for (let i = 0; i < 5; i++) {
      const res = await call(srv, 'container_exec', { command: `seq ${i} 5000; seq ${i} 5000 >&2` });
      assert.ok(cost(res) <= budget, `reply of ${cost(res)} bytes`);
      files.push(res.structuredContent.stdout_file, res.structuredContent.stderr_file);
    }
    assert.equal(new Set(files).size, 10);
    const ls = await call(srv, 'container_exec', { command: 'ls /var/tmp/exec-output' });
    assert.deepEqual(ls.structuredContent.stdout.trim().split('\n'), files.slice(2).map((f) => f.split('/').pop()).sort());
    const gone = await call(srv, 'container_file_read', { path: files[0] });
    assert.equal(gone.isError, true);
    const { out } = await readAll(srv, files[9], 0, budget);
    assert.equal(out, seq(4, 5000));
  } finally {
    await srv.stop();
  }
});

// One HTTP/1.1 response from raw bytes: status, headers, body.
function parseResponse(raw) {
  const end = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, end).split('\r\n');
  const headers = Object.fromEntries(head.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(head[0].split(' ')[1]), headers, body: raw.slice(end + 4) };
}

test('a 5 MB write gets a JSON-RPC error naming the request limit and the way to write in pieces', async () => {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'container_file_write',
    arguments: { path: 'big.bin', content: Buffer.alloc(5 * 1024 * 1024 / 4 * 3, 1).toString('base64'), encoding: 'base64' } } });
  const head = `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
    `Accept: application/json, text/event-stream\r\nAuthorization: Bearer ${server.token}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
  const res = parseResponse(await rawExchange(server, [head, body]));
  assert.equal(res.status, 413);
  assert.match(res.headers['content-type'], /^application\/json/);
  assert.equal(Number(res.headers['content-length']), Buffer.byteLength(res.body));
  const msg = JSON.parse(res.body);
  assert.equal(msg.jsonrpc, '2.0');
  assert.equal(msg.id, null);
  assert.equal(msg.error.code, -32600);
  assert.match(msg.error.message, /at most 4194304 bytes a request \(MAX_REQUEST_BYTES\)/);
  assert.match(msg.error.message, /container_file_write, at most 3133440 bytes of content a call, .* append: true/);
  assert.deepEqual(msg.error.data, { max_request_bytes: 4194304, file_max_bytes: 3133440 });
  // the same server answers the next request as usual
  const ok = await call(server, 'container_exec', { command: 'ls big.bin 2>&1; true' });
  assert.match(ok.structuredContent.stdout, /No such file/);
});

test('FILE_MAX_BYTES agrees with MAX_REQUEST_BYTES: the largest write fits in one request, one more byte is refused by the tool', async () => {
  const max = 3133440; // (4194304 - 16384) / 4 * 3
  const tools = (await rpc(server, { jsonrpc: '2.0', id: nextId++, method: 'tools/list' })).body.result.tools;
  const write = tools.find((x) => x.name === 'container_file_write');
  assert.match(write.description, new RegExp(`At most ${max} bytes of content a call`));
  assert.match(write.inputSchema.properties.content.description, new RegExp(`at most ${max} bytes`));
  let res = await call(server, 'container_file_write', { path: 'max.bin', content: Buffer.alloc(max, 7).toString('base64'), encoding: 'base64' });
  assert.equal(res.isError, undefined, text(res));
  assert.equal(res.structuredContent.bytes_written, max);
  res = await call(server, 'container_file_write', { path: 'max.bin', content: Buffer.alloc(max + 1, 7).toString('base64'), encoding: 'base64' });
  assert.equal(res.isError, true);
  assert.equal(text(res), `content is ${max + 1} bytes; the limit is ${max} bytes a call: write larger files in pieces, the first replacing the file and the others with append`);
});

test('settings that disagree are refused at start, naming both and the fix', async () => {
  await assert.rejects(startServer({ env: { FILE_MAX_BYTES: '8388608' } }),
    /FILE_MAX_BYTES 8388608 is more than one request of MAX_REQUEST_BYTES 4194304 can carry \(3133440 bytes, sent as base64\); lower FILE_MAX_BYTES to 3133440 or less, or raise MAX_REQUEST_BYTES to at least 11201196/);
  await assert.rejects(startServer({ env: { REPLY_MAX_BYTES: '1000' } }), /REPLY_MAX_BYTES '1000' is not a number between 16384 and 16777216/);
  // a smaller request cap lowers the default write limit with it
  const srv = await startServer({ env: { MAX_REQUEST_BYTES: '1048576' } });
  try {
    const tools = (await rpc(srv, { jsonrpc: '2.0', id: 1, method: 'tools/list' })).body.result.tools;
    assert.match(tools.find((x) => x.name === 'container_file_write').description, /At most 774144 bytes of content a call/);
  } finally {
    await srv.stop();
  }
});
