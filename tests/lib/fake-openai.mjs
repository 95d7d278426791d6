// A scripted stand-in for an OpenAI-compatible API (chat completions, as OpenRouter and most
// gateways serve it), in OpenAI's wire format: a streamed reply is SSE `data:` chunks of
// chat.completion.chunk objects, the usage in a last chunk without choices (the client asks for
// it with stream_options.include_usage), then `data: [DONE]`. Serve it with startFake from
// fake-anthropic.mjs, which records every request:
//
//   const script = chatScript([
//     { tool: 'write', input: { filePath: '/workspace/hello.txt', content: 'hi\n' } },
//     { text: 'Wrote hello.txt.' },
//   ]);
//   fake.handle(script);
//
// Each agent request (every request except OpenCode's title request) consumes the next step: a
// final answer { text } (finish_reason stop), or a tool call { tool, input, text? }
// (finish_reason tool_calls). When the steps are used up the agent is told 'Script finished.'
// and script.overrun counts it. Recorded on the script: requests ({url, headers, body} of agent
// requests), titles, usage (tokens of the agent replies), overrun.

let seq = 0;

function parseBody(body) {
  try { return JSON.parse(body || '{}'); } catch { return {}; }
}

// OpenCode's side request that names the session: a system message "You are a title generator...".
export function isTitleRequest(body) {
  return (body.messages || []).some((m) => m.role === 'system'
    && JSON.stringify(m.content ?? '').includes('title generator'));
}

// The chunks of one streamed reply: optional text, optional tool calls, then the usage.
export function chatChunks({ text = '', calls = [], model = 'fake-model', usage = { prompt_tokens: 100, completion_tokens: 20 } } = {}) {
  const id = `chatcmpl-fake-${++seq}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (choices, extra = {}) => `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model, choices, ...extra })}\n\n`;
  const out = [chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])];
  const cut = Math.ceil(text.length / 2);
  for (const piece of [text.slice(0, cut), text.slice(cut)])
    if (piece) out.push(chunk([{ index: 0, delta: { content: piece }, finish_reason: null }]));
  calls.forEach((c, index) => {
    const args = JSON.stringify(c.input ?? {});
    const half = Math.ceil(args.length / 2);
    out.push(chunk([{ index: 0, delta: { tool_calls: [{ index, id: c.id, type: 'function',
      function: { name: c.name, arguments: '' } }] }, finish_reason: null }]));
    for (const piece of [args.slice(0, half), args.slice(half)])
      if (piece) out.push(chunk([{ index: 0, delta: { tool_calls: [{ index, function: { arguments: piece } }] }, finish_reason: null }]));
  });
  out.push(chunk([{ index: 0, delta: {}, finish_reason: calls.length ? 'tool_calls' : 'stop' }]));
  out.push(chunk([], { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } }));
  out.push('data: [DONE]\n\n');
  return out;
}

function reply(res, body, opts) {
  if (body.stream) {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (const c of chatChunks({ ...opts, model: body.model })) res.write(c);
    res.end();
    return;
  }
  const message = { role: 'assistant', content: opts.text || null };
  if (opts.calls?.length)
    message.tool_calls = opts.calls.map((c) => ({ id: c.id, type: 'function',
      function: { name: c.name, arguments: JSON.stringify(c.input ?? {}) } }));
  const u = opts.usage || { prompt_tokens: 100, completion_tokens: 20 };
  const out = JSON.stringify({ id: `chatcmpl-fake-${++seq}`, object: 'chat.completion', created: Math.floor(Date.now() / 1000),
    model: body.model, choices: [{ index: 0, message, finish_reason: opts.calls?.length ? 'tool_calls' : 'stop' }],
    usage: { ...u, total_tokens: u.prompt_tokens + u.completion_tokens } });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
  res.end(out);
}

export function chatScript(steps, { usage = { prompt_tokens: 100, completion_tokens: 20 }, title = 'Scripted task' } = {}) {
  const queue = [...steps];
  const script = (req, res, raw) => {
    const body = parseBody(raw);
    if (isTitleRequest(body)) {
      script.titles.push({ url: req.url, headers: req.headers, body });
      reply(res, body, { text: title, usage: { prompt_tokens: 0, completion_tokens: 0 } });
      return;
    }
    script.requests.push({ url: req.url, headers: req.headers, body });
    const step = queue.shift();
    if (!step) {
      script.overrun++;
      reply(res, body, { text: 'Script finished.', usage });
      return;
    }
    const u = step.usage || usage;
    const calls = step.tool ? [{ id: `call_fake_${++seq}`, name: step.tool, input: step.input }] : [];
    res.on('finish', () => {
      script.usage.prompt_tokens += u.prompt_tokens;
      script.usage.completion_tokens += u.completion_tokens;
    });
    reply(res, body, { text: step.text ?? '', calls, usage: u });
  };
  Object.assign(script, { requests: [], titles: [], usage: { prompt_tokens: 0, completion_tokens: 0 }, overrun: 0 });
  Object.defineProperty(script, 'remaining', { get: () => queue.length });
  return script;
}
