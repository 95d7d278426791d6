// The file tools' worker enters a sandbox's namespaces: it must carry nothing of the server's
// memory there (the server holds provider keys and signing secrets). The test watches the
// server's children from the host while file operations run, reads the memory of every one it
// catches, and looks for a secret the server was given.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

import { startServer, rpc, tempDir, removeDataDir } from '../lib/server.mjs';
import { until } from '../lib/runs.mjs';

const SECRET = `sk-ant-fsworker-${process.pid}-marker-7d1f0c`;

// Scans the children of a pid, every 20 ms until a stop file appears: each child that has
// entered the sandbox (its mount namespace is the sandbox init's) has its memory (every readable
// mapping) searched for the secret. Prints a line "scanned <pid>" for each as it goes, and
// {"scanned": [...], "leaks": [...]} at the end.
const SCANNER = `
import json, os, re, sys, time
parent, secret, stop, init = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3], int(sys.argv[4])
sandbox_mnt = os.readlink(f'/proc/{init}/ns/mnt')
scanned, leaks, seen = [], [], set()
def children():
    out = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                st = f.read()
        except OSError:
            continue
        if int(st[st.rindex(')') + 2:].split()[1]) == parent:
            out.append(int(d))
    return out
def scan(pid):
    try:
        if os.readlink(f'/proc/{pid}/ns/mnt') != sandbox_mnt:
            return None
        exe = os.readlink(f'/proc/{pid}/exe')
        argv0 = open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')[0].decode()
        found = False
        with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb', 0) as mem:
            for line in maps:
                m = re.match(r'([0-9a-f]+)-([0-9a-f]+) r', line)
                if not m or '[vvar]' in line or '[vsyscall]' in line:
                    continue
                lo, hi = int(m.group(1), 16), int(m.group(2), 16)
                if hi - lo > (256 << 20):
                    continue
                try:
                    mem.seek(lo)
                    if secret in mem.read(hi - lo):
                        found = True
                        break
                except (OSError, ValueError, OverflowError):
                    continue
        return {'pid': pid, 'exe': exe, 'argv0': argv0, 'found': found}
    except OSError:
        return None
deadline = time.time() + 240
while not os.path.exists(stop) and time.time() < deadline:
    for pid in children():
        if pid in seen:
            continue
        r = scan(pid)
        if r is None:
            continue
        seen.add(pid)
        scanned.append(r)
        if r['found']:
            leaks.append(r)
        print(f'scanned {pid}', flush=True)
    time.sleep(0.02)
print(json.dumps({'scanned': scanned, 'leaks': leaks}))
`;

test('the file worker that enters a sandbox holds none of the server\'s memory', async () => {
  const dir = tempDir('smcp-fsworker-');
  const stop = path.join(dir, 'stop');
  const srv = await startServer({ env: { ANTHROPIC_API_KEY: SECRET, SANDBOX_DISK_MB: '0' } });
  let nextId = 1;
  const call = async (name, args) => {
    const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });
    assert.equal(r.status, 200, r.text);
    return r.body.result;
  };
  try {
    // A tree to list (the worker, kept for the sandbox, serves every file operation after the first)
    const mk = await call('container_exec', {
      command: 'mkdir -p /workspace/t && cd /workspace/t && for d in $(seq 1 20); do mkdir $d; ' +
               '(cd $d && touch $(seq 1 100)); done; echo made' });
    assert.equal(mk.structuredContent.stdout, 'made\n', JSON.stringify(mk));
    const [row] = JSON.parse(execFileSync('sqlite3', ['-json', path.join(srv.dataDir, 'sandbox-mcp.db'),
      "SELECT init_pid FROM sandboxes WHERE state = 'running'"], { encoding: 'utf8' }));
    const scanner = spawn('python3', ['-c', SCANNER, String(srv.proc.pid), SECRET, stop, String(row.init_pid)],
      { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    scanner.stdout.on('data', (d) => { out += d; });
    const done = new Promise((resolve) => scanner.on('exit', resolve));
    for (let i = 0; i < 3; i++) {
      const res = await call('container_files_list', { path: '/workspace/t', recursive: true, max_entries: 100000 });
      assert.equal(res.isError, undefined, JSON.stringify(res).slice(0, 500));
      const w = await call('container_file_write', { path: `/workspace/w${i}.txt`, content: 'x'.repeat(1 << 20) });
      assert.equal(w.isError, undefined, JSON.stringify(w).slice(0, 500));
    }
    // the worker that served them is scanned while it is there, after its work
    await until(() => /^scanned \d+$/m.test(out), 'the scanner saw a file worker');
    writeFileSync(stop, '');
    await done;
    const result = JSON.parse(out.split('\n').filter((l) => l.startsWith('{')).at(-1));
    assert.ok(result.scanned.length >= 1, `no file worker was caught running: ${out}`);
    assert.deepEqual(result.leaks, [], `the secret was in a file worker's memory: ${JSON.stringify(result.leaks)}`);
    for (const w of result.scanned) assert.match(w.exe, /memfd:sandbox-helper/, JSON.stringify(w));
  } finally {
    writeFileSync(stop, '');
    await srv.stop();
    removeDataDir(dir);
  }
});

// The worker's pid as the host sees it: the server's child whose argv[0] is sandbox-fs.
function workerPids(serverPid) {
  const out = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const st = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]) !== serverPid) continue;
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0')[0] === 'sandbox-fs') out.push(Number(d));
    } catch { /* gone meanwhile */ }
  }
  return out;
}

test('the file worker: kept for the sandbox, out of its reach, replaced when killed, its queue capped', async () => {
  const srv = await startServer({ env: { SANDBOX_DISK_MB: '0' } });
  let nextId = 1;
  const call = async (name, args) => {
    const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });
    assert.equal(r.status, 200, r.text);
    return r.body.result;
  };
  const write = (p, content) => call('container_file_write', { path: p, content });
  try {
    assert.equal((await write('/workspace/a.txt', 'one')).isError, undefined);
    const [worker] = workerPids(srv.proc.pid);
    assert.ok(worker > 0, 'no file worker after a file operation');
    assert.equal((await write('/workspace/b.txt', 'two')).isError, undefined);
    assert.deepEqual(workerPids(srv.proc.pid), [worker], 'a second operation started another worker');

    // Root inside sees no such process and cannot reach it: kill -9 -1 ends everything it sees.
    const ps = await call('container_exec', {
      command: 'cat /proc/[0-9]*/cmdline | tr "\\0" " "; kill -9 -1; echo never' });
    assert.doesNotMatch(ps.structuredContent.stdout, /sandbox-fs/, JSON.stringify(ps));
    assert.deepEqual(workerPids(srv.proc.pid), [worker], 'kill -9 -1 inside reached the file worker');
    const read = await call('container_file_read', { path: '/workspace/b.txt' });
    assert.equal(read.content[0].resource.text, 'two', JSON.stringify(read));

    // While the worker cannot answer, at most 32 operations wait; the rest are refused at once,
    // with the reason, and the waiting ones complete once it answers again.
    process.kill(worker, 'SIGSTOP');
    let answered = 0, eightAnswered;
    const eight = new Promise((resolve) => { eightAnswered = resolve; });
    const calls = [];
    for (let i = 0; i < 40; i++) {
      calls.push(call('container_file_read', { path: '/workspace/a.txt' }).then((r) => {
        if (++answered === 8) eightAnswered();
        return r;
      }));
    }
    await eight; // the refused ones: nothing else can answer while the worker is stopped
    process.kill(worker, 'SIGCONT');
    const all = await Promise.all(calls);
    const busy = all.filter((r) => r.isError);
    assert.equal(busy.length, 8, JSON.stringify(busy.map((r) => r.content[0].text)));
    for (const r of busy) assert.match(r.content[0].text, /too many file operations are under way on sandbox .* \(at most 32\)/);
    for (const r of all.filter((x) => !x.isError)) assert.equal(r.content[0].resource?.text, 'one', JSON.stringify(r));

    // A worker killed from outside is replaced by the next operation. The signal takes effect
    // after kill() returns: the next operation is sent once the worker has exited (a zombie
    // until the server reaps it, or gone), as it would be after any death not seen happen.
    process.kill(worker, 'SIGKILL');
    const exited = () => { try { return readFileSync(`/proc/${worker}/stat`, 'utf8').split(') ')[1][0] === 'Z'; } catch { return true; } };
    await until(exited, `file worker ${worker} exited after SIGKILL`);
    const again = await call('container_file_read', { path: '/workspace/a.txt' });
    assert.equal(again.content[0].resource?.text, 'one', JSON.stringify(again));
    const [next] = workerPids(srv.proc.pid);
    assert.ok(next > 0 && next !== worker, `worker ${worker} was not replaced: ${next}`);
  } finally {
    await srv.stop();
  }
});
