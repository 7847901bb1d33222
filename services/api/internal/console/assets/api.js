// The console's one way to the data: the REST API and /mcp of the api
// service, signed in by the session cookie (sent by the browser, HttpOnly)
// and, on every change, the session's CSRF token.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = { user: null, role: null, keyless: false, csrf: '' };

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    if (session.csrf) headers['X-CSRF-Token'] = session.csrf;
  }
  let res;
  try {
    res = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    throw new ApiError(0, 'unavailable', 'mcpbus cannot be reached: check that the api service is running, then reload');
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!res.ok) {
    const e = data && data.error;
    const msg = e ? e.message : `${res.status} ${res.statusText}`;
    if (res.status === 401 && path !== '/api/console/session') {
      window.dispatchEvent(new CustomEvent('mcpbus:signed-out'));
    }
    throw new ApiError(res.status, e ? e.code : 'http_' + res.status, msg);
  }
  return data;
}

export const isAdmin = () => session.role === 'admin';
