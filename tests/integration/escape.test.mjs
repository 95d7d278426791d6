// Escape attempts from inside a sandbox. Every test tries one way out (host files, writes outside,
// mounts and namespaces, host processes and sockets, privileged syscalls, path tricks through the
// file tools, another user's sandbox, resource bombs) and asserts that it fails for the right
// reason and, where there is something to look at, that the host is unchanged.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { BIN, startServer, rpc, cli, tempDir, removeDataDir } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const tag = `smcp-escape-${randomBytes(6).toString('hex')}`;
let nextId = 1;

async function tool(srv, name, args = {}, { token } = {}) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name, arguments: args } }, { token: token || srv.token });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.body && r.body.result, r.text);
  return r.body.result;
}

function text(res) {
  return (res.content || []).map((c) => c.text || c.resource?.text || '').join('');
}

// Run a shell command in a sandbox; returns the structuredContent. opts: server, token, and the
// container_exec arguments (timeout_ms, cwd, env, stdin).
async function exec(command, { server: srv = main, token, ...args } = {}) {
  const res = await tool(srv, 'container_exec', { command, ...args }, { token });
  assert.equal(res.isError, undefined, JSON.stringify(res));
  return res.structuredContent;
}

// Run a Python program inside (passed in the environment, so no quoting is involved).
function py(code, opts = {}) {
  return exec('python3 -c "$PY" "$@"', { ...opts, env: { PY: code, ...(opts.env || {}) } });
}

const both = (r) => `${r.stdout}${r.stderr}`;

// A file tool call that must fail: isError with a text message.
async function fileToolFails(name, args, re) {
  const res = await tool(main, name, args);
  assert.equal(res.isError, true, `${name} ${JSON.stringify(args)} succeeded: ${JSON.stringify(res)}`);
  if (re) assert.match(text(res), re);
  return text(res);
}

// The errno names of a list of raw syscalls made through libc's syscall(); each line
// "name result errno".
const SYSCALLS_PY = `
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
calls = json.loads(os.environ['CALLS'])
for name, nr, args in calls:
    conv = [a.encode() if isinstance(a, str) else a for a in args]
    ctypes.set_errno(0)
    r = libc.syscall(nr, *conv)
    e = ctypes.get_errno()
    print(name, r, errno.errorcode.get(e, e) if r == -1 else 'OK', flush=True)
`;
async function syscalls(calls) {
  const r = await py(SYSCALLS_PY, { env: { CALLS: JSON.stringify(calls) } });
  assert.equal(r.exit_code, 0, both(r));
  const out = {};
  for (const line of r.stdout.trim().split('\n')) {
    const [name, res, err] = line.split(' ');
    out[name] = { res: Number(res), err };
  }
  return out;
}

// Host processes whose cgroup names this sandbox (its init, its commands, their helpers).
function hostProcessesOf(sandboxId) {
  let n = 0;
  for (const p of readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (readFileSync(`/proc/${p}/cgroup`, 'utf8').includes(sandboxId)) n++;
    } catch { /* gone */ }
  }
  return n;
}

// Python run inside: attach to the sandbox's init (pid 1) with ptrace and make it write a line
// to one of its file descriptors (argv: text, fd). Prints "attach <errno>" when ptrace is refused,
// else "write returned <n>".
const INJECT_PY = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in ('r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx '
                'rsi rdi orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs').split()]
if libc.ptrace(16, 1, None, None) != 0:
    print('attach', ctypes.get_errno()); sys.exit(0)
os.waitpid(1, 0x40000000)
regs = Regs(); libc.ptrace(12, 1, None, ctypes.byref(regs))
saved = Regs.from_buffer_copy(regs)
addr = None
with open('/proc/1/maps') as maps, open('/proc/1/mem', 'r+b', buffering=0) as mem:
    for line in maps:
        rng, perms = line.split()[:2]
        if 'x' not in perms: continue
        lo, hi = (int(x, 16) for x in rng.split('-'))
        try:
            mem.seek(lo); i = mem.read(hi - lo).find(b'\\x0f\\x05')
        except OSError: continue
        if i >= 0: addr = lo + i; break
    msg = (sys.argv[1] + '\\n').encode()
    buf = (saved.rsp - 4096) & ~15
    mem.seek(buf); mem.write(msg)
regs.rax, regs.rdi, regs.rsi, regs.rdx, regs.rip = 1, int(sys.argv[2]), buf, len(msg), addr
libc.ptrace(13, 1, None, ctypes.byref(regs))
libc.ptrace(9, 1, None, None)
os.waitpid(1, 0x40000000)
out = Regs(); libc.ptrace(12, 1, None, ctypes.byref(out))
libc.ptrace(13, 1, None, ctypes.byref(saved))
libc.ptrace(17, 1, None, None)
print('write returned', ctypes.c_longlong(out.rax).value)
`;

// Every file descriptor the sandbox's init and a command hold, and the content of those that are
// regular files.
const INIT_FDS_PY = `
import os, stat
for pid in ('1', str(os.getpid())):
    for fd in sorted(os.listdir('/proc/%s/fd' % pid), key=int):
        p = '/proc/%s/fd/%s' % (pid, fd)
        try:
            target = os.readlink(p)
            print('pid', pid, 'fd', fd, target)
            if stat.S_ISREG(os.stat(p).st_mode):
                print(open(p, 'rb').read(1 << 16).decode('utf8', 'replace'))
        except OSError as e: print('pid', pid, 'fd', fd, type(e).__name__)
`;

function settle(ms = 200) {
  return new Promise((r) => setTimeout(r, ms));
}

// ---------------------------------------------------------------------------------------------
// Host state the attempts aim at: marker files in unique directories, a host process, listeners.

let main;
const markers = []; // {dir, file, content}
let hostMarker; // the one under /root, used for the file tool traversals
let sleeper;
let tcp;
let tcpExternal;
let externalIp;
let abstractServer;
let unixServer;
let unixDir;
const hostConnections = [];
let hostShadow = '';
let hostCorePattern = null;

function makeMarker(parent) {
  if (!existsSync(parent)) return null;
  const dir = path.join(parent, tag);
  mkdirSync(dir, { mode: 0o700 });
  const content = `host-marker ${tag} ${randomBytes(12).toString('hex')}\n`;
  const file = path.join(dir, 'marker.txt');
  writeFileSync(file, content, { mode: 0o600 });
  const m = { parent, dir, file, content, mtimeMs: statSync(file).mtimeMs };
  markers.push(m);
  return m;
}

function assertMarkerIntact(m) {
  assert.equal(readFileSync(m.file, 'utf8'), m.content, `host marker ${m.file} was modified`);
  assert.equal(statSync(m.file).mtimeMs, m.mtimeMs, `host marker ${m.file} was touched`);
  assert.deepEqual(readdirSync(m.dir), ['marker.txt'], `something appeared in ${m.dir}`);
}

function listen(server, ...args) {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(...args, () => resolve(server.address()));
  });
}

function countingServer() {
  return net.createServer((s) => { hostConnections.push(s.remoteAddress || 'unix'); s.destroy(); });
}

describe('escape attempts against a sandbox with the default limits', () => {
  before(async () => {
    for (const parent of ['/root', '/home', '/srv', '/var/lib']) makeMarker(parent);
    hostMarker = markers.find((m) => m.parent === '/root') || markers[0];
    try { hostShadow = readFileSync('/etc/shadow', 'utf8'); } catch { /* not readable */ }
    try { hostCorePattern = readFileSync('/proc/sys/kernel/core_pattern', 'utf8'); } catch { /* none */ }

    sleeper = spawn('sleep', ['300'], { stdio: 'ignore' });
    tcp = countingServer();
    await listen(tcp, 0, '127.0.0.1');
    externalIp = Object.values(os.networkInterfaces()).flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
    if (externalIp) {
      tcpExternal = countingServer();
      await listen(tcpExternal, 0, externalIp);
    }
    abstractServer = countingServer();
    await listen(abstractServer, `\0${tag}`);
    unixDir = tempDir(`${tag}-`);
    unixServer = countingServer();
    await listen(unixServer, path.join(unixDir, 'sock'));

    main = await startServer();
  });

  after(async () => {
    await main?.stop();
    for (const s of [tcp, tcpExternal, abstractServer, unixServer]) s?.close();
    if (sleeper && sleeper.exitCode === null) sleeper.kill('SIGKILL');
    for (const m of markers) rmSync(m.dir, { recursive: true, force: true });
    if (unixDir) rmSync(unixDir, { recursive: true, force: true });
  });

  test('the sandbox has the tools these attempts use (so none passes for lack of a binary)', async () => {
    const r = await exec('for t in sh bash python3 mount umount unshare nsenter chroot mknod sysctl ps strace setpriv; do command -v $t >/dev/null || echo "missing $t"; done; id -u');
    assert.equal(r.stdout, '0\n', both(r));
  });

  // ---------- host files ----------

  test('read the host /etc/shadow', async () => {
    const r = await exec('cat /etc/shadow');
    assert.notEqual(r.exit_code, 0, both(r));
    assert.match(r.stderr, /No such file or directory|Permission denied/);
    const rootLine = hostShadow.split('\n').find((l) => l.startsWith('root:'));
    if (rootLine) assert.ok(!r.stdout.includes(rootLine), 'the host root hash line is visible');
    await fileToolFails('container_file_read', { path: '/etc/shadow' });
  });

  for (const parent of ['/root', '/home', '/srv', '/var/lib']) {
    test(`read a host marker file under ${parent}`, async (t) => {
      const m = markers.find((x) => x.parent === parent);
      if (!m) return t.skip(`no ${parent} on this host`);
      const r = await exec(`ls -la ${m.dir}; cat ${m.file}; grep -rF "${tag}" ${parent} 2>/dev/null; echo "grep=$?"`);
      assert.ok(!both(r).includes(m.content.trim()), `host marker content visible: ${both(r)}`);
      assert.match(r.stderr, /No such file or directory/);
      assert.match(r.stdout, /grep=[12]\n$/, 'grep found the marker');
      await fileToolFails('container_file_read', { path: m.file }, /No such file or directory/);
      const list = await tool(main, 'container_files_list', { path: parent });
      assert.ok(!JSON.stringify(list).includes(tag), `listing ${parent} shows the host marker`);
      assertMarkerIntact(m);
    });
  }

  test("read the server's data dir and its database", async () => {
    const dir = main.dataDir;
    assert.ok(existsSync(path.join(dir, 'sandbox-mcp.db')), 'sanity: the database exists on the host');
    const r = await exec(`ls -la ${dir}; cat ${dir}/sandbox-mcp.db | head -c 64; ls ${dir}/secrets; ` +
      "find / \\( -path /proc -o -path /usr -o -path /sys \\) -prune -o \\( -name 'sandbox-mcp.db*' -o -name proxy_jwt_secret -o -name credentials.key -o -name 'disk.img' \\) -print 2>/dev/null");
    assert.ok(existsSync(path.join(dir, 'secrets', 'credentials.key')), 'sanity: the credentials key exists on the host');
    assert.equal(r.stdout, '', `data dir contents visible: ${r.stdout}`);
    assert.match(r.stderr, /No such file or directory/);
    for (const p of [dir, `${dir}/sandbox-mcp.db`, `${dir}/secrets/proxy_jwt_secret`, `${dir}/secrets/credentials.key`,
                     `../../..${dir}/sandbox-mcp.db`, `/proc/1/root${dir}/sandbox-mcp.db`]) {
      await fileToolFails('container_file_read', { path: p });
    }
  });

  test('read the repository checkout (.dev.vars, sources)', async () => {
    const files = ['.dev.vars', '.dev.vars.example', 'Makefile'].map((f) => path.join(repoRoot, f));
    const r = await exec(`ls ${repoRoot}; cat ${files.join(' ')}`);
    assert.match(r.stderr, /No such file or directory/);
    assert.equal(r.stdout, '');
    for (const f of files) {
      if (!existsSync(f)) continue;
      const content = readFileSync(f, 'utf8').trim();
      if (content) assert.ok(!both(r).includes(content.split('\n')[0]), `${f} visible`);
    }
    for (const f of files) await fileToolFails('container_file_read', { path: f });
  });

  // ---------- writes outside ----------

  for (const target of ['/usr/bin', '/etc/../usr']) {
    test(`write to ${target}/<new file> with a command`, async () => {
      const name = `${tag}-w`;
      const r = await exec(`echo pwned > ${target}/${name}; echo "rc=$?"; touch ${target}/${name}; cp /bin/sh ${target}/${name}`);
      assert.match(r.stdout, /rc=[12]/);
      assert.match(r.stderr, /Read-only file system/);
      const hostPath = path.resolve(target, name);
      assert.equal(existsSync(hostPath), false, `${hostPath} appeared on the host`);
    });
  }

  test('write to /usr/bin/<new file> with container_file_write', async () => {
    const name = `${tag}-fw`;
    await fileToolFails('container_file_write', { path: `/usr/bin/${name}`, content: 'pwned' });
    await fileToolFails('container_file_write', { path: `/workspace/../usr/${name}`, content: 'pwned' });
    assert.equal(existsSync(`/usr/bin/${name}`), false);
    assert.equal(existsSync(`/usr/${name}`), false);
  });

  test('writes to /etc, /root, /var land in the sandbox, never on the host', async () => {
    const name = `${tag}-layer`;
    const r = await exec(`for d in /etc /root /var/lib /srv /home; do echo inside > $d/${name} || exit 1; done; cat /etc/${name}`);
    assert.equal(r.exit_code, 0, both(r));
    assert.equal(r.stdout, 'inside\n');
    for (const d of ['/etc', '/root', '/var/lib', '/srv', '/home'])
      assert.equal(existsSync(path.join(d, name)), false, `${d}/${name} appeared on the host`);
  });

  test('hard-link a host /usr file to write through it', async () => {
    const before = statSync('/usr/bin/env');
    const r = await exec('ln /usr/bin/env /workspace/env-link; echo "rc=$?"; ln /usr/bin/env /usr/bin/env2; echo "rc=$?"');
    assert.equal(r.stdout, 'rc=1\nrc=1\n', both(r));
    assert.match(r.stderr, /Invalid cross-device link|Operation not permitted/);
    assert.match(r.stderr, /Read-only file system/);
    const now = statSync('/usr/bin/env');
    assert.equal(now.nlink, before.nlink);
    assert.equal(now.mtimeMs, before.mtimeMs);
  });

  // ---------- mounts and namespaces ----------

  test('mount a tmpfs', async () => {
    const r = await exec('mount -t tmpfs none /mnt; echo "rc=$?"; grep " /mnt " /proc/mounts; echo end');
    assert.match(r.stdout, /^rc=(1|32)\nend\n$/, both(r));
    const s = await syscalls([['mount', 165, ['none', '/mnt', 'tmpfs', 0, 0]],
                              ['fsopen', 430, ['tmpfs', 0]], ['open_tree', 428, [-100, '/', 1]]]);
    assert.equal(s.mount.err, 'EPERM');
    assert.equal(s.fsopen.err, 'EPERM');
    assert.equal(s.open_tree.err, 'EPERM');
  });

  test('umount /proc (and remount /proc/sys read-write)', async () => {
    const r = await exec('umount /proc; echo "rc=$?"; umount -l /proc/sys; echo "rc=$?"; mount -o remount,rw /proc/sys; echo "rc=$?"; grep -c " /proc/sys proc ro," /proc/mounts');
    assert.match(r.stdout, /^rc=(1|32)\nrc=(1|32)\nrc=(1|32)\n1\n$/, both(r));
    const s = await syscalls([['umount2', 166, ['/proc', 2]], ['umount2_sys', 166, ['/proc/sys', 2]]]);
    assert.equal(s.umount2.err, 'EPERM');
    assert.equal(s.umount2_sys.err, 'EPERM');
    const after = await exec('test -r /proc/self/status && echo proc-still-mounted');
    assert.equal(after.stdout, 'proc-still-mounted\n');
  });

  for (const args of [['-U'], ['-m'], ['-r']]) {
    test(`unshare ${args.join(' ')}`, async () => {
      const r = await exec(`readlink /proc/self/ns/user /proc/self/ns/mnt; unshare ${args.join(' ')} sh -c 'echo ESCAPED; id -u; readlink /proc/self/ns/user /proc/self/ns/mnt'; echo "rc=$?"`);
      assert.ok(!r.stdout.includes('ESCAPED'), both(r));
      assert.match(r.stdout, /rc=1\n$/);
      assert.match(r.stderr, /unshare failed: Operation not permitted/);
    });
  }

  test('nsenter into pid 1 namespaces and setns', async () => {
    const r = await exec('nsenter -t 1 -m -u -n -i -p echo ESCAPED; echo "rc=$?"; nsenter -t 1 -U echo ESCAPED; echo "rc=$?"');
    assert.ok(!r.stdout.includes('ESCAPED'), both(r));
    // PID 1 is not dumpable, so its namespace files cannot even be opened
    assert.match(r.stderr, /cannot open \/proc\/1\/ns\/\w+: Permission denied/);
    const s = await py(`
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
for ns in ('mnt', 'user', 'net', 'pid'):
    try:
        os.open('/proc/1/ns/' + ns, os.O_RDONLY)
        print(ns, 'opened')
    except PermissionError:
        pass
    # our own namespace files open, but setns is refused by the seccomp filter
    fd = os.open('/proc/self/ns/' + ns, os.O_RDONLY)
    r = libc.setns(fd, 0)
    print(ns, r, errno.errorcode.get(ctypes.get_errno()))
`);
    assert.equal(s.stdout, 'mnt -1 EPERM\nuser -1 EPERM\nnet -1 EPERM\npid -1 EPERM\n', both(s));
  });

  test('a new user namespace from Python (unshare, clone, clone3)', async () => {
    const r = await py(`
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17
def err(): return errno.errorcode.get(ctypes.get_errno())
if hasattr(os, 'unshare'):
    try:
        os.unshare(os.CLONE_NEWUSER); print('os.unshare ESCAPED')
    except OSError as e: print('os.unshare', errno.errorcode[e.errno])
else:
    print('os.unshare', 'EPERM' if libc.unshare(CLONE_NEWUSER) == -1 and err() == 'EPERM' else 'ESCAPED')
print('unshare', libc.syscall(272, CLONE_NEWUSER | CLONE_NEWNS), err())
r = libc.syscall(56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
if r == 0: os._exit(0)
print('clone', r, err())
print('clone3', libc.syscall(435, None, 0), err())
`);
    assert.equal(r.stdout, 'os.unshare EPERM\nunshare -1 EPERM\nclone -1 EPERM\nclone3 -1 ENOSYS\n', both(r));
  });

  test('the x32 syscall ABI does not bypass the filter', async () => {
    const r = await exec('python3 -c "$PY"; echo "rc=$?"', { env: { PY: `
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(0x40000000 | 272, 0x10000000)
print('x32 unshare', r, ctypes.get_errno(), flush=True)
` } });
    assert.ok(!/x32 unshare 0 /.test(r.stdout), both(r));
    // SIGSYS (the process is killed), or an error return
    assert.match(r.stdout, /rc=159\n$|x32 unshare -1 /, both(r));
  });

  test('the i386 int 0x80 entry does not bypass the filter', async () => {
    const r = await exec('python3 -c "$PY"; echo "rc=$?"', { env: { PY: `
import ctypes, mmap, os
# push rbx; mov eax, 310 (i386 unshare); mov ebx, CLONE_NEWUSER; int 0x80; pop rbx; ret
code = bytes([0x53, 0xb8, 0x36, 0x01, 0, 0, 0xbb, 0, 0, 0, 0x10, 0xcd, 0x80, 0x5b, 0xc3])
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print('int80 unshare', f(), flush=True)
` } });
    assert.ok(!/int80 unshare 0\n/.test(r.stdout), both(r));
    // killed by seccomp (SIGSYS) or by the kernel when ia32 emulation is off (SIGSEGV), or -EPERM
    assert.match(r.stdout, /rc=(159|139)\n$|int80 unshare -1\n/, both(r));
  });

  // ---------- host processes ----------

  test('kill a host process', async () => {
    const pid = sleeper.pid;
    const r = await exec(`kill -9 ${pid}; echo "rc=$?"; python3 -c 'import os, sys; os.kill(int(sys.argv[1]), 9)' ${pid}; echo "rc=$?"; kill -9 ${main.proc.pid}; echo "rc=$?"`);
    assert.equal(r.stdout, 'rc=1\nrc=1\nrc=1\n', both(r));
    assert.match(r.stderr, /No such process/);
    assert.match(r.stderr, /ProcessLookupError/);
    await settle();
    assert.equal(sleeper.exitCode, null, 'the host process died');
    assert.equal(sleeper.signalCode, null, 'the host process was killed');
    assert.doesNotThrow(() => process.kill(pid, 0));
    assert.equal(main.proc.exitCode, null, 'the server died');
  });

  test('ptrace a host process', async () => {
    const pid = sleeper.pid;
    const r = await exec(`python3 -c "$PY" ${pid} ${main.proc.pid}; timeout 5 strace -p ${pid} -e trace=none; echo "rc=$?"`, { env: { PY: `
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
for pid in sys.argv[1:]:
    for req, name in ((16, 'ATTACH'), (0x4206, 'SEIZE')):
        r = libc.ptrace(req, int(pid), 0, 0)
        print(name, r, errno.errorcode.get(ctypes.get_errno()))
` } });
    assert.equal(r.stdout, 'ATTACH -1 ESRCH\nSEIZE -1 ESRCH\nATTACH -1 ESRCH\nSEIZE -1 ESRCH\nrc=1\n', both(r));
    assert.match(r.stderr, /No such process/);
    assert.match(readFileSync(`/proc/${pid}/status`, 'utf8'), /TracerPid:\s+0\n/);
    assert.equal(sleeper.exitCode, null);
  });

  test('see host processes in ps aux and /proc', async () => {
    const pid = sleeper.pid;
    const spid = main.proc.pid;
    const r = await exec(`ps aux; echo ---; cat /proc/${pid}/cmdline /proc/${spid}/cmdline /proc/${spid}/environ 2>&1 | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'`);
    const [ps, rest] = r.stdout.split('---\n');
    assert.match(ps, /sandbox-init/, 'sanity: ps lists the sandbox processes');
    assert.ok(!ps.includes('serve --listen'), `the server is visible:\n${ps}`);
    assert.ok(!/\bsleep 300\b/.test(ps), `the host sleep is visible:\n${ps}`);
    for (const line of ps.split('\n').slice(1)) {
      const p = Number(line.trim().split(/\s+/)[1]);
      assert.ok(p !== pid && p !== spid, `host pid ${p} listed: ${line}`);
    }
    assert.ok(!rest.includes('serve') && !rest.includes('sleep'), rest);
    assert.ok(Number(rest.trim().split('\n').pop()) < 20, `too many processes: ${rest}`);
  });

  // ---------- host network ----------

  test("connect to a TCP service on the host's 127.0.0.1", async () => {
    const port = tcp.address().port;
    const sport = new URL(main.url).port;
    const r = await exec(`bash -c 'echo hi > /dev/tcp/127.0.0.1/${port}'; echo "rc=$?"; ` +
      `python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 3)' ${port}; echo "rc=$?"; ` +
      `curl -sS -m 3 http://127.0.0.1:${sport}/; echo "rc=$?"`);
    assert.equal(r.stdout, 'rc=1\nrc=1\nrc=7\n', both(r));
    assert.match(r.stderr, /Connection refused/);
    await settle();
    assert.deepEqual(hostConnections, [], 'the host listener saw a connection');
  });

  test("connect to the host's external address", async (t) => {
    if (!externalIp) return t.skip('no external IPv4 address');
    const port = tcpExternal.address().port;
    const r = await exec(`python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 3)' ${externalIp} ${port}; echo "rc=$?"; ` +
      `bash -c 'echo hi > /dev/tcp/${externalIp}/${port}'; echo "rc=$?"; cat /proc/net/dev | grep -v -e lo: -e Inter -e face`);
    assert.equal(r.stdout, 'rc=1\nrc=1\n', both(r));
    assert.match(r.stderr, /Network is unreachable|Connection refused|timed out/);
    await settle();
    assert.deepEqual(hostConnections, []);
  });

  test('connect to a host abstract unix socket and a host unix socket file', async () => {
    const res = await py(`
import os, socket
for addr in ('\\0' + os.environ['NAME'], os.environ['SOCK']):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(addr); print('ESCAPED')
    except OSError as e: print(type(e).__name__)
`, { env: { NAME: tag, SOCK: path.join(unixDir, 'sock') } });
    assert.equal(res.stdout, 'ConnectionRefusedError\nFileNotFoundError\n', both(res));
    await settle();
    assert.deepEqual(hostConnections, []);
  });

  test('reach host sockets in /run and /dev (D-Bus, Docker, systemd, syslog)', async () => {
    const candidates = ['/run/dbus/system_bus_socket', '/var/run/docker.sock', '/run/docker.sock',
                        '/run/systemd/private', '/run/systemd/journal/socket', '/dev/log',
                        '/run/containerd/containerd.sock'];
    const r = await exec(`for s in ${candidates.join(' ')}; do test -e $s && echo "present $s"; done; echo end`);
    assert.equal(r.stdout, 'end\n', both(r));
  });

  test('write into a host terminal through /dev/pts', async () => {
    // a host process holds a pseudo-terminal open and reports what arrives on its master side
    const holder = spawn('python3', ['-c', `
import os, select, sys
m, s = os.openpty()
print(os.ttyname(s), flush=True)
sys.stdin.readline()
r, _, _ = select.select([m], [], [], 0.5)
print('got', len(os.read(m, 4096)) if r else 0, flush=True)
`], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    holder.stdout.on('data', (d) => { out += d; });
    const exited = new Promise((resolve) => holder.on('exit', resolve));
    while (!out.includes('\n') && holder.exitCode === null) await settle(20);
    const tty = out.trim();
    assert.match(tty, /^\/dev\/pts\/\d+$/);
    const r = await exec(`ls /dev/pts; echo INJECTED > ${tty}; echo "rc=$?"; echo INJECTED > /dev/tty; echo "rc=$?"`);
    holder.stdin.end('check\n');
    await exited;
    assert.match(r.stdout, /rc=[12]\nrc=[12]\n$/, both(r));
    assert.match(out, /\ngot 0\n$/, `the host terminal received input: ${out}`);
  });

  test('raw and packet sockets (ping)', async () => {
    const r = await py(`
import errno, socket
for fam, typ, proto, name in ((socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP, 'inet-raw'),
                              (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6, 'inet6-raw'),
                              (socket.AF_PACKET, socket.SOCK_RAW, 0, 'packet-raw'),
                              (socket.AF_PACKET, socket.SOCK_DGRAM, 0, 'packet-dgram'),
                              (socket.AF_NETLINK, socket.SOCK_RAW, 15, 'netlink-uevent')):
    try:
        socket.socket(fam, typ, proto); print(name, 'ESCAPED')
    except OSError as e: print(name, errno.errorcode[e.errno])
`);
    assert.equal(r.stdout, 'inet-raw EPERM\ninet6-raw EPERM\npacket-raw EPERM\npacket-dgram EPERM\nnetlink-uevent EPERM\n', both(r));
  });

  // ---------- privileged syscalls ----------

  test('mknod a block device', async () => {
    const r = await exec('mknod /tmp/sda b 8 0; echo "rc=$?"; mknod /workspace/mem c 1 1; echo "rc=$?"; ls /tmp/sda /workspace/mem 2>&1');
    assert.match(r.stdout, /^rc=1\nrc=1\n/, both(r));
    assert.match(r.stderr, /Operation not permitted/);
    assert.match(r.stdout, /No such file or directory/);
    const s = await syscalls([['mknod', 133, ['/tmp/sda2', 0o60600, (8 << 8) | 0]]]);
    assert.equal(s.mknod.err, 'EPERM');
  });

  test('load or remove a kernel module', async () => {
    const r = await exec('printf "\\177ELF" > /tmp/m.ko; insmod /tmp/m.ko 2>&1; modprobe -r loop 2>&1; echo end');
    assert.match(r.stdout, /end\n$/);
    const s = await syscalls([
      ['init_module', 175, [0, 0, '']],
      ['finit_module', 313, [0, '', 0]],
      ['delete_module', 176, ['loop', 0]],
    ]);
    assert.equal(s.init_module.err, 'EPERM');
    assert.equal(s.finit_module.err, 'EPERM');
    assert.equal(s.delete_module.err, 'EPERM');
  });

  test('kernel keyrings (keyctl, add_key, request_key)', async () => {
    const r = await exec('keyctl show 2>&1; echo end');
    assert.match(r.stdout, /end\n$/);
    assert.ok(!/Keyring|_ses/.test(r.stdout), r.stdout);
    const s = await syscalls([
      ['keyctl', 250, [0, -3, 0]], // KEYCTL_GET_KEYRING_ID of the session keyring
      ['add_key', 248, ['user', 'smcp', 'secret', 6, -3]],
      ['request_key', 249, ['user', 'smcp', 0, 0]],
    ]);
    assert.equal(s.keyctl.err, 'EPERM');
    assert.equal(s.add_key.err, 'EPERM');
    assert.equal(s.request_key.err, 'EPERM');
  });

  test('bpf', async () => {
    const s = await syscalls([['bpf_map_create', 321, [0, 0, 0]], ['bpf_prog_load', 321, [5, 0, 0]]]);
    assert.equal(s.bpf_map_create.err, 'EPERM');
    assert.equal(s.bpf_prog_load.err, 'EPERM');
  });

  test('open_by_handle_at (the "shocker" escape) and name_to_handle_at', async () => {
    const r = await py(`
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(136)
ctypes.c_uint32.from_buffer(buf).value = 128
mount_id = ctypes.c_int()
print('name_to_handle_at', libc.syscall(303, -100, b'/', buf, ctypes.byref(mount_id), 0), errno.errorcode.get(ctypes.get_errno()))
# a handle for inode 2 of the root file system, the classic way to reach the host's root
ctypes.c_uint32.from_buffer(buf).value = 8
ctypes.c_int32.from_buffer(buf, 4).value = 1
ctypes.c_uint32.from_buffer(buf, 8).value = 2
print('open_by_handle_at', libc.syscall(304, -100, buf, 0), errno.errorcode.get(ctypes.get_errno()))
`);
    assert.equal(r.stdout, 'name_to_handle_at -1 EPERM\nopen_by_handle_at -1 EPERM\n', both(r));
  });

  test('kernel log, perf events and userfaultfd', async () => {
    const r = await exec('dmesg 2>&1 | head -3; cat /proc/kmsg 2>&1 | head -c 200; echo');
    assert.match(r.stdout, /Operation not permitted/);
    assert.match(r.stdout, /Permission denied/);
    const s = await syscalls([['syslog', 103, [3, 0, 0]], ['perf_event_open', 298, [0, 0, -1, -1, 0]],
                              ['userfaultfd', 323, [0]]]);
    assert.equal(s.syslog.err, 'EPERM');
    assert.equal(s.perf_event_open.err, 'EPERM');
    assert.equal(s.userfaultfd.err, 'EPERM');
  });

  test('write to /proc/sys (core_pattern, sysrq, drop_caches) and sysctl -w', async () => {
    const r = await exec('echo "|/tmp/evil %p" > /proc/sys/kernel/core_pattern; echo "rc=$?"; ' +
      'echo 1 > /proc/sys/kernel/sysrq; echo "rc=$?"; echo 3 > /proc/sys/vm/drop_caches; echo "rc=$?"; ' +
      'sysctl -w kernel.core_pattern=/tmp/core; echo "rc=$?"; cat /proc/sys/kernel/core_pattern');
    const lines = r.stdout.split('\n');
    assert.deepEqual(lines.slice(0, 3), ['rc=2', 'rc=2', 'rc=2'], both(r));
    assert.notEqual(lines[3], 'rc=0', both(r));
    assert.ok(!r.stdout.includes('evil') && !r.stdout.includes('/tmp/core'), r.stdout);
    assert.match(r.stderr, /Read-only file system/);
    if (hostCorePattern !== null)
      assert.equal(readFileSync('/proc/sys/kernel/core_pattern', 'utf8'), hostCorePattern);
  });

  test('write to /proc/sysrq-trigger', async () => {
    const r = await exec('echo h > /proc/sysrq-trigger; echo "rc=$?"');
    assert.equal(r.stdout, 'rc=2\n', both(r));
  });

  test('chroot, and the classic double-chroot escape in Python', async () => {
    const r = await exec('chroot / /bin/true; echo "rc=$?"');
    assert.equal(r.stdout, 'rc=125\n', both(r));
    assert.match(r.stderr, /Operation not permitted/);
    const p = await py(`
import errno, os
os.makedirs('/tmp/jail', exist_ok=True)
try:
    os.chroot('/tmp/jail')
    for _ in range(64): os.chdir('..')
    os.chroot('.')
    print('ESCAPED', os.listdir('/'))
except OSError as e: print('chroot', errno.errorcode[e.errno])
`);
    assert.equal(p.stdout, 'chroot EPERM\n', both(p));
  });

  test('setuid: no_new_privs, nosuid mounts, a setuid copy and the host setuid mount', async () => {
    const r = await exec(`grep NoNewPrivs /proc/self/status; awk '$2 == "/usr" || $2 == "/workspace" || $2 == "/tmp" || $2 == "/" {print $2, $4}' /proc/mounts; ` +
      'cp /usr/bin/id /workspace/suid-id && chmod 4755 /workspace/suid-id && stat -c %a /workspace/suid-id; ' +
      'setpriv --reuid=1000 --regid=1000 --clear-groups /workspace/suid-id -u; ' +
      'setpriv --reuid=1000 --regid=1000 --clear-groups /usr/bin/mount -t tmpfs none /mnt; echo "rc=$?"');
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0], /^NoNewPrivs:\s+1$/, both(r));
    for (const mnt of ['/', '/usr', '/workspace', '/tmp']) {
      const line = lines.find((l) => l.startsWith(`${mnt} `));
      assert.ok(line, `${mnt} missing from /proc/mounts: ${r.stdout}`);
      assert.match(line.split(' ')[1], /(^|,)nosuid(,|$)/, line);
    }
    assert.match(lines.find((l) => l.startsWith('/usr ')), /(^|\s|,)ro,/);
    assert.ok(lines.includes('4755'), 'sanity: the setuid bit is set on the copy');
    const i = lines.indexOf('4755');
    assert.equal(lines[i + 1], '1000', 'a setuid-root copy ran with euid 0');
    assert.notEqual(lines[i + 2], 'rc=0', both(r));
  });

  test('container_file_write drops setuid and setgid bits', async () => {
    const res = await tool(main, 'container_file_write', { path: 'suid.sh', content: '#!/bin/sh\nid -u\n', mode: '6755' });
    assert.equal(res.isError, undefined, text(res));
    const r = await exec('stat -c %a /workspace/suid.sh');
    assert.equal(r.stdout, '755\n');
  });

  test('TIOCSTI to push input into a terminal', async () => {
    const r = await py(`
import ctypes, errno, fcntl, os, termios
libc = ctypes.CDLL(None, use_errno=True)
m = os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY)
libc.grantpt(m); libc.unlockpt(m)
libc.ptsname.restype = ctypes.c_char_p
s = os.open(libc.ptsname(m), os.O_RDWR | os.O_NOCTTY)
try:
    fcntl.ioctl(s, termios.TIOCSTI, b'x'); print('TIOCSTI ESCAPED')
except OSError as e: print('TIOCSTI', errno.errorcode[e.errno])
`);
    assert.equal(r.stdout, 'TIOCSTI EPERM\n', both(r));
  });

  test('overwrite sandbox-init through /proc/1/exe', async () => {
    const before = await exec('sha256sum < /proc/1/exe');
    const r = await py(`
import errno
for mode in ('r+b', 'ab', 'wb'):
    try:
        open('/proc/1/exe', mode).write(b'pwned'); print(mode, 'ESCAPED')
    except OSError as e: print(mode, errno.errorcode[e.errno])
`);
    assert.ok(!r.stdout.includes('ESCAPED'), both(r));
    assert.equal(r.stdout.trim().split('\n').length, 3, both(r));
    const now = await exec('sha256sum < /proc/1/exe');
    assert.equal(now.stdout, before.stdout);
  });

  test('no host file descriptor reaches a command or the init', async () => {
    const r = await py(`
import os
for pid in ('self', '1'):
    d = '/proc/%s/fd' % pid
    for fd in sorted(os.listdir(d), key=int):
        try: print(pid, fd, os.readlink('%s/%s' % (d, fd)))
        except OSError: pass
`);
    assert.equal(r.exit_code, 0, both(r));
    for (const line of r.stdout.trim().split('\n')) {
      const target = line.split(' ').slice(2).join(' ');
      assert.match(target, /^(pipe:|socket:|anon_inode:|\/dev\/null$|\/dev\/pts\/|\/proc\/)/, `unexpected fd: ${line}`);
    }
  });

  test("write into the server's own output through the sandbox init (ptrace)", async () => {
    const forged = `FORGED ${tag} error http listening addr=203.0.113.1:80`;
    const r = await exec('python3 -c "$PY" "$LINE" 2; python3 -c "$PY" "$LINE" 1', { env: { PY: INJECT_PY, LINE: forged } });
    await settle();
    assert.ok(!main.stderr().includes(forged) && !main.stdout().includes(forged),
      `a sandbox process wrote into the server's stderr/stdout (${r.stdout.trim()})`);
  });

  test('make the sandbox unkillable or raise its limits (oom_score_adj, RLIMIT_NOFILE)', async () => {
    const r = await exec('echo -1000 > /proc/self/oom_score_adj; echo "rc=$?"; cat /proc/self/oom_score_adj; ulimit -n 1048576; echo "rc=$?"; ulimit -Hn');
    const lines = r.stdout.trim().split('\n');
    assert.notEqual(lines[0], 'rc=0', both(r));
    assert.notEqual(lines[1], '-1000');
    assert.notEqual(lines[2], 'rc=0', both(r));
    assert.ok(Number(lines[3]) <= 4096, lines[3]);
  });

  test("change host device nodes bound into /dev", async () => {
    const before = statSync('/dev/null');
    const r = await exec('chmod 777 /dev/null; echo "rc=$?"; chown 1000 /dev/null; echo "rc=$?"; rm -f /dev/null; echo "rc=$?"; ls /dev | grep -c -e vda -e sda -e mem -e kmsg');
    assert.equal(r.stdout, 'rc=1\nrc=1\nrc=1\n0\n', both(r));
    const now = statSync('/dev/null');
    assert.equal(now.mode, before.mode);
    assert.equal(now.uid, before.uid);
    assert.ok(now.isCharacterDevice());
  });

  test('cgroup release_agent escape: no cgroupfs inside and mounting one is refused', async () => {
    const r = await exec('ls -A /sys; grep -c cgroup /proc/mounts; mkdir -p /tmp/cg && mount -t cgroup -o memory cgroup /tmp/cg; echo "rc=$?"; ls /tmp/cg');
    assert.equal(r.stdout, '0\nrc=32\n', both(r));
    const s = await syscalls([['mount_cgroup', 165, ['cgroup', '/tmp/cg', 'cgroup', 0, 'memory']]]);
    assert.equal(s.mount_cgroup.err, 'EPERM');
  });

  // ---------- the file tools: .. and symlinks ----------

  test('container_file_read with .. and /proc root links', async () => {
    for (const p of ['../../etc/shadow', '/proc/1/root/etc/shadow', '/proc/self/root/../../etc/shadow',
                     `../../../..${hostMarker.file}`, `/proc/1/root${hostMarker.file}`,
                     `/proc/self/cwd/../../..${hostMarker.file}`, `/proc/${main.proc.pid}/root/etc/shadow`]) {
      const msg = await fileToolFails('container_file_read', { path: p });
      assert.ok(!msg.includes(hostMarker.content.trim()));
    }
    assertMarkerIntact(hostMarker);
  });

  test('file tools through a symlink to / (read, write, list, delete)', async () => {
    const r = await exec(`ln -sfn / /workspace/hostroot; ln -sfn ${hostMarker.file} /workspace/m; readlink /workspace/hostroot`);
    assert.equal(r.stdout, '/\n', both(r));
    const through = `hostroot${hostMarker.file}`;
    const list = await tool(main, 'container_files_list', { path: `hostroot${hostMarker.parent}`, recursive: true });
    assert.equal(list.isError, undefined, text(list));
    const names = list.structuredContent.entries.map((e) => e.name);
    assert.ok(!names.some((n) => n === tag || n.startsWith(`${tag}/`)), `the host marker is listed: ${text(list)}`);
    await fileToolFails('container_file_read', { path: through }, /No such file or directory/);
    await fileToolFails('container_file_read', { path: 'm' }, /No such file or directory/);
    await fileToolFails('container_file_write', { path: 'm', content: 'pwned' }, /symlink|symbolic/);
    await fileToolFails('container_file_delete', { path: through }, /No such file or directory/);
    // a write through the link lands in the sandbox's own root
    const w = await tool(main, 'container_file_write', { path: through, content: 'pwned' });
    assert.equal(w.isError, undefined, text(w));
    assert.equal(w.structuredContent.path, `/workspace/${through}`);
    const inside = await exec(`cat ${hostMarker.file}`);
    assert.equal(inside.stdout, 'pwned', 'the write went into the sandbox');
    await exec(`rm -rf ${hostMarker.dir}`);
    const del = await tool(main, 'container_file_delete', { path: 'hostroot', recursive: true });
    assert.equal(del.isError, undefined, text(del));
    assert.equal(del.structuredContent.deleted, 1, 'only the link itself is deleted');
    const still = await exec('ls /etc/passwd /usr/bin/env');
    assert.equal(still.exit_code, 0, 'deleting the link removed what it points to');
    assertMarkerIntact(hostMarker);
  });

  test('file tools through a symlink to /proc/1/root', async () => {
    const r = await exec('ln -sfn /proc/1/root /workspace/p; ln -sfn /proc/self/root /workspace/q');
    assert.equal(r.exit_code, 0, both(r));
    for (const link of ['p', 'q']) {
      await fileToolFails('container_file_read', { path: `${link}/etc/passwd` });
      await fileToolFails('container_file_read', { path: `${link}${hostMarker.file}` });
      await fileToolFails('container_file_write', { path: `${link}${hostMarker.file}`, content: 'pwned' });
      await fileToolFails('container_file_write', { path: `${link}/usr/bin/${tag}`, content: 'pwned' });
      await fileToolFails('container_file_delete', { path: `${link}/etc/passwd` });
      await fileToolFails('container_files_list', { path: `${link}/etc` });
      const list = await tool(main, 'container_files_list', { path: `${link}/`, recursive: true });
      assert.equal(list.isError, undefined, text(list));
      assert.deepEqual(list.structuredContent.entries.map((e) => [e.name, e.type]), [[link, 'symlink']], text(list));
    }
    assert.equal(existsSync(`/usr/bin/${tag}`), false);
    assertMarkerIntact(hostMarker);
  });

  test('a symlink flipped while the file tools resolve it', async () => {
    // a loop inside swaps the link between / and /proc/1/root while reads go through it
    const bg = exec(`end=$(($(date +%s) + 3)); while [ $(date +%s) -lt $end ]; do ln -sfn / /workspace/flip; ln -sfn /proc/1/root /workspace/flip; ln -sfn ${hostMarker.dir} /workspace/flip; done`, { timeout_ms: 10000 });
    const results = [];
    for (let i = 0; i < 30; i++) {
      results.push(await tool(main, 'container_file_read', { path: `flip${hostMarker.file}` }));
      results.push(await tool(main, 'container_file_read', { path: 'flip/marker.txt' }));
    }
    await bg;
    for (const res of results) {
      assert.ok(!JSON.stringify(res).includes(hostMarker.content.trim()), `host marker read: ${JSON.stringify(res)}`);
    }
    assertMarkerIntact(hostMarker);
  });

  test('exec with a cwd of .. and /proc/1/root stays in the sandbox', async () => {
    for (const cwd of ['../../../../..', '/proc/1/root/../..', '/proc/self/root/..']) {
      const res = await tool(main, 'container_exec', { command: `/bin/pwd -P; cd ../../../..; /bin/pwd -P; test -e ${repoRoot}/Makefile && echo REPO; cat ${hostMarker.file} 2>/dev/null; echo; ls -A`, cwd });
      if (res.isError) continue; // refused outright is fine
      const r = res.structuredContent;
      assert.equal(r.exit_code, 0, both(r));
      const [here, top, ...rest] = r.stdout.split('\n');
      assert.match(here, /^\//, `cwd ${cwd} is outside the sandbox root: ${r.stdout}`);
      assert.equal(top, '/', `cwd ${cwd}: .. went past the root`);
      assert.ok(!rest.includes('REPO'), `cwd ${cwd}: ${r.stdout}`);
      assert.ok(!r.stdout.includes(hostMarker.content.trim()), `cwd ${cwd}: ${r.stdout}`);
      assert.ok(rest.includes('workspace'), `cwd ${cwd}: ${r.stdout}`);
    }
  });

  // ---------- another user's sandbox ----------

  test("another user's sandbox: by path and by session_id", async () => {
    const secret = `admin-secret-${randomBytes(8).toString('hex')}`;
    const w = await tool(main, 'container_file_write', { path: 'secret.txt', content: secret });
    assert.equal(w.isError, undefined, text(w));
    const ping = await tool(main, 'container_ping');
    const adminSbx = ping.structuredContent.sandbox_id;
    assert.match(adminSbx, /^sbx_/);

    const add = cli(['user', 'add', 'bob', '--data-dir', main.dataDir]);
    assert.equal(add.status, 0, add.stderr);
    const tok = cli(['token', 'create', '--user', 'bob', '--data-dir', main.dataDir]);
    assert.equal(tok.status, 0, tok.stderr);
    const bob = tok.stdout.trim();
    assert.match(bob, /^smcp_/);

    // by path, in bob's own sandbox
    const own = await tool(main, 'container_file_read', { path: 'secret.txt' }, { token: bob });
    assert.equal(own.isError, true);
    assert.match(text(own), /No such file or directory/);
    const r = await exec(`cat /workspace/secret.txt; grep -rl "${secret.slice(0, 12)}" /workspace /tmp /root 2>/dev/null; ls /proc | grep -c '^[0-9]'`, { token: bob });
    assert.ok(!r.stdout.includes(secret), r.stdout);
    assert.notEqual(r.sandbox_id, adminSbx);

    // by session_id: every tool answers "not found"
    const calls = [
      ['container_exec', { command: 'cat /workspace/secret.txt' }],
      ['container_file_read', { path: 'secret.txt' }],
      ['container_files_list', { path: '/workspace' }],
      ['container_file_write', { path: 'secret.txt', content: 'bob was here' }],
      ['container_file_delete', { path: 'secret.txt' }],
      ['container_ping', {}],
      ['container_initialize', {}],
      ['container_preview', { port: 3000 }],
    ];
    for (const [name, args] of calls) {
      const res = await tool(main, name, { ...args, session_id: adminSbx }, { token: bob });
      assert.equal(res.isError, true, `${name}: ${JSON.stringify(res)}`);
      assert.match(text(res), /not found/, name);
      assert.ok(!JSON.stringify(res).includes(secret), name);
    }
    // admin's file is untouched and the server is still up
    const back = await tool(main, 'container_file_read', { path: 'secret.txt' });
    assert.equal(text(back), secret);
  });

  test('stop every process it can (a SIGSTOP spree) to stall the init while it starts commands', { timeout: 120000 }, async () => {
    // The init starts a command on its own memory until the command's exec; a command stopped
    // in between must not stall it for good.
    const spree = `import os, signal, time
end = time.time() + 2
while time.time() < end:
    try: os.kill(-1, signal.SIGSTOP)
    except OSError: pass
`;
    const started = await exec('nohup python3 -c "$PY" >/dev/null 2>&1 & echo started', { env: { PY: spree } });
    assert.equal(started.stdout, 'started\n');
    // commands started meanwhile: each may be stopped before or after its exec
    const calls = await Promise.all(Array.from({ length: 12 }, (_, i) =>
      tool(main, 'container_exec', { command: `echo call${i}`, timeout_ms: 3000 })));
    for (const res of calls) {
      if (res.isError) assert.match(text(res), /stopped before it could start/, JSON.stringify(res));
      else assert.ok(res.structuredContent.timed_out || res.structuredContent.exit_code === 0, JSON.stringify(res));
    }
    await settle(2500); // the spree is over
    const after = await exec('echo alive; kill -CONT -1; true', { timeout_ms: 10000 });
    assert.match(after.stdout, /^alive$/m);
  });

  test('the server printed no sanitizer report', () => {
    assertNoSanitizerReport(main.stderr(), 'server');
    assert.equal(main.proc.exitCode, null);
  });
});

// ---------------------------------------------------------------------------------------------
// Resource bombs against small limits: each must stay inside the sandbox while the server keeps
// answering.

describe('resource bombs against a sandbox with small limits', () => {
  let srv;
  const MEMORY_MB = 256;
  const DISK_MB = 128;
  const TMP_MB = 32;

  before(async () => {
    srv = await startServer({ env: { SANDBOX_MEMORY_MB: String(MEMORY_MB), SANDBOX_DISK_MB: String(DISK_MB),
                                      SANDBOX_TMP_MB: String(TMP_MB) } });
  });
  after(async () => { await srv?.stop(); });

  const run = (cmd, opts = {}) => exec(cmd, { server: srv, ...opts });

  async function assertServerAnswers({ initialize = false } = {}) {
    const info = await tool(srv, 'server_info');
    assert.equal(info.isError, undefined, JSON.stringify(info));
    assert.equal(info.structuredContent.name, 'sandbox-mcp');
    if (initialize) {
      const init = await tool(srv, 'container_initialize');
      assert.equal(init.isError, undefined, text(init));
    }
    const ok = await run('echo ok');
    assert.equal(ok.stdout, 'ok\n');
    assert.equal(srv.proc.exitCode, null, 'the server exited');
  }

  test('the limits are in place', async () => {
    const ping = await tool(srv, 'container_ping');
    assert.equal(ping.isError, undefined, text(ping));
    assert.equal(ping.structuredContent.limits.memory_bytes, MEMORY_MB << 20);
    assert.equal(ping.structuredContent.limits.processes, 512);
  });

  test('fork bomb', async () => {
    const ping = await tool(srv, 'container_ping');
    const sbx = ping.structuredContent.sandbox_id;
    const limit = ping.structuredContent.limits.processes;
    assert.ok(hostProcessesOf(sbx) > 0 || ping.structuredContent.cgroup === 'none', 'sanity: the sandbox init is found on the host by its cgroup');
    const r = await tool(srv, 'container_exec', { command: "bash -c ':(){ :|:& };:'; sleep 2", timeout_ms: 4000 });
    assert.ok(r.structuredContent || r.isError, JSON.stringify(r));
    // while the bomb goes on: the process count stays capped, the server answers, and the
    // sandbox's files can still be written (its file worker does the work itself when it
    // cannot fork)
    let most = 0;
    for (let i = 0; i < 5; i++) {
      most = Math.max(most, hostProcessesOf(sbx));
      const info = await tool(srv, 'server_info');
      assert.equal(info.isError, undefined);
      const w = await tool(srv, 'container_file_write', { path: `/workspace/during-bomb-${i}`, content: 'x' });
      assert.equal(w.isError, undefined, text(w));
      await settle(100);
    }
    assert.ok(most <= limit, `${most} processes in the sandbox, limit ${limit}`);
    await assertServerAnswers({ initialize: true });
    // the old processes may still be on their way out; wait for them rather than for a time
    let left = hostProcessesOf(sbx);
    for (let i = 0; i < 50 && left >= 20; i++) {
      await settle(100);
      left = hostProcessesOf(sbx);
    }
    assert.ok(left < 20, `${left} processes survived container_initialize`);
  });

  test('memory bomb (Python)', async () => {
    const r = await run('python3 -c "$PY"; echo "rc=$?"', { env: { PY: `
x = []
while True:
    x.append(b'x' * (16 << 20))
    print(len(x) * 16, flush=True)
` }, timeout_ms: 60000 });
    assert.equal(r.timed_out, false);
    assert.match(r.stdout, /rc=137\n$/, `not killed: ${r.stdout.slice(-200)} ${r.stderr}`);
    const mb = r.stdout.trim().split('\n').slice(0, -1).map(Number);
    const most = mb.length ? mb[mb.length - 1] : 0;
    assert.ok(most < MEMORY_MB, `allocated ${most} MiB with a ${MEMORY_MB} MiB limit`);
    await assertServerAnswers();
  });

  test('memory bomb (head -c 4G /dev/zero | tail)', async () => {
    const r = await run('bash -c \'head -c 4G /dev/zero | tail > /dev/null; echo "status=${PIPESTATUS[1]}"\'', { timeout_ms: 60000 });
    assert.equal(r.timed_out, false);
    assert.equal(r.stdout, 'status=137\n', r.stderr);
    await assertServerAnswers();
  });

  test('disk filling /workspace and the root layer', async () => {
    const r = await run('dd if=/dev/zero of=/workspace/big bs=1M count=100000 2>&1 | grep -o "No space left on device"; stat -c %s /workspace/big; ' +
      'dd if=/dev/zero of=/var/big bs=1M count=100000 2>&1 | grep -o "No space left on device"; stat -c %s /var/big', { timeout_ms: 60000 });
    assert.equal(r.timed_out, false);
    const [wsErr, wsSize, rootErr, rootSize] = r.stdout.trim().split('\n');
    assert.equal(wsErr, 'No space left on device', r.stdout);
    assert.equal(rootErr, 'No space left on device', r.stdout);
    assert.ok(Number(wsSize) <= DISK_MB << 20, `wrote ${wsSize} bytes with a ${DISK_MB} MiB disk`);
    assert.ok(Number(wsSize) + Number(rootSize) <= DISK_MB << 20, `wrote ${wsSize} + ${rootSize} bytes with a ${DISK_MB} MiB disk`);
    const clean = await run('rm -f /workspace/big /var/big; df -k /workspace | tail -1');
    assert.equal(clean.exit_code, 0, both(clean));
    await assertServerAnswers();
  });

  test('/tmp and /dev/shm filling', async () => {
    const r = await run('dd if=/dev/zero of=/tmp/big bs=1M count=100000 2>&1 | grep -o "No space left on device"; stat -c %s /tmp/big; ' +
      'dd if=/dev/zero of=/dev/shm/big bs=1M count=100000 2>&1 | grep -o "No space left on device"; stat -c %s /dev/shm/big', { timeout_ms: 60000 });
    assert.equal(r.timed_out, false);
    const [tmpErr, tmpSize, shmErr, shmSize] = r.stdout.trim().split('\n');
    assert.match(tmpErr, /No space left on device/);
    assert.ok(Number(tmpSize) <= TMP_MB << 20, `/tmp took ${tmpSize} bytes`);
    assert.match(shmErr, /No space left on device/);
    assert.ok(Number(shmSize) <= MEMORY_MB << 20, `/dev/shm took ${shmSize} bytes`);
    await run('rm -f /tmp/big /dev/shm/big');
    await assertServerAnswers();
  });

  test('fd exhaustion', async () => {
    const r = await run('python3 -c "$PY"', { env: { PY: `
import errno, os, resource
fds = []
try:
    while True: fds.append(os.open('/dev/null', os.O_RDONLY))
except OSError as e: print('stopped', len(fds), errno.errorcode[e.errno])
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20)); print('raised')
except (ValueError, OSError) as e: print('refused')
` }, timeout_ms: 30000 });
    const [stopped, raised] = r.stdout.trim().split('\n');
    const m = /^stopped (\d+) EMFILE$/.exec(stopped);
    assert.ok(m, r.stdout + r.stderr);
    assert.ok(Number(m[1]) <= 4096, stopped);
    assert.equal(raised, 'refused');
    await assertServerAnswers();
  });

  test('output flood', async () => {
    const r = await run('yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 2>/dev/null | head -c 100000000; yes e 2>/dev/null | head -c 20000000 >&2', { timeout_ms: 60000 });
    assert.equal(r.timed_out, false);
    assert.equal(r.stdout_truncated, true);
    assert.equal(r.stderr_truncated, true);
    assert.equal(r.stdout_bytes, 100000000);
    assert.equal(r.stderr_bytes, 20000000);
    assert.ok(r.stdout.length < 64 << 20, `${r.stdout.length} bytes of stdout returned`);
    await assertServerAnswers();
  });

  test('a runaway process that ignores SIGTERM is killed at the timeout', async () => {
    const r = await run('trap "" TERM INT HUP; while :; do :; done', { timeout_ms: 1500 });
    assert.equal(r.timed_out, true);
    assert.equal(r.signal, 9);
    await assertServerAnswers();
  });

  test('the server printed no sanitizer report', () => {
    assertNoSanitizerReport(srv.stderr(), 'server');
    assert.equal(srv.proc.exitCode, null);
  });
});

// ---------------------------------------------------------------------------------------------
// A server started the way a shell or a service manager often does it: output appended to a log
// file (which holds the first user's token), and a descriptor inherited from its parent.

describe('escape attempts against a server whose output goes to a file', () => {
  let srv;
  let dir;
  let logPath;
  let inheritedSecret;

  before(async () => {
    dir = tempDir(`${tag}-log-`);
    const dataDir = tempDir();
    logPath = path.join(dir, 'server.log');
    const inheritedPath = path.join(dir, 'inherited.txt');
    inheritedSecret = `inherited-secret ${randomBytes(12).toString('hex')}`;
    writeFileSync(inheritedPath, `${inheritedSecret}\n`);
    const env = { ...process.env };
    for (const k of Object.keys(env))
      if (/^(SANDBOX_|EXEC_)/.test(k) || ['LISTEN', 'DATA_DIR', 'PUBLIC_URL', 'FIRST_USER', 'LOG_LEVEL'].includes(k))
        delete env[k];
    env.SANDBOX_NETWORK = 'none'; // as tests/lib/server.mjs: no test reaches past this machine
    env.ASAN_OPTIONS = env.ASAN_OPTIONS || 'detect_leaks=1:abort_on_error=1';
    const logFd = openSync(logPath, 'a');
    const inheritedFd = openSync(inheritedPath, 'r');
    const proc = spawn(BIN, ['serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
      cwd: dir, env, stdio: ['ignore', logFd, logFd, inheritedFd],
    });
    closeSync(logFd);
    closeSync(inheritedFd);
    const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
    let log = '';
    for (let i = 0; i < 600 && !/http listening addr=\S+/.test(log); i++) {
      if (proc.exitCode !== null) break;
      await settle(20);
      log = readFileSync(logPath, 'utf8');
    }
    const addr = /http listening addr=(\S+)/.exec(log)?.[1];
    assert.ok(addr, `the server did not start:\n${log}`);
    const url = `http://${addr}`;
    srv = {
      url, mcpUrl: `${url}/mcp`, dataDir, proc,
      token: /Access token:\s+(\S+)/.exec(log)?.[1],
      async stop() {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
        await exited;
        removeDataDir(dataDir);
      },
    };
    assert.match(srv.token || '', /^smcp_/, 'sanity: the first start printed the token into the log');
  });

  after(async () => {
    await srv?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("read the server's log (and the token in it) or an inherited file through /proc/1/fd", async () => {
    const r = await exec('python3 -c "$PY"', { server: srv, env: { PY: INIT_FDS_PY } });
    assert.equal(r.exit_code, 0, both(r));
    assert.ok(!r.stdout.includes(srv.token), `the admin token is readable inside:\n${r.stdout.slice(0, 2000)}`);
    assert.ok(!r.stdout.includes('http listening'), `the server log is readable inside:\n${r.stdout.slice(0, 2000)}`);
    assert.ok(!r.stdout.includes(inheritedSecret), `an inherited host file is readable inside:\n${r.stdout}`);
    assert.ok(!r.stdout.includes(dir), `the init holds host files:\n${r.stdout}`);
  });

  test("write into the server's log file through the sandbox init (ptrace)", async () => {
    const forged = `FORGED ${tag} info store first-user user=mallory`;
    const r = await exec('python3 -c "$PY" "$LINE" 1; python3 -c "$PY" "$LINE" 2', { server: srv, env: { PY: INJECT_PY, LINE: forged } });
    await settle();
    assert.ok(!readFileSync(logPath, 'utf8').includes(forged), `a sandbox process wrote into the host log file (${r.stdout.trim()})`);
  });
});
