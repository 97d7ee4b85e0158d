// The LLM backend in use changes while the page is open: a save in Settings →
// Connection, another admin's save, or `auto` finding Ollama. refreshBackend() reads
// GET /health again; onBackendChange(fn) calls fn when its backend, model or context
// window differ from before, so the footer, the model picker, the notices and the
// context meter follow without a reload.

import { api } from './api.js';
import { state, subscribe, update } from './state.js';

const identity = (health) => (health
  ? [health.backend, health.model, health.context_window, health.model_reason, health.model_missing].join('\n')
  : '');

/** GET /health into the state (null when Navi's server does not answer). */
export async function refreshBackend() {
  update({ health: await api.health().catch(() => null) });
}

/** The status poll's answer ({backend, model}) names another backend than /health did. */
export function differsFromHealth(status) {
  const health = state.health;
  if (!health || !status || !status.backend) return false;
  return status.backend !== health.backend || (status.model || '') !== (health.model || '')
    || (status.model_reason || '') !== (health.model_reason || '')
    || Boolean(status.model_missing) !== Boolean(health.model_missing);
}

/** fn(health) after each change of the backend, model, window or why that model (not
 *  the first load). */
export function onBackendChange(fn) {
  let seen = identity(state.health);
  subscribe('health', () => {
    const now = identity(state.health);
    if (!state.health || now === seen) return;
    const first = seen === '';
    seen = now;
    if (!first) fn(state.health);
  });
}
