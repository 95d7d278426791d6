// The real OpenCode as an MCP client of this server: OpenCode runs on the host, talks to a scripted
// fake of the Anthropic API, and the fake makes it call container_exec over /mcp. The command runs
// in the user's sandbox and its output comes back to the model as the tool result.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, rpc, tempDir } from '../lib/server.mjs';
import { startFake, agentScript, toolNames, toolResults } from '../lib/fake-anthropic.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const OPENCODE = process.env.OPENCODE_BIN
  || path.join(repoRoot, 'src/runs/opencode/node_modules/opencode-ai/bin/opencode.exe');
const OPENCODE_VERSION = '1.18.33';

let fake, server, dir;

// A HOME for OpenCode that needs no network: its config directory already "has" the plugin
// package it would otherwise install with npm on start.
function openCodeHome(root) {
  const home = path.join(root, 'home');
  const cfg = path.join(home, '.config', 'opencode');
  mkdirSync(path.join(cfg, 'node_modules'), { recursive: true });
  const deps = { '@opencode-ai/plugin': OPENCODE_VERSION };
  writeFileSync(path.join(cfg, 'package.json'), JSON.stringify({ dependencies: deps }));
  writeFileSync(path.join(cfg, 'package-lock.json'), JSON.stringify({ packages: { '': { dependencies: deps } } }));
  return home;
}

// `opencode run --format json` with the task on stdin; resolves {code, events, stdout, stderr}.
function runOpenCode({ cwd, home, config, task }) {
  const env = {
    ...process.env,
    HOME: home,
    PWD: cwd, // OpenCode takes its working directory from $PWD when it is set
    OPENCODE_DISABLE_MODELS_FETCH: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    SMCP_KEY: 'sk-ant-not-a-real-key',
    OPENCODE_CONFIG_CONTENT: JSON.stringify(config),
  };
  return new Promise((resolve) => {
    const p = spawn(OPENCODE, ['run', '--format', 'json', '-m', 'anthropic/claude-sonnet-4-5'],
      { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('error', (e) => { stderr += `spawn ${OPENCODE}: ${e.message}\n`; });
    p.stdin.end(task);
    p.on('close', (code) => {
      const events = stdout.split('\n').filter(Boolean).map((l) => {
        try { return JSON.parse(l); } catch { return { type: 'unparsed', line: l }; }
      });
      resolve({ code, events, stdout, stderr });
    });
  });
}

before(async () => {
  assert.ok(existsSync(OPENCODE), `OpenCode not found at ${OPENCODE} (make deps installs it; or set OPENCODE_BIN)`);
  fake = await startFake();
  server = await startServer();
  dir = tempDir('smcp-oc-');
});

after(async () => {
  if (process.env.SHOW_STDERR) console.log(server?.stderr());
  await server?.stop();
  await fake?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('OpenCode calls container_exec over /mcp; the command runs in the sandbox and its output reaches the model', async () => {
  const script = agentScript([
    // OpenCode names an MCP tool "<server name>_<tool name>"
    { text: 'Running it in the sandbox.', tool: 'sandbox_container_exec',
      input: { command: 'echo hi-from-$(hostname); echo mcp-was-here > /workspace/opencode-mcp.txt' } },
    { text: 'The sandbox said hello.' },
  ], { name: 'mcp' });
  fake.handle(script);
  const cwd = path.join(dir, 'project');
  mkdirSync(cwd);
  assert.equal(spawnSync('git', ['init', '-q', cwd]).status, 0);
  const config = {
    autoupdate: false,
    share: 'disabled',
    provider: { anthropic: { options: { baseURL: `${fake.url}/v1`, apiKey: '{env:SMCP_KEY}' } } },
    permission: { edit: 'allow', bash: 'allow', webfetch: 'allow', external_directory: 'allow' },
    mcp: { sandbox: { type: 'remote', url: server.mcpUrl, headers: { Authorization: `Bearer ${server.token}` }, enabled: true } },
  };
  const r = await runOpenCode({ cwd, home: openCodeHome(dir), config, task: 'Say hello from the sandbox.' });
  const diag = `exit ${r.code}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr.slice(-4000)}`;
  assert.equal(r.code, 0, diag);
  assert.equal(script.overrun, 0, diag);
  assert.equal(script.requests.length, 2, diag);

  // every tool of this server is offered to the model under the "sandbox_" prefix
  const offered = toolNames(script.requests[0].body);
  for (const t of ['container_exec', 'container_file_read', 'container_file_write', 'container_files_list', 'container_ping'])
    assert.ok(offered.includes(`sandbox_${t}`), `sandbox_${t} not offered: ${offered.join(', ')}`);
  const execTool = script.requests[0].body.tools.find((t) => t.name === 'sandbox_container_exec');
  assert.ok(execTool.input_schema.properties.command, JSON.stringify(execTool));

  // the next request carries the tool result: the command's output, from inside the sandbox
  const results = toolResults(script.requests[1].body);
  assert.equal(results.length, 1, JSON.stringify(results));
  assert.equal(results[0].tool_use_id, script.toolCalls[0].id);
  assert.match(results[0].text, /hi-from-sandbox/);
  assert.equal(results[0].is_error, false);

  // OpenCode's own account of the call
  const use = r.events.find((e) => e.type === 'tool_use');
  assert.equal(use.part.tool, 'sandbox_container_exec');
  assert.equal(use.part.state.status, 'completed');
  assert.match(use.part.state.output, /hi-from-sandbox/);
  assert.equal(r.events.filter((e) => e.type === 'text').at(-1).part.text, 'The sandbox said hello.');

  // the file it wrote is in the user's sandbox, not on the host
  const read = await rpc(server, { jsonrpc: '2.0', id: 1, method: 'tools/call',
    params: { name: 'container_exec', arguments: { command: 'cat /workspace/opencode-mcp.txt' } } });
  assert.equal(read.body.result.structuredContent.stdout, 'mcp-was-here\n');
});
