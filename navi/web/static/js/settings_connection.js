// Settings → Connection: where Navi's LLM server is, as Open WebUI's connections are: a
// type (Ollama | OpenAI-compatible), a base URL and, for OpenAI-compatible servers, an
// API key. The key is kept on the server: the page shows only its masked hint (as the
// field's placeholder), never the key; typing one replaces it, "Remove the key" drops
// it. Verify lists the server's models or says exactly why not; only admins may change
// or verify it, others see it read-only.

import { api } from './api.js';
import { h } from './dom.js';

const TYPES = [['ollama', 'Ollama'], ['openai', 'OpenAI-compatible']];

function row(label, control, hint) {
  return h('label', { class: 'settings-field' },
    h('span', { class: 'settings-label', text: label }), control,
    hint && h('span', { class: 'settings-hint', text: hint }));
}

/** The section for GET /settings' answer `saved`. `.changes()`: what PATCH /settings
 *  needs for the connection ({} when nothing changed). */
export function connectionSection(saved) {
  const admin = Boolean(saved.may_change_backend);
  const inUse = saved.backend || {};
  const savedType = saved.backend_type || (inUse.name === 'openai' ? 'openai' : 'ollama');
  const kind = h('select', { name: 'backend_type', disabled: !admin, 'aria-label': 'Connection type' });
  for (const [value, text] of TYPES) kind.append(h('option', { value, text }));
  kind.value = savedType;
  const url = h('input', {
    type: 'url', name: 'backend_url', value: saved.backend_url || '', disabled: !admin,
    placeholder: inUse.url || 'http://localhost:11434', autocomplete: 'off', spellcheck: 'false',
  });
  const hint = saved.api_key_hint || '';
  const key = h('input', {
    type: 'password', name: 'api_key', autocomplete: 'new-password', spellcheck: 'false',
    placeholder: hint || 'No key', 'aria-label': 'API key',
  });
  const remove = h('input', { type: 'checkbox', name: 'remove_key' });
  const removeRow = h('label', { class: 'settings-check', hidden: !hint },
    remove, h('span', { text: `Remove the saved key (${hint})` }));
  remove.addEventListener('change', () => {
    key.disabled = remove.checked;
    if (remove.checked) key.value = '';
  });
  const keyField = row('API key', key, 'Sent as a bearer token; kept on the server, shown masked.');
  keyField.append(removeRow);
  const result = h('div', { class: 'connection-result', 'data-testid': 'connection-result', role: 'status', hidden: true });
  const verifyButton = h('button', { type: 'button', class: 'button', 'data-action': 'verify-connection', text: 'Verify' });
  const showKey = () => {
    keyField.hidden = !admin || kind.value !== 'openai';
  };
  kind.addEventListener('change', showKey);
  showKey();

  const wanted = () => {
    const body = { backend_type: kind.value, backend_url: url.value.trim() };
    if (kind.value === 'openai') {
      if (remove.checked) body.api_key = '';
      else if (key.value) body.api_key = key.value;
    }
    return body;
  };
  verifyButton.addEventListener('click', async () => {
    verifyButton.disabled = true;
    result.hidden = false;
    result.className = 'connection-result';
    result.textContent = 'Verifying…';
    try {
      const found = await api.verifyConnection(wanted());
      const names = found.models || [];
      result.classList.add('ok');
      result.textContent = names.length
        ? `${found.backend} answers: ${names.length} model${names.length === 1 ? '' : 's'}: ${names.join(', ')}`
        : `${found.backend} answers, but lists no models.`;
    } catch (error) {
      result.classList.add('failed');
      result.textContent = `Not usable: ${error.message}`;
    } finally {
      verifyButton.disabled = false;
    }
  });

  const now = `Now: ${inUse.name || '?'}${inUse.model ? ` · ${inUse.model}` : ''}${inUse.url ? ` at ${inUse.url}` : ''}.`;
  const element = h('fieldset', { class: 'settings-connection', 'data-testid': 'settings-connection' },
    h('legend', { text: 'Connection: the LLM server' }),
    row('Type', kind),
    row('Base URL', url, admin ? `${now} Empty: as the environment says.` : `${now} Only an admin can change the connection.`),
    keyField,
    admin && h('div', { class: 'connection-actions' }, verifyButton),
    result);

  const changes = () => {
    if (!admin) return {};
    const body = wanted();
    const out = {};
    if (body.backend_type !== savedType) out.backend_type = body.backend_type;
    if (body.backend_url !== (saved.backend_url || '')) out.backend_url = body.backend_url;
    if ('api_key' in body) out.api_key = body.api_key;
    if (Object.keys(out).length && !('backend_type' in out)) out.backend_type = body.backend_type;
    if (Object.keys(out).length && !('backend_url' in out)) out.backend_url = body.backend_url;
    return out;
  };
  return { element, changes };
}
