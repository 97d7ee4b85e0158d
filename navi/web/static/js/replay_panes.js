// The Replay view's two panes at the cursor: the conversation as the user saw it (drawn
// by the chat's own history renderer, and by the live renderer while a replay plays) and
// the context as the LLM saw it, each message marked when it is new since the previous
// LLM call (and the ones that call had but this context no longer has, listed apart).

import { ConversationView } from './conversation.js';
import { clear, formatCount, h } from './dom.js';
import { renderHistory } from './history.js';
import { eventWords, runStateWords } from './replay_words.js';

const ACTIVE = new Set(['planning', 'awaiting_llm', 'streaming', 'executing_tools', 'answered', 'compressing', 'stopping']);

/** What identifies a message to the LLM (not its seq: a summary is renumbered). */
function keyOf(message) {
  return JSON.stringify([
    message.role, message.content || '', message.name || null, message.tool_call_id || null,
    (message.tool_calls || []).map((c) => [c.name, c.arguments]), Boolean(message.is_summary),
    (message.images || []).length,
  ]);
}

/**
 * The context against the messages of the previous LLM call: each current message with
 * `added` (not in that call), and the messages of that call that are gone.
 */
export function diffContext(current, baseline) {
  if (!baseline) return { items: current.map((message) => ({ message, added: false })), removed: [] };
  const left = new Map();
  for (const message of baseline) {
    const key = keyOf(message);
    left.set(key, (left.get(key) || 0) + 1);
  }
  const items = current.map((message) => {
    const key = keyOf(message);
    const count = left.get(key) || 0;
    if (count) left.set(key, count - 1);
    return { message, added: count === 0 };
  });
  const removed = baseline.filter((message) => {
    const key = keyOf(message);
    const count = left.get(key) || 0;
    if (!count) return false;
    left.set(key, count - 1);
    return true;
  });
  return { items, removed };
}

/** The LLM call to compare the context at `seq` with: the one before the call at the
 *  cursor, or else the last one before the cursor. */
export function baselineRequest(requests, seq) {
  const before = requests.filter((r) => r.seq <= seq);
  if (!before.length) return null;
  const last = before[before.length - 1];
  if (last.seq === seq) return before.length > 1 ? before[before.length - 2] : null;
  return last;
}

function contextMessage({ message, added }, removed = false) {
  const calls = (message.tool_calls || []).map((c) => `${c.name}(${JSON.stringify(c.arguments)})`).join('\n');
  const role = message.is_summary ? 'summary' : message.role;
  return h('div', {
    class: `ctx-msg role-${role}${added ? ' added' : ''}${removed ? ' removed' : ''}`,
    'data-seq': message.seq ?? null,
  },
  h('div', { class: 'ctx-head' },
    h('span', { class: 'ctx-role', text: message.name ? `${role} · ${message.name}` : role }),
    Number.isInteger(message.seq) && h('span', { class: 'ctx-seq tech', text: `#${message.seq}` }),
    added && h('span', { class: 'ctx-badge', text: 'new' }),
    removed && h('span', { class: 'ctx-badge', text: 'no longer sent' })),
  message.content && h('pre', { class: 'ctx-content', text: message.content }),
  calls && h('pre', { class: 'ctx-calls', text: calls }),
  (message.images || []).length ? h('div', { class: 'ctx-note', text: `${message.images.length} image${message.images.length === 1 ? '' : 's'}` }) : null);
}

export class ReplayPanes {
  constructor({ scroller, inner, jump, context, info }) {
    this.view = new ConversationView(scroller, inner, jump);
    this.context = context;
    this.info = info;
  }

  /** The conversation as of `state`; returns the turn a replay would continue. */
  renderConversation(state) {
    const running = ACTIVE.has(state.run_state);
    const turn = renderHistory(this.view, state.messages || [], { running });
    // The running calls' progress at this point, as their live cards showed it.
    for (const progress of state.tool_progress || []) turn?.toolProgress(progress.call_id, progress);
    this.view.adoptTurn(running ? turn : null);
    if (!(state.messages || []).length) {
      this.view.inner.append(h('div', { class: 'replay-empty', text: 'Nothing said yet at this point.' }));
    }
    this.view.scrollToBottom();
    return running;
  }

  renderContext(state, baseline) {
    const diff = diffContext(state.context || [], baseline ? baseline.messages : null);
    const added = diff.items.filter((i) => i.added).length;
    const counts = `${added} new, ${diff.removed.length} no longer sent`;
    const compared = baseline
      ? [h('span', { class: 'plain', text: `compared with what the model was sent before: ${counts}` }),
        h('span', { class: 'tech', text: `compared with the LLM call at #${baseline.seq}: ${counts}` })]
      : 'nothing sent to the model before to compare with';
    const parts = [
      h('div', { class: 'ctx-summary' },
        h('span', { text: `${(state.context || []).length} messages · ${formatCount(state.context_token_count)} tokens` }),
        h('span', { class: 'ctx-compared' }, compared)),
      diff.removed.length
        ? h('details', { class: 'ctx-removed' },
          h('summary', { text: `${diff.removed.length === 1 ? '1 message' : `${diff.removed.length} messages`} sent to the model before, no longer sent` }),
          diff.removed.map((message) => contextMessage({ message, added: false }, true)))
        : null,
      ...(diff.items.length ? diff.items.map((item) => contextMessage(item))
        : [h('div', { class: 'replay-empty', text: 'The context is empty at this point.' })]),
    ];
    clear(this.context).append(...parts.filter(Boolean));
  }

  renderInfo(state) {
    const bits = [
      `event ${state.seq} of ${state.head}`,
      state.event_type,
      `run: ${state.run_state}`,
      state.active_profile?.profile_id && `profile: ${state.active_profile.profile_id}`,
    ];
    const todo = state.todo || [];
    if (todo.length) bits.push(`todo ${todo.filter((t) => t.status === 'done').length}/${todo.length}`);
    const pad = Object.keys(state.scratchpad || {});
    if (pad.length) bits.push(`scratchpad: ${pad.join(', ')}`);
    const call = (state.llm_requests || []).find((r) => r.seq === state.seq);
    const words = [
      state.event_type && `${eventWords(state.event_type)[0].toUpperCase()}${eventWords(state.event_type).slice(1)}`,
      `Navi: ${runStateWords(state.run_state)}`,
      state.active_profile?.profile_id && `profile: ${state.active_profile.profile_id}`,
      todo.length && `tasks ${todo.filter((t) => t.status === 'done').length}/${todo.length} done`,
    ];
    const parts = [h('span', { class: 'replay-info-main plain', text: words.filter(Boolean).join(' · ') }),
      h('span', { class: 'replay-info-main tech', text: bits.filter(Boolean).join(' · ') }),
      call && h('span', {
        class: 'replay-info-call tech',
        text: `LLM call: ${call.purpose} #${call.iteration}, attempt ${call.attempt}, model ${call.model || '–'}, ` +
          `tools [${call.tools.join(', ')}], options ${JSON.stringify(call.options)}`,
      }),
      state.run_state_error && h('span', { class: 'replay-info-error', text: state.run_state_error })];
    clear(this.info).append(...parts.filter(Boolean));
  }
}
