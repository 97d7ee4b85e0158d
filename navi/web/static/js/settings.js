// The settings page: what a user changes often, saved on the server for them
// (GET/PATCH /settings): the LLM server's URL (admins only), the model of new chats,
// thinking on or off, and what each tool does by default (run, ask first, or never).

import { api } from './api.js';
import { h } from './dom.js';
import { icon } from './icons.js';
import { update } from './state.js';

const CHOICES = [['', 'Policy default'], ['auto', 'Run'], ['ask', 'Ask first'], ['deny', 'Never']];

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
  const [saved, listed, tools] = await Promise.all([
    api.settings(),
    api.llmModels().catch((error) => ({ models: [], default_model: '', error: error.message })),
    api.tools().catch(() => []),
  ]);
  const url = h('input', {
    type: 'url', name: 'backend_url', value: saved.backend_url || '', placeholder: saved.backend?.url || 'http://localhost:11434',
    disabled: !saved.may_change_backend, autocomplete: 'off', spellcheck: 'false',
  });
  const names = (listed.models || []).map((m) => m.name);
  if (saved.model && !names.includes(saved.model)) names.unshift(saved.model);
  const model = options(h('select', { name: 'model' }),
    [['', `The profile's (${listed.default_model || 'default'})`], ...names.map((n) => [n, n])], saved.model || '');
  const think = options(h('select', { name: 'think' }),
    [['default', 'As the profile says'], ['on', 'On'], ['off', 'Off']], saved.think || 'default');
  const policy = saved.tool_policy || {};
  const rows = tools.map((tool) => {
    const select = options(h('select', { 'data-tool': tool.name, 'aria-label': `${tool.name}: default` }), CHOICES, policy[tool.name] || '');
    return h('div', { class: 'policy-row' }, h('span', { class: 'policy-tool', text: tool.name, title: tool.description || '' }), select);
  });
  const error = h('div', { class: 'settings-error', role: 'alert', hidden: true });
  const backendHint = saved.may_change_backend
    ? `Where Navi's LLM server is (now ${saved.backend?.name || ''} at ${saved.backend?.url || '?'}); empty: as the environment says.`
    : 'Only an admin can change the LLM server.';
  const form = h('form', { method: 'dialog', class: 'settings-form' },
    h('div', { class: 'settings-head' }, h('h2', { text: 'Settings' }),
      h('button', { type: 'button', class: 'icon-button small', 'aria-label': 'Close settings', value: 'cancel', onclick: () => dialog.close('cancel') }, icon('close'))),
    field('LLM server URL', url, backendHint),
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
    if (saved.may_change_backend && url.value.trim() !== (saved.backend_url || '')) {
      changes.backend_url = url.value.trim();
    }
    error.hidden = true;
    try {
      await api.saveSettings(changes);
    } catch (failure) {
      error.textContent = `Not saved: ${failure.message}`;
      error.hidden = false;
      return;
    }
    if ('backend_url' in changes) update({ health: await api.health().catch(() => null) });
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
