// LLM providers from provider files: a provider the server was not built with, described by one
// file in PROXY_PROVIDERS_DIR (an OpenAI-compatible API: a scripted fake of chat completions,
// tests/lib/fake-openai.mjs), carries a real OpenCode run end to end; run_task refuses at once a
// model whose provider has no key or does not exist, naming the setting or the providers there
// are; a bad provider file stops the server from starting.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { startServer, rpc, tempDir, removeDataDir, sqlRows } from '../lib/server.mjs';
import { startFake } from '../lib/fake-anthropic.mjs';
import { chatScript } from '../lib/fake-openai.mjs';

const KEY = 'sk-fakeco-real-key';
const PROVIDER = 'fakeco';
let fake, server, dir;
let nextId = 1;

async function call(name, args) {
  const r = await rpc(server, { jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });
  assert.equal(r.status, 200, r.text);
  return r.body.result;
}

const text = (res) => (res.content || []).map((c) => c.text || '').join('');

async function refused(args, re) {
  const res = await call('run_task', args);
  assert.equal(res.isError, true, `run_task ${JSON.stringify(args)} was not refused: ${JSON.stringify(res).slice(0, 400)}`);
  assert.match(text(res), re);
  return text(res);
}

function providerFile(upstream) {
  return JSON.stringify({
    name: PROVIDER,
    description: 'a test gateway speaking OpenAI chat completions',
    upstream,
    key_env: 'FAKECO_API_KEY',
    key_header: 'authorization',
    key_format: 'Bearer {key}',
    token_from: ['bearer'],
    methods: ['GET', 'POST'],
    paths: ['/v1/chat/completions', '/v1/models'],
    usage: 'openai',
    agent: { format: 'openai-compatible', base_path: '/v1' },
  });
}

before(async () => {
  fake = await startFake();
  dir = tempDir('smcp-providers-');
  writeFileSync(path.join(dir, `${PROVIDER}.json`), providerFile(fake.url));
  // no Anthropic or OpenAI key: the default model's provider has none
  server = await startServer({ env: { PROXY_PROVIDERS_DIR: dir, FAKECO_API_KEY: KEY } });
});

after(async () => {
  if (process.env.SHOW_STDERR) console.log(server?.stderr());
  await server?.stop();
  await fake?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a model of a provider without a key is refused at once, naming the setting', async () => {
  const before = (await call('list_runs', {})).structuredContent.runs.length;
  const msg = await refused({ task: 'never runs', model: 'anthropic/claude-sonnet-4-5' },
    /provider 'anthropic' has no key on this server: set ANTHROPIC_API_KEY in \.dev\.vars or the server's environment/);
  assert.match(msg, /providers with a key: fakeco/);
  await refused({ task: 'never runs', model: 'openai/gpt-5' }, /set OPENAI_API_KEY/);
  await refused({ task: 'never runs', model: 'openrouter/anthropic/claude-sonnet-4.5' }, /set OPENROUTER_API_KEY/);
  // the default model (anthropic's) is refused the same way, and says it was the default
  const dflt = await refused({ task: 'never runs' }, /no model was given, so the server's default \(RUN_DEFAULT_MODEL\) was tried/);
  assert.match(dflt, /ANTHROPIC_API_KEY/);
  assert.equal((await call('list_runs', {})).structuredContent.runs.length, before, 'a refused run was recorded');
  // the server said so when it started
  assert.match(server.stderr(), /runs default-model=anthropic\/claude-sonnet-4-5 note="run_task without a model is refused/);
});

test('a model of a provider the server does not have is refused, listing the providers', async () => {
  const msg = await refused({ task: 'never runs', model: 'google/gemini-2.5-pro' },
    /model 'google\/gemini-2\.5-pro': this server has no provider 'google'; providers with a key: fakeco; without one: /);
  for (const p of ['anthropic', 'openai', 'openrouter']) assert.match(msg, new RegExp(`${p} \\(set ${p.toUpperCase()}_API_KEY\\)`));
  // github is a provider file too, but not one a model may name
  await refused({ task: 'never runs', model: 'github/copilot' }, /no provider 'github'/);
  await refused({ task: 'never runs', model: 'gemini-2.5-pro' },
    /model 'gemini-2\.5-pro' is not of the form provider\/model \(e\.g\. fakeco\/gemini-2\.5-pro\); providers with a key: fakeco/);
  await refused({ task: 'never runs', model: `${PROVIDER}/` }, /not of the form provider\/model/);
  await refused({ task: 'never runs', model: `${PROVIDER}/bad model` }, /has characters a model name does not/);
});

test('a provider from one file carries a real OpenCode run: the key swapped in, the answer returned', async () => {
  const script = chatScript([
    { text: 'Writing the file.', tool: 'write', input: { filePath: '/workspace/hello.txt', content: 'hello through fakeco\n' },
      usage: { prompt_tokens: 1000, completion_tokens: 40 } },
    { text: 'Wrote hello.txt through the fakeco gateway.', usage: { prompt_tokens: 1200, completion_tokens: 30 } },
  ]);
  fake.handle(script);
  const started = await call('run_task', { task: 'providers-7c1: write hello.txt', model: `${PROVIDER}/vendor/fake-model-1` });
  assert.equal(started.isError, undefined, text(started));
  const runId = started.structuredContent.run_id;
  let r;
  for (;;) {
    r = (await call('get_result', { run_id: runId, wait_seconds: 30 })).structuredContent;
    if (['succeeded', 'failed', 'cancelled'].includes(r.status)) break;
  }
  const diag = `${JSON.stringify(r, null, 1)}\nfake saw: ${JSON.stringify(fake.requests.map((q) => [q.method, q.url]))}`;
  assert.equal(r.status, 'succeeded', diag);
  assert.equal(r.model, `${PROVIDER}/vendor/fake-model-1`);
  assert.equal(r.result.summary, 'Wrote hello.txt through the fakeco gateway.', diag);
  assert.equal(script.overrun, 0, diag);
  assert.equal(script.remaining, 0, diag);

  // what reached the upstream: chat completions under the file's path, the model's own name,
  // the configured key in place of the run's proxy token, streamed with usage asked for
  assert.equal(script.requests.length, 2, diag);
  // the agent's token, the run's own or its session's warm OpenCode's
  const token = sqlRows(server, `SELECT jti, services FROM proxy_tokens WHERE session_id = '${r.session_id}'`);
  assert.equal(token.length, 1);
  assert.equal(token[0].services, PROVIDER); // the only provider with a key; no github
  for (const q of [...script.requests, ...script.titles]) {
    assert.equal(q.url, '/v1/chat/completions');
    assert.equal(q.headers.authorization, `Bearer ${KEY}`);
    assert.doesNotMatch(JSON.stringify(q.headers), /eyJ/); // no JWT went upstream
  }
  assert.equal(script.requests[0].body.model, 'vendor/fake-model-1');
  assert.equal(script.requests[0].body.stream, true);
  assert.equal(script.requests[0].body.stream_options?.include_usage, true);
  assert.ok(script.requests[0].body.tools.some((t) => t.function?.name === 'write'), 'the agent offered no write tool');
  // the tool call was carried out and its result sent back
  const results = script.requests[1].body.messages.filter((m) => m.role === 'tool');
  assert.equal(results.length, 1, JSON.stringify(script.requests[1].body.messages).slice(0, 2000));
  assert.match(JSON.stringify(results[0].content), /[Ww]rote file successfully/);

  // usage read from the stream by the proxy, as the fake reported it
  assert.equal(r.usage.input_tokens, script.usage.prompt_tokens, diag);
  assert.equal(r.usage.output_tokens, script.usage.completion_tokens, diag);
  assert.equal(script.usage.prompt_tokens, 2200);
});

test('a bad provider file stops the server from starting, naming the file', async () => {
  const bad = tempDir('smcp-providers-bad-');
  const dataDir = tempDir();
  try {
    writeFileSync(path.join(bad, 'gemini.json'), JSON.stringify({ name: 'gemini', upstream: 'http://127.0.0.1:9',
      key_env: 'GEMINI_API_KEY', key_header: 'x-goog-api-key', key_format: '{key}', agent: { format: 'gemini' } }));
    await assert.rejects(startServer({ dataDir, env: { PROXY_PROVIDERS_DIR: bad } }),
      /server exited 2: [\s\S]*PROXY_PROVIDERS_DIR '[^']+': provider 'gemini\.json': agent\.format is one of anthropic, openai, openai-compatible/);
    await assert.rejects(startServer({ dataDir, env: { PROXY_PROVIDERS_DIR: path.join(bad, 'missing') } }),
      /server exited 2: [\s\S]*PROXY_PROVIDERS_DIR '[^']+missing': No such file or directory/);
  } finally {
    removeDataDir(dataDir);
    rmSync(bad, { recursive: true, force: true });
  }
});
