// The welcome screen's notice on the embedded demo model: what it is and how to connect
// Ollama; and, once Ollama answers with models (GET /llm/models asks it again), those
// models, one click from being this chat's model.

import { api } from './api.js';
import { clear, h } from './dom.js';

const MAX_OFFERED = 8;

/** profileId: whose models; pick(name): make it the chat's model; onOllama(): Ollama
 *  answered (the footer's health is then out of date). */
export function demoNotice({ profileId, pick, onOllama }) {
  const hint = h('p', { class: 'demo-hint' },
    'Start Ollama and set ', h('code', { text: 'OLLAMA_HOST' }), ' (README, “Quick start”).');
  const el = h('div', { class: 'demo-notice welcome-demo', 'data-testid': 'demo-notice', role: 'note' },
    h('p', { class: 'demo-title', text: 'Demo model: small and slow — connect Ollama for real work.' }),
    hint);
  offerModels(el, hint, { profileId, pick, onOllama });
  return el;
}

async function offerModels(el, hint, { profileId, pick, onOllama }) {
  let listed;
  try {
    listed = await api.llmModels(profileId);
  } catch {
    return; // the hint stays: how to connect Ollama
  }
  const names = (listed.models || []).map((m) => m.name).slice(0, MAX_OFFERED);
  if (listed.backend !== 'ollama' || !names.length) return;
  onOllama?.();
  clear(hint).append('Ollama answers now. Use one of your models for this chat:');
  const buttons = names.map((name) => h('button', {
    type: 'button',
    class: 'button small demo-model',
    'data-model': name,
    text: name,
    onclick: async (event) => {
      const button = event.currentTarget;
      buttons.forEach((b) => { b.disabled = true; });
      try {
        await pick(name);
        button.classList.add('selected');
        button.setAttribute('aria-pressed', 'true');
      } catch (error) {
        hint.textContent = `Could not pick ${name}: ${error.message}`;
      } finally {
        buttons.forEach((b) => { b.disabled = false; });
      }
    },
  }));
  el.append(h('div', { class: 'demo-models', role: 'group', 'aria-label': 'Your Ollama models' }, buttons));
}
