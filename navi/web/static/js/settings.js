// The settings page: what a user changes often, saved on the server for them
// (GET/PATCH /settings): the LLM connection (settings_connection.js; admins only), the
// model of new chats, thinking on or off, and what each tool does by default (run, ask
// first, or never), each tool's choice saying what it comes to: "Ask first (default)".

import { api } from './api.js';
import { h } from './dom.js';
import { refreshBackend } from './backend_watch.js';
import { icon } from './icons.js';
import { connectionSection } from './settings_connection.js';
import { mcpSignInSection, waitingSignIns } from './settings_mcp.js';

const WORDS = { auto: 'Run without asking', ask: 'Ask first', deny: 'Never run', varies: 'Depends on the call' };

/** The first sentence of a tool's description (the line under its name). */
export function firstSentence(text) {
  const flat = String(text || '').replace(/\s+/g, ' ').trim();
  const match = flat.match(/^.*?[.!?](?=\s|$)/);
  return match ? match[0] : flat;
}

function policyRow(tool, chosen) {
  const fallback = WORDS[tool.default_approval] || 'As the approval policy says';
  const select = h('select', { 'data-tool': tool.name, 'aria-label': `${tool.name}: what it does` });
  select.append(h('option', { value: '', text: `${fallback} (default)` }));
  for (const value of ['auto', 'ask', 'deny']) select.append(h('option', { value, text: WORDS[value] }));
  const label = () => {
    for (const option of select.options) {
      if (option.value) option.textContent = WORDS[option.value] + (option.selected ? ' (your setting)' : '');
    }
  };
  select.value = chosen || '';
  label();
  select.addEventListener('change', label);
  const about = firstSentence(tool.description);
  return h('div', { class: 'policy-row' },
    h('div', { class: 'policy-about' }, h('span', { class: 'policy-tool', text: tool.name }),
      about && h('span', { class: 'policy-description', text: about })),
    select);
}

function field(label, control, hint) {
  return h('label', { class: 'settings-field' },
    h('span', { class: 'settings-label', text: label }), control,
    hint && h('span', { class: 'settings-hint', text: hint }));
}

function options(select, pairs, value) {
  for (const [v, text] of pairs) select.append(h('option', { value: v, text }));
  select.value = value;
  return select;
}

/** Opens the settings page (a dialog). Resolves when it closes. */
export async function openSettings() {
  const [saved, listed, tools, signIns] = await Promise.all([
    api.settings(),
    api.llmModels().catch((error) => ({ models: [], default_model: '', error: error.message })),
    api.tools().catch(() => []),
    waitingSignIns(),
  ]);
  const connection = connectionSection(saved);
  const names = (listed.models || []).map((m) => m.name);
  if (saved.model && !names.includes(saved.model)) names.unshift(saved.model);
  const model = options(h('select', { name: 'model' }),
    [['', `The profile's (${listed.default_model || 'default'})`], ...names.map((n) => [n, n])], saved.model || '');
  const think = options(h('select', { name: 'think' }),
    [['default', 'As the profile says'], ['on', 'On'], ['off', 'Off']], saved.think || 'default');
  const policy = saved.tool_policy || {};
  const rows = tools.map((tool) => policyRow(tool, policy[tool.name]));
  const error = h('div', { class: 'settings-error', role: 'alert', hidden: true });
  const form = h('form', { method: 'dialog', class: 'settings-form' },
    h('div', { class: 'settings-head' }, h('h2', { text: 'Settings' }),
      h('button', { type: 'button', class: 'icon-button small', 'aria-label': 'Close settings', value: 'cancel', onclick: () => dialog.close('cancel') }, icon('close'))),
    mcpSignInSection(signIns),
    connection.element,
    field('Model of new chats', model, listed.error ? `The server did not list its models: ${listed.error}` : 'A chat can pick its own in the top bar.'),
    field('Thinking', think, 'Whether the model thinks before it answers.'),
    h('fieldset', { class: 'settings-policy' }, h('legend', { text: 'Tools: what each does by default' }),
      rows.length ? rows : h('p', { class: 'settings-hint', text: 'No tools.' })),
    error,
    h('div', { class: 'dialog-actions' },
      h('button', { type: 'button', class: 'button', text: 'Cancel', onclick: () => dialog.close('cancel') }),
      h('button', { type: 'submit', class: 'button primary', 'data-action': 'save-settings', text: 'Save' })));
  const dialog = h('dialog', { class: 'dialog settings-dialog', 'data-testid': 'settings-dialog', 'aria-label': 'Settings' }, form);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const changes = { model: model.value, think: think.value, tool_policy: {} };
    for (const select of form.querySelectorAll('select[data-tool]')) {
      if (select.value) changes.tool_policy[select.dataset.tool] = select.value;
    }
    Object.assign(changes, connection.changes());
    error.hidden = true;
    try {
      await api.saveSettings(changes);
    } catch (failure) {
      error.textContent = /not saved/i.test(failure.message) ? failure.message : `Not saved: ${failure.message}`;
      error.hidden = false;
      return;
    }
    if ('backend_type' in changes || 'backend_url' in changes || 'api_key' in changes) await refreshBackend();
    dialog.close('saved');
  });
  document.body.append(dialog);
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue);
    });
  });
}

/** The gear at the bottom of the sidebar. */
export function mountSettingsButton(button, { onError }) {
  button.append(icon('settings'));
  button.addEventListener('click', () => openSettings().catch((error) => onError(`Could not open the settings: ${error.message}`)));
}
