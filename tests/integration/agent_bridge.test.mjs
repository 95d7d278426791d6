// The agent bridge and its keeper (sandbox-agent and sandbox-keeper, src/sandbox/helper/agent.c
// and keeper.c), run directly with the real OpenCode and the fake Anthropic API: a run that goes
// on with a session whose earlier prompt is not over. In a server, a run is stopped (cancelled,
// timed out) by killing its bridge, the keeper then aborts the session's prompt, and the next run
// of the session may start at once: its bridge must neither take the earlier prompt's end (its
// MessageAbortedError, its idle) for its own, nor wait behind a prompt still going, nor have its
// own prompt aborted by the keeper for the bridge that went.
//
// Here the earlier run's bridge is stopped with SIGSTOP instead, so that its prompt is still
// going when the next bridge comes (the keeper has not seen it go): the next bridge has to end
// that prompt itself, and its end comes on the next bridge's event stream. Everything runs in a
// network namespace of its own with only loopback (the test file again, as a child process).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { createInterface } from 'node:readline';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inEmptyNetns } from '../lib/egress.mjs';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..', '..');
const HELPER = path.join(root, process.env.BUILD || 'build', 'sandbox-helper');
const OPENCODE = path.join(root, 'src/runs/opencode/node_modules/opencode-ai/bin/opencode.exe');
const MODEL = 'anthropic/claude-test';

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

// In the child: the fake, then bridges on one keeper; prints what each bridge did.
async function child() {
  const { startFake, agentRouter } = await import('../lib/fake-anthropic.mjs');
  const { tempDir } = await import('../lib/server.mjs');
  const { until } = await import('../lib/runs.mjs');
  const fake = await startFake();
  const router = agentRouter();
  fake.handle(router);
  const home = tempDir('smcp-bridge-');
  const work = path.join(home, 'work');
  mkdirSync(work);
  const port = String(await freePort());
  const config = {
    $schema: 'https://opencode.ai/config.json', autoupdate: false, snapshot: false, share: 'disabled',
    enabled_providers: ['anthropic'],
    provider: { anthropic: { npm: '@ai-sdk/anthropic', options: { baseURL: `${fake.url}/v1`, apiKey: 'sk-fake' },
      models: { 'claude-test': {} } } },
    permission: { edit: 'allow', bash: 'allow' },
  };
  const env = { PATH: process.env.PATH, HOME: home, OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
    OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_AUTOUPDATE: '1', OPENCODE_DISABLE_SHARE: '1',
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1' };
  // One bridge: `sandbox-agent OPENCODE PORT IDLE_S MODEL [SESSION]`, the task on stdin. The
  // keeper stops the server a second after the last bridge went.
  const bridges = [];
  const bridge = (task, session) => {
    const proc = spawn(HELPER, [OPENCODE, port, '1', MODEL, ...(session ? [session] : [])],
      { argv0: 'sandbox-agent', cwd: work, env, stdio: ['pipe', 'pipe', 'pipe'] });
    const b = { proc, out: '', err: '' };
    proc.stdout.on('data', (d) => { b.out += d; });
    proc.stderr.on('data', (d) => { b.err += d; });
    b.exit = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
    proc.stdin.end(task);
    bridges.push(b);
    return b;
  };
  // A bridge's end; one that never comes (a bridge waiting behind a prompt that is not over)
  // is reported as such after far longer than any answer of the fake takes.
  const ended = (b) => Promise.race([b.exit,
    new Promise((resolve) => { setTimeout(() => resolve({ hung: true }), 300000).unref(); })]);
  const lines = (b) => b.out.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const seen = (b) => ({ exit: null, types: lines(b).map((l) => l.type),
    texts: lines(b).filter((l) => l.type === 'text').map((l) => l.part.text),
    errors: lines(b).filter((l) => l.type === 'error').map((l) => l.error?.name), err: b.err });
  // The keeper (a process of its own, in a session of its own): gone once it has stopped the
  // server and exited. (Not asked on its socket: a connection there is a bridge to it, and keeps
  // it.)
  const keeperGone = () => until(() => !readdirSync('/proc').some((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'latin1').startsWith(`sandbox-keeper\0${port}\0`);
    } catch {
      return false;
    }
  }), 'the keeper stopped', 120000);
  const found = {};
  try {
    // 1. a run whose model request hangs, in a new session; its bridge then stops (SIGSTOP):
    // its connection to the keeper stays, so the keeper does not abort its prompt
    const held = router.add('bridge-held', [{ hold: true, text: 'Never sent.' }]);
    const first = bridge('bridge-held: wait for the model');
    await held.waitHeld();
    await until(() => /session (ses_\w+)/.test(first.err), 'the first bridge named its session');
    const session = first.err.match(/session (ses_\w+)/)[1];
    first.proc.kill('SIGSTOP');

    // 2. the next run of the session: its bridge ends the earlier prompt, takes none of that
    // prompt's end for its own, and its own prompt is answered
    const nextScript = router.add('bridge-next', [{ text: 'Next done.' }]);
    const next = bridge('bridge-next: go on', session);
    const nextExit = await ended(next);
    found.next = { ...seen(next), exit: nextExit, requests: nextScript.requests.length };
    await until(() => held.aborted >= 1, 'the earlier prompt\'s model request was dropped');
    found.heldAborted = held.aborted;

    // 3. a third run of the session holds its model request; meanwhile the first bridge goes
    // (killed, as a server stops a run): the keeper must not abort the session's prompt now,
    // which is the third run's
    const third = router.add('bridge-third', [{ hold: true, text: 'Third done.' }]);
    const last = bridge('bridge-third: go on again', session);
    await third.waitHeld();
    first.proc.kill('SIGKILL');
    first.proc.kill('SIGCONT');
    await first.exit;
    // A bridge for a session the server does not have: the keeper answers its hello only after
    // it has dealt with the first bridge's end (in the order it sees them), and it fails without
    // naming a session to the keeper.
    const probe = bridge('bridge-probe: nothing', 'ses_none');
    found.probe = { exit: await ended(probe), errors: seen(probe).errors, err: probe.err };
    found.thirdAbortedBeforeRelease = third.aborted;
    third.release();
    const lastExit = await ended(last);
    found.third = { ...seen(last), exit: lastExit, requests: third.requests.length };
  } finally {
    // every bridge gone (a stopped one too), the keeper stops its server and exits
    for (const b of bridges) {
      b.proc.kill('SIGKILL');
      b.proc.kill('SIGCONT');
    }
    await Promise.all(bridges.map((b) => b.exit));
    await keeperGone();
    await fake.close();
    rmSync(home, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify(found)}\n`);
}

// A connection to a listening keeper that says `first` and prints each line the keeper says;
// "done" and the end once its stdin closes. Python, as Node.js 20 pads an abstract socket's name
// to the whole sun_path, which names another socket.
const KEEPER_CLIENT = `
import socket, sys, threading
s = socket.socket(socket.AF_UNIX)
s.connect('\\0' + sys.argv[1])
s.sendall(sys.argv[2].encode() + b'\\n')
print('connected', flush=True)
def pump():
    for line in s.makefile('rb'):
        sys.stdout.write(line.decode())
        sys.stdout.flush()
threading.Thread(target=pump, daemon=True).start()
sys.stdin.read()
s.sendall(b'done\\n')
s.close()
`;

function keeperClient(name, first) {
  const proc = spawn('python3', ['-c', KEEPER_CLIENT, name, first], { stdio: ['pipe', 'pipe', 'inherit'] });
  const c = { proc, lines: [], waiters: [] };
  createInterface({ input: proc.stdout }).on('line', (l) => {
    c.lines.push(l);
    for (const w of c.waiters.splice(0)) w();
  });
  // the next line after those read so far, or null once the keeper has said nothing for ms (far
  // longer than it takes to answer once its server has said it listens)
  let read = 0;
  c.next = (ms) => new Promise((resolve) => {
    const look = () => {
      if (read < c.lines.length) { clearTimeout(timer); resolve(c.lines[read++]); return true; }
      return false;
    };
    const timer = setTimeout(() => resolve(null), ms);
    if (!look()) c.waiters.push(function again() { if (!look()) c.waiters.push(again); });
  });
  c.exit = new Promise((resolve) => proc.on('exit', resolve));
  return c;
}

// The keeper alone, with a stand-in for OpenCode that says it listens once told to: a bridge of
// the server's configuration that said hello before the server was ready is told "ready" when
// it is, even though a bridge of another configuration has made the keeper stale meanwhile. (It
// was told nothing, and waited out its five minutes.)
async function staleWhileStarting() {
  const { tempDir } = await import('../lib/server.mjs');
  const { until } = await import('../lib/runs.mjs');
  const home = tempDir('smcp-keeper-');
  const go = path.join(home, 'go');
  const program = path.join(home, 'fake-opencode');
  writeFileSync(program, `#!/bin/sh\nwhile [ ! -e ${go} ]; do sleep 0.05; done\necho "opencode server listening on http://127.0.0.1:$3"\nexec sleep 600\n`, { mode: 0o755 });
  // a port of its own for the name of the keeper's socket; nothing listens on it. The keeper
  // stops after its idle time without a bridge: long enough that the clients are there first.
  const port = String(40000 + (process.pid % 20000));
  const keeper = spawn(HELPER, [port, '600', 'fp-current', program],
    { argv0: 'sandbox-keeper', env: { PATH: process.env.PATH, HOME: home }, stdio: 'ignore' });
  let exited = null;
  const gone = new Promise((resolve) => keeper.on('exit', (code, signal) => { exited = { code, signal }; resolve(); }));
  const clients = [];
  try {
    await until(() => exited || new RegExp(`@sandbox-mcp-agent:${port}$`, 'm').test(readFileSync('/proc/net/unix', 'utf8')),
      'the keeper listening', 120000);
    assert.equal(exited, null, 'the keeper ended before it listened');
    const current = keeperClient(`sandbox-mcp-agent:${port}`, 'hello fp-current');
    clients.push(current);
    assert.equal(await current.next(30000), 'connected');
    const other = keeperClient(`sandbox-mcp-agent:${port}`, 'hello fp-other');
    clients.push(other);
    assert.equal(await other.next(30000), 'connected');
    const otherSaid = await other.next(30000);
    other.proc.stdin.end();
    await other.exit;
    writeFileSync(go, '');
    const currentSaid = await current.next(30000);
    current.proc.stdin.end();
    await current.exit;
    await gone; // stale, and no bridge left: it stops its server and exits
    return { otherSaid, currentSaid };
  } finally {
    for (const c of clients) c.proc.kill();
    keeper.kill('SIGKILL');
    rmSync(home, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'child') {
  await child();
} else {
  test('a keeper made stale while its server starts still answers "ready" to a bridge of its configuration', async () => {
    const { otherSaid, currentSaid } = await staleWhileStarting();
    assert.equal(otherSaid, 'stale');
    assert.equal(currentSaid, 'ready');
  });

  test('a run of a session whose earlier prompt is not over: that prompt is ended, its end is not the run\'s, and the keeper leaves the run\'s own prompt alone', async () => {
    const found = await inEmptyNetns(self);
    const { next, third, probe } = found;
    const diag = JSON.stringify(found, null, 1);
    // the next run: its bridge ended the earlier prompt, and its own prompt got its answer
    assert.deepEqual(next.exit, { code: 0, signal: null }, diag);
    assert.match(next.err, /an earlier run's answer was still going: aborted/, diag);
    assert.deepEqual(next.errors, [], diag);
    assert.deepEqual(next.texts, ['Next done.'], diag);
    assert.equal(next.requests, 1, diag);
    assert.ok(found.heldAborted >= 1, diag);
    // the probe failed as it should, with the keeper's answer first
    assert.equal(probe.exit.code, 2, diag);
    assert.match(probe.err, /Session not found/, diag);
    // the third run: nothing aborted its prompt when the first bridge went
    assert.equal(found.thirdAbortedBeforeRelease, 0, diag);
    assert.deepEqual(third.exit, { code: 0, signal: null }, diag);
    assert.deepEqual(third.errors, [], diag);
    assert.deepEqual(third.texts, ['Third done.'], diag);
  });
}
