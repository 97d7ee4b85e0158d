// The footer's status dot tracks the LLM, not only the socket to Navi: green when the
// model's server answered (a run's frames, or GET /llm/status every 30 s), amber while
// a run waits for it or retries it, red when it does not answer, a run failed on it (until
// a run gets an answer) or Navi's own server is gone. The tooltip says which, in words.
// A check that names another backend or model than the page shows reloads /health
// (backend_watch.js), and the page follows.

import { api } from './api.js';
import { differsFromHealth, refreshBackend } from './backend_watch.js';
import { state, subscribe, update } from './state.js';

const POLL_MS = 30_000;

/** What a run is doing with the model: 'waiting', 'answering', 'retrying', 'failed'
 *  or 'idle' (the LiveRenderer's llm hook). */
export function llmActivity(activity, detail = '') {
  const now = Date.now();
  const answeredAt = activity === 'answering' ? now : state.llm.answeredAt;
  const idleAfterFailure = activity === 'idle' && state.llm.activity === 'failed';
  update({
    llm: {
      ...state.llm,
      activity: idleAfterFailure ? 'failed' : activity,
      detail: idleAfterFailure ? state.llm.detail : detail,
      answeredAt,
    },
  });
  if (activity === 'idle' || activity === 'failed') probe();
}

async function probe() {
  let result;
  try {
    result = await api.llmStatus();
  } catch (error) {
    result = error.status === 404 ? null : { reachable: false, error: error.message, navi: false };
  }
  // A failed run stays red until a run gets an answer: a server that lists its models
  // may still fail to answer (an overloaded or broken model).
  update({ llm: { ...state.llm, probe: result } });
  // Another backend or model than the page shows: an admin changed the connection.
  if (differsFromHealth(result)) refreshBackend();
}

function ago(ms) {
  const seconds = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (seconds < 60) return `${seconds} s ago`;
  return `${Math.round(seconds / 60)} min ago`;
}

/** [status, words]: status is 'ok' (green), 'busy' (amber) or 'down' (red). */
export function describe(s) {
  const { activity, detail, probe: checked, answeredAt } = s.llm;
  if (!s.health || s.connection === 'lost' || checked?.navi === false) {
    return ['down', 'Navi\'s server does not answer: reconnecting…'];
  }
  if (activity === 'retrying') return ['busy', `The model's server failed; Navi is retrying (${detail})`];
  if (activity === 'waiting') return ['busy', 'Waiting for the model to start answering…'];
  if (activity === 'failed') {
    const still = checked?.reachable ? ' (it answers status checks now: try again)' : '';
    return ['down', `The model's server failed: ${detail}${still}`];
  }
  if (activity === 'answering') return ['ok', 'The model is answering'];
  if (checked && !checked.reachable) {
    return ['down', `The model's server does not answer: ${checked.error || 'unreachable'}`];
  }
  if (answeredAt) return ['ok', `The model's server answered ${ago(answeredAt)}`];
  if (checked?.reachable) return ['ok', 'The model\'s server is reachable'];
  return ['busy', 'Checking the model\'s server…'];
}

export function mountLLMStatus(footer) {
  const dot = footer.querySelector('.status-dot');
  const render = () => {
    const [status, words] = describe(state);
    footer.dataset.llm = status;
    footer.title = words;
    dot.setAttribute('role', 'img');
    dot.setAttribute('aria-label', words);
    dot.removeAttribute('aria-hidden');
  };
  subscribe(['llm', 'health', 'connection'], render);
  render();
  probe();
  setInterval(() => {
    if (document.visibilityState === 'visible') probe();
  }, POLL_MS);
  window.addEventListener('focus', () => probe());
}
