// The container_* tools over /mcp against real sandboxes: every tool, its errors and caps,
// streaming, lifecycle (idle stop, capacity, fresh start) and re-adoption after kill -9.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { startServer, rpc, cli, sseMessages, tempDir, removeDataDir } from '../lib/server.mjs';
import { modernRequest } from '../lib/http.mjs';
import { until } from '../lib/runs.mjs';

// The pid of a host process whose command line is exactly command (words split on spaces), or 0.
function pgrep(command) {
  const want = `${command.split(' ').join('\0')}\0`;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try { if (readFileSync(`/proc/${pid}/cmdline`, 'latin1') === want) return Number(pid); } catch { /* gone */ }
  }
  return 0;
}

let server;
let nextId = 1;

async function tool(srv, name, args = {}, { token, headers } = {}) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name, arguments: args } }, { token: token || srv.token, headers });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.body && r.body.result, r.text);
  return r.body.result;
}

async function exec(srv, command, extra = {}, opts) {
  const res = await tool(srv, 'container_exec', { command, ...extra }, opts);
  assert.equal(res.isError, undefined, JSON.stringify(res));
  return res.structuredContent;
}

function text(res) {
  return res.content.map((c) => c.text || '').join('');
}

before(async () => {
  server = await startServer();
});

after(async () => {
  if (process.env.SHOW_STDERR) console.log(server.stderr());
  await server.stop();
});

test('container_exec runs a shell command in the sandbox as root of its own namespaces', async () => {
  const r = await exec(server, 'id -u; hostname; pwd; echo to-stderr >&2; exit 7');
  assert.equal(r.exit_code, 7);
  assert.equal(r.signal, null);
  assert.equal(r.timed_out, false);
  assert.equal(r.stdout, '0\nsandbox\n/workspace\n');
  assert.equal(r.stderr, 'to-stderr\n');
  assert.match(r.sandbox_id, /^sbx_/);
});

test('container_exec text content gives exit code and both streams', async () => {
  const res = await tool(server, 'container_exec', { command: 'echo out; echo err >&2; false' });
  const t = text(res);
  assert.match(t, /exit code 1/);
  assert.match(t, /--- stdout ---\nout\n/);
  assert.match(t, /--- stderr ---\nerr\n/);
});

test('a plain program and its arguments (run without the shell) give what the shell gives', async () => {
  // the command leads its own process group either way (the kill on timeout takes the group)
  let r = await exec(server, 'cat /proc/self/stat');
  const f = r.stdout.slice(r.stdout.lastIndexOf(')') + 2).split(' ');
  assert.equal(f[2], r.stdout.split(' ')[0], 'cat leads its own process group');
  assert.equal((await exec(server, 'true')).exit_code, 0);
  assert.equal((await exec(server, 'false')).exit_code, 1);
  r = await exec(server, '/bin/echo  two   spaces');
  assert.equal(r.stdout, 'two spaces\n');
  r = await exec(server, 'env');
  assert.match(r.stdout, /^PATH=/m);
  assert.match(r.stdout, /^HOME=\/root$/m);
  r = await exec(server, 'ls', { cwd: '/' });
  assert.match(r.stdout, /^workspace$/m);
  // what only the shell does still goes to the shell
  r = await exec(server, 'no-such-program-x1 --flag');
  assert.equal(r.exit_code, 127);
  assert.match(r.stderr, /not found/);
  r = await exec(server, 'echo -e x');
  assert.equal(r.stdout, '-e x\n', 'the shell\'s echo (no -e), not /bin/echo');
  r = await exec(server, 'cd /tmp', { cwd: '/' });
  assert.equal(r.exit_code, 0);
  r = await exec(server, 'pwd', { cwd: '/tmp' });
  assert.equal(r.stdout, '/tmp\n');
  r = await exec(server, 'FOO=bar env');
  assert.match(r.stdout, /^FOO=bar$/m);
});

test('connections to the init that bring no request neither stall it nor pile up: it keeps four', async () => {
  const id = (await exec(server, 'true')).sandbox_id;
  // Ten connections to the init's control socket, held without a word (as the server's own, made
  // ahead of its next command, waits): the holder says how many of them the init has closed.
  const py = `import socket, sys, time
socks = []
for i in range(10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    socks.append(s)
last = -1
while True:
    closed = 0
    for s in socks:
        try:
            if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                closed += 1
        except BlockingIOError:
            pass
    if closed != last:
        print(closed, flush=True)
        last = closed
    time.sleep(0.05)`;
  const holder = spawn('python3', ['-c', py, `${server.dataDir}/sandboxes/${id}/control.sock`], { stdio: ['ignore', 'pipe', 'inherit'] });
  let said = '';
  holder.stdout.on('data', (d) => { said += d; });
  try {
    await until(() => said.length > 0, 'the holder connected');
    // commands go on meanwhile
    assert.equal((await exec(server, 'echo still')).stdout, 'still\n');
    // the init keeps at most four connections that have brought no request yet (the server's
    // own, kept after its last command, is not one of them), so at least six of the ten are
    // closed, the oldest first
    await until(async () => {
      await exec(server, 'true'); // the init accepts a connection a turn
      return Math.max(...said.trim().split('\n').map(Number)) >= 6;
    }, () => `the init closed ${said.trim().split('\n').at(-1)} of ten idle connections`);
    assert.equal((await exec(server, 'echo after')).stdout, 'after\n');
  } finally {
    holder.kill();
  }
});

// The connections the sandbox's init holds from servers (its listening socket, fd 3, aside).
function initConns(srv, id) {
  const db = `${srv.dataDir}/sandbox-mcp.db`;
  const r = spawnSync('sqlite3', [db, `SELECT init_pid FROM sandboxes WHERE id = '${id}'`], { encoding: 'utf8' });
  const pid = Number(r.stdout.trim());
  assert.ok(pid > 0, r.stderr);
  const links = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    if (fd === '3') continue;
    try { links.push(readlinkSync(`/proc/${pid}/fd/${fd}`)); } catch { /* closed meanwhile */ }
  }
  return links.filter((l) => l.startsWith('socket:')).sort();
}

test('the init keeps a command\'s connection for the next: the server sends its commands on one, and the init keeps at most sixteen', async () => {
  const id = (await exec(server, 'true')).sandbox_id;
  // (the connections of the test before are closed as the init sees them end)
  await until(() => initConns(server, id).length === 1, () => `the init holds ${initConns(server, id).join(', ')}`);
  const kept = initConns(server, id);
  for (let i = 0; i < 5; i++) assert.equal((await exec(server, `echo ${i}`)).stdout, `${i}\n`);
  assert.deepEqual(initConns(server, id), kept, 'the same connection, kept');
  // As a server would: seventeen connections, a command on each, each kept open after. With
  // the server's own, the init keeps sixteen: two are closed after their report, without
  // "ready"; the others take another command.
  const py = `import json, os, socket, struct, sys
def ask(s, command):
    req = b"/\\0/bin/sh\\0-c\\0" + command + b"\\0\\0\\0"
    null = os.open("/dev/null", os.O_RDWR)
    s.sendmsg([struct.pack("=I", len(req)) + req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("3i", null, null, null))])
    os.close(null)
    said = b""
    while not (said.endswith(b"ready\\n") or (said.endswith(b"\\n") and b"exit " in said.split(b"\\n")[-2])):
        got = s.recv(256)
        if not got:
            break
        said += got
    return said.decode()
socks, said = [], []
for i in range(17):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    said.append(ask(s, b"true"))
    socks.append(s)
# the init closes a connection it does not keep as it reports on it; one it keeps stays open
closed = []
for s, r in zip(socks, said):
    try:
        s.settimeout(5 if not r.endswith("ready\\n") else 0)
        closed.append(s.recv(1, socket.MSG_PEEK) == b"")
    except (BlockingIOError, socket.timeout):
        closed.append(False)
    s.settimeout(None)
again = ask(socks[0], b"echo again")
print(json.dumps({"said": said, "closed": closed, "again": again}), flush=True)
sys.stdin.readline()`;
  const holder = spawn('python3', ['-c', py, `${server.dataDir}/sandboxes/${id}/control.sock`], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  holder.stdout.on('data', (d) => { out += d; });
  try {
    await until(() => out.includes('\n') || holder.exitCode !== null, 'the holder made its seventeen commands');
    const { said, closed, again } = JSON.parse(out);
    assert.equal(said.length, 17);
    for (const s of said) assert.match(s, /^pid \d+\nexit 0\n(ready\n)?$/);
    const ready = said.map((s) => s.endsWith('ready\n'));
    assert.deepEqual(ready, [...Array(15).fill(true), false, false]);
    assert.deepEqual(closed, ready.map((r) => !r), 'closed exactly where "ready" was not said');
    assert.match(again, /^pid \d+\nexit 0\nready\n$/);
    // the server's kept connection still serves; of two commands at once, the second to end
    // finds every place taken, and its connection is closed after its report
    assert.deepEqual(initConns(server, id).filter((c) => kept.includes(c)), kept);
    const both = await Promise.all([exec(server, 'echo one'), exec(server, 'sleep 0.2; echo two')]);
    assert.deepEqual(both.map((r) => r.stdout), ['one\n', 'two\n']);
    assert.equal(initConns(server, id).length, 16);
    assert.equal((await exec(server, 'echo three')).stdout, 'three\n');
  } finally {
    holder.stdin.end('\n');
    if (holder.exitCode === null) await new Promise((resolve) => holder.once('exit', resolve));
  }
  // the holder's connections are gone; the server's commands go on one connection again
  await until(async () => (await exec(server, 'true')) && initConns(server, id).length === 1,
    () => `the init holds ${initConns(server, id).length} connections`);
});

test('the sandbox has its own pid 1, and /proc shows only its processes', async () => {
  const r = await exec(server, 'cat /proc/1/comm; ls /proc | grep -c "^[0-9]"');
  assert.equal(r.stdout.split('\n')[0], 'sandbox-init');
  assert.ok(Number(r.stdout.split('\n')[1]) < 10, r.stdout);
});

test('cwd, env and stdin are honoured', async () => {
  await exec(server, 'mkdir -p /workspace/sub');
  const r = await exec(server, 'pwd; echo "$GREETING"; cat', {
    cwd: 'sub', env: { GREETING: 'hello there' }, stdin: 'from stdin\n',
  });
  assert.equal(r.stdout, '/workspace/sub\nhello there\nfrom stdin\n');
});

test('without stdin a command reads end of file at once, and cannot write to it', async () => {
  const r = await exec(server, 'wc -c; read line; echo "read:$?"; echo x >&0 2>/dev/null; echo "write:$?"');
  assert.equal(r.stdout, '0\nread:1\nwrite:1\n');
  // a plain program (run without the shell) sees the same
  const c = await exec(server, 'cat');
  assert.equal(c.stdout, '');
  assert.equal(c.exit_code, 0);
});

test("a command holds its stdin, stdout and stderr and none of the init's descriptors", async () => {
  // ls opens the directory it lists as 3; the init's own (its control socket, its connection
  // for the command, the start pipe) are gone by the exec, run by the shell or without it
  for (const command of ['ls /proc/self/fd', 'ls /proc/self/fd | cat', 'exec ls /proc/self/fd']) {
    const r = await exec(server, command);
    assert.equal(r.stdout, '0\n1\n2\n3\n', command);
  }
  // and so does one started with stdin
  const r = await exec(server, 'ls /proc/self/fd', { stdin: 'x' });
  assert.equal(r.stdout, '0\n1\n2\n3\n');
});

test('a missing cwd is a tool error naming the problem', async () => {
  const res = await tool(server, 'container_exec', { command: 'true', cwd: '/nope/dir' });
  assert.equal(res.isError, true);
  assert.match(text(res), /working directory/);
});

test('bad env names and both command forms at once are refused', async () => {
  let res = await tool(server, 'container_exec', { command: 'true', env: { '1BAD': 'x' } });
  assert.equal(res.isError, true);
  assert.match(text(res), /env name '1BAD'/);
  res = await tool(server, 'container_exec', { command: 'true', args: { args: 'true' } });
  assert.equal(res.isError, true);
  res = await tool(server, 'container_exec', {});
  assert.equal(res.isError, true);
  assert.match(text(res), /command is required/);
});

test('the nested Cloudflare form {args: {args, timeout}} is accepted', async () => {
  const res = await tool(server, 'container_exec', { args: { args: 'echo nested', timeout: 5000 } });
  assert.equal(res.structuredContent.stdout, 'nested\n');
});

test('timeout kills the whole process tree of the command', async () => {
  const r = await exec(server, 'sleep 30 & sleep 31; echo never', { timeout_ms: 300 });
  assert.equal(r.timed_out, true);
  assert.equal(r.signal, 9);
  assert.equal(r.exit_code, -1);
  assert.doesNotMatch(r.stdout, /never/);
  const ps = await exec(server, 'ps -eo args');
  assert.doesNotMatch(ps.stdout, /sleep 3[01]/);
});

// Send container_exec and leave before any answer: no progress token, so nothing is written
// to the connection until the command ends.
async function execAndLeave(command, { modern } = {}) {
  const ac = new AbortController();
  const message = { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: 'container_exec', arguments: { command } } };
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${server.token}` };
  if (modern) {
    const r = modernRequest(message.id, 'tools/call', message.params);
    Object.assign(message, r.message);
    Object.assign(headers, r.headers);
  }
  const pending = fetch(server.mcpUrl, { method: 'POST', headers, body: JSON.stringify(message), signal: ac.signal }).catch((e) => e);
  await until(async () => (await exec(server, 'ps -eo args')).stdout.includes(command), `${command} running`);
  ac.abort();
  assert.equal((await pending).name, 'AbortError');
}

async function running(pattern) {
  return pattern.test((await exec(server, 'ps -eo args')).stdout);
}

test('stateless revision: a client that leaves before the answer cancels the command', async () => {
  await execAndLeave('sleep 41', { modern: true });
  // the server looks once a second; well before the 41 s the command would take on its own
  const gone = await until(async () => !(await running(/sleep 41/)), 'sleep 41 gone', 25000).then(() => true, () => false);
  assert.ok(gone, 'the command still runs after its client left');
});

test('older revisions: a client that leaves does not cancel the command (a disconnection is not a cancellation)', async () => {
  const kept = /mcp client-left req=\S* user=\S+ method=tools\/call tool=container_exec call=kept/g;
  const before = (server.stderr().match(kept) || []).length;
  await execAndLeave('sleep 42');
  // the server has noticed the client leave, and decided to let the command run on
  await until(() => (server.stderr().match(kept) || []).length > before, 'the departure noticed', 25000);
  assert.ok(await running(/sleep 42/), 'the command was stopped');
  await exec(server, 'pkill -f "sleep 42"; true');
});

test('a timeout above the configured maximum is refused by the schema', async () => {
  const res = await tool(server, 'container_exec', { command: 'true', timeout_ms: 10 ** 12 });
  assert.equal(res.isError, true);
  assert.match(text(res), /timeout_ms/);
});

test('background processes keep running after the call returns', async () => {
  const r = await exec(server, 'nohup sleep 120 >/dev/null 2>&1 & echo started');
  assert.equal(r.stdout, 'started\n');
  const ps = await exec(server, 'ps -eo args');
  assert.match(ps.stdout, /sleep 120/);
  await exec(server, 'pkill -f "sleep 120"; true');
});

test('output beyond the cap keeps head and tail with a marker', async () => {
  const r = await exec(server, 'head -c 3000000 /dev/zero | tr "\\0" a; echo; echo THE-END');
  assert.equal(r.stdout_truncated, true);
  assert.equal(r.truncated, true);
  assert.equal(r.stdout_bytes, 3000000 + 1 + 8);
  assert.match(r.stdout, /^a{1000}/);
  assert.match(r.stdout, /\[\.\.\. \d+ bytes not shown: read stdout_file from its offset \.\.\.\]/);
  assert.match(r.stdout, /THE-END\n$/);
  assert.ok(Buffer.byteLength(r.stdout) < 50000);
  // what the sandbox kept (its first and last 512 KiB, with its own marker) is in stdout_file
  const kept = await exec(server, `wc -c < ${r.stdout_file}; grep -o "bytes omitted" ${r.stdout_file}`);
  assert.match(kept.stdout, /^10486\d\d\nbytes omitted\n$/);
});

test('invalid UTF-8 output does not break the response', async () => {
  const r = await exec(server, "printf 'ok \\377\\376 \\000 done'");
  assert.equal(r.exit_code, 0);
  assert.match(r.stdout, /^ok \uFFFD\uFFFD \uFFFD done$/);
});

test('with a progress token, output streams as notifications/progress on SSE', async () => {
  const r = await rpc(server, {
    jsonrpc: '2.0', id: 99, method: 'tools/call',
    params: { name: 'container_exec', arguments: { command: 'echo one; sleep 0.3; echo two' },
      _meta: { progressToken: 'p1' } },
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /text\/event-stream/);
  const msgs = sseMessages(r.text);
  const progress = msgs.filter((m) => m.method === 'notifications/progress');
  assert.ok(progress.length >= 2, r.text);
  assert.equal(progress[0].params.progressToken, 'p1');
  assert.equal(progress.map((p) => p.params.message).join(''), 'one\ntwo\n');
  const values = progress.map((p) => p.params.progress);
  assert.deepEqual(values, [...values].sort((a, b) => a - b));
  const final = msgs.find((m) => m.id === 99);
  assert.equal(final.result.structuredContent.stdout, 'one\ntwo\n');
});

// Past 32 KiB of output the server reads the pipes on a tick rather than at each write; after a
// pause it reads at each write again, and back on the tick at the next burst.
test('output in bursts with pauses between: every byte read in order, and streamed as it comes', async () => {
  const burst = (c, n, to = '') => `head -c ${n} /dev/zero | tr "\\0" ${c}${to}`;
  const r = await rpc(server, {
    jsonrpc: '2.0', id: 98, method: 'tools/call',
    params: { name: 'container_exec', arguments: { command: `${burst('a', 40000)}; sleep 0.3; echo second; `
      + `${burst('b', 20000, ' >&2')}; sleep 0.3; ${burst('c', 30000)}; echo third` },
    _meta: { progressToken: 'burst' } },
  });
  assert.equal(r.status, 200);
  const msgs = sseMessages(r.text);
  const streamed = msgs.filter((m) => m.method === 'notifications/progress').map((p) => p.params.message);
  const out = streamed.filter((m) => !m.startsWith('[stderr] ')).join('');
  const err = streamed.filter((m) => m.startsWith('[stderr] ')).map((m) => m.slice(9)).join('');
  assert.equal(out, `${'a'.repeat(40000)}second\n${'c'.repeat(30000)}third\n`);
  assert.equal(err, 'b'.repeat(20000));
  // "second" came while the command slept, before the rest
  assert.ok(streamed.findIndex((m) => m.includes('second')) < streamed.findIndex((m) => m.includes('ccc')));
  const final = msgs.find((m) => m.id === 98).result.structuredContent;
  assert.equal(final.exit_code, 0);
  assert.equal(final.stdout_bytes, 40000 + 7 + 30000 + 6);
  assert.equal(final.stderr_bytes, 20000);
  assert.match(final.stdout, /c{1000}third\n$/);
});

test('file write and read round trip text, with parents created', async () => {
  let res = await tool(server, 'container_file_write', { path: 'dir/sub/hello.py', content: 'print("hi")\n' });
  assert.equal(res.isError, undefined, text(res));
  assert.equal(res.structuredContent.path, '/workspace/dir/sub/hello.py');
  assert.equal(res.structuredContent.created, true);
  res = await tool(server, 'container_file_read', { path: '/workspace/dir/sub/hello.py' });
  assert.equal(res.content[0].type, 'resource');
  assert.equal(res.content[0].resource.text, 'print("hi")\n');
  assert.equal(res.content[0].resource.mimeType, 'text/x-python');
  assert.equal(res.content[0].resource.uri, 'file:///workspace/dir/sub/hello.py');
  const r = await exec(server, 'python3 dir/sub/hello.py');
  assert.equal(r.stdout, 'hi\n');
});

test('binary content is decided by content and comes back as a base64 blob', async () => {
  const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 255]);
  let res = await tool(server, 'container_file_write', { path: 'notes.txt', content: bytes.toString('base64'), encoding: 'base64' });
  assert.equal(res.structuredContent.bytes_written, bytes.length);
  res = await tool(server, 'container_file_read', { path: 'notes.txt' });
  assert.equal(res.content[0].resource.blob, bytes.toString('base64'));
  assert.equal(res.content[0].resource.mimeType, 'image/png');
  assert.equal(res.structuredContent.binary, true);
});

test('append, mode, offset and max_bytes', async () => {
  await tool(server, 'container_file_write', { path: 'log.txt', content: 'one\n' });
  await tool(server, 'container_file_write', { path: 'log.txt', content: 'two\n', append: true });
  await tool(server, 'container_file_write', { path: 'run.sh', content: '#!/bin/sh\necho ran\n', mode: '0755' });
  let r = await exec(server, 'cat log.txt; ./run.sh; stat -c %a run.sh');
  assert.equal(r.stdout, 'one\ntwo\nran\n755\n');
  const res = await tool(server, 'container_file_read', { path: 'log.txt', offset: 4, max_bytes: 2 });
  assert.equal(res.content[0].resource.text, 'tw');
  assert.equal(res.structuredContent.truncated, true);
});

test('bad base64 and oversized content are refused and write nothing', async () => {
  let res = await tool(server, 'container_file_write', { path: 'b64.bin', content: '!!!', encoding: 'base64' });
  assert.equal(res.isError, true);
  assert.match(text(res), /base64/);
  res = await tool(server, 'container_file_write', { path: 'x.txt', content: 'x', mode: '9' });
  assert.equal(res.isError, true);
  const r = await exec(server, 'ls b64.bin x.txt 2>&1; true');
  assert.match(r.stdout, /No such file/);
});

test('reading a directory returns its listing; a missing path is an error saying so', async () => {
  let res = await tool(server, 'container_file_read', { path: 'dir' });
  assert.equal(res.structuredContent.type, 'directory');
  assert.deepEqual(res.structuredContent.entries.map((e) => e.name), ['sub']);
  res = await tool(server, 'container_file_read', { path: 'does/not/exist' });
  assert.equal(res.isError, true);
  assert.match(text(res), /does not exist|No such file/);
});

test('files_list gives name, type, size, mtime, mode; recursive; truncated flag', async () => {
  let res = await tool(server, 'container_files_list', {});
  assert.equal(res.structuredContent.path, '/workspace');
  const hello = (await tool(server, 'container_files_list', { path: 'dir', recursive: true }))
    .structuredContent.entries.find((e) => e.name === 'sub/hello.py');
  assert.equal(hello.type, 'file');
  assert.equal(hello.size, 12);
  assert.equal(hello.mode, '0644');
  assert.match(hello.mtime, /^\d{4}-\d\d-\d\dT/);
  await exec(server, 'mkdir -p many && cd many && for i in $(seq 1 30); do : > f$i; done');
  res = await tool(server, 'container_files_list', { path: 'many', max_entries: 10 });
  assert.equal(res.structuredContent.entries.length, 10);
  assert.equal(res.structuredContent.truncated, true);
});

test('delete: missing is an error, / and /workspace are refused, recursive needed', async () => {
  let res = await tool(server, 'container_file_delete', { path: 'nope.txt' });
  assert.equal(res.isError, true);
  res = await tool(server, 'container_file_delete', { path: '/workspace' });
  assert.equal(res.isError, true);
  assert.match(text(res), /refusing/);
  res = await tool(server, 'container_file_delete', { path: '/' });
  assert.equal(res.isError, true);
  res = await tool(server, 'container_file_delete', { path: 'dir' });
  assert.equal(res.isError, true);
  res = await tool(server, 'container_file_delete', { path: 'dir', recursive: true });
  assert.equal(res.structuredContent.deleted, 3);
  const r = await exec(server, 'test -e dir; echo $?');
  assert.equal(r.stdout, '1\n');
});

test('container_ping reports up, uptime, memory and processes', async () => {
  const res = await tool(server, 'container_ping');
  const s = res.structuredContent;
  assert.equal(s.up, true);
  assert.ok(s.uptime_ms >= 0);
  assert.ok(s.memory_bytes > 0);
  assert.equal(typeof s.processes, 'number');
  assert.equal(s.limits.processes, 512);
  assert.equal(s.limits.memory_bytes, 2 * 1024 ** 3);
});

test('container_initialize starts over: processes killed, files discarded', async () => {
  await exec(server, 'echo keep > /workspace/file; echo layer > /root/file; nohup sleep 200 >/dev/null 2>&1 &');
  const before = (await tool(server, 'container_ping')).structuredContent.sandbox_id;
  const res = await tool(server, 'container_initialize');
  const s = res.structuredContent;
  assert.equal(s.sandbox_id, before);
  assert.equal(s.template, 'host');
  assert.ok(s.start_ms >= 0);
  const r = await exec(server, 'ls /workspace; cat /root/file 2>&1; ps -eo args | grep -c "^sleep 200"');
  assert.equal(r.stdout, 'cat: /root/file: No such file or directory\n0\n');
});

test('an unknown session_id is not found', async () => {
  const res = await tool(server, 'container_exec', { command: 'true', session_id: 'ses_nope' });
  assert.equal(res.isError, true);
  assert.match(text(res), /session 'ses_nope' not found/);
});

test('each user has a separate sandbox', async () => {
  assert.equal(cli(['user', 'add', 'carol', '--data-dir', server.dataDir]).status, 0);
  const tok = cli(['token', 'create', '--user', 'carol', '--data-dir', server.dataDir]).stdout.match(/smcp_\S+/)[0];
  await exec(server, 'echo admin-secret > /workspace/secret.txt');
  const mine = (await tool(server, 'container_ping')).structuredContent.sandbox_id;
  const theirs = (await tool(server, 'container_ping', {}, { token: tok })).structuredContent.sandbox_id;
  assert.notEqual(mine, theirs);
  const r = await exec(server, 'cat /workspace/secret.txt 2>&1; true', {}, { token: tok });
  assert.match(r.stdout, /No such file/);
});

test('idle sandboxes stop and start again transparently; files survive', async () => {
  const srv = await startServer({ env: { SANDBOX_IDLE_SECONDS: '1' } });
  try {
    await exec(srv, 'echo persisted > /workspace/p.txt');
    const first = (await tool(srv, 'container_ping')).structuredContent.started_at;
    await waitFor(() => /sandbox stopped .*reason=idle/.test(srv.stderr()));
    const r = await exec(srv, 'cat /workspace/p.txt');
    assert.equal(r.stdout, 'persisted\n');
    const second = (await tool(srv, 'container_ping')).structuredContent.started_at;
    assert.notEqual(first, second);
  } finally {
    await srv.stop();
  }
});

test('at capacity: an idle sandbox is evicted; when all are busy the caller is told to retry', async () => {
  const srv = await startServer({ env: { SANDBOX_MAX_RUNNING: '1' } });
  try {
    assert.equal(cli(['user', 'add', 'dave', '--data-dir', srv.dataDir]).status, 0);
    const tok = cli(['token', 'create', '--user', 'dave', '--data-dir', srv.dataDir]).stdout.match(/smcp_\S+/)[0];
    await exec(srv, 'true');
    // admin's sandbox is idle: dave's start evicts it
    await exec(srv, 'true', {}, { token: tok });
    await srv.waitLog(/sandbox stopped .*reason=evicted/);
    // dave's sandbox is now busy with a long command: admin is at capacity
    // (seen from the host: the sandbox's processes are the host's too; a duration no other test uses)
    const busy = exec(srv, 'sleep 30.25', {}, { token: tok });
    await until(() => pgrep('sleep 30.25'), 'the command running');
    const res = await tool(srv, 'container_exec', { command: 'true' });
    assert.equal(res.isError, true);
    assert.match(text(res), /at capacity.*retry later/);
    process.kill(pgrep('sleep 30.25'));
    await busy;
  } finally {
    await srv.stop();
  }
});

test('file size cap; a write that fails on a full disk leaves the old file whole', async () => {
  const srv = await startServer({ env: { SANDBOX_DISK_MB: '64', FILE_MAX_BYTES: '2097152' } });
  try {
    let res = await tool(srv, 'container_file_write', { path: 'big.bin', content: Buffer.alloc(2097153).toString('base64'), encoding: 'base64' });
    assert.equal(res.isError, true);
    assert.match(text(res), /limit is 2097152 bytes/);
    res = await tool(srv, 'container_file_write', { path: 'keep.txt', content: 'original\n' });
    assert.equal(res.isError, undefined, text(res));
    const fill = await exec(srv, 'dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>&1; df -k /workspace | tail -1');
    assert.match(fill.stdout, /No space left on device/);
    res = await tool(srv, 'container_file_write', { path: 'keep.txt', content: Buffer.alloc(2000000, 'x').toString('base64'), encoding: 'base64' });
    assert.equal(res.isError, true);
    assert.match(text(res), /No space left/);
    const r = await exec(srv, 'cat keep.txt; ls -a /workspace');
    // the old content, and no temporary file left behind
    assert.equal(r.stdout, 'original\n.\n..\nfill\nkeep.txt\n');
  } finally {
    await srv.stop();
  }
});

test('a relative data directory works (make run uses ./var)', async () => {
  const cwd = tempDir();
  const srv = await startServer({ args: [], cwd, dataDir: `${cwd}/var`, relative: 'var' });
  try {
    const r = await exec(srv, 'echo relative-ok');
    assert.equal(r.stdout, 'relative-ok\n');
  } finally {
    await srv.stop();
    removeDataDir(`${cwd}/var`);
    removeDataDir(cwd);
  }
});

test('kill -9 of the server leaves the sandbox running; the next server re-adopts it', async () => {
  const dataDir = tempDir();
  try {
    let srv = await startServer({ dataDir });
    const token = srv.token;
    await exec(srv, 'nohup sleep 300 >/dev/null 2>&1 & echo $! > /workspace/bg.pid');
    const id = (await tool(srv, 'container_ping')).structuredContent.sandbox_id;
    await srv.stop('SIGKILL');
    // The init and the background process are still there on the host.
    const host = spawnSync('pgrep', ['-f', 'sleep 300'], { encoding: 'utf8' });
    assert.notEqual(host.stdout.trim(), '');
    srv = await startServer({ dataDir });
    srv.token = token;
    assert.match(srv.stderr(), new RegExp(`sandbox adopted sbx=${id}`));
    const ping = (await tool(srv, 'container_ping')).structuredContent;
    assert.equal(ping.sandbox_id, id);
    const r = await exec(srv, 'kill -0 $(cat /workspace/bg.pid) && ps -eo args | grep -c "^sleep 300"');
    assert.equal(r.stdout, '1\n');
    // A sandbox of an earlier server has its init's socket under the older name: adopted and
    // served all the same.
    await srv.stop('SIGKILL');
    const dir = `${dataDir}/sandboxes/${id}`;
    renameSync(`${dir}/control.sock`, `${dir}/ctl.sock`);
    srv = await startServer({ dataDir });
    srv.token = token;
    assert.match(srv.stderr(), new RegExp(`sandbox adopted sbx=${id}`));
    for (let i = 0; i < 3; i++) {
      const again = await exec(srv, 'kill -0 $(cat /workspace/bg.pid) && echo alive');
      assert.equal(again.stdout, 'alive\n');
      assert.equal(again.sandbox_id, id);
    }
    // started anew by this server, it listens on the current name, which the server then uses
    const db = `${dataDir}/sandbox-mcp.db`;
    const pid = Number(spawnSync('sqlite3', [db, `SELECT init_pid FROM sandboxes WHERE id = '${id}'`], { encoding: 'utf8' }).stdout.trim());
    assert.ok(pid > 0);
    process.kill(pid, 'SIGKILL');
    await until(() => !existsSync(`/proc/${pid}`), 'the init gone');
    const anew = await exec(srv, 'echo anew');
    assert.equal(anew.stdout, 'anew\n');
    assert.equal(anew.sandbox_id, id);
    assert.ok(existsSync(`${dir}/control.sock`));
    assert.equal((await exec(srv, 'echo again')).stdout, 'again\n');
    await srv.stop();
  } finally {
    removeDataDir(dataDir);
  }
});

test('a restarted server stops sandboxes it no longer knows', async () => {
  const dataDir = tempDir();
  try {
    let srv = await startServer({ dataDir });
    const token = srv.token;
    await exec(srv, 'nohup sleep 301 >/dev/null 2>&1 &');
    await srv.stop('SIGKILL');
    // Forget the sandbox, as if its row had been lost.
    const db = `${dataDir}/sandbox-mcp.db`;
    assert.equal(spawnSync('sqlite3', [db, 'DELETE FROM sandboxes']).status, 0);
    srv = await startServer({ dataDir });
    srv.token = token;
    assert.match(srv.stderr(), /sandbox unknown stopped/);
    const host = spawnSync('pgrep', ['-f', 'sleep 301'], { encoding: 'utf8' });
    assert.equal(host.stdout.trim(), '');
    await srv.stop();
  } finally {
    removeDataDir(dataDir);
  }
});

// until() of tests/lib/runs.mjs, bounded for a hung server only
const waitFor = (cond) => until(cond, 'the condition', 120000);

test('a sandbox whose init cannot set it up says at which step, and starts once that is mended', async () => {
  // The init (which mounts /proc in the sandbox's root) runs in the setup child's memory until it
  // executes sandbox-init; its failure must reach the caller as its own error, not as a start.
  const srv = await startServer({ env: { SANDBOX_DISK_MB: '0', SANDBOX_POOL: '0' } });
  try {
    const first = await exec(srv, 'true');
    const stop = cli(['sandbox', 'stop-all', '--data-dir', srv.dataDir]);
    assert.equal(stop.status, 0, stop.stderr);
    // /proc in the sandbox's own layer, a file: the init's mount of /proc there fails.
    const upper = `${srv.dataDir}/sandboxes/${first.sandbox_id}/upper`;
    writeFileSync(`${upper}/proc`, 'not a directory');
    const res = await tool(srv, 'container_exec', { command: 'true' });
    assert.equal(res.isError, true, JSON.stringify(res));
    assert.match(text(res), /^cannot start sandbox: mount \/proc: Not a directory$/);
    await srv.waitLog(/sandbox start failed .*mount \/proc/);
    rmSync(`${upper}/proc`);
    const again = await exec(srv, 'echo fine');
    assert.equal(again.stdout, 'fine\n');
  } finally {
    await srv.stop();
  }
});
