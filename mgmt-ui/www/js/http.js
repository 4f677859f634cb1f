// The console's only way to the broker: fetch() against the HTTP API with the
// user's credentials and one error shape.
//
// Credentials are kept in sessionStorage (gone when the tab closes) and sent
// as an explicit Basic `Authorization` header on every fetch. There are no
// cookies and the browser's own Basic-auth cache is never filled (the console
// never lets the browser answer a challenge), so a page on another site cannot
// make the browser send an authenticated request: a cross-site form or fetch
// carries no credentials, and a state-changing call without them gets 401.

const KEY = 'warren.auth';

export class ApiError extends Error {
  constructor(status, error, reason) {
    super(reason || error || `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

export function setCredentials(user, password) {
  // btoa needs Latin-1; encode UTF-8 first so any password works.
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  sessionStorage.setItem(KEY, btoa(bin));
}

export function clearCredentials() {
  sessionStorage.removeItem(KEY);
}

export function hasCredentials() {
  return sessionStorage.getItem(KEY) !== null;
}

// Encodes one path segment: vhost "/" becomes %2F as the API expects.
export function seg(s) {
  return encodeURIComponent(s);
}

const listeners = new Set();
// fn(err) is called on every 401 after login (credentials revoked or changed).
export function onUnauthorized(fn) {
  listeners.add(fn);
}

// request(method, path, {body, headers, raw}) -> parsed JSON (or text when
// raw). Throws ApiError with the API's {error, reason} when the status is not
// 2xx, and a status-0 ApiError when the broker cannot be reached.
export async function request(method, path, opts = {}) {
  // The wildcard matters: RabbitMQ's purge (DELETE .../contents) answers a
  // bare application/json Accept with 406.
  const headers = { Accept: 'application/json, */*;q=0.1', ...(opts.headers || {}) };
  const auth = sessionStorage.getItem(KEY);
  if (auth) headers.Authorization = `Basic ${auth}`;
  let body;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['Content-Type'] = 'application/json';
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body, credentials: 'omit', cache: 'no-store', signal: opts.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'unreachable', 'The broker did not answer. Is it running?');
  }
  const text = await res.text();
  if (!res.ok) {
    let error = res.statusText;
    let reason = text;
    try {
      const j = JSON.parse(text);
      error = j.error || error;
      reason = j.reason || j.error || text;
    } catch (e) { /* not JSON: keep the text */ }
    const err = new ApiError(res.status, error, reason);
    if (res.status === 401 && !opts.login) listeners.forEach((fn) => fn(err));
    throw err;
  }
  if (opts.raw) return text;
  return text ? JSON.parse(text) : null;
}

export const get = (path, opts) => request('GET', path, opts);
export const put = (path, body, opts) => request('PUT', path, { ...opts, body: body === undefined ? {} : body });
export const post = (path, body, opts) => request('POST', path, { ...opts, body: body === undefined ? {} : body });
export const del = (path, opts) => request('DELETE', path, opts);

// Query string from an object, skipping empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}
