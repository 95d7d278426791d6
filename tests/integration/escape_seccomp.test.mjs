// The seccomp allow list and the /proc masks, from inside a sandbox: each test tries one way
// around the filter (io_uring, socket families, numbers newer than the list, foreign ABIs, clone
// and unshare, personality, the calls docs/SANDBOX.md compares with Docker's default profile) or
// one masked /proc path, and the real work a sandbox is for (node,
// python, git, gcc and make, threads, ip) must still run. npm and pip installs need a network,
// which sandboxes do not have yet; they are not tried here.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';

import { startServer, rpc } from '../lib/server.mjs';
import { assertNoSanitizerReport } from '../lib/http.mjs';

let main;
let nextId = 1;

async function tool(srv, name, args = {}) {
  const r = await rpc(srv, { jsonrpc: '2.0', id: nextId++, method: 'tools/call',
    params: { name, arguments: args } }, { token: srv.token });
  assert.equal(r.status, 200, r.text);
  assert.ok(r.body && r.body.result, r.text);
  return r.body.result;
}

// Run a shell command in the sandbox; returns the structuredContent.
async function exec(command, { env, timeout_ms = 120000 } = {}) {
  const res = await tool(main, 'container_exec', { command, timeout_ms, ...(env ? { env } : {}) });
  assert.equal(res.isError, undefined, JSON.stringify(res));
  return res.structuredContent;
}

// Run a Python program inside (passed in the environment, so no quoting is involved); the shell
// reports its status last, as "rc=N", so a process killed by a signal shows as 128+N.
function py(code, env = {}) {
  return exec('python3 -c "$PY"; echo "rc=$?"', { env: { PY: code, ...env } });
}

// Compile a C program (source in the environment) with gcc inside and run it.
function cprog(src, flags = '') {
  return exec(`mkdir -p /tmp/c && printf '%s' "$SRC" > /tmp/c/p.c && gcc -O1 ${flags} -o /tmp/c/p /tmp/c/p.c && /tmp/c/p; echo "rc=$?"`,
    { env: { SRC: src } });
}

const both = (r) => `${r.stdout}${r.stderr}`;

// Raw system calls through libc's syscall(); each line "name result errno".
const SYSCALLS_PY = `
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for name, nr, args in json.loads(os.environ['CALLS']):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a) for a in args])
    e = ctypes.get_errno()
    print(name, r, errno.errorcode.get(e, e) if r == -1 else 'OK', flush=True)
`;
async function syscalls(calls) {
  const r = await py(SYSCALLS_PY, { CALLS: JSON.stringify(calls) });
  assert.match(r.stdout, /rc=0\n$/, both(r));
  const out = {};
  for (const line of r.stdout.trim().split('\n').slice(0, -1)) {
    const [name, res, err] = line.split(' ');
    out[name] = { res: Number(res), err };
  }
  return out;
}

describe('seccomp allow list and /proc masks', () => {
  before(async () => { main = await startServer(); });
  after(async () => { await main?.stop(); });

  test('the sandbox has the tools these tests use', async () => {
    const r = await exec('for t in sh python3 gcc make node git setarch; do command -v $t >/dev/null || echo "missing $t"; done; uname -m');
    assert.equal(r.stdout, 'x86_64\n', both(r));
  });

  // ---------- io_uring ----------

  test('io_uring_setup is refused, so IORING_OP_SOCKET cannot make an AF_VSOCK socket', async () => {
    const r = await cprog(`
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    int fd = syscall(__NR_io_uring_setup, 4, &p);
    if (fd < 0) {
        printf("setup %s\\n", strerrorname_np(errno));
        return 0;
    }
    printf("setup ok\\n");
    size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (cq_sz > sq_sz) sq_sz = cq_sz;
    char *sq = mmap(0, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    char *cq = (p.features & IORING_FEAT_SINGLE_MMAP) ? sq
               : mmap(0, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    unsigned *tail = (unsigned *)(sq + p.sq_off.tail), mask = *(unsigned *)(sq + p.sq_off.ring_mask);
    unsigned *array = (unsigned *)(sq + p.sq_off.array), i = *tail & mask;
    memset(&sqes[i], 0, sizeof(sqes[i]));
    sqes[i].opcode = IORING_OP_SOCKET;
    sqes[i].fd = AF_VSOCK;
    sqes[i].off = SOCK_STREAM;
    array[i] = i;
    __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
    if (syscall(__NR_io_uring_enter, fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) {
        printf("enter %s\\n", strerrorname_np(errno));
        return 0;
    }
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    unsigned head = *(unsigned *)(cq + p.cq_off.head), cmask = *(unsigned *)(cq + p.cq_off.ring_mask);
    int res = cqes[head & cmask].res;
    if (res >= 0)
        printf("AF_VSOCK socket %d\\n", res);
    else
        printf("socket op %s\\n", strerrorname_np(-res));
    return 0;
}
`);
    assert.equal(r.stdout, 'setup EPERM\nrc=0\n', both(r));
    const s = await syscalls([['io_uring_setup', 425, [4, 0]], ['io_uring_enter', 426, [0, 1, 0, 0, 0, 0]],
                              ['io_uring_register', 427, [0, 0, 0, 0]]]);
    assert.equal(s.io_uring_setup.err, 'EPERM');
    assert.equal(s.io_uring_enter.err, 'EPERM');
    assert.equal(s.io_uring_register.err, 'EPERM');
  });

  // ---------- sockets ----------

  test('socket(AF_VSOCK) is refused, also with garbage in the upper half of the family', async () => {
    // the kernel reads an int: 1 << 32 | AF_VSOCK is AF_VSOCK to it
    const s = await syscalls([['vsock', 41, [40, 1, 0]], ['vsock_high', 41, [2 ** 32 + 40, 1, 0]],
                              ['vsock_dgram', 41, [40, 2, 0]], ['alg', 41, [38, 5, 0]]]);
    assert.deepEqual(s, { vsock: { res: -1, err: 'EPERM' }, vsock_high: { res: -1, err: 'EPERM' },
                          vsock_dgram: { res: -1, err: 'EPERM' }, alg: { res: -1, err: 'EPERM' } });
  });

  test('netlink route sockets work: ip addr, and RTM_GETLINK from Python', async (t) => {
    const r = await py(`
import socket, struct
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
s.bind((0, 0))
# nlmsghdr + ifinfomsg: RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP
s.send(struct.pack('=IHHII', 32, 18, 0x301, 1, 0) + struct.pack('=BxHiII', 0, 0, 0, 0, 0))
names, done = [], False
while not done:
    data, off = s.recv(65536), 0
    while off < len(data):
        ln, typ = struct.unpack_from('=IH', data, off)
        if typ == 3:
            done = True
            break
        if typ == 16:
            a = off + 32
            while a < off + ln:
                alen, atype = struct.unpack_from('=HH', data, a)
                if atype == 3:
                    names.append(data[a + 4:a + alen].rstrip(b'\\0').decode())
                a += (alen + 3) & ~3
        off += (ln + 3) & ~3
print('links', ' '.join(names))
print('if_nameindex', socket.if_nameindex())
`);
    assert.equal(r.stdout, "links lo\nif_nameindex [(1, 'lo')]\nrc=0\n", both(r));
    const which = await exec('command -v ip || true');
    if (!which.stdout.trim()) {
      t.skip('iproute2 (ip) is not installed on this host, so not in the sandbox');
      return;
    }
    const ip = await exec('ip addr; echo "rc=$?"');
    assert.match(ip.stdout, /^1: lo: .*\n(.*\n)*\s+inet 127\.0\.0\.1\/8 /, both(ip));
    assert.match(ip.stdout, /rc=0\n$/, both(ip));
  });

  test('netlink other than routing and socket diagnostics is refused (netfilter, uevents, audit, generic)', async () => {
    const r = await py(`
import errno, socket
for proto, name in ((12, 'netfilter'), (15, 'kobject_uevent'), (9, 'audit'), (16, 'generic'), (6, 'xfrm')):
    for typ, tname in ((socket.SOCK_RAW, 'raw'), (socket.SOCK_DGRAM, 'dgram')):
        try:
            socket.socket(socket.AF_NETLINK, typ, proto); print(name, tname, 'ESCAPED')
        except OSError as e: print(name, tname, errno.errorcode[e.errno])
for proto, name in ((0, 'route'), (4, 'sock_diag')):
    socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, proto).close(); print(name, 'OK')
`);
    assert.equal(r.stdout, ['netfilter', 'kobject_uevent', 'audit', 'generic', 'xfrm']
      .map((n) => `${n} raw EPERM\n${n} dgram EPERM\n`).join('') + 'route OK\nsock_diag OK\nrc=0\n', both(r));
  });

  // ---------- numbers newer than the list, foreign ABIs ----------

  test('a number beyond the list gives ENOSYS, so libc falls back', async () => {
    // 468 and 469 are file_getattr and file_setattr (Linux 6.17): the kernel has them, the list
    // (and the libseccomp it is resolved with) does not. 1000 is no system call yet. clone3 is on
    // the list and answers ENOSYS too.
    const s = await syscalls([['nr1000', 1000, []], ['nr469', 469, [0, 0, 0, 0, 0]],
                              ['nr468', 468, [0, 0, 0, 0, 0]], ['clone3', 435, [0, 0]]]);
    assert.deepEqual(s, { nr1000: { res: -1, err: 'ENOSYS' }, nr469: { res: -1, err: 'ENOSYS' },
                          nr468: { res: -1, err: 'ENOSYS' }, clone3: { res: -1, err: 'ENOSYS' } });
  });

  // A foreign ABI kills the whole process, not only the thread that used it.
  const FOREIGN_IN_THREAD = (call) => `
import ctypes, mmap, threading, time
libc = ctypes.CDLL(None, use_errno=True)
${call}
t = threading.Thread(target=lambda: print('call returned', f(), flush=True))
t.start()
t.join(3)
print('process survived', flush=True)
`;

  test('an i386 int 0x80 getpid from a 64-bit process is refused (the process is killed)', async () => {
    const r = await py(FOREIGN_IN_THREAD(`
# push rbx; mov eax, 20 (i386 getpid); int 0x80; pop rbx; ret
code = bytes([0x53, 0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0x5b, 0xc3])
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(code)
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
`));
    // SIGSYS from seccomp, or SIGSEGV from a kernel without ia32 emulation
    assert.match(r.stdout, /^rc=(159|139)\n$/, both(r));
  });

  test('an x32 system call (the x32 bit) is refused (the process is killed)', async () => {
    const r = await py(FOREIGN_IN_THREAD(`
libc.syscall.restype = ctypes.c_long
f = lambda: libc.syscall(ctypes.c_long(0x40000000 | 39))  # x32 getpid
`));
    assert.equal(r.stdout, 'rc=159\n', both(r));
  });

  // ---------- namespaces and personality ----------

  test('clone with CLONE_NEWUSER (and every namespace flag) is refused', async () => {
    const flags = { newuser: 0x10000000, newns: 0x20000, newpid: 0x20000000, newnet: 0x40000000,
                    newuts: 0x4000000, newipc: 0x8000000, newcgroup: 0x2000000 };
    const s = await syscalls(Object.entries(flags).map(([n, f]) => [n, 56, [f | 17, 0, 0, 0, 0]]));
    for (const n of Object.keys(flags)) assert.deepEqual(s[n], { res: -1, err: 'EPERM' }, n);
    // a plain fork through clone still works
    const r = await py(`
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.syscall(56, 17, 0, 0, 0, 0)
if pid == 0: os._exit(7)
print('child', os.WEXITSTATUS(os.waitpid(pid, 0)[1]))
`);
    assert.equal(r.stdout, 'child 7\nrc=0\n', both(r));
  });

  test('unshare is refused', async () => {
    const s = await syscalls([['user', 272, [0x10000000]], ['mnt', 272, [0x20000]], ['files', 272, [0x400]],
                              ['time', 272, [0x80]]]);
    for (const n of ['user', 'mnt', 'files', 'time']) assert.deepEqual(s[n], { res: -1, err: 'EPERM' }, n);
    const r = await exec('unshare -U true; echo "rc=$?"');
    assert.equal(r.stdout, 'rc=1\n', both(r));
  });

  test('personality with a forbidden value (ASLR off, READ_IMPLIES_EXEC) is refused', async () => {
    const r = await py(`
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.personality.argtypes = [ctypes.c_ulong]
print('query', libc.personality(0xffffffff))
for name, value in (('addr_no_randomize', 0x0040000), ('read_implies_exec', 0x0400000), ('linux', 0)):
    r = libc.personality(value)
    print(name, r, errno.errorcode.get(ctypes.get_errno()) if r == -1 else 'OK')
`);
    assert.equal(r.stdout, 'query 0\naddr_no_randomize -1 EPERM\nread_implies_exec -1 EPERM\nlinux 0 OK\nrc=0\n', both(r));
    const s = await exec('setarch "$(uname -m)" -R cat /proc/self/personality; echo "rc=$?"');
    assert.match(s.stdout, /rc=1\n$/, both(s));
    assert.match(s.stderr, /Operation not permitted/, both(s));
  });

  test('personality takes Docker\'s values (PER_LINUX32, UNAME26, both) and refuses them with any other flag', async () => {
    const r = await py(`
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
libc.personality.argtypes = [ctypes.c_ulong]
def put(v):
    ctypes.set_errno(0)
    r = libc.personality(v)
    return errno.errorcode.get(ctypes.get_errno()) if r == -1 else 'OK'
print('uname26', put(0x0020000), os.uname().release.startswith('2.6.'), put(0))
print('linux32', put(0x0000008), os.uname().machine, put(0))
print('both', put(0x0020008), os.uname().release.startswith('2.6.'), os.uname().machine, put(0))
for name, v in (('linux32_no_randomize', 0x0040008), ('uname26_read_implies_exec', 0x0420000),
                ('mmap_page_zero', 0x0100000), ('addr_limit_32bit', 0x0800000), ('bsd', 0x6)):
    print(name, put(v))
print('now', libc.personality(0xffffffff), os.uname().machine)
`);
    assert.equal(r.stdout, 'uname26 OK True OK\nlinux32 OK i686 OK\nboth OK True i686 OK\n'
      + 'linux32_no_randomize EPERM\nuname26_read_implies_exec EPERM\nmmap_page_zero EPERM\n'
      + 'addr_limit_32bit EPERM\nbsd EPERM\nnow 0 x86_64\nrc=0\n', both(r));
  });

  // docs/SANDBOX.md, "Compared with Docker's default profile": the calls Docker grants only with a
  // capability it does not give by default (CAP_SYS_NICE, CAP_SYS_PTRACE), those not on its list,
  // and those it allows that the sandbox refuses deliberately. Numbers of x86_64.
  test('NUMA memory policy, move_pages, sysfs, ustat, kcmp and the other calls the table lists as refused are refused', async () => {
    const calls = [['get_mempolicy', 239], ['set_mempolicy', 238], ['mbind', 237], ['move_pages', 279],
      ['migrate_pages', 256], ['sysfs', 139, [2, 0, 0]], ['ustat', 136], ['kcmp', 312], ['pidfd_getfd', 438],
      ['process_madvise', 440], ['adjtimex', 159], ['clock_adjtime', 305], ['name_to_handle_at', 303],
      ['process_vm_writev', 311], ['chroot', 161], ['set_mempolicy_home_node', 450]];
    const s = await syscalls(calls.map(([n, nr, args]) => [n, nr, args ?? [0, 0, 0, 0, 0, 0]]));
    for (const [n] of calls) {
      // set_mempolicy_home_node lies above the highest number an older libseccomp knows: ENOSYS
      const want = n === 'set_mempolicy_home_node' ? /^(EPERM|ENOSYS)$/ : /^EPERM$/;
      assert.equal(s[n]?.res, -1, `${n}: ${JSON.stringify(s[n])}`);
      assert.match(s[n].err, want, n);
    }
    // process_vm_readv is allowed, as by Docker (it reads what ptrace could); its writing twin is not
    const r = await cprog(`
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
int main(void)
{
    char src[8] = "sandbox", dst[8] = "", w[8] = "written";
    struct iovec l = {dst, sizeof(dst)}, r = {src, sizeof(src)}, wl = {w, sizeof(w)};
    ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
    printf("readv %zd %s\\n", n, n < 0 ? strerrorname_np(errno) : dst);
    n = process_vm_writev(getpid(), &wl, 1, &r, 1, 0);
    printf("writev %zd %s %s\\n", n, n < 0 ? strerrorname_np(errno) : "OK", src);
    return 0;
}
`);
    assert.equal(r.stdout, 'readv 8 sandbox\nwritev -1 EPERM sandbox\nrc=0\n', both(r));
  });

  // ---------- real work ----------

  test('python: threads, subprocesses, sockets, sqlite', async () => {
    const r = await py(`
import concurrent.futures, os, socket, sqlite3, subprocess, threading
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    print('threads', sum(ex.map(lambda i: sum(range(i * 1000)), range(32))))
print('subprocess', subprocess.run(['sh', '-c', 'echo $((6 * 7))'], capture_output=True, text=True).stdout.strip())
a, b = socket.socketpair()
a.sendall(b'ping'); print('socketpair', b.recv(4).decode())
srv = socket.create_server(('127.0.0.1', 0)); c = socket.create_connection(srv.getsockname())
conn, _ = srv.accept(); c.sendall(b'tcp'); print('tcp', conn.recv(3).decode())
db = sqlite3.connect('/tmp/t.db'); db.execute('create table if not exists t(x)'); db.execute('insert into t values (1)')
print('sqlite', db.execute('select count(*) > 0 from t').fetchone()[0])
`);
    assert.equal(r.stdout, 'threads 5207752000\nsubprocess 42\nsocketpair ping\ntcp tcp\nsqlite 1\nrc=0\n', both(r));
  });

  test('node: worker threads, child processes, an HTTP round trip, network interfaces', async () => {
    const r = await exec('node -e "$JS"; echo "rc=$?"', { env: { JS: `
const { Worker } = require('node:worker_threads');
const http = require('node:http');
const os = require('node:os');
const { execSync } = require('node:child_process');
(async () => {
  const sums = await Promise.all([1, 2, 3, 4].map((n) => new Promise((resolve, reject) => {
    const w = new Worker('const { parentPort, workerData } = require("node:worker_threads"); parentPort.postMessage(workerData * 10);', { eval: true, workerData: n });
    w.on('message', resolve); w.on('error', reject);
  })));
  console.log('workers', sums.join(','));
  console.log('child', execSync('echo hi').toString().trim());
  const srv = http.createServer((req, res) => res.end('pong')).listen(0, '127.0.0.1');
  await new Promise((r) => srv.on('listening', r));
  const body = await (await fetch('http://127.0.0.1:' + srv.address().port + '/')).text();
  console.log('http', body);
  srv.close();
  console.log('interfaces', Object.keys(os.networkInterfaces()).join(','));
})().catch((e) => { console.error(e); process.exit(1); });
` } });
    assert.equal(r.stdout, 'workers 10,20,30,40\nchild hi\nhttp pong\ninterfaces lo\nrc=0\n', both(r));
  });

  test('git: init, commit, log', async () => {
    const r = await exec('rm -rf /tmp/g && git init -q /tmp/g && cd /tmp/g && echo hello > a.txt && git add a.txt && ' +
      'git -c user.name=t -c user.email=t@example.com commit -q -m first && git log --oneline | cut -d" " -f2-; ' +
      'git status --porcelain; echo "rc=$?"', { env: { HOME: '/tmp' } });
    assert.equal(r.stdout, 'first\nrc=0\n', both(r));
  });

  test('gcc and make build and run a multi-threaded C program', async () => {
    const r = await exec('rm -rf /tmp/m && mkdir -p /tmp/m && cd /tmp/m && printf "%s" "$SRC" > t.c && printf "%s" "$MK" > Makefile && ' +
      'make -s && ./t; echo "rc=$?"', { env: { MK: 't: t.c\n\t$(CC) -O2 -pthread -o $@ $<\n', SRC: `
#include <pthread.h>
#include <stdio.h>
static long sums[8];
static void *work(void *arg)
{
    long i = (long)arg, s = 0;
    for (long k = 0; k < 1000000; k++)
        s += k % (i + 2);
    sums[i] = s;
    return NULL;
}
int main(void)
{
    pthread_t t[8];
    for (long i = 0; i < 8; i++)
        if (pthread_create(&t[i], NULL, work, (void *)i) != 0)
            return 1;
    long total = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        total += sums[i];
    }
    printf("threads %ld\\n", total);
    return 0;
}
` } });
    assert.equal(r.stdout, 'threads 17999988\nrc=0\n', both(r));
  });

  // ---------- /proc ----------

  test('/proc masks: acpi, asound, scsi, interrupts, latency_stats and the rest hide what the host has', async () => {
    const paths = ['acpi', 'asound', 'interrupts', 'kallsyms', 'kcore', 'keys', 'latency_stats', 'sched_debug',
                   'scsi', 'timer_list', 'timer_stats'];
    const r = await exec(`for p in ${paths.join(' ')}; do f=/proc/$p; ` +
      'if [ -d $f ]; then echo "$p dir $(stat -f -c %T $f) $(ls -A $f | wc -l) $(touch $f/x 2>&1 | grep -c Read-only)"; ' +
      'elif [ -e $f ]; then echo "$p file $(stat -c %t:%T $f) $(head -c 4096 $f | wc -c)"; else echo "$p absent"; fi; done');
    const seen = Object.fromEntries(r.stdout.trim().split('\n').map((l) => [l.split(' ')[0], l]));
    let masked = 0;
    for (const p of paths) {
      // the sandbox's /proc is a procfs of the same kernel: what the host has, it has too
      const host = `/proc/${p}`;
      if (!existsSync(host)) {
        assert.equal(seen[p], `${p} absent`, both(r));
        continue;
      }
      masked++;
      if (statSync(host).isDirectory()) assert.equal(seen[p], `${p} dir tmpfs 0 1`, `${p} is not masked: ${both(r)}`);
      else assert.equal(seen[p], `${p} file 1:3 0`, `${p} is not masked: ${both(r)}`);
    }
    assert.ok(masked >= 2, `only ${masked} of the paths exist on this host`); // interrupts always does
  });

  test('the server printed no sanitizer report', () => {
    assertNoSanitizerReport(main.stderr(), 'server');
    assert.equal(main.proc.exitCode, null);
  });
});
