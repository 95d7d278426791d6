// The run and session pages. Everything shown comes from the server as JSON and goes onto the
// page as text (textContent), never as HTML, so nothing an agent wrote can run here.
'use strict';

const params = new URLSearchParams(location.search);
const token = params.get('t') || '';
const parts = location.pathname.split('/').filter(Boolean); // ["runs", id] or ["sessions", id]
const id = parts[1] || '';
// With a view token the page needs nothing else; without one it opens for its owner signed in,
// by the session cookie, which only then goes with the requests.
const q = token ? `?t=${encodeURIComponent(token)}` : '';
const credentials = token ? 'omit' : 'same-origin';

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
  $('status-reason').textContent = reason || '';
}

async function getJson(path) {
  const r = await fetch(path + q, { cache: 'no-store', credentials });
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

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

// An address to link to: http(s) only; anything else is shown as text, never followed.
function safeUrl(u) {
  try {
    const url = new URL(String(u));
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch {
    return null;
  }
}

function showCommits(list) {
  const commits = $('commits');
  commits.replaceChildren();
  for (const k of list) {
    const sha = String((typeof k === 'string' ? k : k && k.sha) || '');
    const msg = typeof k === 'string' ? '' : String((k && k.message) || '');
    const li = el('li');
    li.append(el('code', 'sha', sha.slice(0, 10)), el('span', 'msg', ` ${msg}`));
    commits.append(li);
  }
  if (!list.length) commits.append(el('li', 'muted', 'none'));
}

// The pull request the run's work went to, and how it was delivered (when the run has one).
function showDelivery(pr, delivery) {
  const box = $('pull-request');
  const d = delivery || {};
  box.hidden = !pr && !d.status;
  if (box.hidden) return;
  const link = $('pr-link');
  link.hidden = !pr;
  $('pr-state').textContent = '';
  if (pr) {
    link.textContent = `Pull request${pr.number != null ? ` #${pr.number}` : ''}`;
    const href = safeUrl(pr.url);
    if (href) link.href = href;
    else link.removeAttribute('href');
    const state = [pr.state, pr.draft ? 'draft' : ''].filter(Boolean).join(', ');
    $('pr-state').textContent = state ? `(${state})` : '';
  }
  const said = [];
  if (d.status) said.push(`${d.status}${d.reason ? `: ${d.reason}` : ''}`);
  if (d.branch) said.push(`branch ${d.branch}`);
  if (Array.isArray(d.commits) && d.commits.length && d.status === 'delivered')
    said.push(`${plural(d.commits.length, 'commit', 'commits')} pushed`);
  $('delivery').textContent = said.join(' · ');
  $('delivery').hidden = !said.length;
}

// --- the diff: one collapsible block a file, its lines coloured by kind, as text ---

const OPEN_LINES = 120; // a diff this short opens whole

function diffLines(hunks) {
  const box = el('div', 'hunks');
  for (const line of hunks.split('\n')) {
    const c = line[0];
    const kind = c === '+' ? 'add' : c === '-' ? 'del' : c === '@' ? 'hunk' : c === '\\' ? 'note' : 'ctx';
    box.append(el('div', `ln ${kind}`, line || ' '));
  }
  return box;
}

function fileBlock(f, open) {
  const d = el('details', 'file');
  const s = el('summary');
  s.append(el('span', 'path', f.old_path ? `${f.old_path} → ${f.path}` : f.path), ' ');
  if (!f.binary) {
    s.append(el('span', 'plus', `+${f.insertions}`), ' ', el('span', 'minus', `−${f.deletions}`), ' ');
  }
  s.append(el('span', `tag tag-${f.status}`, f.status));
  if (f.binary) s.append(' ', el('span', 'tag', 'binary'));
  if (f.old_mode && f.new_mode) s.append(' ', el('span', 'tag', `mode ${f.old_mode} → ${f.new_mode}`));
  d.append(s);
  // the lines are put on the page when the block is first opened
  const fill = () => {
    if (d.dataset.filled) return;
    d.dataset.filled = '1';
    if (f.binary) d.append(el('p', 'muted blank', 'Binary file, not shown.'));
    else if (f.hunks) d.append(diffLines(f.hunks));
    else d.append(el('p', 'muted blank', 'No lines changed.'));
    if (f.more_lines > 0) d.append(el('p', 'more', plural(f.more_lines, 'more line', 'more lines')));
  };
  d.addEventListener('toggle', () => { if (d.open) fill(); });
  if (open) {
    d.open = true;
    fill();
  }
  return d;
}

function showDiff(diff) {
  const box = $('diff');
  box.replaceChildren();
  const shown = diff.files.reduce((n, f) => n + (f.hunks ? f.hunks.split('\n').length : 0), 0);
  for (const f of diff.files) box.append(fileBlock(f, shown <= OPEN_LINES));
  if (diff.more_files > 0) box.append(el('p', 'more', plural(diff.more_files, 'more file', 'more files')));
  $('files').hidden = diff.files.length > 0 || diff.more_files > 0;
  const note = $('diff-note');
  note.hidden = !diff.truncated;
  note.textContent = 'Parts of this diff are left out: it is cut to what a page can show.';
}

let diffAsked = false;

async function loadDiff() {
  if (diffAsked) return;
  diffAsked = true;
  let diff;
  try {
    diff = await getJson(`/runs/${id}/diff`);
  } catch {
    diffAsked = false; // asked again with the next look at the run
    return;
  }
  if (diff && Array.isArray(diff.files)) showDiff(diff);
}

// --- the phase: what the run is doing now, and for how long (or how it ended, and how long it
// took); the clock runs on here between the server's words ---

function duration(secs) {
  const s = Math.max(0, Math.floor(secs));
  if (s < 60) return `${s}s`;
  const pad = (n) => String(n).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`;
  return `${Math.floor(s / 3600)}h ${pad(Math.floor(s / 60) % 60)}m`;
}

let clock = null; // {secs, at, done}

function showElapsed() {
  if (!clock) return;
  const secs = clock.done ? clock.secs : clock.secs + (Date.now() - clock.at) / 1000;
  $('elapsed').textContent = clock.done ? `· took ${duration(secs)}` : `· ${duration(secs)} so far`;
}

function showPhase(phase, elapsed, done) {
  if (!phase) return;
  $('phase').textContent = phase.text;
  $('phase').dataset.phase = phase.name;
  if (typeof elapsed === 'number') clock = { secs: elapsed, at: Date.now(), done };
  showElapsed();
}

setInterval(showElapsed, 1000);

function showRun(run) {
  document.title = `${run.title || 'Run'} · ${run.status} · sandbox-mcp`;
  setText('title', run.title || 'Run');
  const ended = !['queued', 'running'].includes(run.status);
  // while it runs the phase says what the reason would, and more
  setStatus(run.status, ended ? run.status_reason : '');
  showPhase(run.phase, run.elapsed_seconds, ended);
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
  $('changes').hidden = !done;
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
  showDelivery(run.pull_request, run.delivery);
  // the run's commits: what a delivery pushed (the agent's, and the server's own last one)
  showCommits(c.commits || []);
  loadDiff();
  const u = run.usage || {};
  setText('usage', `${u.input_tokens || 0} input tokens, ${u.output_tokens || 0} output tokens, `
    + `$${Number(u.cost || 0).toFixed(4)}`);
}

const seen = new Set();

// The agent's steps frame its tool calls and texts: a step's start opens a group that holds
// them, headed with its number, and its finish closes the group with a line of its own, so they
// are not rows of their own. Every event keeps its sequence number on its element, in order.
let step = null;
let steps = 0;

function nearBottom() {
  return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 160;
}

function addEvent(ev) {
  if (seen.has(ev.seq)) return;
  seen.add(ev.seq);
  $('empty').hidden = true;
  const follow = nearBottom();
  if (ev.type === 'step_start') {
    step = el('li', 'step');
    step.dataset.seq = String(ev.seq);
    const head = el('div', 'step-head');
    head.append(el('span', null, `step ${++steps}`),
      el('time', 'event-time', new Date(ev.time).toLocaleTimeString()));
    step.append(head, el('ol', 'step-events'));
    $('timeline').append(step);
  } else if (ev.type === 'step_finish' && step) {
    const end = el('div', 'step-end', ev.summary);
    end.dataset.seq = String(ev.seq);
    step.append(end);
    step = null;
  } else {
    const li = el('li', `event event-${ev.type}`);
    li.dataset.seq = String(ev.seq);
    const head = el('div', 'event-head');
    head.append(el('span', 'event-type', ev.type.replace(/_/g, ' ')),
      el('time', 'event-time', new Date(ev.time).toLocaleTimeString()));
    li.append(head, el('div', 'event-summary', ev.summary));
    if (ev.text && ev.text !== ev.summary) li.append(el('pre', 'event-text', ev.text));
    (step ? step.querySelector('.step-events') : $('timeline')).append(li);
  }
  // the newest stays in sight for a reader at the bottom; one who scrolled up gets a way back
  if (!follow) $('jump').hidden = false;
}

function jumpToLatest() {
  const all = document.querySelectorAll('#timeline [data-seq]');
  if (all.length) all[all.length - 1].scrollIntoView({ block: 'end' });
  $('jump').hidden = true;
}

// A form of the owner's page: POSTed with the page's CSRF token; the answer's JSON, or throws
// with the server's reason.
async function postForm(path, fields, csrf) {
  const body = new URLSearchParams({ ...fields, csrf });
  const r = await fetch(path, { method: 'POST', body, credentials: 'same-origin' });
  const out = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(out.error || `failed (${r.status})`);
  return out;
}

// The owner signed in may cancel a run under way (a view link only reads).
function ownerActions(run) {
  const box = $('actions');
  box.hidden = !(run.can_act && ['queued', 'running'].includes(run.status));
  if (box.hidden) return;
  const b = $('cancel');
  b.onclick = async () => {
    b.disabled = true;
    try {
      await postForm(`/runs/${id}/cancel`, {}, run.csrf);
      setText('action-note', 'Cancelling.');
    } catch (e) {
      b.disabled = false;
      setText('action-note', e.message);
    }
  };
}

// What the run's agent asks and waits for: shown to anyone with the page, answered by the owner
// signed in (a question's answer; a plan approved as written or with changes).
let shownQuestion = '';
function showQuestion(run) {
  const q = run.question;
  const box = $('question');
  box.hidden = !q;
  if (!q) { shownQuestion = ''; return; }
  if (q.id === shownQuestion) return; // keep what the owner is typing
  shownQuestion = q.id;
  const plan = q.kind === 'plan';
  setText('question-title', plan ? "The agent's plan, for your approval" : 'The agent asks');
  setText('question-text', q.text);
  setText('question-wait', `Without an answer by ${new Date(q.answer_by).toLocaleString()}, `
    + (plan ? 'the plan is not carried out.' : 'the agent goes on with its own judgement.'));
  const choices = $('question-choices');
  choices.replaceChildren();
  const text = $('answer-text');
  text.value = '';
  for (const c of q.choices || []) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'choice';
    b.textContent = c;
    b.onclick = () => { text.value = c; text.focus(); };
    choices.append(b);
  }
  const form = $('answer-form');
  form.hidden = !run.can_act;
  setText('answer-label', plan ? 'Changes to make (leave empty to approve it as written)' : 'Your answer');
  setText('answer-send', plan ? 'Approve' : 'Send the answer');
  $('answer-note').textContent = '';
  text.required = !plan;
  form.onsubmit = async (ev) => {
    ev.preventDefault();
    const send = $('answer-send');
    send.disabled = true;
    try {
      await postForm(`/runs/${id}/answer`, { answer: text.value, question_id: q.id }, run.csrf);
      form.hidden = true;
      setText('question-wait', plan ? 'Approved: the agent goes on.' : 'Answered: the agent goes on.');
    } catch (e) {
      setText('answer-note', e.message);
    } finally {
      send.disabled = false;
    }
  };
}

// What the run's agent opened for a person to look at: links that open in a new tab.
function showPreviews(run) {
  const list = run.previews || [];
  $('previews').hidden = !list.length;
  const ul = $('preview-list');
  ul.replaceChildren();
  for (const p of list) {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.href = p.url;
    a.target = '_blank';
    a.rel = 'noreferrer noopener';
    a.textContent = `Port ${p.port}`;
    const until = document.createElement('span');
    until.className = 'muted';
    until.textContent = ` until ${new Date(p.expires_at).toLocaleTimeString()}`;
    li.append(a, until);
    ul.append(li);
  }
}

// Images the run's agent kept to show its work (a screenshot of its app), with their captions.
let shownEvidence = -1;
function showEvidence(run) {
  const list = run.evidence || [];
  $('evidence').hidden = !list.length;
  if (list.length === shownEvidence) return;
  shownEvidence = list.length;
  const box = $('evidence-list');
  box.replaceChildren();
  for (const ev of list) {
    const fig = document.createElement('figure');
    const img = document.createElement('img');
    img.src = `${ev.path}${q}`;
    img.alt = ev.caption || `evidence ${ev.n}`;
    img.loading = 'lazy';
    const cap = document.createElement('figcaption');
    cap.textContent = ev.caption || `Evidence ${ev.n}`;
    fig.append(img, cap);
    box.append(fig);
  }
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
  ownerActions(run);
  showQuestion(run);
  showPreviews(run);
  showEvidence(run);
  const link = $('session-link');
  link.hidden = true;
  const live = $('live');
  $('jump').onclick = jumpToLatest;
  window.addEventListener('scroll', () => { if (nearBottom()) $('jump').hidden = true; }, { passive: true });
  const src = new EventSource(`/runs/${id}/events${q}`);
  live.hidden = false;
  src.addEventListener('run-event', (m) => {
    addEvent(JSON.parse(m.data));
    if (run.status === 'queued') setStatus('running', '');
  });
  src.addEventListener('phase', async (m) => {
    const p = JSON.parse(m.data);
    showPhase(p.phase, p.elapsed_seconds, ['succeeded', 'failed', 'cancelled'].includes(p.phase.name));
    // a question asked, or answered: what it asks, from the run's data
    if ((p.phase.name === 'waiting') !== !!shownQuestion) {
      try { showQuestion(await getJson(`/runs/${id}/data`)); } catch { /* the timer looks again */ }
    }
  });
  src.addEventListener('end', async () => {
    src.close();
    live.hidden = true;
    try {
      const r = await getJson(`/runs/${id}/data`);
      showRun(r);
      ownerActions(r);
      showQuestion(r);
      showPreviews(r);
      showEvidence(r);
    } catch { /* keep what is shown */ }
  });
  src.onerror = () => { /* EventSource reconnects by itself, resuming after the last id */ };
  // the status line follows the run while it goes on
  const timer = setInterval(async () => {
    if (live.hidden) { clearInterval(timer); return; }
    try {
      const r = await getJson(`/runs/${id}/data`);
      if (['queued', 'running'].includes(r.status)) {
        setStatus(r.status, '');
        showPhase(r.phase, r.elapsed_seconds, false);
      }
      showQuestion(r);
      showPreviews(r);
      showEvidence(r);
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
  if (s.can_act) {
    // the owner signed in follows up from here: a run in this session, then its page
    $('follow-up').hidden = false;
    $('follow-up-form').onsubmit = async (ev) => {
      ev.preventDefault();
      const button = ev.target.querySelector('button');
      button.disabled = true;
      try {
        const out = await postForm(`/sessions/${id}/follow-up`, { task: $('follow-up-task').value }, s.csrf);
        // the run's page as its owner sees it, signed in (a view link's page only reads)
        location.href = `/runs/${out.run_id}`;
      } catch (e) {
        button.disabled = false;
        setText('follow-up-note', e.message);
      }
    };
  }
  const pr = s.pull_request;
  if (pr) {
    // what the pull request can still ask of the session (review comments, failing CI)
    const p = $('steering');
    const link = el('a', 'pr', `Pull request #${pr.number}`);
    const href = safeUrl(pr.url);
    if (href) link.href = href;
    link.rel = 'noreferrer noopener';
    p.append(link, pr.steering
      ? `: review comments addressed to the server start runs here${pr.fix_ci
        ? `, and failing CI is fixed by runs (${pr.ci_fixes} so far for its latest push)` : ''}.`
      : ` was ${pr.state}: this session takes no more steering from it.`);
    p.hidden = false;
  }
  const list = $('runs');
  $('empty').hidden = s.runs.length > 0;
  for (const r of s.runs) {
    const li = el('li', 'run');
    const a = el('a', 'run-title', r.title || r.task_preview);
    a.href = new URL(r.web_url, location.href).pathname + new URL(r.web_url, location.href).search;
    const st = el('span', `status status-${r.status}`, r.status);
    li.append(st, a);
    if (r.pull_request) {
      const pr = el('a', 'pr', `pull request${r.pull_request.number != null ? ` #${r.pull_request.number}` : ''}`);
      const href = safeUrl(r.pull_request.url);
      if (href) pr.href = href;
      pr.rel = 'noreferrer noopener';
      li.append(' ', pr);
    }
    li.append(el('div', 'muted', when(r.created_at)));
    list.append(li);
  }
}

// --- a group of attempts: each one's outcome side by side, its diff on demand, and for the owner
// signed in a button that delivers it ---

function pathOf(url) {
  const u = new URL(url, location.href);
  return u.pathname + u.search;
}

function attemptCard(g, a) {
  const card = el('section', `card attempt${g.picked === a.run_id ? ' picked' : ''}`);
  card.append(el('h2', null, `${a.agent} · ${a.model}`));
  const head = el('p');
  head.append(el('span', `status status-${a.status}`, a.status), ' ');
  const link = el('a', null, 'run page');
  link.href = pathOf(a.web_url);
  head.append(link);
  card.append(head);
  if (a.summary) card.append(el('pre', 'summary', a.summary));
  if (a.error) card.append(el('p', 'error', a.error));
  const facts = el('dl', 'facts');
  const fact = (k, v) => facts.append(el('dt', null, k), el('dd', null, v));
  fact('Changes', `${plural(a.files_changed, 'file', 'files')}, +${a.insertions} −${a.deletions}, `
    + plural(a.commits, 'commit', 'commits'));
  fact('Tests', a.tests || 'none run');
  fact('Cost', a.cost ? `$${a.cost.toFixed(4)}` : '-');
  fact('Tokens', `${a.input_tokens} in, ${a.output_tokens} out`);
  if (a.base_commit) fact('Started from', a.base_commit.slice(0, 12));
  if (a.delivery) {
    fact('Delivery', a.delivery.status === 'held' ? 'held until picked'
      : a.delivery.reason ? `${a.delivery.status}: ${a.delivery.reason}` : a.delivery.status);
  }
  card.append(facts);
  // its diff, read with its own run's view token (which the group's page was given)
  const diff = el('details', 'diff');
  diff.append(el('summary', null, 'Diff'));
  diff.addEventListener('toggle', async () => {
    if (!diff.open || diff.dataset.filled) return;
    diff.dataset.filled = '1';
    const u = new URL(a.web_url, location.href);
    try {
      const r = await fetch(`${u.pathname}/diff${u.search}`, { cache: 'no-store', credentials });
      const d = r.ok ? await r.json() : null;
      if (d && Array.isArray(d.files) && d.files.length) for (const f of d.files) diff.append(fileBlock(f, false));
      else diff.append(el('p', 'muted blank', 'No changes.'));
    } catch {
      diff.append(el('p', 'muted blank', 'The diff could not be loaded.'));
    }
  });
  card.append(diff);
  if (g.can_pick && !g.picked && a.status === 'succeeded' && a.delivery && a.delivery.status === 'held') {
    const b = el('button', 'primary', 'Deliver this attempt');
    b.addEventListener('click', async () => {
      b.disabled = true;
      const body = new URLSearchParams({ run_id: a.run_id, csrf: g.csrf });
      const r = await fetch(`/groups/${id}/deliver`, { method: 'POST', body, credentials: 'same-origin' });
      const out = await r.json().catch(() => ({}));
      if (r.ok) location.reload();
      else {
        b.disabled = false;
        card.append(el('p', 'error', (out.error && out.error.message) || `failed (${r.status})`));
      }
    });
    card.append(b);
  }
  return card;
}

async function groupPage() {
  let g;
  try {
    g = await getJson(`/groups/${id}/data`);
  } catch (e) {
    setText('group-id', `this page could not be loaded (${e.message})`);
    return;
  }
  setText('group-id', `${g.group_id} · ${plural(g.attempts.length, 'attempt', 'attempts')}`);
  setText('picked', (g.picked ? `Picked: ${g.picked} (delivery ${g.delivery_status}).`
    : 'None picked yet: nothing is pushed until one is.')
    + (g.same_start ? '' : ' They did not all start from the same commit: the branch moved between their clones.'));
  $('attempts').replaceChildren(...g.attempts.map((a) => attemptCard(g, a)));
  $('pick-note').hidden = g.can_pick || !!g.picked;
  if (g.attempts.some((a) => a.status === 'queued' || a.status === 'running')) setTimeout(groupPage, 5000);
}

if (document.body.dataset.page === 'run') runPage();
else if (document.body.dataset.page === 'session') sessionPage();
else if (document.body.dataset.page === 'group') groupPage();
