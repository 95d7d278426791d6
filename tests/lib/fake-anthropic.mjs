// A local stand-in for the Anthropic Messages API (and anything else a test points the proxy
// at): it speaks the real wire format, SSE streaming included, and does what each test scripts.
// Every request is recorded (method, url, headers, body) so tests can check what reached it.
import http from 'node:http';
import { responsesEvents, sendResponsesError, functionOutputs } from './fake-openai.mjs';

// Anthropic's streaming shape for a short reply.
export function messageEvents({ input = 25, output = 7, text = 'Hello!' } = {}) {
  const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  return [
    ev('message_start', { message: { id: 'msg_fake', type: 'message', role: 'assistant', content: [],
      model: 'claude-fake', stop_reason: null, usage: { input_tokens: input, output_tokens: 1 } } }),
    ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    ev('ping', {}),
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }),
    ev('content_block_stop', { index: 0 }),
    ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: output } }),
    ev('message_stop', {}),
  ];
}

export function messageJson({ input = 25, output = 7, text = 'Hello!' } = {}) {
  return { id: 'msg_fake', type: 'message', role: 'assistant', model: 'claude-fake',
    content: [{ type: 'text', text }], stop_reason: 'end_turn', stop_sequence: null,
    usage: { input_tokens: input, output_tokens: output } };
}

// Start the fake on a random loopback port. handler(req, res, body) answers; the default
// replies like the Messages API (streaming when the body asks for it).
export async function startFake(handler) {
  const requests = [];
  const closed = [];
  let current = handler || defaultHandler;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const rec = { method: req.method, url: req.url, headers: req.headers, body };
      requests.push(rec);
      res.on('close', () => { if (!res.writableFinished) closed.push(rec); });
      current(req, res, body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    closed, // requests whose connection closed before the response finished
    handle(h) { current = h || defaultHandler; },
    close: () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(resolve); }),
  };
}

export function defaultHandler(req, res, body) {
  let parsed = {};
  try { parsed = JSON.parse(body || '{}'); } catch { /* not JSON */ }
  if (parsed.stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const e of messageEvents()) res.write(e);
    res.end();
    return;
  }
  const out = JSON.stringify(messageJson());
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
  res.end(out);
}

// ---------------------------------------------------------------------------------------------
// A scripted agent: makes a real coding agent (OpenCode) call tools, one scripted step per turn.
//
//   const script = agentScript([
//     { tool: 'write', input: { filePath: '/workspace/r/hello.txt', content: 'hi\n' } },
//     { tool: 'bash', input: { command: 'git add -A && git commit -qm "Add hello"', description: 'Commit' } },
//     { hold: true, text: 'All done.' },          // answers only after script.release()
//   ]);
//   fake.handle(script);                           // a script is a handler for startFake
//   await script.waitFor(2);                       // the 2nd agent request has arrived
//
// Each agent request (every request except OpenCode's "title generator" side request) consumes
// the next step. A step is one of
//   { text }                                 a final answer (stop_reason end_turn)
//   { tool, input, text? }                   a tool call (stop_reason tool_use), after an optional text
//   { tools: [{ tool, input }, ...], text? } several tool calls in one turn
//   { status, error: { type, message }, headers? }  an HTTP error in the Messages API error shape
//   { hold: true, ...step }                  held until script.release(), then answered as ...step
//   { holdUntil: promise, ...step }          held until the promise settles, then answered
//                                            (as { text: 'Done.' } when nothing else is given)
//   (body, ctx) => step                      decided when the request arrives
// and may carry usage: { input_tokens, output_tokens } (default: the script's usage option).
// A held request whose connection closes before release (the agent, or the proxy in between,
// went away) gives its step back: the next request (a retry) is served the same step again.
// When the steps are used up the agent is told 'Script finished.' and script.overrun counts it.
//
// Recorded on the script: requests (agent requests: {url, headers, body (parsed), step, aborted}),
// titles (title requests), usage (input/output tokens of the agent replies sent in full),
// served (steps consumed), held (requests waiting at the gate now), aborted, overrun.
// Title requests get a short text reply with zero usage, so a run's token total is that of the
// agent steps whether it is counted from the agent's events or at the proxy.

let toolSeq = 0;

// OpenCode's bash and write as Codex's exec_command (answered once the command ends, however long
// it takes); any other tool as it is.
export function codexTool(c) {
  const input = c.input ?? {};
  if (c.tool === 'bash')
    return { tool: 'exec_command', input: { cmd: input.command, yield_time_ms: 300000 } };
  if (c.tool === 'write') {
    const q = (v) => `'${String(v).replace(/'/g, "'\\''")}'`;
    const b64 = Buffer.from(input.content ?? '').toString('base64');
    return { tool: 'exec_command', input: { cmd: `mkdir -p "$(dirname ${q(input.filePath)})" && `
      + `echo ${b64} | base64 -d > ${q(input.filePath)}`, yield_time_ms: 300000 } };
  }
  return c;
}

export function sseEvent(type, data) {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

// The SSE events of one streamed Messages API reply made of text and tool_use blocks.
export function replyEvents({ blocks = [], stop = 'end_turn', input_tokens = 100, output_tokens = 20,
  model = 'claude-sonnet-4-5-20250929', id = `msg_fake_${++toolSeq}` } = {}) {
  const out = [sseEvent('message_start', { message: { id, type: 'message', role: 'assistant', model,
    content: [], stop_reason: null, stop_sequence: null,
    usage: { input_tokens, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } } })];
  blocks.forEach((b, index) => {
    if (b.type === 'text') {
      out.push(sseEvent('content_block_start', { index, content_block: { type: 'text', text: '' } }));
      if (index === 0) out.push(sseEvent('ping', {}));
      // streamed in two pieces, as the real API does for anything but the shortest text
      const cut = Math.ceil(b.text.length / 2);
      for (const piece of [b.text.slice(0, cut), b.text.slice(cut)])
        if (piece) out.push(sseEvent('content_block_delta', { index, delta: { type: 'text_delta', text: piece } }));
    } else {
      out.push(sseEvent('content_block_start', { index,
        content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } }));
      const json = JSON.stringify(b.input ?? {});
      const cut = Math.ceil(json.length / 2);
      out.push(sseEvent('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: '' } }));
      for (const piece of [json.slice(0, cut), json.slice(cut)])
        if (piece) out.push(sseEvent('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } }));
    }
    out.push(sseEvent('content_block_stop', { index }));
  });
  out.push(sseEvent('message_delta', { delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens } }));
  out.push(sseEvent('message_stop', {}));
  return out;
}

export function sendReply(res, opts) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'request-id': 'req_fake' });
  for (const e of replyEvents(opts)) res.write(e);
  res.end();
}

export function sendError(res, status, error = {}, headers = {}) {
  const out = JSON.stringify({ type: 'error', error: { type: error.type || 'api_error', message: error.message || 'error' } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out),
    'request-id': 'req_fake', ...headers });
  res.end(out);
}

function parseBody(body) {
  try { return JSON.parse(body || '{}'); } catch { return {}; }
}

// OpenCode's side request that names the session: system prompt "You are a title generator...".
export function isTitleRequest(body) {
  return JSON.stringify(body.system ?? '').includes('title generator');
}

// The text parts of a request's user messages, latest first (tool results left out).
// A Responses API request (Codex's) keeps them in input, as input_text parts.
export function userTexts(body) {
  const texts = [];
  const messages = body.messages || (Array.isArray(body.input) ? body.input : []);
  for (const m of [...messages].reverse()) {
    if (m.role !== 'user') continue;
    if (typeof m.content === 'string') { texts.push(m.content); continue; }
    for (const c of [...(m.content || [])].reverse())
      if (c.type === 'text' || c.type === 'input_text') texts.push(c.text);
  }
  return texts;
}

// The tool results a request carries, in order: [{tool_use_id, text}] (a Responses API
// request's function call outputs as the same: of Codex's exec_command, what the command printed,
// without the lines Codex puts before it, "Chunk ID: ...", "Process exited with code N", ...,
// "Output:").
const CODEX_EXEC_HEAD = /^Chunk ID: [^\n]*\n(?:[A-Z][^\n]*\n)*?Output:\n/;
export function toolResults(body) {
  if (!body.messages && Array.isArray(body.input))
    return functionOutputs(body).map((o) => ({ tool_use_id: o.call_id, text: o.text.replace(CODEX_EXEC_HEAD, ''),
      is_error: false }));
  const out = [];
  for (const m of body.messages || []) {
    if (m.role !== 'user' || !Array.isArray(m.content)) continue;
    for (const c of m.content) {
      if (c.type !== 'tool_result') continue;
      const text = typeof c.content === 'string' ? c.content
        : (c.content || []).map((x) => x.text || '').join('');
      out.push({ tool_use_id: c.tool_use_id, text, is_error: !!c.is_error });
    }
  }
  return out;
}

// The tool names a request offers the model.
export function toolNames(body) {
  return (body.tools || []).map((t) => t.name);
}

// A step that calls the server's own tool named like suffix (each agent names MCP tools its own
// way: OpenCode "sandbox-mcp_ask_user", Claude Code "mcp__sandbox-mcp__ask_user", Codex
// "ask_user" in the Responses API namespace "mcp__sandbox_mcp"); without it, a text saying so,
// which ends the run and fails the test's later checks.
export const serverTool = (suffix, input) => (body) => {
  for (const ns of (body.tools || []).filter((t) => t.type === 'namespace' && /sandbox/.test(t.name)))
    if ((ns.tools || []).some((t) => t.name === suffix)) return { tool: suffix, namespace: ns.name, input };
  const name = toolNames(body).find((n) => n?.endsWith(suffix));
  return name ? { tool: name, input } : { text: `no ${suffix} among ${toolNames(body).join(', ')}` };
};

function waiters() {
  const list = [];
  return {
    add(cond, ms, what) {
      return new Promise((resolve, reject) => {
        const w = { cond, resolve };
        w.timer = setTimeout(() => { list.splice(list.indexOf(w), 1); reject(new Error(`fake: timed out waiting for ${what}`)); }, ms);
        w.timer.unref?.();
        list.push(w);
        this.check();
      });
    },
    check() {
      for (const w of [...list]) {
        const v = w.cond();
        if (v) { clearTimeout(w.timer); list.splice(list.indexOf(w), 1); w.resolve(v); }
      }
    },
  };
}

//
// A request to the Responses API (POST .../responses, Codex's) is answered in that API's shape:
// a tool call as a function call, an error as that API's. There, the two OpenCode tools the
// scripts call most become Codex's own, so that one script serves either agent:
//   { tool: 'bash', input: { command } }           exec_command { cmd: command }
//   { tool: 'write', input: { filePath, content } } exec_command writing the file (base64)
// wire: 'anthropic' or 'responses' answers every request in that shape instead.
export function agentScript(steps, { usage = { input_tokens: 100, output_tokens: 20 }, title = 'Scripted task',
  name = 'script', wire = null } = {}) {
  const queue = steps.map((s, i) => ({ s, i }));
  const wait = waiters();
  let release;
  const gate = new Promise((r) => { release = r; });
  let released = false;

  const script = (req, res, raw) => {
    const body = parseBody(raw);
    if (isTitleRequest(body)) {
      script.titles.push({ url: req.url, headers: req.headers, body });
      sendReply(res, { blocks: [{ type: 'text', text: title }], input_tokens: 0, output_tokens: 0,
        model: body.model });
      return;
    }
    const rec = { url: req.url, headers: req.headers, body, step: null, aborted: false };
    script.requests.push(rec);
    const w = wire || (/\/responses(\?|$)/.test(req.url) ? 'responses' : 'anthropic');
    let next = queue.shift();
    if (!next) {
      script.overrun++;
      rec.step = -1;
      if (w === 'responses') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        for (const e of responsesEvents({ text: 'Script finished.', model: body.model, usage })) res.write(e);
        res.end();
      } else {
        sendReply(res, { blocks: [{ type: 'text', text: 'Script finished.' }], ...usage });
      }
      wait.check();
      return;
    }
    script.served++;
    rec.step = next.i;
    let step = typeof next.s === 'function' ? next.s(body, { req, script }) : next.s;
    const answer = () => {
      if (res.destroyed || res.writableEnded) return;
      respond(res, step, body, w);
    };
    // held at the script's gate, or until a promise of the test's own (holdUntil) settles
    const until = step.holdUntil || (step.hold && !released ? gate : null);
    if (until) {
      script.held++;
      let done = false;
      res.on('close', () => {
        if (done) return;
        done = true;
        script.held--;
        script.aborted++;
        rec.aborted = true;
        queue.unshift(next); // the retry gets the same step
        script.served--;
        wait.check();
      });
      wait.check();
      until.then(() => {
        if (done) return;
        done = true;
        script.held--;
        answer();
        wait.check();
      });
      return;
    }
    answer();
    wait.check();
  };

  function respond(res, step, body, w) {
    if (step.status && step.status !== 200) {
      (w === 'responses' ? sendResponsesError : sendError)(res, step.status, step.error, step.headers);
      return;
    }
    const u = step.usage || usage;
    const blocks = [];
    if (step.text !== undefined && step.text !== '') blocks.push({ type: 'text', text: step.text });
    const calls = step.tools || (step.tool ? [{ tool: step.tool, input: step.input, namespace: step.namespace }] : []);
    for (const c0 of calls) {
      const c = w === 'responses' ? codexTool(c0) : c0;
      const id = `toolu_${name}_${++toolSeq}`;
      blocks.push({ type: 'tool_use', id, name: c.tool, input: c.input ?? {}, namespace: c.namespace });
      script.toolCalls.push({ id, name: c.tool, input: c.input ?? {} });
    }
    if (!blocks.length) blocks.push({ type: 'text', text: 'Done.' });
    res.on('finish', () => {
      script.usage.input_tokens += u.input_tokens;
      script.usage.output_tokens += u.output_tokens;
    });
    if (w === 'responses') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const text = blocks.filter((b) => b.type === 'text').map((b) => b.text).join('');
      const fcalls = blocks.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, name: b.name, input: b.input, namespace: b.namespace }));
      for (const e of responsesEvents({ text, calls: fcalls, model: body.model, usage: u })) res.write(e);
      res.end();
      return;
    }
    sendReply(res, { blocks, stop: calls.length ? 'tool_use' : 'end_turn', ...u, model: body.model });
  }

  Object.assign(script, {
    steps,
    requests: [],
    titles: [],
    toolCalls: [],   // [{id, name, input}] of the tool_use blocks sent
    usage: { input_tokens: 0, output_tokens: 0 },
    served: 0,
    held: 0,
    aborted: 0,
    overrun: 0,
    // The waits below end in an error only past ms, a bound for an agent that never comes, far
    // beyond what a loaded machine takes: a run's agent boots in 10 s of CPU, and a fresh clone's
    // make test, with something else beside it, once took over 300 s to bring one to its
    // second request.
    // Resolves with the n-th agent request (1-based) once it has arrived.
    waitFor(n, ms = 600000) {
      return wait.add(() => script.requests.length >= n && script.requests[n - 1], ms, `${name}: agent request ${n}`);
    },
    // Resolves once a request is being held at the gate.
    waitHeld(ms = 600000) {
      return wait.add(() => script.held > 0, ms, `${name}: a held request`);
    },
    // Resolves once every step has been served and answered (no request held).
    waitDone(ms = 600000) {
      return wait.add(() => !queue.length && script.held === 0, ms, `${name}: all steps served`);
    },
    // Opens the gate: held requests are answered, later hold steps answer at once.
    release() { released = true; release(); },
  });
  // steps not served yet
  Object.defineProperty(script, 'remaining', { get: () => queue.length });
  return script;
}

// Several scripts on one fake, for runs going on at the same time: a request goes to the script
// whose marker appears in the latest user text of the conversation (the task of the run being
// served, title requests included). A request no script claims gets a 400 and is kept in
// router.unmatched.
//   const router = agentRouter(); fake.handle(router);
//   const a = router.add('task-a-7f3', [...steps]);   // a run whose task contains 'task-a-7f3'
export function agentRouter() {
  const routes = [];
  const router = (req, res, raw) => {
    const body = parseBody(raw);
    const texts = userTexts(body);
    for (const t of texts) {
      const r = routes.find((x) => t.includes(x.marker));
      if (r) { r.script(req, res, raw); return; }
    }
    if (isTitleRequest(body)) {
      router.unmatched.push({ url: req.url, headers: req.headers, body });
      sendReply(res, { blocks: [{ type: 'text', text: 'Untitled' }], input_tokens: 0, output_tokens: 0 });
      return;
    }
    router.unmatched.push({ url: req.url, headers: req.headers, body });
    sendError(res, 400, { type: 'invalid_request_error', message: 'fake: no script for this conversation' });
  };
  router.unmatched = [];
  router.add = (marker, steps, opts = {}) => {
    const script = agentScript(steps, { name: marker.replace(/\W/g, '_'), ...opts });
    // the newest route first: a continued session's new task wins over the first one's
    routes.unshift({ marker, script });
    return script;
  };
  return router;
}
