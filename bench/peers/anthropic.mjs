// Upstream for bench/proxy.mjs: the tests' fake Anthropic Messages API (tests/lib/fake-anthropic.mjs)
// on a random loopback port, in a process of its own so that the benchmark's client and the
// upstream each have their own descriptors (10,000 held streams are 10,000 sockets on each side)
// and their own event loop. A body with "hold" starts a stream and keeps it open; "stream" sends
// a whole short stream; anything else gets a plain JSON reply. Prints "listening <url>" on
// stdout, then takes one command a line on stdin and answers each with a line:
//   held   -> "held N": streams held now
//   ping   -> "pinged N": an SSE ping event written to every held stream
//   end    -> "ended N": the rest of the events written to every held stream, which then ends
import { createInterface } from 'node:readline';
import { startFake, messageEvents, messageJson } from '../../tests/lib/fake-anthropic.mjs';

const small = JSON.stringify(messageJson());
const first = messageEvents()[0];
const rest = messageEvents().slice(1).join('');
const holds = new Set();
const fake = await startFake((req, res, body) => {
  fake.requests.length = 0; // the tests' record of every request is not wanted here
  if (body.includes('"hold"')) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(first);
    holds.add(res);
    res.on('close', () => holds.delete(res));
    return;
  }
  if (body.includes('"stream"')) {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of messageEvents()) res.write(e);
    res.end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(small) });
  res.end(small);
});
console.log(`listening ${fake.url}`);

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = line.trim();
  if (cmd === 'held') console.log(`held ${holds.size}`);
  else if (cmd === 'ping') {
    for (const h of holds) h.write('event: ping\ndata: {"type":"ping"}\n\n');
    console.log(`pinged ${holds.size}`);
  } else if (cmd === 'end') {
    const n = holds.size;
    for (const h of [...holds]) h.end(rest);
    holds.clear();
    console.log(`ended ${n}`);
  }
}
await fake.close();
