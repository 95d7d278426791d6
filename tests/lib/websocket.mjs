// A WebSocket client as RFC 6455 has one (masked text frames, the handshake's accept checked),
// over node's http: enough to open a socket, send text and read what comes back, for tests on
// Node 20, whose WebSocket is behind a flag. Resolves {status, headers, send, next, close,
// socket} once the server answered the handshake (status 101), or {status, headers, body}
// when it refused it.
import http from 'node:http';
import https from 'node:https';
import { createHash, randomBytes } from 'node:crypto';

export function openWebSocket(url, { headers = {} } = {}) {
  const u = new URL(url);
  const key = randomBytes(16).toString('base64');
  const mod = u.protocol === 'https:' || u.protocol === 'wss:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'GET',
      rejectUnauthorized: false,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': key, ...headers } });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('upgrade', (res, socket, head) => {
      const want = createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
      if (res.headers['sec-websocket-accept'] !== want) {
        socket.destroy();
        reject(new Error(`bad Sec-WebSocket-Accept ${res.headers['sec-websocket-accept']}`));
        return;
      }
      let buf = Buffer.from(head);
      const messages = [];
      const waiting = [];
      let closed = false;
      const wake = () => {
        while (waiting.length && (messages.length || closed)) {
          const w = waiting.shift();
          if (messages.length) w.resolve(messages.shift()); else w.reject(new Error('websocket closed'));
        }
      };
      socket.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        for (;;) {
          if (buf.length < 2) break;
          let len = buf[1] & 127;
          let off = 2;
          if (len === 126) { if (buf.length < 4) break; len = buf.readUInt16BE(2); off = 4; }
          if (buf.length < off + len) break;
          const op = buf[0] & 15;
          const data = buf.subarray(off, off + len).toString();
          buf = buf.subarray(off + len);
          if (op === 1) messages.push(data);
          if (op === 8) closed = true;
        }
        wake();
      });
      const end = () => { closed = true; wake(); };
      socket.on('close', end);
      socket.on('error', end);
      resolve({
        status: 101, headers: res.headers, socket,
        get closed() { return closed; },
        send(text) {
          const data = Buffer.from(text);
          const mask = randomBytes(4);
          const head2 = data.length < 126 ? Buffer.from([0x81, 0x80 | data.length])
            : Buffer.from([0x81, 0x80 | 126, data.length >> 8, data.length & 255]);
          const body = Buffer.from(data.map((b, i) => b ^ mask[i % 4]));
          socket.write(Buffer.concat([head2, mask, body]));
        },
        next(ms = 10000) {
          return new Promise((res2, rej2) => {
            const w = { resolve: res2, reject: rej2 };
            const t = setTimeout(() => { waiting.splice(waiting.indexOf(w), 1); rej2(new Error('no message in time')); }, ms);
            w.resolve = (v) => { clearTimeout(t); res2(v); };
            w.reject = (e) => { clearTimeout(t); rej2(e); };
            waiting.push(w);
            wake();
          });
        },
        close() { socket.destroy(); },
      });
    });
    req.end();
  });
}
