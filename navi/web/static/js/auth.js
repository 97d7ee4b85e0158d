// The access token: asked once when the server wants one, kept in localStorage, sent as
// `Authorization: Bearer …` on REST and `?token=…` on the WebSocket. A 401 asks again.

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
