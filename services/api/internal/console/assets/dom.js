// DOM helpers: every text goes through textContent, never innerHTML, so
// names, descriptions and results from upstream servers cannot inject
// markup or script.

// h builds an element: h('button', {type: 'button', onclick: fn}, 'Call').
// Attributes starting with "on" become listeners; null/false are skipped.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

// set replaces el's children (null, false and undefined are skipped, as
// in h; DOM replaceChildren would show them as text).
export function set(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// page replaces the main region with a page whose heading is its name.
export function page(title, ...children) {
  const main = document.getElementById('main');
  set(main, h('h1', {}, title), ...children.flat());
  document.title = `${title} · mcpbus console`;
  return main;
}

// alertBox shows a failure: what happened and what to do.
export function alertBox(err, what) {
  const msg = err && err.message ? err.message : String(err);
  return h('div', { role: 'alert', class: 'error' }, what ? `${what}: ${msg}` : msg);
}

export function note(text) {
  return h('p', { class: 'note' }, text);
}

// table builds a table with a caption from rows of cell values.
export function table(caption, headers, rows) {
  return h('div', { class: 'scroll' }, h('table', {},
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { scope: 'col' }, x)))),
    h('tbody', {}, rows.length ? rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c))))
      : h('tr', {}, h('td', { colspan: String(headers.length) }, 'None.')))));
}

export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2)}`;
  input.id = id;
  const hintEl = hint ? h('span', { class: 'hint', id: `${id}-hint` }, hint) : null;
  if (hintEl) input.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: id }, label), input, hintEl);
}

export function pretty(v) {
  return h('pre', { tabindex: '0', class: 'json' }, typeof v === 'string' ? v : JSON.stringify(v, null, 2));
}

export function when(t) {
  if (!t) return '—';
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}
