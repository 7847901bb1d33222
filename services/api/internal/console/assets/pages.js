// The console's pages. Each reads and changes data through the REST API
// only (api.js), under the signed-in identity; render returns an optional
// cleanup that stops the page's timers and streams.
import { api, session, isAdmin } from './api.js';
import { h, set, page, alertBox, note, table, field, pretty, when } from './dom.js';
import { catalogPage } from './playground.js';
import { THREAD } from './content.js';


export function goTo(slug) {
  window.dispatchEvent(new CustomEvent('mcpbus:go', { detail: slug }));
}

function link(slug, text) {
  const a = h('a', { href: `/ui/${slug}` }, text);
  a.addEventListener('click', (e) => { e.preventDefault(); goTo(slug); });
  return a;
}

// section is a titled part of a page.
function section(title, ...children) {
  return h('section', { 'aria-label': title }, h('h2', {}, title), ...children);
}

async function attempt(fn) {
  try { return [await fn(), null]; } catch (e) { return [null, e]; }
}

function countBy(items, key) {
  const m = {};
  for (const it of items) m[it[key]] = (m[it[key]] || 0) + 1;
  return Object.entries(m).map(([k, v]) => `${k}: ${v}`).join(', ') || 'none';
}

// ---- Overview

async function overview() {
  const [ready, readyErr] = await attempt(() => fetch('/readyz').then((r) => r.json()));
  const [cat, catErr] = await attempt(() => api('GET', `/api/mcp/tools?thread_id=${THREAD}&limit=1`));
  const [tasks, tasksErr] = await attempt(() => api('GET', '/api/mcp/tasks?limit=100'));
  const parts = [];
  parts.push(section('Services', readyErr ? alertBox(readyErr, 'Readiness could not be read')
    : table('Readiness of this api replica and what it depends on', ['check', 'state'],
      [['api', ready.status], ...Object.entries(ready.checks || {}).map(([k, v]) => [k, v])])));
  // A server waiting for someone to connect an account (code
  // auth_required) has not failed: it is counted apart.
  const failed = catErr ? [] : (cat.failed_servers || []);
  const waiting = failed.filter((f) => f.code === 'auth_required').length;
  parts.push(section('Catalog', catErr ? alertBox(catErr, 'The catalog could not be read')
    : h('dl', {}, h('dt', {}, 'Catalog generation'), h('dd', {}, String(cat.generation)),
      h('dt', {}, 'Tools you can call'), h('dd', {}, String(cat.total)),
      h('dt', {}, 'Servers failing discovery'), h('dd', {}, String(failed.length - waiting)),
      h('dt', {}, 'Servers waiting for a user to connect'), h('dd', {}, String(waiting)))));
  if (isAdmin()) {
    const [srv, srvErr] = await attempt(() => api('GET', '/api/mcp/servers?refresh=false'));
    parts.push(section('Servers by state', srvErr ? alertBox(srvErr, 'Server states could not be read')
      : h('p', {}, countBy(srv.servers || [], 'state'), ' — ', link('servers', 'open Servers'))));
  }
  const [calls, callsErr] = await attempt(() => api('GET', '/api/mcp/stats/calls?minutes=10'));
  parts.push(section('Calls and errors per minute', callsErr ? alertBox(callsErr, 'The call counts could not be read (they come from the audit log: is audit.enabled on?)')
    : callsPerMinute(calls)));
  parts.push(section('Tasks by state', tasksErr ? alertBox(tasksErr, 'Tasks could not be read')
    : h('p', {}, countBy(tasks.tasks || [], 'status'), ' — ', link('tasks', 'open Tasks'))));
  page('Overview', parts);
}

// callsPerMinute shows the calls and failed calls of each of the last
// minutes, counted from the audit log (every replica's calls).
function callsPerMinute(r) {
  const mins = r.minutes || [];
  const calls = mins.reduce((a, m) => a + m.calls, 0);
  const errors = mins.reduce((a, m) => a + m.errors, 0);
  const whose = r.scope === 'deployment' ? 'every user\'s calls through every replica' : 'your calls';
  return [h('p', { class: 'calls-total' }, `Last ${mins.length} minutes: ${calls} calls, ${errors} failed (${whose}).`),
    table('Tool calls and failed calls per minute, newest first', ['minute', 'calls', 'failed'],
      mins.slice().reverse().map((m) => [new Date(m.start).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }), String(m.calls), String(m.errors)]))];
}

// ---- Servers (admin)

// pinCounts shows a server's tool pins by state, the states with pins
// only ("—" when it has none, or without a database).
function pinCounts(pins) {
  const parts = Object.entries(pins || {}).filter(([, n]) => n > 0).map(([st, n]) => `${st} ${n}`);
  return parts.length ? parts.join(', ') : '—';
}

async function servers() {
  const status = h('div', { 'aria-live': 'polite' });
  const listBox = h('div');
  const name = h('input', { type: 'text', name: 'server_name', required: true, pattern: '[A-Za-z0-9_-]+' });
  const def = h('textarea', { name: 'definition', rows: '8', spellcheck: 'false' },
    '{\n  "type": "http",\n  "url": "http://127.0.0.1:8765/mcp"\n}');
  let config = {};

  async function load() {
    const [st, cfg] = await Promise.all([api('GET', '/api/mcp/servers'), api('GET', '/api/mcp/config')]);
    config = cfg.mcp_servers || {};
    const rows = (st.servers || []).map((s) => [
      h('strong', {}, s.name), s.state === 'needs_auth' ? 'needs_auth (waiting for a user to connect)' : s.state, s.transport || '—', s.era || '—', String(s.tool_count ?? 0),
      String(s.resource_count ?? 0) + (s.resource_template_count ? ` + ${s.resource_template_count} templates` : ''),
      String(s.prompt_count ?? 0), pinCounts(s.pins),
      s.last_error ? h('span', {}, s.last_error, s.next_retry_at ? ` Next retry: ${when(s.next_retry_at)}.` : '') : '—',
      s.stderr ? h('details', {}, h('summary', {}, 'stderr tail'), h('pre', { tabindex: '0' }, s.stderr)) : '—',
      h('span', { class: 'actions' },
        config[s.name] ? h('button', { type: 'button', onclick: () => edit(s.name) }, `Edit ${s.name}`) : null,
        config[s.name] ? h('button', { type: 'button', onclick: () => toggle(s.name, !s.enabled) }, `${s.enabled ? 'Disable' : 'Enable'} ${s.name}`) : null,
        config[s.name] ? h('button', { type: 'button', class: 'danger', onclick: () => remove(s.name) }, `Delete ${s.name}`) : null),
    ]);
    set(listBox, 
      table(`Servers (catalog generation ${st.generation})`, ['name', 'state', 'transport', 'era', 'tools', 'resources', 'prompts', 'pins', 'last error and next step', 'stderr', 'actions'], rows),
      st.error ? alertBox(st.error, 'The catalog cannot be published') : null);
  }
  function edit(n) {
    name.value = n;
    def.value = JSON.stringify(config[n], null, 2);
    name.focus();
  }
  async function save(servers, what) {
    try {
      await api('PUT', '/api/mcp/config', { mcp_servers: servers });
      set(status, h('p', { role: 'status' }, `${what}. Discovery runs in the background; the table shows the new state.`));
      await load();
    } catch (e) {
      set(status, alertBox(e, `Not saved (${what.toLowerCase()})`));
    }
  }
  async function toggle(n, enabled) {
    try {
      await api('PATCH', '/api/mcp/config', { server_name: n, enabled });
      set(status, h('p', { role: 'status' }, `${n} ${enabled ? 'enabled' : 'disabled'}.`));
      await load();
    } catch (e) { set(status, alertBox(e, `${n} was not changed`)); }
  }
  function remove(n) {
    if (!window.confirm(`Delete the server ${n}? Its tools leave the catalog.`)) return;
    const next = { ...config };
    delete next[n];
    save(next, `Server ${n} deleted`);
  }
  const form = h('form', {},
    field('Server name', name, 'Letters, digits, _ and -; an existing name replaces that server.'),
    field('Server definition (JSON)', def, 'An mcpServers entry as in extensions_config.json. Masked secrets (***) keep the stored value. Changing a task server\'s command, args, url or task toolsets needs a restart of the services and is refused (409) with the reason.'),
    h('button', { type: 'submit' }, 'Save server'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    let parsed;
    try { parsed = JSON.parse(def.value); } catch (err) {
      set(status, alertBox(err, 'The server definition is not valid JSON; fix it and save again'));
      return;
    }
    save({ ...config, [name.value.trim()]: parsed }, `Server ${name.value.trim()} saved`);
  });
  page('Servers', listBox, section('Add or edit a server', form), status);
  await load();
}

// ---- My connections

async function connections() {
  const status = h('div', { 'aria-live': 'polite' });
  const personalBox = h('div');
  const oauthBox = h('div');
  async function loadPersonal() {
    const r = await api('GET', '/api/mcp/personal-connections');
    set(personalBox, table('Your personal connections (only you see them)', ['name', 'runtime name', 'definition', 'updated', 'actions'],
      (r.connections || []).map((c) => [h('strong', {}, c.name), c.runtime_name, pretty(c.server), when(c.updated_at),
        h('button', { type: 'button', class: 'danger', onclick: () => del(c.name) }, `Delete ${c.name}`)])));
  }
  async function del(n) {
    try {
      await api('DELETE', `/api/mcp/personal-connections/${encodeURIComponent(n)}`);
      set(status, h('p', { role: 'status' }, `Connection ${n} deleted.`));
      await loadPersonal();
    } catch (e) { set(status, alertBox(e, `${n} was not deleted`)); }
  }
  async function loadOAuth() {
    try {
      const r = await api('GET', '/api/mcp/connections');
      const list = r.connections || [];
      if (list.length === 0) {
        set(oauthBox, note('No MCP server of this deployment asks you to connect an account.'));
        return;
      }
      set(oauthBox, table('Your accounts at OAuth servers', ['server', 'state', 'scopes', 'actions'],
        list.map((c) => {
          const server = c.server;
          const connected = c.state === 'connected';
          return [h('strong', {}, server), c.state === 'needs_auth' ? 'needs authorization' : c.state, c.scopes || '—',
            h('span', { class: 'actions' },
              h('button', { type: 'button', 'aria-label': `${connected ? 'Reconnect' : 'Connect'} ${server}`, onclick: () => authorize(server) }, connected ? 'Reconnect' : 'Connect'),
              connected ? h('button', { type: 'button', 'aria-label': `Disconnect ${server}`, onclick: () => disconnect(server) }, 'Disconnect') : null)];
        })));
    } catch (e) {
      set(oauthBox, e.status === 404
        ? note('Connecting your own accounts (per-user OAuth) is not available in this deployment: GET /api/mcp/connections answers 404. Ask the operator to enable it.')
        : alertBox(e, 'Your OAuth connections could not be read'));
    }
  }
  async function authorize(server) {
    try {
      const r = await api('POST', `/api/mcp/connections/${encodeURIComponent(server)}/authorize`, {});
      const url = r.authorize_url;
      if (url && /^https?:\/\//.test(url)) window.location.assign(url);
      else set(status, alertBox(new Error('the server did not return an authorization URL'), `${server} was not connected`));
    } catch (e) { set(status, alertBox(e, `${server} was not connected`)); }
  }
  async function disconnect(server) {
    try {
      await api('DELETE', `/api/mcp/connections/${encodeURIComponent(server)}`);
      set(status, h('p', { role: 'status' }, `${server} disconnected.`));
      await loadOAuth();
    } catch (e) { set(status, alertBox(e, `${server} was not disconnected`)); }
  }
  const name = h('input', { type: 'text', name: 'connection_name', required: true });
  const def = h('textarea', { name: 'connection_definition', rows: '6', spellcheck: 'false' }, '{\n  "type": "http",\n  "url": "https://mcp.example.com/mcp"\n}');
  const form = h('form', {}, field('Connection name', name), field('Connection definition (JSON)', def,
    'An mcpServers entry; the deployment\'s egress and launch policies apply.'), h('button', { type: 'submit' }, 'Add connection'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      await api('POST', '/api/mcp/personal-connections', { name: name.value.trim(), server: JSON.parse(def.value) });
      set(status, h('p', { role: 'status' }, `Connection ${name.value.trim()} saved.`));
      await loadPersonal();
    } catch (err) { set(status, alertBox(err, 'The connection was not saved')); }
  });
  page('My connections', section('Personal connections', personalBox, form), section('OAuth accounts', oauthBox), status);
  await Promise.all([loadPersonal().catch((e) => set(personalBox, alertBox(e, 'Your personal connections could not be read'))), loadOAuth()]);
}

// ---- Virtual servers and approvals (admin)

async function virtualServers() {
  const status = h('div', { 'aria-live': 'polite' });
  const setsBox = h('div');
  const queueBox = h('div');
  async function loadSets() {
    try {
      const r = await api('GET', '/api/mcp/virtual-servers');
      set(setsBox, table('Virtual servers: named sets of tools, each at its own URL', ['name', 'URL', 'servers', 'tools', 'description'],
        (r.virtual_servers || []).map((v) => [h('strong', {}, v.name), h('code', {}, `${location.origin}/mcp/v/${v.name}`),
          (v.servers || []).join(', '), (v.tools || []).join(', ') || 'every tool of its servers', v.description || '—'])));
    } catch (e) { set(setsBox, alertBox(e, 'The virtual servers could not be read')); }
  }
  // change shows one changed field: the approved value, then the new one.
  const change = (c) => h('div', { class: 'change' }, h('h4', {}, c.field),
    h('div', { class: 'diff' },
      h('div', {}, h('p', { class: 'note' }, 'Approved'), pretty(c.old === undefined ? '(none)' : c.old)),
      h('div', {}, h('p', { class: 'note' }, 'Waiting'), pretty(c.new === undefined ? '(removed)' : c.new))));
  async function loadQueue() {
    try {
      const r = await api('GET', '/api/mcp/pins');
      const pins = r.pins || [];
      if (pins.length === 0) {
        set(queueBox, note('No changed tool definition waits for approval.'));
        return;
      }
      set(queueBox, pins.map((p) => {
        const diff = p.diff || { changes: [], flags: [] };
        const label = `${p.server} ${p.tool}`;
        return h('article', { class: 'pin', 'aria-label': `Pending change of ${label}` },
          h('h3', {}, `${p.server} / ${p.tool}`, diff.new ? ' (new tool)' : ''),
          (diff.flags || []).length
            ? h('ul', { class: 'flags', 'aria-label': `Flagged cues in ${label}` },
              diff.flags.map((f) => h('li', {}, h('strong', {}, f.kind), ': ', f.evidence)))
            : note('No cue flagged.'),
          (diff.changes || []).map(change),
          h('p', { class: 'note' }, `Waiting digest ${p.pending_digest}`),
          h('span', { class: 'actions' },
            h('button', { type: 'button', 'aria-label': `Approve ${label}`, onclick: () => decide(p, true) }, 'Approve'),
            h('button', { type: 'button', class: 'danger', 'aria-label': `Reject ${label}`, onclick: () => decide(p, false) }, 'Reject')));
      }));
    } catch (e) {
      set(queueBox, e.status === 503 ? note(`Tool pinning is not available here: ${e.message}`) : alertBox(e, 'The approval queue could not be read'));
    }
  }
  async function decide(p, approve) {
    const what = `${p.server} / ${p.tool}`;
    try {
      await api('POST', `/api/mcp/pins/${approve ? 'approve' : 'reject'}`, { server: p.server, tool: p.tool, digest: p.pending_digest });
      set(status, h('p', { role: 'status' }, `${what} ${approve ? 'approved: the new definition is served from the next catalog' : 'rejected: the approved definition keeps serving'}.`));
    } catch (e) { set(status, alertBox(e, `${what} was not decided`)); }
    await loadQueue();
  }
  page('Virtual servers and approvals', section('Virtual servers', setsBox),
    section('Approvals', h('p', { class: 'note' }, 'Changed tool definitions of pinned servers wait here; the approved definition keeps serving until you decide.'), status, queueBox));
  await Promise.all([loadSets(), loadQueue()]);
}

// ---- Tasks (live: the list and the open task reload on every task event
// the api streams from JetStream; no polling)

const TERMINAL = ['completed', 'failed', 'cancelled'];

async function tasks() {
  const live = h('p', { class: 'note', 'aria-live': 'polite' });
  const listBox = h('div');
  const detailBox = h('div', { 'aria-live': 'polite' });
  let selected = null; // { thread, id }
  async function refresh() {
    try {
      const r = await api('GET', '/api/mcp/tasks?limit=100');
      const list = r.tasks || [];
      set(listBox, table('Your tasks in every thread, newest first',
        ['task', 'thread', 'name', 'status', 'updated', 'detail'],
        list.map((x) => [h('code', {}, x.task_id), x.thread_id || '—', x.task_name || '—',
          h('span', { class: `status status-${x.status}` }, x.status + (x.cancel_requested && !TERMINAL.includes(x.status) ? ' (cancel requested)' : '')),
          when(x.updated_at), h('button', { type: 'button', 'aria-label': `Show task ${x.task_id}`, onclick: () => { selected = { thread: x.thread_id, id: x.task_id }; showDetail(); } }, 'Show')])));
      if (selected && !selected.thread) selected.thread = (list.find((x) => x.task_id === selected.id) || {}).thread_id;
      if (selected && selected.thread) await showDetail();
    } catch (e) {
      set(listBox, alertBox(e, 'Tasks could not be read'));
    }
  }
  async function showDetail() {
    const { thread, id } = selected;
    try {
      const d = await api('GET', `/api/threads/${encodeURIComponent(thread)}/mcp-tasks/${encodeURIComponent(id)}`);
      set(detailBox, section(`Task ${d.task_id}`,
        h('dl', {}, h('dt', {}, 'Status'), h('dd', { class: 'task-status' }, d.status + (d.cancel_requested && !TERMINAL.includes(d.status) ? ' (cancel requested)' : '')),
          h('dt', {}, 'Thread'), h('dd', {}, thread),
          h('dt', {}, 'Name'), h('dd', {}, d.task_name || '—'),
          h('dt', {}, 'Last polled'), h('dd', {}, when(d.last_polled_at)),
          d.error ? [h('dt', {}, 'Error'), h('dd', {}, d.error)] : null,
          d.last_poll_error ? [h('dt', {}, 'Last poll error'), h('dd', {}, d.last_poll_error)] : null),
        d.result !== undefined && d.result !== null ? [h('h3', {}, 'Result'), pretty(d.result)]
          : d.result_preview ? [h('h3', {}, 'Result'), pretty(d.result_preview)] : null,
        TERMINAL.includes(d.status) ? null : h('button', { type: 'button', class: 'danger', onclick: () => cancel(thread, d.task_id) }, 'Cancel task')));
    } catch (e) { set(detailBox, alertBox(e, `Task ${id} could not be read`)); }
  }
  async function cancel(thread, id) {
    try {
      await api('POST', `/api/threads/${encodeURIComponent(thread)}/mcp-tasks/${encodeURIComponent(id)}/cancel`, {});
      live.textContent = `Cancellation of ${id} requested; the page updates when the task ends.`;
      await refresh();
    } catch (e) { detailBox.append(alertBox(e, 'The task was not cancelled')); }
  }
  let events = 0;
  const source = new EventSource('/api/mcp/tasks/stream');
  source.onopen = () => { live.textContent = 'Live: the list updates when a task needs input or ends.'; refresh(); };
  // An admin's stream carries every user's task events: those of other
  // users' tasks are listed as they arrive (the list above is the admin's own).
  const others = new Map();
  const othersBox = h('div');
  function drawOthers() {
    set(othersBox, section('Other users\' tasks (from their events since this page opened)',
      table('Other users\' task events, newest first', ['task', 'user', 'thread', 'name', 'status', 'error'],
        [...others.values()].reverse().map((e) => [h('code', {}, e.task_id), e.user_id, e.thread_id, e.task_name || '—',
          h('span', { class: `status status-${e.status}` }, e.status), e.error || '—']))));
  }
  if (isAdmin()) drawOthers();
  source.onmessage = (ev) => {
    const e = JSON.parse(ev.data);
    if (e.user_id !== session.user) {
      others.delete(e.task_id);
      others.set(e.task_id, e);
      drawOthers();
    }
    events += 1;
    live.textContent = `Live: task ${e.task_id} is ${e.status} (${events} event${events === 1 ? '' : 's'} received).`;
    refresh();
  };
  source.onerror = () => { live.textContent = 'The live task stream was interrupted; it reconnects by itself.'; };
  const params = new URLSearchParams(location.search);
  if (params.get('task')) selected = { thread: params.get('thread'), id: params.get('task') };
  page('Tasks', live, h('button', { type: 'button', onclick: refresh }, 'Refresh'), listBox, detailBox, othersBox);
  await refresh();
  return () => source.close();
}

// ---- Audit (admin): filters, and follow live over server-sent events

async function auditPage() {
  const inputs = {
    user: h('input', { type: 'text', name: 'user' }),
    server: h('input', { type: 'text', name: 'server' }),
    tool: h('input', { type: 'text', name: 'tool' }),
    outcome: h('input', { type: 'text', name: 'outcome' }),
    since: h('input', { type: 'datetime-local', name: 'since' }),
  };
  const kind = h('select', { name: 'kind' }, ['', 'call', 'config', 'reply_dropped'].map((k) => h('option', { value: k }, k || 'any')));
  const follow = h('input', { type: 'checkbox', name: 'follow' });
  const status = h('p', { class: 'note', 'aria-live': 'polite' });
  const body = h('tbody');
  let source = null;
  let records = [];
  const matches = (r) => (!inputs.server.value || r.server === inputs.server.value.trim())
    && (!inputs.outcome.value || r.outcome === inputs.outcome.value.trim());
  function row(r) {
    return h('tr', {}, [when(r.time), r.kind, r.user || '—', r.tool || r.action || '—', r.server || '—', r.outcome || '—',
      r.duration_ms ? `${Math.round(r.duration_ms)} ms` : '—'].map((c) => h('td', {}, c)));
  }
  function draw() {
    const shown = records.filter(matches);
    set(body, ...(shown.length ? shown.map(row) : [h('tr', {}, h('td', { colspan: '7' }, 'No records match.'))]));
  }
  function query() {
    const q = new URLSearchParams();
    for (const k of ['user', 'tool']) if (inputs[k].value.trim()) q.set(k, inputs[k].value.trim());
    if (kind.value) q.set('kind', kind.value);
    if (inputs.since.value) q.set('since', new Date(inputs.since.value).toISOString().replace(/\.\d+Z$/, 'Z'));
    q.set('limit', '200');
    return q.toString();
  }
  async function load() {
    stopFollow();
    try {
      const r = await api('GET', `/api/mcp/audit?${query()}`);
      records = r.records || [];
      draw();
      status.textContent = `${records.filter(matches).length} records.`;
      if (follow.checked) startFollow();
    } catch (e) { set(status, alertBox(e, 'The audit log could not be read')); }
  }
  function startFollow() {
    stopFollow();
    const since = records.length ? records[records.length - 1].time : null;
    const q = new URLSearchParams(query());
    if (since) q.set('since', since);
    source = new EventSource(`/api/mcp/audit/stream?${q}`);
    const seen = new Set(records.map((r) => JSON.stringify(r)));
    source.onmessage = (ev) => {
      if (seen.has(ev.data)) return;
      seen.add(ev.data);
      records.push(JSON.parse(ev.data));
      draw();
      status.textContent = `Following live: ${records.filter(matches).length} records.`;
    };
    source.onerror = () => { status.textContent = 'The live audit stream was interrupted; it reconnects by itself.'; };
    status.textContent = 'Following live.';
  }
  function stopFollow() { if (source) { source.close(); source = null; } }
  follow.addEventListener('change', () => (follow.checked ? startFollow() : (stopFollow(), status.textContent = 'Stopped following.')));
  const form = h('form', { class: 'filters' },
    field('User', inputs.user), field('Server', inputs.server), field('Tool', inputs.tool), field('Outcome', inputs.outcome, 'ok, tool_error or an error code'),
    field('Kind', kind), field('Since', inputs.since),
    h('button', { type: 'submit' }, 'Filter'),
    h('div', { class: 'field check' }, follow, h('label', { for: 'audit-follow' }, 'Follow live')));
  follow.id = 'audit-follow';
  form.addEventListener('submit', (e) => { e.preventDefault(); load(); });
  page('Audit', form, status, h('div', { class: 'scroll' }, h('table', {}, h('caption', {}, 'Audit records, oldest first'),
    h('thead', {}, h('tr', {}, ['time', 'kind', 'user', 'tool or action', 'server', 'outcome', 'duration'].map((x) => h('th', { scope: 'col' }, x)))), body)));
  await load();
  return stopFollow;
}

// ---- Connect a client

async function connectClient() {
  const url = `${location.origin}/mcp`;
  const thread = `${session.user || 'default'}-client`;
  const auth = session.keyless ? {} : { Authorization: 'Bearer <your API key>' };
  const headers = { ...auth, 'Mcpbus-Thread-Id': thread };
  const hdrArgs = Object.entries(headers).flatMap(([k, v]) => ['--header', `${k}: ${v}`]);
  const configs = [
    ['Claude Desktop', 'claude_desktop_config.json (through mcp-remote, which Claude Desktop starts over stdio)',
      JSON.stringify({ mcpServers: { mcpbus: { command: 'npx', args: ['-y', 'mcp-remote', url, ...hdrArgs] } } }, null, 2)],
    ['Cursor', '~/.cursor/mcp.json', JSON.stringify({ mcpServers: { mcpbus: { url, headers } } }, null, 2)],
    ['VS Code', '.vscode/mcp.json', JSON.stringify({ servers: { mcpbus: { type: 'http', url, headers } } }, null, 2)],
    ['MCP Inspector', 'a shell', `npx @modelcontextprotocol/inspector --cli ${url} --transport http ${hdrArgs.map((a) => (a.startsWith('--') ? a : `'${a}'`)).join(' ')} --method tools/list`],
    ['DeerFlow', 'extensions_config.json (export MCPBUS_AUTHORIZATION="Bearer <your API key>")',
      JSON.stringify({ mcpServers: { mcpbus: { enabled: true, type: 'http', url, headers: { ...(session.keyless ? {} : { Authorization: '$MCPBUS_AUTHORIZATION' }), 'Mcpbus-Thread-Id': thread } } } }, null, 2)],
  ];
  page('Connect a client',
    h('p', {}, 'Each client below reaches this deployment at ', h('code', {}, url), ` with your thread header (${thread}). Replace the key placeholder with your API key; never paste a key into a shared file.`),
    configs.map(([name, where, text]) => {
      const out = h('span', { 'aria-live': 'polite', class: 'note' });
      return section(name, h('p', {}, where), h('pre', { tabindex: '0', class: 'json' }, text),
        h('button', { type: 'button', onclick: async () => {
          try { await navigator.clipboard.writeText(text); out.textContent = 'Copied.'; } catch { out.textContent = 'Copying is not allowed here: select the text and copy it.'; }
        } }, `Copy ${name} config`), out);
    }));
}

export const pages = [
  { slug: 'overview', title: 'Overview', render: overview },
  { slug: 'servers', title: 'Servers', render: servers, admin: true },
  { slug: 'catalog', title: 'Catalog and playground', render: catalogPage },
  { slug: 'connections', title: 'My connections', render: connections },
  { slug: 'virtual-servers', title: 'Virtual servers and approvals', render: virtualServers, admin: true },
  { slug: 'tasks', title: 'Tasks', render: tasks },
  { slug: 'audit', title: 'Audit', render: auditPage, admin: true },
  { slug: 'connect', title: 'Connect a client', render: connectClient },
];
