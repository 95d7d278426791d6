// The run and session pages. Everything shown comes from the server as JSON and goes onto the
// page as text (textContent), never as HTML, so nothing an agent wrote can run here.
'use strict';

const params = new URLSearchParams(location.search);
const token = params.get('t') || '';
const parts = location.pathname.split('/').filter(Boolean); // ["runs", id] or ["sessions", id]
const id = parts[1] || '';
const q = `?t=${encodeURIComponent(token)}`;

const $ = (sel) => document.getElementById(sel);

function setText(elId, text) {
  const el = $(elId);
  if (el) el.textContent = text == null || text === '' ? '-' : String(text);
}

function when(iso) {
  if (!iso) return '-';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString();
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function setStatus(status, reason) {
  const s = $('status');
  s.textContent = status;
  s.className = `status status-${status}`;
  setText('status-reason', reason || '');
}

async function getJson(path) {
  const r = await fetch(path + q, { cache: 'no-store', credentials: 'omit' });
  if (!r.ok) throw new Error(`${r.status}`);
  return r.json();
}

// --- the run page ---

function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// What the run's sandbox reached and what it was refused, with the reason.
function showNetwork(net) {
  const card = $('network');
  card.hidden = !net;
  if (!net) return;
  setText('network-mode', `· ${net.mode}`);
  setText('network-totals', `${net.connections} connection${net.connections === 1 ? '' : 's'}, `
    + `${bytes(net.bytes_down)} down, ${bytes(net.bytes_up)} up; `
    + `${net.denied_attempts} refused, ${net.failed_attempts} failed`);
  const reached = $('network-reached');
  reached.replaceChildren();
  for (const h of net.reached) {
    const li = el('li');
    li.append(el('span', 'host', `${h.host}:${h.port}`),
      el('span', 'muted', ` ${h.connections}× · ${bytes(h.bytes_down)} down · ${bytes(h.bytes_up)} up`));
    reached.append(li);
  }
  if (!net.reached.length) reached.append(el('li', 'muted', 'none'));
  const denied = $('network-denied');
  denied.replaceChildren();
  for (const h of [...net.denied, ...net.failed]) {
    const li = el('li');
    li.append(el('span', 'host', `${h.host}:${h.port}`),
      el('span', 'reason', ` ${h.reason.replace(/_/g, ' ')} ${h.attempts}×`),
      el('div', 'muted', h.message));
    denied.append(li);
  }
  if (!net.denied.length && !net.failed.length) denied.append(el('li', 'muted', 'none'));
}

function showRun(run) {
  document.title = `${run.title || 'Run'} · ${run.status} · sandbox-mcp`;
  setText('title', run.title || 'Run');
  setStatus(run.status, run.status_reason);
  setText('task', run.task);
  setText('repository', run.repository || 'none');
  setText('branch', run.branch);
  setText('model', run.model);
  setText('created', when(run.created_at));
  setText('started', when(run.started_at));
  setText('finished', when(run.finished_at));
  showNetwork(run.network);
  const done = !['queued', 'running'].includes(run.status);
  $('outcome').hidden = !done;
  if (!done) return;
  setText('summary', run.result && run.result.summary ? run.result.summary : '(no summary)');
  const err = $('error');
  err.hidden = !(run.result && run.result.error);
  if (!err.hidden) err.textContent = run.result.error;
  const c = run.changes || { files_changed: 0, insertions: 0, deletions: 0, files: [], commits: [] };
  setText('diffstat', `${c.files_changed} file${c.files_changed === 1 ? '' : 's'} changed, `
    + `${c.insertions} insertion${c.insertions === 1 ? '' : 's'}(+), `
    + `${c.deletions} deletion${c.deletions === 1 ? '' : 's'}(-)${c.branch ? ` on ${c.branch}` : ''}`);
  const files = $('files');
  files.replaceChildren();
  for (const f of c.files || []) {
    const li = el('li');
    li.append(el('span', 'path', f.path), el('span', 'plus', ` +${f.insertions}`),
      el('span', 'minus', ` -${f.deletions}`));
    files.append(li);
  }
  const commits = $('commits');
  commits.replaceChildren();
  for (const k of c.commits || []) {
    const li = el('li');
    li.append(el('code', 'sha', k.sha.slice(0, 10)), el('span', 'msg', ` ${k.message}`));
    commits.append(li);
  }
  if (!(c.commits || []).length) commits.append(el('li', 'muted', 'none'));
  const u = run.usage || {};
  setText('usage', `${u.input_tokens || 0} input tokens, ${u.output_tokens || 0} output tokens, `
    + `$${Number(u.cost || 0).toFixed(4)}`);
}

const seen = new Set();

function addEvent(ev) {
  if (seen.has(ev.seq)) return;
  seen.add(ev.seq);
  $('empty').hidden = true;
  const li = el('li', `event event-${ev.type}`);
  li.dataset.seq = String(ev.seq);
  const head = el('div', 'event-head');
  head.append(el('span', 'event-type', ev.type.replace(/_/g, ' ')),
    el('time', 'event-time', new Date(ev.time).toLocaleTimeString()));
  li.append(head, el('div', 'event-summary', ev.summary));
  if (ev.text && ev.text !== ev.summary) li.append(el('pre', 'event-text', ev.text));
  $('timeline').append(li);
}

async function runPage() {
  let run;
  try {
    run = await getJson(`/runs/${id}/data`);
  } catch (e) {
    setStatus('unavailable', `this page could not be loaded (${e.message})`);
    return;
  }
  showRun(run);
  const link = $('session-link');
  link.hidden = true;
  const live = $('live');
  const src = new EventSource(`/runs/${id}/events${q}`);
  live.hidden = false;
  src.addEventListener('run-event', (m) => {
    addEvent(JSON.parse(m.data));
    if (run.status === 'queued') setStatus('running', 'the agent is working');
  });
  src.addEventListener('end', async () => {
    src.close();
    live.hidden = true;
    try { showRun(await getJson(`/runs/${id}/data`)); } catch { /* keep what is shown */ }
  });
  src.onerror = () => { /* EventSource reconnects by itself, resuming after the last id */ };
  // the status line follows the run while it goes on
  const timer = setInterval(async () => {
    if (live.hidden) { clearInterval(timer); return; }
    try {
      const r = await getJson(`/runs/${id}/data`);
      if (['queued', 'running'].includes(r.status)) setStatus(r.status, r.status_reason);
      showNetwork(r.network);
    } catch { /* next time */ }
  }, 5000);
}

// --- the session page ---

async function sessionPage() {
  let s;
  try {
    s = await getJson(`/sessions/${id}/data`);
  } catch (e) {
    setText('session-id', `this page could not be loaded (${e.message})`);
    return;
  }
  setText('session-id', `${s.session_id} · ${s.agent} · since ${when(s.created_at)}`);
  const list = $('runs');
  $('empty').hidden = s.runs.length > 0;
  for (const r of s.runs) {
    const li = el('li', 'run');
    const a = el('a', 'run-title', r.title || r.task_preview);
    a.href = new URL(r.web_url, location.href).pathname + new URL(r.web_url, location.href).search;
    const st = el('span', `status status-${r.status}`, r.status);
    li.append(st, a, el('div', 'muted', when(r.created_at)));
    list.append(li);
  }
}

if (document.body.dataset.page === 'run') runPage();
else if (document.body.dataset.page === 'session') sessionPage();
