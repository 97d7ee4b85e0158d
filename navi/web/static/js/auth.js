// The access token: asked once when the server wants one, kept in localStorage, sent as
// `Authorization: Bearer …` on REST, never in a URL. A WebSocket cannot carry that
// header, so it connects with `?ticket=…`: a single-use ticket that lives a few seconds,
// fetched with the header just before connecting (wsTicket). A 401 asks again.

import { promptSecret } from './dialogs.js';

const KEY = 'navi.token';
let pending = null; // one prompt at a time, shared by every request that got a 401

export function getToken() {
  try {
    return localStorage.getItem(KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(KEY, token);
    else localStorage.removeItem(KEY);
  } catch {
    // Private mode without storage: the token lives for this page only.
  }
}

/**
 * Ask the user for a (new) token. Resolves to the token, or null when they cancel.
 * Concurrent callers share one dialog.
 */
export function askToken(reason) {
  if (!pending) {
    const message = getToken()
      ? 'The server did not accept the saved token. Enter a valid one.'
      : 'This Navi server needs an access token.';
    pending = promptSecret(reason ? `${message} (${reason})` : message)
      .then((token) => {
        if (token) setToken(token);
        return token;
      })
      .finally(() => {
        pending = null;
      });
  }
  return pending;
}

export function authHeaders() {
  const token = getToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/**
 * A fresh WebSocket ticket (POST /auth/ws-ticket), asking for a token on 401.
 * Resolves to the ticket, or null when the user cancels; throws when the server cannot
 * be reached.
 */
export async function wsTicket() {
  for (;;) {
    const response = await fetch('/auth/ws-ticket', {
      method: 'POST',
      headers: { Accept: 'application/json', ...authHeaders() },
    });
    if (response.status === 401) {
      if (await askToken()) continue;
      return null;
    }
    if (!response.ok) throw new Error(`a WebSocket ticket was refused (${response.status})`);
    const body = await response.json();
    return body.ticket;
  }
}
