// MCP content as the console shows it: tool results, prompt messages and
// resource contents. Every text goes through textContent (HTML, an MCP
// App's included, is shown as text, never rendered); binary contents stay
// the base64 the server sent and become an image or a download in the
// page, never decoded.
import { api } from './api.js';
import { h, set, alertBox, pretty } from './dom.js';

export const THREAD = 'console';

// mimeOf is a content's MIME type when it is a plain type/subtype (what
// goes into a data: URL), else application/octet-stream.
function mimeOf(m) {
  const t = String(m || '').split(';')[0].trim();
  return /^[A-Za-z0-9.+-]+\/[A-Za-z0-9.+-]+$/.test(t) ? t : 'application/octet-stream';
}

// base64Bytes is how many bytes a base64 string holds.
function base64Bytes(b64) {
  const s = String(b64).replace(/\s/g, '');
  return Math.floor(s.length * 3 / 4) - (s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0);
}

// block shows one content block of a tool result or a prompt message.
export function block(c) {
  switch (c.type) {
    case 'text': return h('pre', { tabindex: '0', class: 'text' }, c.text);
    case 'image': return h('img', { src: `data:${mimeOf(c.mimeType)};base64,${c.data}`, alt: `image (${c.mimeType})`, class: 'result-image' });
    case 'audio': return h('audio', { controls: true, src: `data:${mimeOf(c.mimeType)};base64,${c.data}`, 'aria-label': `audio (${c.mimeType})` });
    case 'resource_link': return resourceLink(c);
    case 'resource': return h('div', { class: 'embedded' }, h('p', {}, 'Embedded resource ', h('code', {}, c.resource.uri)), contents(c.resource));
    default: return pretty(c);
  }
}

// contents shows one entry of a resource's contents: its text, or its
// blob as an image (image/*) or a download.
export function contents(rc) {
  const kind = rc.mimeType ? h('p', { class: 'note' }, rc.mimeType) : null;
  if (rc.text !== undefined) return h('div', {}, kind, h('pre', { tabindex: '0', class: 'text' }, rc.text));
  if (rc.blob === undefined) return pretty(rc);
  const mime = mimeOf(rc.mimeType);
  const size = base64Bytes(rc.blob);
  if (mime.startsWith('image/')) {
    return h('div', {}, kind, h('img', { src: `data:${mime};base64,${rc.blob}`, alt: `image ${rc.uri} (${size} bytes)`, class: 'result-image' }));
  }
  const file = (String(rc.uri || '').split(/[/:]/).filter(Boolean).pop() || 'resource').replace(/[^A-Za-z0-9._-]/g, '_');
  return h('div', {}, kind, h('a', { href: `data:${mime};base64,${rc.blob}`, download: file, class: 'download' },
    `Download ${file} (${size} bytes, binary)`));
}

// readResource reads uri through mcpbus (REST, the signed-in user) and
// shows its contents.
export async function readResource(uri, out) {
  set(out, h('p', { role: 'status', class: 'note' }, `Reading ${uri}…`));
  try {
    const r = await api('POST', '/api/mcp/resources/read', { uri, thread_id: THREAD });
    set(out, h('section', { 'aria-label': `Contents of ${uri}`, class: 'result' },
      h('h3', {}, 'Contents'), h('p', { class: 'note' }, `From server ${r.server}.`), (r.contents || []).map(contents)));
  } catch (e) {
    set(out, alertBox(e, `${uri} could not be read`));
  }
}

// resourceLink shows a resource_link with a button that follows it: the
// linked resource is read and shown below.
function resourceLink(c) {
  const out = h('div', { 'aria-live': 'polite' });
  return h('div', { class: 'resource-link' },
    h('p', {}, 'Resource link: ', h('code', {}, c.uri), c.name ? ` (${c.name})` : '', c.description ? ` — ${c.description}` : '', ' ',
      h('button', { type: 'button', 'aria-label': `Read the linked resource ${c.uri}`, onclick: () => readResource(c.uri, out) }, 'Read')),
    out);
}
