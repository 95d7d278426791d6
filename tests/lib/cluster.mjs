// Several sandbox-mcp nodes sharing one PostgreSQL database, behind nginx as an ordinary
// round-robin load balancer, all on loopback.
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

import { cli, pgUrl, startServer, tempDir, removeDataDir } from './server.mjs';


function psql(url, sql) {
  return execFileSync('psql', ['-qAtX', '-v', 'ON_ERROR_STOP=1', '-c', `SET client_min_messages = warning; ${sql}`, url],
    { encoding: 'utf8' });
}

export async function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// nginx in front of the nodes' addresses ("127.0.0.1:port"), round-robin, streaming answers as
// they come (no buffering, so progress events pass at once). Resolves to {url, stop()}.
export async function startBalancer(addrs) {
  const dir = tempDir('smcp-lb-');
  const port = await freePort();
  const conf = `worker_processes 1;
daemon off;
error_log stderr warn;
pid ${dir}/nginx.pid;
user root;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  client_max_body_size 8m;
  upstream nodes { ${addrs.map((a) => `server ${a} max_fails=0;`).join(' ')} }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://nodes;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_buffering off;
      proxy_read_timeout 300s;
      proxy_next_upstream error timeout;
    }
  }
}
`;
  writeFileSync(path.join(dir, 'nginx.conf'), conf);
  const proc = spawn('nginx', ['-c', path.join(dir, 'nginx.conf'), '-p', dir], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr.on('data', (d) => { err += d; });
  for (let i = 0; ; i++) {
    const up = await new Promise((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); resolve(true); });
      s.on('error', () => resolve(false));
    });
    if (up) break;
    if (i > 200 || proc.exitCode !== null) throw new Error(`nginx did not start: ${err}`);
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    mcpUrl: `http://127.0.0.1:${port}/mcp`,
    stderr: () => err,
    async stop() {
      proc.kill('SIGQUIT');
      await new Promise((r) => (proc.exitCode !== null ? r() : proc.on('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// n nodes on a fresh schema of the shared database, with the same secrets. Resolves to
// {nodes, env(i), start(i), token, url, schema, stop()}; node i keeps its data directory across
// restarts (start(i) again after a kill).
export async function startCluster(n, { env = {}, args = [] } = {}) {
  const base = pgUrl();
  const schema = `cluster_${process.pid}_${randomBytes(4).toString('hex')}`;
  psql(base, `CREATE SCHEMA ${schema}`);
  const shared = {
    DATABASE_URL: `${base}&options=-csearch_path%3D${schema}`,
    CLUSTER_SECRET: randomBytes(32).toString('hex'),
    PROXY_JWT_SECRET: randomBytes(32).toString('hex'),
    NODE_HEARTBEAT_SECONDS: '1',
    NODE_LOST_SECONDS: '3',
    ...env,
  };
  const dirs = Array.from({ length: n }, () => tempDir('smcp-node-'));
  const c = {
    nodes: [],
    schema,
    env: (i) => ({ ...shared, NODE_ID: `node${i + 1}` }),
    dirs,
    async start(i) {
      const node = await startServer({ dataDir: dirs[i], env: c.env(i), args });
      c.nodes[i] = node;
      return node;
    },
    cli: (i, args) => cli([...args, '--data-dir', dirs[i]], { env: c.env(i) }),
    // every node's exit ({code, signal}), in order
    async stop() {
      const exits = [];
      for (const node of c.nodes) if (node) exits.push(await node.stop('SIGTERM', { keep: true }));
      for (const d of dirs) removeDataDir(d);
      psql(base, `DROP SCHEMA ${schema} CASCADE`);
      return exits;
    },
  };
  // the first node makes the first user and the credentials key, which the others share
  await c.start(0);
  c.token = c.nodes[0].token;
  for (let i = 1; i < n; i++) {
    mkdirSync(path.join(dirs[i], 'secrets'), { recursive: true, mode: 0o700 });
    copyFileSync(path.join(dirs[0], 'secrets', 'credentials.key'), path.join(dirs[i], 'secrets', 'credentials.key'));
    await c.start(i);
  }
  return c;
}

// The rows query gives on the cluster's database, as objects.
export function clusterRows(c, query) {
  const url = c.env(0).DATABASE_URL;
  return JSON.parse(psql(url, `WITH r AS (${query}) SELECT coalesce(json_agg(r), '[]') FROM r`));
}
