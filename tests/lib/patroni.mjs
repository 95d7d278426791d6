// A PostgreSQL primary and a streaming replica managed by Patroni (Debian's patroni, with one
// etcd, Debian's etcd-server, as its store), on loopback ports, in a directory of its own under
// /var/tmp. Synchronous mode: a commit is acknowledged once the replica has it, so a failover
// loses nothing committed. For tests of a failover: kill(name) takes a whole node away (Patroni
// and its PostgreSQL, SIGKILL), and the other is promoted once the leader's key expires (ttl 10 s).
import { spawn, execFileSync } from 'node:child_process';
import { chownSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';

const freePort = () => new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
});

async function until(cond, what, ms) {
  const t0 = Date.now();
  for (;;) {
    if (await cond()) return;
    if (Date.now() - t0 > ms) throw new Error(`patroni: not met in time: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function config(dir, bin, etcdPort, name, rest, port) {
  return `scope: smcp
name: ${name}
restapi:
  listen: 127.0.0.1:${rest}
  connect_address: 127.0.0.1:${rest}
etcd3:
  hosts: 127.0.0.1:${etcdPort}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 300
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 5
        max_replication_slots: 5
  initdb:
  - encoding: UTF8
  - locale: C
  - no-sync
  pg_hba:
  - local all all trust
  - host replication replicator 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:${port}
  connect_address: 127.0.0.1:${port}
  data_dir: ${dir}/${name}
  bin_dir: ${bin}
  pgpass: ${dir}/${name}.pgpass
  authentication:
    replication:
      username: replicator
      password: replicator
    superuser:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: ${dir}
    fsync: "off"
`;
}

// Resolves {url (libpq, both hosts, read-write sessions only), nodes {n1, n2: {rest, port}},
// primary() (the name Patroni says leads), kill(name), stop(), log(name)} once n1 leads and n2
// is its synchronous standby.
export async function startPatroni() {
  const dir = `/var/tmp/smcp-patroni-${process.pid}`;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }));
  chownSync(dir, uid, gid);
  const bin = execFileSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1'], { encoding: 'utf8' }).trim();
  const [etcdPort, peerPort, r1, r2, p1, p2] = await Promise.all([...Array(6)].map(freePort));
  const logs = { etcd: '' };
  const etcd = spawn('etcd', ['--name', 'e1', '--data-dir', `${dir}/etcd`,
    '--listen-client-urls', `http://127.0.0.1:${etcdPort}`, '--advertise-client-urls', `http://127.0.0.1:${etcdPort}`,
    '--listen-peer-urls', `http://127.0.0.1:${peerPort}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${peerPort}`,
    '--initial-cluster', `e1=http://127.0.0.1:${peerPort}`, '--log-level', 'warn'], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  etcd.stderr.on('data', (d) => { logs.etcd = (logs.etcd + d).slice(-20000); });
  const nodes = { n1: { rest: r1, port: p1 }, n2: { rest: r2, port: p2 } };
  const procs = {};
  const start = (name) => {
    const n = nodes[name];
    writeFileSync(`${dir}/${name}.yml`, config(dir, bin, etcdPort, name, n.rest, n.port));
    logs[name] = '';
    // its working directory its own: Patroni's children (Python's multiprocessing) change into
    // their parent's, which user postgres may not enter (a checkout under /tmp, mode 0700)
    const p = spawn('runuser', ['-u', 'postgres', '--', 'patroni', `${dir}/${name}.yml`], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    // its first lines (how its bootstrap began) and its last
    const keep = (d) => {
      const all = logs[name] + d;
      logs[name] = all.length <= 24000 ? all : `${all.slice(0, 8000)}\n[...]\n${all.slice(-16000)}`;
    };
    p.stdout.on('data', keep);
    p.stderr.on('data', keep);
    procs[name] = p;
  };
  const rest = async (name, path) => {
    try { return await fetch(`http://127.0.0.1:${nodes[name].rest}/${path}`); } catch { return null; }
  };
  const pids = (pattern) => execFileSync('sh', ['-c', `pgrep -f '${pattern}' || true`], { encoding: 'utf8' })
    .trim().split('\n').filter(Boolean).map(Number);
  const kill = (name) => {
    let postmaster = null;
    try { postmaster = Number(readFileSync(`${dir}/${name}/postmaster.pid`, 'utf8').split('\n')[0]); } catch { /* not running */ }
    for (const pid of pids(`patroni ${dir}/${name}.yml`)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    if (postmaster) try { process.kill(postmaster, 'SIGKILL'); } catch { /* gone */ }
  };
  const stop = async () => {
    for (const name of Object.keys(procs)) kill(name);
    for (const pid of pids(`${dir}/`)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    etcd.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 200));
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', () => {
    for (const pid of pids(`${dir}/`)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
    try { etcd.kill('SIGKILL'); } catch { /* gone */ }
    rmSync(dir, { recursive: true, force: true });
  });
  try {
    start('n1');
    await until(async () => (await rest('n1', 'primary'))?.status === 200, 'n1 leads', 120000);
    start('n2');
    await until(async () => {
      const c = await (await rest('n1', 'cluster'))?.json().catch(() => null);
      return c?.members?.some((m) => m.name === 'n2' && m.role === 'sync_standby') && (await rest('n2', 'replica'))?.status === 200;
    }, 'n2 replicates as the synchronous standby', 120000);
  } catch (e) {
    await stop();
    throw new Error(`${e.message}\n--- n1 ---\n${logs.n1}\n--- n2 ---\n${logs.n2 ?? ''}\n--- etcd ---\n${logs.etcd.slice(-4000)}`);
  }
  return {
    url: `postgresql://127.0.0.1:${p1},127.0.0.1:${p2}/postgres?user=postgres&target_session_attrs=read-write`,
    nodes,
    async primary() {
      for (const name of Object.keys(nodes)) if ((await rest(name, 'primary'))?.status === 200) return name;
      return null;
    },
    kill,
    stop,
    log: (name) => logs[name],
  };
}
