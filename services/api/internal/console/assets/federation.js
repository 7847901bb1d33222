// The catalog's resources, resource templates and prompts: read a
// resource, expand a template and read it, get a prompt with a form
// generated from its arguments. Arguments are completed by the server that
// offers completion (POST /api/mcp/completion); everything goes through
// the REST API as the signed-in user, in the console's thread.
import { api } from './api.js';
import { h, set, alertBox, note, field } from './dom.js';
import { THREAD, block, readResource } from './content.js';

function heading(title) {
  const el = h('h2', { tabindex: '-1' }, title);
  return [el, () => el.focus()];
}

// suggestions completes one argument: on focus and as the user types it
// asks the server (ref: ref/prompt or ref/resource) and offers the values
// as buttons that fill the field.
function suggestions(ref, name, input, others) {
  const box = h('div', { class: 'suggest', 'aria-live': 'polite' });
  let seq = 0;
  let debounce = null;
  async function ask() {
    const mine = ++seq;
    try {
      const r = await api('POST', '/api/mcp/completion', { ref, argument: { name, value: input.value }, context_arguments: others(), thread_id: THREAD });
      if (mine !== seq) return;
      const values = ((r.completion || {}).values || []).slice(0, 10);
      set(box, values.length ? h('span', { class: 'actions' }, h('span', { class: 'note' }, `Suggestions for ${name}:`),
        values.map((v) => h('button', { type: 'button', class: 'secondary', 'aria-label': `Use ${v} for ${name}`, onclick: () => { input.value = v; set(box); input.focus(); } }, v))) : null);
    } catch {
      if (mine === seq) set(box); // the server offers no completion here
    }
  }
  input.addEventListener('focus', ask);
  input.addEventListener('input', () => { clearTimeout(debounce); debounce = setTimeout(ask, 150); });
  return box;
}

function details(pairs) {
  return h('dl', {}, pairs.filter(([, v]) => v).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// showResource shows a listed resource and reads it.
export function showResource(res, box) {
  const out = h('div', { 'aria-live': 'polite' });
  const [title, focus] = heading(res.uri);
  set(box, title, h('p', {}, res.description || 'No description.'),
    details([['Server', res.server], ['Name', res.title || res.name], ['MIME type', res.mimeType], ['Thread', THREAD]]),
    h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => readResource(res.uri, out) }, 'Read')), out);
  focus();
}

// variablesOf are the names of a URI template's expressions ({id},
// {+path}, {?a,b}).
function variablesOf(tpl) {
  const names = [];
  for (const m of tpl.matchAll(/\{([^}]*)\}/g)) {
    for (const v of m[1].replace(/^[+#./;?&]/, '').split(',')) {
      const n = v.replace(/[*]$|:\d+$/, '');
      if (n && !names.includes(n)) names.push(n);
    }
  }
  return names;
}

// expand fills a URI template's simple and reserved expressions.
function expand(tpl, values) {
  return tpl.replace(/\{([^}]*)\}/g, (_, expr) => {
    const op = /^[+#./;?&]/.test(expr) ? expr[0] : '';
    const vars = expr.slice(op.length).split(',').map((v) => v.replace(/[*]$|:\d+$/, ''));
    const enc = op === '+' || op === '#' ? encodeURI : encodeURIComponent;
    const vals = vars.map((v) => enc(values[v] || ''));
    if (op === '?' || op === '&') return op + vars.map((v, i) => `${v}=${vals[i]}`).join('&');
    return (op === '+' ? '' : op) + vals.join(',');
  });
}

// showTemplate shows a resource template with a field per variable
// (completed by the server) and reads the URI they make.
export function showTemplate(tpl, box) {
  const out = h('div', { 'aria-live': 'polite' });
  const vars = variablesOf(tpl.uriTemplate);
  const inputs = vars.map((v) => [v, h('input', { type: 'text', name: v, autocomplete: 'off', required: true })]);
  const values = () => Object.fromEntries(inputs.map(([v, el]) => [v, el.value]));
  const ref = { type: 'ref/resource', uri: tpl.uriTemplate };
  const form = h('form', { class: 'playground' },
    inputs.map(([v, el]) => [field(`${v} (required)`, el, 'Part of the resource URI.'), suggestions(ref, v, el, () => {
      const o = values(); delete o[v]; return o;
    })]),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Read')));
  form.addEventListener('submit', (e) => { e.preventDefault(); readResource(expand(tpl.uriTemplate, values()), out); });
  const [title, focus] = heading(tpl.uriTemplate);
  set(box, title, h('p', {}, tpl.description || 'A resource template: fill its variables to read one resource.'),
    details([['Server', tpl.server], ['Name', tpl.title || tpl.name], ['MIME type', tpl.mimeType], ['Thread', THREAD]]), form, out);
  focus();
}

// showPrompt shows a prompt with a field per argument (completed by the
// server) and renders the messages it gets.
export function showPrompt(p, box) {
  const out = h('div', { 'aria-live': 'polite' });
  const args = Array.isArray(p.arguments) ? p.arguments : [];
  const inputs = args.map((a) => [a, h('input', { type: 'text', name: a.name, autocomplete: 'off', required: !!a.required })]);
  const values = () => Object.fromEntries(inputs.filter(([, el]) => el.value !== '').map(([a, el]) => [a.name, el.value]));
  const ref = { type: 'ref/prompt', name: p.name };
  const getBtn = h('button', { type: 'submit' }, 'Get prompt');
  const form = h('form', { class: 'playground' },
    inputs.length ? inputs.map(([a, el]) => [field(a.name + (a.required ? ' (required)' : ''), el, a.description),
      suggestions(ref, a.name, el, () => { const o = values(); delete o[a.name]; return o; })])
      : note('This prompt takes no arguments.'),
    h('div', { class: 'actions' }, getBtn));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    getBtn.disabled = true;
    set(out, h('p', { role: 'status', class: 'note' }, 'Getting the prompt…'));
    try {
      const r = await api('POST', `/api/mcp/prompts/${encodeURIComponent(p.name)}`, { arguments: values(), thread_id: THREAD });
      set(out, h('section', { 'aria-label': 'Messages', class: 'result' }, h('h3', {}, 'Messages'),
        r.description ? h('p', {}, r.description) : null,
        (r.messages || []).map((m, i) => h('article', { class: 'message', 'aria-label': `Message ${i + 1} (${m.role})` },
          h('h4', {}, `${i + 1}. ${m.role}`), [].concat(m.content || []).map(block)))));
    } catch (err) {
      set(out, alertBox(err, 'The prompt could not be got'));
    } finally {
      getBtn.disabled = false;
    }
  });
  const [title, focus] = heading(p.name);
  set(box, title, h('p', {}, p.description || 'No description.'),
    details([['Server', p.server], ['Name at its server', p.original_name], ['Title', p.title], ['Thread', THREAD]]), form, out);
  focus();
}
