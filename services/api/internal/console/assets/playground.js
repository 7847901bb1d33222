// Catalog and playground: server-side search and paging over the caller's
// tools, resources and prompts (GET /api/mcp/{tools,resources,prompts}?
// search=&offset=&limit=), a tool's schema and annotations, and a form
// generated from its input schema that calls the tool through mcpbus's MCP
// endpoint (POST /mcp, MCP 2026-07-28, one request per call): progress
// arrives on the call's SSE response and Cancel aborts it, which cancels
// the call on the upstream. Resources and prompts open in federation.js.
import { api, session } from './api.js';
import { h, set, page, alertBox, note, field, pretty } from './dom.js';
import { THREAD, block } from './content.js';
import { showResource, showTemplate, showPrompt } from './federation.js';

const PAGE = 25;
const PROTOCOL = '2026-07-28';

// kinds are what the catalog searches: each its route, its words and its
// entries (the button's text, a note, and what opens the entry).
const kinds = {
  tools: { label: 'Tools', path: '/api/mcp/tools', one: 'tool', many: 'tools', what: 'tools',
    hint: 'Matches tool names, servers and descriptions; the server searches, so large catalogs stay fast.',
    entries: (r) => (r.tools || []).map((t) => [t.name, t.description, (box) => showTool(t, box)]) },
  resources: { label: 'Resources', path: '/api/mcp/resources', one: 'resource or template', many: 'resources and templates', what: 'resources',
    hint: 'Matches URIs, names, descriptions and servers of resources and resource templates; the server searches.',
    entries: (r) => [...(r.resources || []).map((x) => [x.uri, [x.title || x.name, x.description].filter(Boolean).join(': '), (box) => showResource(x, box)]),
      ...(r.resource_templates || []).map((x) => [x.uriTemplate, `template ${[x.title || x.name, x.description].filter(Boolean).join(': ')}`, (box) => showTemplate(x, box)])] },
  prompts: { label: 'Prompts', path: '/api/mcp/prompts', one: 'prompt', many: 'prompts', what: 'prompts',
    hint: 'Matches prompt names, titles, descriptions and servers; the server searches.',
    entries: (r) => (r.prompts || []).map((p) => [p.name, p.description, (box) => showPrompt(p, box)]) },
};

export async function catalogPage() {
  const kindSel = h('select', { name: 'kind' }, Object.entries(kinds).map(([k, v]) => h('option', { value: k }, v.label)));
  const search = h('input', { type: 'search', name: 'search', autocomplete: 'off' });
  const searchField = field('Search tools', search, kinds.tools.hint);
  const results = h('div', { 'aria-live': 'polite' });
  const detail = h('div');
  let offset = 0;
  let seq = 0;

  async function load() {
    const mine = ++seq;
    const kind = kinds[kindSel.value];
    const q = new URLSearchParams({ thread_id: THREAD, search: search.value.trim(), offset: String(offset), limit: String(PAGE) });
    try {
      const r = await api('GET', `${kind.path}?${q}`);
      if (mine !== seq) return; // a newer search answered first
      const entries = kind.entries(r);
      const first = r.total ? r.offset + 1 : 0;
      const last = r.offset + entries.length;
      set(results,
        h('p', { class: 'note' }, `${r.total} ${r.total === 1 ? `${kind.one} matches` : `${kind.many} match`}; showing ${first}–${last}. Catalog generation ${r.generation}.`),
        (r.failed_servers || []).length ? h('p', { class: 'warn' }, `Servers whose ${kind.what} are missing: ${r.failed_servers.map((f) => `${f.server} (${f.error})`).join('; ')}`) : null,
        h('ul', { class: 'tools' }, entries.map(([name, text, open]) => h('li', {},
          h('button', { type: 'button', class: 'link', onclick: () => open(detail) }, name),
          ' ', h('span', { class: 'note' }, text || '')))),
        h('div', { class: 'pager' },
          h('button', { type: 'button', disabled: offset === 0, onclick: () => { offset = Math.max(0, offset - PAGE); load(); } }, 'Previous page'),
          h('button', { type: 'button', disabled: last >= r.total, onclick: () => { offset += PAGE; load(); } }, 'Next page')));
    } catch (e) {
      if (mine === seq) set(results, alertBox(e, `The ${kind.what} could not be read`));
    }
  }
  let debounce = null;
  search.addEventListener('input', () => { clearTimeout(debounce); debounce = setTimeout(() => { offset = 0; load(); }, 200); });
  kindSel.addEventListener('change', () => {
    const kind = kinds[kindSel.value];
    searchField.querySelector('label').textContent = `Search ${kind.what}`;
    searchField.querySelector('.hint').textContent = kind.hint;
    section.setAttribute('aria-label', kind.label);
    offset = 0;
    set(detail);
    load();
  });
  const section = h('section', { 'aria-label': 'Tools' }, results);
  page('Catalog and playground',
    h('div', { class: 'filters' }, field('Search in', kindSel), searchField),
    h('div', { class: 'split' }, section, h('section', { 'aria-label': 'Playground' }, detail)));
  await load();
  return () => clearTimeout(debounce);
}

// inputFor builds the control of one input-schema property.
function inputFor(name, schema, required) {
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  let el;
  if (Array.isArray(schema.enum)) {
    el = h('select', { name }, required ? null : h('option', { value: '' }, '(none)'),
      schema.enum.map((v) => h('option', { value: JSON.stringify(v) }, String(v))));
    el.dataset.kind = 'enum';
  } else if (type === 'boolean') {
    el = h('input', { type: 'checkbox', name });
    if (schema.default === true) el.checked = true;
    el.dataset.kind = 'boolean';
  } else if (type === 'number' || type === 'integer') {
    el = h('input', { type: 'number', name, step: type === 'integer' ? '1' : 'any',
      min: schema.minimum ?? null, max: schema.maximum ?? null, value: schema.default ?? null });
    el.dataset.kind = type;
  } else if (type === 'object' || type === 'array' || !type) {
    el = h('textarea', { name, rows: '3', spellcheck: 'false' }, schema.default !== undefined ? JSON.stringify(schema.default) : '');
    el.dataset.kind = 'json';
  } else {
    el = h('input', { type: 'text', name, value: schema.default ?? null });
    el.dataset.kind = 'string';
  }
  if (required && el.dataset.kind !== 'boolean') el.required = true;
  return el;
}

// argumentsOf reads the generated form into the call's arguments.
function argumentsOf(controls) {
  const args = {};
  for (const [name, el] of controls) {
    const k = el.dataset.kind;
    if (k === 'boolean') { args[name] = el.checked; continue; }
    if (el.value === '') continue;
    if (k === 'enum') args[name] = JSON.parse(el.value);
    else if (k === 'number' || k === 'integer') args[name] = Number(el.value);
    else if (k === 'json') {
      try { args[name] = JSON.parse(el.value); } catch { throw new Error(`${name} must be JSON (an object, array or value)`); }
    } else args[name] = el.value;
  }
  return args;
}

function showTool(tool, box) {
  const schema = tool.input_schema || {};
  const props = schema.properties || {};
  const required = new Set(schema.required || []);
  const controls = Object.entries(props).map(([name, s]) => [name, inputFor(name, s || {}, required.has(name))]);
  const progress = h('progress', { max: '1', value: '0', 'aria-label': 'Call progress' });
  const progressText = h('span', { role: 'status', class: 'note' });
  const out = h('div', { 'aria-live': 'polite' });
  const callBtn = h('button', { type: 'submit' }, 'Call');
  const cancelBtn = h('button', { type: 'button', disabled: true }, 'Cancel');
  let abort = null;
  cancelBtn.addEventListener('click', () => { if (abort) abort.abort(); });
  const form = h('form', { class: 'playground' },
    controls.length ? controls.map(([name, el]) => field(name + (required.has(name) ? ' (required)' : ''), el, (props[name] || {}).description))
      : note('This tool takes no arguments.'),
    h('div', { class: 'actions' }, callBtn, cancelBtn),
    h('div', { class: 'progress' }, progress, ' ', progressText));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    let args;
    try { args = argumentsOf(controls); } catch (err) { set(out, alertBox(err, 'Fix the arguments')); return; }
    abort = new AbortController();
    callBtn.disabled = true; cancelBtn.disabled = false;
    progress.removeAttribute('value'); progressText.textContent = 'Calling…';
    set(out, );
    try {
      const res = await callTool(tool.name, args, abort.signal, (p) => {
        if (p.total) { progress.max = p.total; progress.value = p.progress; } else progress.removeAttribute('value');
        progressText.textContent = p.message || `progress ${p.progress}${p.total ? ` of ${p.total}` : ''}`;
      });
      progress.max = 1; progress.value = 1;
      progressText.textContent = res.isError ? 'The tool answered with an error.' : 'Done.';
      set(out, renderResult(res));
    } catch (err) {
      progress.max = 1; progress.value = 0;
      if (err.name === 'AbortError') {
        progressText.textContent = 'Cancelled.';
        set(out, h('p', { role: 'status' }, 'The call was cancelled; mcpbus told the upstream server to stop.'));
      } else {
        progressText.textContent = 'Failed.';
        set(out, alertBox(err, 'The call failed'));
      }
    } finally {
      callBtn.disabled = false; cancelBtn.disabled = true; abort = null;
    }
  });
  const ann = tool.annotations ? Object.entries(tool.annotations).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(', ') : 'none';
  set(box, h('h2', {}, tool.name),
    h('p', {}, tool.description || 'No description.'),
    h('dl', {}, h('dt', {}, 'Server'), h('dd', {}, tool.server), h('dt', {}, 'Annotations'), h('dd', {}, ann),
      h('dt', {}, 'Thread'), h('dd', {}, THREAD)),
    h('details', {}, h('summary', {}, 'Input schema'), pretty(schema)),
    tool.output_schema ? h('details', {}, h('summary', {}, 'Output schema'), pretty(tool.output_schema)) : null,
    form, out);
  box.querySelector('h2').setAttribute('tabindex', '-1');
  box.querySelector('h2').focus();
}

// callTool sends one MCP tools/call to /mcp and reads its SSE response:
// notifications/progress for this call's token go to onProgress, the
// response resolves. Aborting signal cancels the call.
async function callTool(name, args, signal, onProgress) {
  const token = `console-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  const body = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args,
    _meta: { progressToken: token, 'io.modelcontextprotocol/protocolVersion': PROTOCOL, 'io.modelcontextprotocol/clientCapabilities': {} } } };
  const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream',
    'Mcp-Protocol-Version': PROTOCOL, 'Mcp-Method': 'tools/call', 'Mcp-Name': name, 'Mcpbus-Thread-Id': THREAD };
  if (session.csrf) headers['X-CSRF-Token'] = session.csrf;
  const res = await fetch('/mcp', { method: 'POST', headers, body: JSON.stringify(body), credentials: 'same-origin', signal });
  const type = res.headers.get('Content-Type') || '';
  if (!type.includes('text/event-stream')) {
    const text = await res.text();
    let msg;
    try { const j = JSON.parse(text); msg = j.error ? (j.error.message || JSON.stringify(j.error)) : null; if (!msg && j.result) return j.result; } catch { msg = text; }
    if (res.status === 401) window.dispatchEvent(new CustomEvent('mcpbus:signed-out'));
    throw new Error(msg || `HTTP ${res.status}`);
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const event = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
      if (!data) continue;
      const msg = JSON.parse(data);
      if (msg.method === 'notifications/progress' && msg.params && msg.params.progressToken === token) onProgress(msg.params);
      else if (msg.id === 1 && msg.error) throw new Error(msg.error.message);
      else if (msg.id === 1) return msg.result;
    }
  }
  throw new Error('the call ended without a result: try again');
}

// renderResult shows every kind of MCP content: text, images, audio,
// resource links, embedded resources, structured content, and errors.
export function renderResult(res) {
  const blocks = (res.content || []).map(block);
  return h('section', { 'aria-label': 'Result', class: res.isError ? 'result error-result' : 'result' },
    h('h3', {}, res.isError ? 'Result: the tool reported an error' : 'Result'),
    res.isError ? h('div', { role: 'alert', class: 'error' }, (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n') || 'The tool failed.') : null,
    blocks,
    res.structuredContent !== undefined ? [h('h4', {}, 'Structured content'), pretty(res.structuredContent)] : null,
    taskLink(res));
}

// taskLink points at the Tasks page when the result is a durable task handle.
function taskLink(res) {
  const sc = res.structuredContent;
  let id = sc && (sc.task_id || (sc.task && sc.task.task_id));
  if (!id) {
    const t = (res.content || []).find((c) => c.type === 'text');
    try { const j = t && JSON.parse(t.text); id = j && j.task_id; } catch { /* not a handle */ }
  }
  if (!id || !/^[A-Za-z0-9_.:-]+$/.test(id)) return null;
  const a = h('a', { href: `/ui/tasks?task=${encodeURIComponent(id)}&thread=${THREAD}` }, `Follow task ${id} on the Tasks page`);
  a.addEventListener('click', (e) => {
    e.preventDefault();
    history.pushState({}, '', `/ui/tasks?task=${encodeURIComponent(id)}&thread=${THREAD}`);
    window.dispatchEvent(new PopStateEvent('popstate'));
  });
  return h('p', {}, a);
}
