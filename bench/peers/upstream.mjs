// Upstream for bench/egress.mjs: plain HTTP and HTTPS on random loopback ports, in a process of its
// own so that serving a gigabyte does not stall the benchmark's client. GET /big?n=N answers N
// bytes from one preallocated 1 MiB buffer (written again and again, so the upstream costs no more
// than it must); GET /small answers "ok\n". Reads {"cert": PEM, "key": PEM} on stdin and prints
// "listening http=<port> https=<port>" on stdout.
import http from 'node:http';
import https from 'node:https';

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { cert, key } = JSON.parse(input);
const MiB = 1 << 20;
const chunk = Buffer.alloc(MiB, 120);

function handle(req, res) {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/small') {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': 3 });
    return res.end('ok\n');
  }
  let left = Number(u.searchParams.get('n') || 0);
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': left });
  const more = () => {
    while (left > 0) {
      const n = Math.min(left, MiB);
      left -= n;
      if (!res.write(n === MiB ? chunk : chunk.subarray(0, n))) return res.once('drain', more);
    }
    res.end();
  };
  more();
}

const plain = http.createServer(handle);
const tls = https.createServer({ cert, key }, handle);
await Promise.all([
  new Promise((r) => plain.listen(0, '127.0.0.1', r)),
  new Promise((r) => tls.listen(0, '127.0.0.1', r)),
]);
console.log(`listening http=${plain.address().port} https=${tls.address().port}`);
