// The REST client: one function per endpoint of API-SHAPES.md. Failures throw ApiError
// with a message fit to show a person; a 401 asks for a token and retries.

import { askToken, authHeaders } from './auth.js';

export class ApiError extends Error {
  constructor(message, { status = 0, body = null } = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status; // 0: the server could not be reached
    this.body = body;
  }
}

async function errorFrom(response) {
  let body = null;
  let detail = '';
  try {
    const text = await response.text();
    try {
      body = JSON.parse(text);
      detail = body.detail || body.error || body.message || '';
      if (typeof detail !== 'string') detail = JSON.stringify(detail);
    } catch {
      detail = text.slice(0, 300);
    }
  } catch {
    // No body to read.
  }
  const what = detail || response.statusText || 'request failed';
  return new ApiError(`${response.status}: ${what}`, { status: response.status, body });
}

async function request(method, path, { json, query, form } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined && value !== null && value !== '') params.set(key, value);
    }
    const text = params.toString();
    if (text) url += `?${text}`;
  }
  for (;;) {
    const headers = { Accept: 'application/json', ...authHeaders() };
    let body;
    if (json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(json);
    } else if (form) {
      body = form;
    }
    let response;
    try {
      response = await fetch(url, { method, headers, body });
    } catch (error) {
      throw new ApiError(`Cannot reach the Navi server (${error.message})`);
    }
    if (response.status === 401) {
      const token = await askToken();
      if (token) continue;
      throw new ApiError('401: an access token is needed', { status: 401 });
    }
    if (!response.ok) throw await errorFrom(response);
    if (response.status === 204) return null;
    const type = response.headers.get('Content-Type') || '';
    return type.includes('application/json') ? response.json() : response.text();
  }
}

const id = (value) => encodeURIComponent(value);

export const api = {
  health: () => request('GET', '/health'),
  profiles: () => request('GET', '/agents/profiles'),
  listSessions: (q) => request('GET', '/sessions', { query: { q } }),
  getSession: (sessionId) => request('GET', `/sessions/${id(sessionId)}`),
  createSession: (profileId) =>
    request('POST', '/sessions', { json: profileId ? { profile_id: profileId } : {} }),
  pinSession: (sessionId, pinned) =>
    request('PATCH', `/sessions/${id(sessionId)}/pin`, { json: { pinned } }),
  renameSession: (sessionId, title) =>
    request('PATCH', `/sessions/${id(sessionId)}`, { json: { title } }),
  deleteSession: (sessionId) => request('DELETE', `/sessions/${id(sessionId)}`),
  stopRun: (sessionId) => request('POST', `/sessions/${id(sessionId)}/stop`),
  // Go on now with the run that waits for the model's server (409 if none waits).
  tryAgain: (sessionId) => request('POST', `/sessions/${id(sessionId)}/try-again`),
  // A tool call that waits for the user: {decision: 'approve'|'deny', scope?, reason?,
  // stream_id?} (stream_id: the approval_required frame's, when it has one).
  decideApproval: (sessionId, callId, decision) =>
    request('POST', `/sessions/${id(sessionId)}/approvals/${id(callId)}`, { json: decision }),
  switchProfile: (sessionId, profileId) =>
    request('PATCH', `/sessions/${id(sessionId)}/profile`, { json: { profile_id: profileId } }),
  uploadFile,
  // The model picker, the footer's status dot and the settings page.
  chooseModel: (sessionId, model) =>
    request('PATCH', `/sessions/${id(sessionId)}/model`, { json: { model } }),
  llmStatus: () => request('GET', '/llm/status'),
  llmModels: (profileId) => request('GET', '/llm/models', { query: { profile_id: profileId } }),
  tools: () => request('GET', '/agents/tools'),
  prompts: () => request('GET', '/mcp/prompts'),
  renderPrompt: (server, name, args) => request('POST',
    `/mcp/prompts/${encodeURIComponent(server)}/${encodeURIComponent(name)}`, { json: { arguments: args } }),
  settings: () => request('GET', '/settings'),
  saveSettings: (changes) => request('PATCH', '/settings', { json: changes }),
  // {backend_type, backend_url, api_key?} → {ok, backend, models}, or 422 with the reason.
  verifyConnection: (connection) => request('POST', '/settings/connection/verify', { json: connection }),
  // MCP servers waiting for a sign-in (admins): {servers: [{name, link, url}]}.
  mcpSignIns: () => request('GET', '/mcp/sign-ins'),
  // The Memory page (docs/memory.md).
  memoryFacts: () => request('GET', '/memory/facts'),
  memoryStatus: () => request('GET', '/memory/status'),
  editFact: (factId, value) => request('PATCH', `/memory/facts/${id(factId)}`, { json: { value } }),
  forgetFact: (factId) => request('DELETE', `/memory/facts/${id(factId)}`),
  // Replay and debugging (docs/replay.md).
  sessionState: (sessionId, at) => request('GET', `/sessions/${id(sessionId)}/state`, { query: { at } }),
  llmRequest: (sessionId, seq) => request('GET', `/sessions/${id(sessionId)}/llm-requests/${seq}`),
  timeline: (sessionId) => request('GET', `/sessions/${id(sessionId)}/timeline`),
  forkSession: (sessionId, at, title) =>
    request('POST', `/sessions/${id(sessionId)}/fork`, { json: title === undefined ? { at } : { at, title } }),
};

/**
 * POST /sessions/{id}/files (multipart field "file") with upload progress.
 * onProgress(fraction) is called with 0…1. Resolves to {name, path, size, content_type}.
 * Returns {promise, abort}.
 */
function uploadFile(sessionId, file, onProgress) {
  let xhr = null;
  let aborted = false;
  const attempt = () =>
    new Promise((resolve, reject) => {
      xhr = new XMLHttpRequest();
      xhr.open('POST', `/sessions/${id(sessionId)}/files`);
      for (const [key, value] of Object.entries(authHeaders())) xhr.setRequestHeader(key, value);
      xhr.setRequestHeader('Accept', 'application/json');
      xhr.upload.onprogress = (event) => {
        if (event.lengthComputable && onProgress) onProgress(event.loaded / event.total);
      };
      xhr.onload = () => {
        let body = null;
        try {
          body = JSON.parse(xhr.responseText);
        } catch {
          body = null;
        }
        if (xhr.status >= 200 && xhr.status < 300 && body) resolve(body);
        else {
          const detail = (body && (body.detail || body.error || body.message)) || xhr.statusText;
          reject(new ApiError(`${xhr.status}: ${detail || 'upload failed'}`, { status: xhr.status, body }));
        }
      };
      xhr.onerror = () => reject(new ApiError('Upload failed: cannot reach the Navi server'));
      xhr.onabort = () => reject(new ApiError('Upload cancelled'));
      const form = new FormData();
      form.append('file', file, file.name);
      xhr.send(form);
    });
  const promise = (async () => {
    for (;;) {
      try {
        return await attempt();
      } catch (error) {
        if (error.status === 401 && !aborted && (await askToken())) continue;
        throw error;
      }
    }
  })();
  return {
    promise,
    abort: () => {
      aborted = true;
      if (xhr) xhr.abort();
    },
  };
}
