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

// ---------------------------------------------------------------------------------------------
// OpenAI's Responses API (POST /v1/responses, streamed), as Codex speaks it: SSE events with
// `event:` names, the reply's output items (a message, function calls) each added and done, and
// response.completed with the usage last.

// The SSE events of one streamed Responses reply: optional text, then function calls
// [{ id, name, input }] (input is sent as the call's JSON arguments).
export function responsesEvents({ text = '', calls = [], model = 'fake-model',
  usage = { input_tokens: 100, output_tokens: 20 } } = {}) {
  const id = `resp_fake_${++seq}`;
  const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const response = (status, extra = {}) => ({ id, object: 'response', created_at: Math.floor(Date.now() / 1000),
    status, model, output: [], ...extra });
  const out = [ev('response.created', { response: response('in_progress') }),
    ev('response.in_progress', { response: response('in_progress') })];
  const items = [];
  let index = 0;
  if (text) {
    const item = { id: `msg_fake_${++seq}`, type: 'message', role: 'assistant', status: 'completed',
      content: [{ type: 'output_text', text, annotations: [] }] };
    out.push(ev('response.output_item.added', { output_index: index,
      item: { ...item, status: 'in_progress', content: [] } }));
    out.push(ev('response.content_part.added', { item_id: item.id, output_index: index, content_index: 0,
      part: { type: 'output_text', text: '', annotations: [] } }));
    const cut = Math.ceil(text.length / 2);
    for (const piece of [text.slice(0, cut), text.slice(cut)])
      if (piece) out.push(ev('response.output_text.delta', { item_id: item.id, output_index: index, content_index: 0, delta: piece }));
    out.push(ev('response.output_text.done', { item_id: item.id, output_index: index, content_index: 0, text }));
    out.push(ev('response.content_part.done', { item_id: item.id, output_index: index, content_index: 0,
      part: item.content[0] }));
    out.push(ev('response.output_item.done', { output_index: index, item }));
    items.push(item);
    index++;
  }
  for (const c of calls) {
    const item = { id: `fc_fake_${++seq}`, type: 'function_call', status: 'completed', call_id: c.id,
      name: c.name, ...(c.namespace ? { namespace: c.namespace } : {}), arguments: JSON.stringify(c.input ?? {}) };
    out.push(ev('response.output_item.added', { output_index: index, item: { ...item, status: 'in_progress', arguments: '' } }));
    out.push(ev('response.function_call_arguments.delta', { item_id: item.id, output_index: index, delta: item.arguments }));
    out.push(ev('response.function_call_arguments.done', { item_id: item.id, output_index: index, arguments: item.arguments }));
    out.push(ev('response.output_item.done', { output_index: index, item }));
    items.push(item);
    index++;
  }
  out.push(ev('response.completed', { response: response('completed', { output: items,
    usage: { input_tokens: usage.input_tokens, input_tokens_details: { cached_tokens: 0 },
      output_tokens: usage.output_tokens, output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: usage.input_tokens + usage.output_tokens } }) }));
  return out;
}

// An error in the Responses API's shape.
export function sendResponsesError(res, status, error = {}, headers = {}) {
  const out = JSON.stringify({ error: { message: error.message || 'error', type: error.type || 'invalid_request_error',
    param: null, code: error.code || null } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out), ...headers });
  res.end(out);
}

// The function call outputs a Responses request carries, in order: [{call_id, text}]. An output
// may be a string or a list of content items (Codex gives an MCP tool's result so: a line of its
// own, "Wall time: ...", then the tool's text), whose texts are joined a line apart; an item
// without text (an image) is kept as its JSON.
export function functionOutputs(body) {
  const text = (o) => (typeof o === 'string' ? o : Array.isArray(o)
    ? o.map((c) => (typeof c?.text === 'string' ? c.text : JSON.stringify(c))).join('\n') : JSON.stringify(o));
  return (Array.isArray(body.input) ? body.input : []).filter((i) => i.type === 'function_call_output')
    .map((i) => ({ call_id: i.call_id, text: text(i.output) }));
}
