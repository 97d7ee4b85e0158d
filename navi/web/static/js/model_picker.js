// The chat's model picker in the top bar: "Default" (the profile's model) and the models
// the LLM server lists (GET /llm/models). A choice is recorded in the chat's log
// (PATCH /sessions/{id}/model) and used from the next LLM call on; on a new chat,
// picking one creates the chat first (as attaching a file does).

import { api } from './api.js';
import { onBackendChange } from './backend_watch.js';
import { clear, h } from './dom.js';
import { state, subscribe, update } from './state.js';

const FRESH_MS = 30_000;
const lists = new Map(); // profile id → {at, models, default_model, error}

async function modelsFor(profileId) {
  const known = lists.get(profileId);
  if (known && Date.now() - known.at < FRESH_MS) return known;
  let listed;
  try {
    listed = await api.llmModels(profileId);
  } catch (error) {
    listed = { models: [], default_model: '', error: error.message };
  }
  const entry = { ...listed, at: Date.now() };
  lists.set(profileId, entry);
  return entry;
}

/** select: the <select>; ensureSession(): the chat's id, creating it on a new chat. */
export function mountModelPicker(select, { ensureSession }) {
  let drawn = 0;
  const render = async () => {
    const token = ++drawn;
    const listed = await modelsFor(state.profileId || '');
    if (token !== drawn) return;
    clear(select);
    const fallback = listed.default_model ? `Default · ${listed.default_model}` : 'Default model';
    select.append(h('option', { value: '', text: fallback }));
    const names = (listed.models || []).map((m) => m.name);
    if (state.chatModel && !names.includes(state.chatModel)) names.unshift(state.chatModel);
    for (const name of names) select.append(h('option', { value: name, text: name }));
    select.value = state.chatModel || '';
    select.disabled = state.running;
    select.title = listed.error
      ? `The model's server did not list its models: ${listed.error}`
      : 'The model this chat uses from the next answer on';
  };
  select.addEventListener('change', async () => {
    const model = select.value;
    const previous = state.chatModel;
    update({ chatModel: model });
    try {
      const sessionId = await ensureSession();
      await api.chooseModel(sessionId, model);
      update({ chatModel: model });
    } catch (error) {
      update({ chatModel: previous });
      select.title = `Could not change the model: ${error.message}`;
    }
  });
  subscribe(['profileId', 'chatModel', 'running'], render);
  onBackendChange(() => {
    lists.clear(); // another server: other models
    render();
  });
  render();
}
