// The console's shell: sign-in, navigation and the page router. Pages
// live under /ui/<slug>; the server answers index.html for each of them.
import { api, session, ApiError } from './api.js';
import { h, set, page, alertBox } from './dom.js';
import { pages } from './pages.js';

const nav = document.getElementById('nav');
const who = document.getElementById('who');
let stopPage = null; // the current page's cleanup (timers, streams)
let routed = false; // after the first page, focus moves to each new page's content

function slugOf(pathname) {
  const s = pathname.replace(/^\/ui\/?/, '').replace(/\/$/, '');
  return s || 'overview';
}

export function go(slug) {
  history.pushState({}, '', `/ui/${slug === 'overview' ? '' : slug}`);
  route();
}

function renderNav(current) {
  set(nav, ...pages.filter((p) => !p.admin || session.role === 'admin').map((p) => {
    const a = h('a', { href: `/ui/${p.slug === 'overview' ? '' : p.slug}` }, p.title);
    if (p.slug === current) a.setAttribute('aria-current', 'page');
    a.addEventListener('click', (e) => {
      if (e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
      e.preventDefault();
      go(p.slug);
    });
    return a;
  }));
  nav.hidden = false;
  const label = session.keyless ? 'default (admin, key-less mode)' : `${session.user} (${session.role})`;
  set(who, h('span', {}, 'Signed in as ', h('strong', {}, label)),
    session.keyless ? null : h('button', { type: 'button', onclick: signOut }, 'Sign out'));
}

async function route() {
  if (stopPage) { stopPage(); stopPage = null; }
  const slug = slugOf(location.pathname);
  const p = pages.find((x) => x.slug === slug);
  renderNav(slug);
  const main = document.getElementById('main');
  if (!p) {
    page('Page not found', h('p', {}, 'The console has no page here. Choose a page from the navigation.'));
  } else if (p.admin && session.role !== 'admin') {
    page(p.title, h('div', { role: 'alert', class: 'error' },
      `Only administrators can open ${p.title}. You are signed in as ${session.user}, a user; ask an administrator if you need it.`));
  } else {
    try {
      stopPage = (await p.render()) || null;
    } catch (e) {
      page(p.title, alertBox(e, `${p.title} could not be shown`));
    }
  }
  if (routed) main.focus({ preventScroll: true });
  routed = true;
}

function signInPage(message) {
  nav.hidden = true;
  set(who, );
  const key = h('input', { type: 'password', id: 'api-key', name: 'api_key', autocomplete: 'current-password', required: true });
  const status = h('div', { 'aria-live': 'polite' }, message ? h('div', { role: 'alert', class: 'error' }, message) : null);
  const form = h('form', { class: 'signin' },
    h('div', { class: 'field' }, h('label', { for: 'api-key' }, 'API key'), key,
      h('span', { class: 'hint' }, 'The key your operator gave you. It is exchanged for a session cookie and not kept by the page.')),
    h('button', { type: 'submit' }, 'Sign in'), status);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const s = await api('POST', '/api/console/session', { api_key: key.value });
      key.value = '';
      Object.assign(session, { user: s.user_id, role: s.role, keyless: s.keyless, csrf: s.csrf_token || '' });
      route();
    } catch (err) {
      set(status, alertBox(err, 'Sign-in failed'));
    }
  });
  page('Sign in', form);
  key.focus();
}

async function signOut() {
  try { await api('DELETE', '/api/console/session'); } catch { /* the cookie may be gone already */ }
  Object.assign(session, { user: null, role: null, csrf: '' });
  if (stopPage) { stopPage(); stopPage = null; }
  signInPage('You are signed out.');
}

async function start() {
  window.addEventListener('popstate', () => session.user && route());
  window.addEventListener('mcpbus:go', (e) => go(e.detail));
  window.addEventListener('mcpbus:signed-out', () => {
    if (stopPage) { stopPage(); stopPage = null; }
    session.user = null;
    signInPage('Your session has ended: sign in again with your API key.');
  });
  try {
    const s = await api('GET', '/api/console/session');
    Object.assign(session, { user: s.user_id, role: s.role, keyless: s.keyless, csrf: s.csrf_token || '' });
    route();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) signInPage();
    else page('mcpbus console', alertBox(e, 'The console could not start'));
  }
}

start();
