// The page's shared state and a minimal publish/subscribe: views subscribe to the keys
// they draw, and `update` tells each subscriber once per change.

export const state = {
  sessionId: null, // from the URL hash
  sessions: [], // GET /sessions, pinned first then most recent
  profiles: [], // GET /agents/profiles
  health: null, // GET /health (may carry backend and model)
  profileId: null, // the current session's profile, or the one picked for a new chat
  running: false, // a run is active: input locked, Stop shown
  connection: 'idle', // idle | connecting | open | lost | gone
  contextTokens: null,
  maxContextTokens: null,
  todo: [], // [{id, text, status}] from todo_updated
  approvals: 0, // tool calls of the open chat that wait for the user's decision
  chatModel: '', // the chat's model picker (GET /sessions/{id} → model); '': the profile's
  llm: { activity: 'idle', detail: '', probe: null, answeredAt: 0 }, // the footer's dot
  llmAway: '', // the run waits for the model's server (llm_waiting): the last error
  llmAwayWho: '', // 'subagent': the run that waits is a subagent's of this chat
};

const listeners = new Map();

/** Call fn(state) whenever one of the keys changes. Returns an unsubscribe function. */
export function subscribe(keys, fn) {
  const list = Array.isArray(keys) ? keys : [keys];
  for (const key of list) {
    if (!listeners.has(key)) listeners.set(key, new Set());
    listeners.get(key).add(fn);
  }
  return () => list.forEach((key) => listeners.get(key).delete(fn));
}

export function update(patch) {
  // Apply the whole patch first, so that a subscriber never sees half of it.
  const changed = [];
  for (const [key, value] of Object.entries(patch)) {
    if (Object.is(state[key], value) && (typeof value !== 'object' || value === null)) continue;
    state[key] = value;
    changed.push(key);
  }
  const toCall = new Set();
  for (const key of changed) for (const fn of listeners.get(key) || []) toCall.add(fn);
  for (const fn of toCall) fn(state);
}

export function profileById(profileId) {
  return state.profiles.find((profile) => profile.id === profileId) || null;
}
