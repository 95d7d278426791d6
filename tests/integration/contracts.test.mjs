// Tool contracts through the official MCP SDK client: every tool's structuredContent meets the
// outputSchema tools/list gives, on success and on every error path (the SDK client checks it
// in callTool once it has listed the tools; each result is also checked here with the SDK's own
// validator, and must carry structuredContent, so nothing passes by having none). Also the
// annotations, the descriptions, the limits the schemas state, the error shape, idempotent
// cancel_run, the seed's names on the opencode_* aliases, and the list_runs cursor.
// Runs here have no agent (OPENCODE_BIN names nothing), so each fails at once without a model.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';

import { startServer, addUser, sqlRows, tempDir } from '../lib/server.mjs';

const TOOLS = ['server_info', 'container_initialize', 'container_ping', 'container_exec',
  'container_file_write', 'container_file_read', 'container_files_list', 'container_file_delete',
  'container_preview', 'run_task', 'get_result', 'list_runs', 'cancel_run', 'deliver_run', 'answer_run'];
const ALIASES = { opencode_run_task: 'run_task', opencode_get_result: 'get_result',
  opencode_list_runs: 'list_runs' };
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
// No agent and a model upstream nobody listens on: a run fails as soon as it starts, and no
// request leaves the machine.
const NO_AGENT = { OPENCODE_BIN: '/nonexistent/opencode', ANTHROPIC_API_KEY: 'sk-ant-test-key',
  ANTHROPIC_BASE_URL: 'http://127.0.0.1:9/' };

// [readOnly, destructive, idempotent, openWorld] of each tool (container_exec's openWorld
// follows the network mode: these servers are started with SANDBOX_NETWORK=none).
const HINTS = {
  server_info: [true, false, true, false],
  container_initialize: [false, true, true, false],
  container_ping: [true, false, true, false],
  container_exec: [false, true, false, false],
  container_file_write: [false, true, false, false],
  container_file_read: [true, false, true, false],
  container_files_list: [true, false, true, false],
  container_file_delete: [false, true, false, false],
  container_preview: [false, false, false, true],
  run_task: [false, false, false, true],
  get_result: [true, false, true, false],
  list_runs: [true, false, true, false],
  cancel_run: [false, true, true, false],
  deliver_run: [false, false, true, true],
  answer_run: [false, false, true, false],
};

async function connect(server, token = server.token) {
  const client = new Client({ name: 'contracts-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(server.mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

function text(res) {
  return (res.content || []).map((c) => c.text || '').join('');
}

// A client that lists the tools (so the SDK validates every result), checks each result again
// with the SDK's validator against the listed schema, and counts what it checked.
class Checked {
  constructor(client, tools) {
    this.client = client;
    const ajv = new AjvJsonSchemaValidator();
    this.validators = new Map(tools.map((t) => [t.name, ajv.getValidator(t.outputSchema)]));
    this.checked = { ok: new Set(), error: new Set() };
  }

  static async open(server, token) {
    const client = await connect(server, token);
    const { tools } = await client.listTools();
    return new Checked(client, tools);
  }

  async call(name, args) {
    const res = await this.client.callTool({ name, arguments: args }, undefined, { timeout: 120000 });
    assert.ok(res.structuredContent && typeof res.structuredContent === 'object',
      `${name}: no structuredContent: ${JSON.stringify(res).slice(0, 400)}`);
    const validate = this.validators.get(ALIASES[name] || name);
    assert.ok(validate, `${name}: no outputSchema listed`);
    const v = validate(res.structuredContent);
    assert.ok(v.valid, `${name} ${JSON.stringify(args)}: ${v.errorMessage}: ${JSON.stringify(res.structuredContent).slice(0, 400)}`);
    this.checked[res.isError ? 'error' : 'ok'].add(name);
    return res;
  }

  // A call that must succeed; returns its structuredContent.
  async ok(name, args = {}) {
    const res = await this.call(name, args);
    assert.notEqual(res.isError, true, `${name} ${JSON.stringify(args)}: ${text(res)}`);
    assert.equal(res.structuredContent.error, undefined);
    return res.structuredContent;
  }

  // A call that must fail with code; its message is the text the model reads.
  async fails(name, args, code, re) {
    const res = await this.call(name, args);
    assert.equal(res.isError, true, `${name} ${JSON.stringify(args)} did not fail: ${JSON.stringify(res).slice(0, 400)}`);
    const { error } = res.structuredContent;
    assert.equal(error.code, code, `${name} ${JSON.stringify(args)}: ${JSON.stringify(error)}`);
    assert.equal(error.message, text(res));
    if (re) assert.match(error.message, re);
    return error;
  }

  async waitRun(runId, tool = 'get_result', key = 'run_id') {
    for (;;) {
      const r = await this.ok(tool, { [key]: runId, wait_seconds: 30 });
      if (TERMINAL.has(r.status)) return r;
    }
  }

  close() {
    return this.client.close();
  }
}

// No line of the server's log says a result missed its schema.
function noMismatch(server) {
  assert.doesNotMatch(server.stderr(), /output-schema-mismatch/);
}

describe('a server with sandboxes and runs', () => {
  let server, c, tools;

  before(async () => {
    server = await startServer({ env: NO_AGENT });
    c = await Checked.open(server);
    tools = (await c.client.listTools()).tools;
  });

  after(async () => {
    await c?.close();
    await server?.stop();
  });

  test('the fourteen tools are listed with an outputSchema, a title and described parameters; the aliases are not', () => {
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
    for (const t of tools) {
      assert.equal(t.outputSchema?.type, 'object', t.name);
      assert.ok(t.title && t.annotations.title === t.title, t.name);
      assert.ok(t.description.length > 80, `${t.name}: ${t.description}`);
      // failed calls fit the schema: an error property, and required moved into anyOf
      assert.deepEqual(t.outputSchema.properties.error.required, ['code', 'message']);
      assert.equal(t.outputSchema.required, undefined, t.name);
      assert.deepEqual(t.outputSchema.anyOf.at(-1), { required: ['error'] }, t.name);
      // no top-level additionalProperties: fields may be added
      assert.equal(t.outputSchema.additionalProperties, undefined, t.name);
      for (const [p, s] of Object.entries(t.inputSchema.properties || {}))
        assert.ok(s.description, `${t.name}.${p} has no description`);
    }
  });

  test('annotations say what each tool does to the world', () => {
    for (const t of tools) {
      const a = t.annotations;
      assert.deepEqual([a.readOnlyHint, a.destructiveHint, a.idempotentHint, a.openWorldHint],
        HINTS[t.name], t.name);
    }
  });

  test('descriptions and instructions state the limits and the network of this server', () => {
    const get = (n) => tools.find((t) => t.name === n);
    const exec = get('container_exec');
    assert.match(exec.description, /first and last 512 KiB/);
    assert.match(exec.description, /default 60 s, at most 60 min/);
    assert.match(exec.description, /no network/);
    assert.equal(exec.inputSchema.properties.timeout_ms.maximum, 3600000);
    assert.match(get('container_file_write').description, /At most 3133440 bytes of content a call/);
    assert.match(get('run_task').description, /get_result/);
    assert.match(get('run_task').description, /ANTHROPIC_API_KEY/);
    assert.match(get('run_task').description, /Models of these providers work here: anthropic\./);
    assert.match(get('get_result').description, /wait_seconds/);
    // timeout_minutes: the schema's maximum is what run_task accepts
    assert.equal(get('run_task').inputSchema.properties.timeout_minutes.maximum, 240);
    const instructions = c.client.getInstructions();
    for (const re of [/\/workspace/, /container_exec/, /run_task/, /get_result/, /wait_seconds/,
      /web_url/, /no network/, /about 100000 bytes/, /ANTHROPIC_API_KEY/])
      assert.match(instructions, re);
    assert.ok(instructions.length < 3000, `instructions are ${instructions.length} characters`);
  });

  test('every container tool on success and on its errors', async () => {
    const info = await c.ok('server_info', { include_tools: true });
    assert.deepEqual(info.tools, tools.map((t) => t.name));
    await c.fails('server_info', { include_tools: 'yes' }, 'invalid_arguments', /include_tools/);

    assert.match((await c.ok('container_initialize')).sandbox_id, /\S/);
    assert.equal((await c.ok('container_ping')).up, true);
    const run = await c.ok('container_exec', { command: 'echo hi; echo oops >&2; exit 3' });
    assert.equal(run.stdout, 'hi\n');
    assert.equal(run.exit_code, 3);
    assert.equal(run.signal, null);
    await c.fails('container_exec', {}, 'invalid_arguments', /command is required/);
    await c.fails('container_exec', { command: 'true', timeout_ms: 0 }, 'invalid_arguments', /timeout_ms/);
    await c.fails('container_exec', { command: 'true', env: { '1A': 'x' } }, 'invalid_arguments', /env name/);
    await c.fails('container_exec', { command: 'true', args: { args: 'true' } }, 'invalid_arguments', /not both/);
    await c.fails('container_exec', { command: 'true', cwd: 'nowhere' }, 'not_found');

    const w = await c.ok('container_file_write', { path: 'dir/a.txt', content: 'one\n' });
    assert.deepEqual([w.path, w.bytes_written, w.created], ['/workspace/dir/a.txt', 4, true]);
    await c.ok('container_file_write', { path: 'dir/a.txt', content: 'two\n', append: true });
    await c.fails('container_file_write', { path: 'dir/b', content: 'x', mode: '9' }, 'invalid_arguments', /mode/);
    await c.fails('container_file_write', { path: 'dir/b', content: '@@', encoding: 'base64' }, 'invalid_arguments', /base64/);
    await c.fails('container_file_write', { path: 'dir', content: 'x' }, 'is_a_directory');
    const r = await c.ok('container_file_read', { path: 'dir/a.txt' });
    assert.deepEqual([r.type, r.size, r.truncated], ['file', 8, false]);
    assert.equal((await c.call('container_file_read', { path: 'dir/a.txt' })).content[0].resource.text, 'one\ntwo\n');
    const part = await c.ok('container_file_read', { path: 'dir/a.txt', max_bytes: 3 });
    assert.deepEqual([part.truncated, part.bytes], [true, 3]);
    const d = await c.ok('container_file_read', { path: 'dir' });
    assert.deepEqual([d.type, d.entries.map((e) => e.name)], ['directory', ['a.txt']]);
    await c.fails('container_file_read', { path: 'missing.txt' }, 'not_found', /missing\.txt/);
    await c.fails('container_file_read', { path: 'dir/a.txt/x' }, 'not_a_directory');
    const l = await c.ok('container_files_list', {});
    assert.ok(l.entries.some((e) => e.name === 'dir' && e.type === 'directory'), JSON.stringify(l));
    await c.fails('container_files_list', { path: 'missing' }, 'not_found');
    await c.fails('container_file_delete', { path: 'dir' }, 'not_empty');
    await c.fails('container_file_delete', { path: 'missing' }, 'not_found');
    await c.fails('container_file_delete', { path: '/workspace' }, 'permission_denied');
    assert.equal((await c.ok('container_file_delete', { path: 'dir', recursive: true })).deleted, 2);
    assert.deepEqual((await c.ok('container_preview', {})).previews, []);
    await c.fails('container_preview', { port: 8788 }, 'invalid_arguments', /the server's own listeners/);
    await c.fails('container_preview', { revoke: 'prv_nosuch' }, 'not_found');
    for (const tool of ['container_ping', 'container_initialize', 'container_files_list'])
      await c.fails(tool, { session_id: 'ses_doesnotexist' }, 'not_found');
  });

  test('every run tool on success and on its errors; cancel_run answers an ended run with its status', async () => {
    const started = await c.ok('run_task', { task: 'contracts: nothing to do', title: 'First' });
    assert.equal(started.status, 'queued');
    const done = await c.waitRun(started.run_id);
    assert.equal(done.status, 'failed', JSON.stringify(done));
    assert.equal(done.result.success, false);
    for (let i = 0; i < 2; i++) {
      const again = await c.ok('cancel_run', { run_id: started.run_id });
      assert.deepEqual(again, { run_id: started.run_id, status: 'failed', already_ended: true });
    }
    const list = await c.ok('list_runs', { session_id: started.session_id });
    assert.deepEqual(list.runs.map((x) => x.run_id), [started.run_id]);
    assert.equal(list.has_more, false);

    await c.fails('run_task', { task: '' }, 'invalid_arguments', /task/);
    await c.fails('run_task', { task: 'x', session_id: 'ses_doesnotexist' }, 'not_found');
    await c.fails('run_task', { task: 'x', timeout_minutes: 240.5 }, 'invalid_arguments', /at most 240/);
    await c.fails('run_task', { task: 'x', network: 'public' }, 'invalid_arguments', /network 'public' is wider/);
    await c.fails('get_result', { run_id: 'run_doesnotexist' }, 'not_found');
    await c.fails('get_result', { run_id: started.run_id, wait_seconds: 61 }, 'invalid_arguments');
    await c.fails('cancel_run', { run_id: 'run_doesnotexist' }, 'not_found');
    await c.fails('deliver_run', { run_id: 'run_doesnotexist' }, 'not_found');
    await c.fails('deliver_run', { run_id: started.run_id }, 'invalid_arguments', /not one of several attempts/);
    await c.fails('answer_run', { run_id: 'run_doesnotexist', answer: 'yes' }, 'not_found');
    await c.fails('answer_run', { run_id: started.run_id, answer: 'yes' }, 'failed', /not waiting for an answer/);
    await c.fails('answer_run', { run_id: started.run_id, answer: 'x'.repeat(16385) }, 'invalid_arguments');
    await c.fails('get_result', { group_id: 'grp_doesnotexist' }, 'not_found');
    await c.fails('get_result', {}, 'invalid_arguments');
    await c.fails('list_runs', { status: 'sleeping' }, 'invalid_arguments');
    await c.fails('list_runs', { session_id: 'ses_doesnotexist' }, 'not_found');
    await c.fails('list_runs', { cursor: 'not-a-cursor' }, 'invalid_arguments', /cursor/);
    // the largest timeout the schema allows is one run_task takes
    const longest = await c.ok('run_task', { task: 'contracts: longest timeout', timeout_minutes: 240,
      session_id: started.session_id });
    await c.waitRun(longest.run_id);
  });

  test("the opencode_* aliases take the seed's camelCase names and statuses, and stay hidden", async () => {
    const a = await c.ok('opencode_run_task', { task: 'contracts: seed run' });
    const b = await c.ok('opencode_run_task', { task: 'contracts: seed run 2', sessionId: a.session_id });
    assert.equal(b.session_id, a.session_id);
    const rb = await c.waitRun(b.run_id, 'opencode_get_result', 'runId');
    assert.equal(rb.run_id, b.run_id);
    await c.waitRun(a.run_id, 'opencode_get_result', 'runId');
    const ids = async (args) => (await c.ok('opencode_list_runs', args)).runs.map((x) => x.run_id);
    assert.deepEqual(await ids({ sessionId: a.session_id }), [b.run_id, a.run_id]);
    assert.deepEqual(await ids({ sessionId: a.session_id, status: 'failed' }), [b.run_id, a.run_id]);
    // started is a run not yet at work, completed one that succeeded: none here
    assert.deepEqual(await ids({ sessionId: a.session_id, status: 'started' }), []);
    assert.deepEqual(await ids({ sessionId: a.session_id, status: 'completed' }), []);
    // before: a Unix time in seconds or milliseconds
    const [row] = sqlRows(server, `SELECT created_at FROM runs WHERE id = '${b.run_id}'`);
    assert.deepEqual(await ids({ sessionId: a.session_id, before: row.created_at }), [a.run_id]);
    assert.deepEqual(await ids({ sessionId: a.session_id, before: Math.ceil(row.created_at / 1000) + 1 }), [b.run_id, a.run_id]);
    assert.deepEqual(await ids({ sessionId: a.session_id, before: 1 }), []);
    // this server's names work too; both forms of one name must agree
    assert.equal((await c.ok('opencode_get_result', { run_id: a.run_id })).run_id, a.run_id);
    await c.fails('opencode_get_result', { runId: a.run_id, run_id: b.run_id }, 'invalid_arguments', /run_id and runId/);
    await c.fails('opencode_get_result', {}, 'invalid_arguments', /run_id/);
    await c.fails('opencode_get_result', { runId: 'run_doesnotexist' }, 'not_found');
    await c.fails('opencode_list_runs', { status: 'sleeping' }, 'invalid_arguments');
    await c.fails('opencode_run_task', { task: 'x', sessionId: 'ses_doesnotexist' }, 'not_found');
  });

  test("list_runs' cursor is opaque, the user's own, and counts nothing", async () => {
    const alice = await Checked.open(server, addUser(server, 'alice'));
    const bob = await Checked.open(server, addUser(server, 'bob'));
    try {
      const first = await alice.ok('run_task', { task: 'contracts: alice 1' });
      const second = await alice.ok('run_task', { task: 'contracts: alice 2', session_id: first.session_id });
      await alice.waitRun(second.run_id);
      const page = await alice.ok('list_runs', { limit: 1 });
      assert.deepEqual(page.runs.map((x) => x.run_id), [second.run_id]);
      assert.equal(page.has_more, true);
      const cursor = page.next_cursor;
      // it holds nothing the page did not show: not the row number the store counts every
      // user's runs with, only the id of the page's last run
      assert.doesNotMatch(cursor, /^\d+$/);
      assert.equal(Buffer.from(cursor, 'base64url').toString('latin1'), second.run_id);
      // other users' runs do not change it
      const theirs = await bob.ok('run_task', { task: 'contracts: bob 1' });
      await bob.waitRun(theirs.run_id);
      assert.equal((await alice.ok('list_runs', { limit: 1 })).next_cursor, cursor);
      const rest = await alice.ok('list_runs', { limit: 1, cursor });
      assert.deepEqual(rest.runs.map((x) => x.run_id), [first.run_id]);
      assert.equal(rest.has_more, false);
      assert.equal(rest.next_cursor, null);
      // another user's cursor, or an altered one, is refused, naming the cursor
      await bob.fails('list_runs', { limit: 1, cursor }, 'invalid_arguments', /not one list_runs gave you/);
      const altered = cursor.slice(0, -2) + (cursor.at(-2) === 'A' ? 'B' : 'A') + cursor.slice(-1);
      assert.notEqual(altered, cursor);
      await alice.fails('list_runs', { cursor: altered }, 'invalid_arguments', /cursor/);
    } finally {
      await alice.close();
      await bob.close();
    }
  });

  test('every tool was seen succeeding and failing, and the server found no mismatch', () => {
    for (const name of [...TOOLS, ...Object.keys(ALIASES)]) {
      // deliver_run succeeds only for an attempt that ended well, answer_run only for a run whose
      // agent asks, which need a real agent: runs_agents.test.mjs and questions.test.mjs see
      // them succeed
      if (name !== 'deliver_run' && name !== 'answer_run') assert.ok(c.checked.ok.has(name), `${name} never succeeded`);
      assert.ok(c.checked.error.has(name), `${name} never failed`);
    }
    noMismatch(server);
  });
});

describe('a server whose sandboxes reach the network, with a shorter run timeout', () => {
  let server, client;
  before(async () => {
    server = await startServer({ env: { ...NO_AGENT, SANDBOX_NETWORK: 'public',
      RUN_TIMEOUT_MAX_MINUTES: '90', EXEC_TIMEOUT_MAX_SECONDS: '600' } });
    client = await Checked.open(server);
  });
  after(async () => {
    await client?.close();
    await server?.stop();
  });

  test('container_exec is open-world, and the schemas carry the configured limits', async () => {
    const { tools } = await client.client.listTools();
    const get = (n) => tools.find((t) => t.name === n);
    assert.equal(get('container_exec').annotations.openWorldHint, true);
    assert.match(get('container_exec').description, /any public internet host/);
    assert.equal(get('container_exec').inputSchema.properties.timeout_ms.maximum, 600000);
    assert.equal(get('run_task').inputSchema.properties.timeout_minutes.maximum, 90);
    assert.match(client.client.getInstructions(), /any public internet host/);
    await client.fails('run_task', { task: 'x', timeout_minutes: 91 }, 'invalid_arguments', /at most 90/);
    await client.fails('container_exec', { command: 'true', timeout_ms: 600001 }, 'invalid_arguments', /600000/);
  });
});

describe('a server without sandboxes', () => {
  let server, c, cgroups;
  before(async () => {
    // no usable cgroup hierarchy: the sandbox runtime, and runs with it, do not start; and no
    // model provider's key
    cgroups = mkdtempSync(path.join(tempDir(), 'cgroup-'));
    server = await startServer({ env: { ...NO_AGENT, ANTHROPIC_API_KEY: '', SANDBOX_CGROUP_ROOT: cgroups } });
    c = await Checked.open(server);
  });
  after(async () => {
    await c?.close();
    await server?.stop();
    if (cgroups) rmSync(path.dirname(cgroups), { recursive: true, force: true });
  });

  test('each tool answers unavailable in the error shape, saying why', async () => {
    const calls = [
      ['container_exec', { command: 'true' }], ['container_ping', {}], ['container_initialize', {}],
      ['container_file_write', { path: 'a', content: 'x' }], ['container_file_read', { path: 'a' }],
      ['container_files_list', {}], ['container_file_delete', { path: 'a' }], ['container_preview', { port: 3000 }],
      ['run_task', { task: 'x' }], ['get_result', { run_id: 'run_x' }], ['list_runs', {}],
      ['cancel_run', { run_id: 'run_x' }], ['deliver_run', { run_id: 'run_x' }], ['answer_run', { run_id: 'run_x' }],
      ['opencode_run_task', { task: 'x' }],
      ['opencode_get_result', { runId: 'run_x' }], ['opencode_list_runs', {}],
    ];
    for (const [name, args] of calls)
      await c.fails(name, args, 'unavailable', /unavailable|not available/);
    await c.ok('server_info', {});
    const { tools } = await c.client.listTools();
    assert.match(tools.find((t) => t.name === 'run_task').description,
      /No model provider has its key set on this server yet/);
    noMismatch(server);
  });
});
