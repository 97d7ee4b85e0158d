// Draw a session's display history (GET /sessions/{id} → `messages`) with the same
// blocks live frames use: thinking collapsed, plans collapsed, tool cards completed by
// their tool message (paired by tool_call_id).

import { decidedNote } from './approval_card.js';
import { notice } from './cards.js';
import { runStats } from './live.js';
import { Turn } from './turns.js';

/**
 * Render `messages` into the view. Returns the last assistant turn (so that a run still
 * in progress can continue it) or null.
 */
export function renderHistory(view, messages, { running = false } = {}) {
  view.reset();
  let turn = null;
  let lastText = '';
  let stats = [];
  const close = () => {
    if (!turn) return;
    turn.settle();
    turn.abandonTools('no result: the run ended before this call finished');
    turn.finish({ content: lastText, stats });
  };

  for (const message of messages || []) {
    if (message.role === 'user' && !message.is_summary) {
      close();
      turn = null;
      lastText = '';
      stats = [];
      view.addUser({
        content: message.content || '', images: message.images || [], files: message.files || [], seq: message.seq,
      });
      continue;
    }
    if (message.role === 'system' || message.is_summary) {
      const text = message.is_summary ? 'Earlier messages were summarised for the model.' : message.content;
      if (turn) turn.root.notice(text, 'info');
      else view.inner.append(notice(text, 'info'));
      continue;
    }
    if (!turn) {
      turn = new Turn();
      view.inner.append(turn.el);
    }
    const scope = message.is_subagent ? turn.scopeFor(message) : turn.root;
    if (message.role === 'assistant') {
      if (message.is_plan) {
        scope.showPlan(message.content || '', { open: false });
        continue;
      }
      // A subagent's thinking came whole (turn_thinking): "Reasoning", as it was live.
      scope.reasoning(message.thinking, message.is_subagent ? undefined : message.thinking_seconds);
      if (message.content) {
        scope.text = null; // a new assistant message starts its own text block
        scope.setText(message.content);
        if (!message.is_subagent) lastText = message.content;
      }
      for (const call of message.tool_calls || []) {
        scope.toolStarted(call.name, call.arguments, call.id, { history: true });
      }
      showRunEnd(turn, message);
      if (Number.isFinite(message.elapsed_seconds)) stats = runStats(message);
    } else if (message.role === 'tool') {
      const card = scope.toolFinished(message.name || 'tool', undefined, message.content,
        message.success !== false, message.tool_call_id, { history: true, images: message.images || [] });
      // A call a person decided on says so, as its live card did.
      if (message.approval) card.attach(decidedNote(message.approval));
    }
  }

  if (running) return turn;
  close();
  return turn;
}

/** How the run ended, where its last message says so: as the live frames showed it. */
function showRunEnd(turn, message) {
  if (message.is_subagent) return;
  if (message.stopped) {
    turn.settle();
    turn.abandonTools('stopped');
    turn.root.notice('Stopped', 'stopped');
  }
  if (message.error) {
    turn.settle();
    turn.error(message.error, { runError: true });
  }
}

/** The highest log seq the history covers (when the server does not say `last_seq`). */
export function highestSeq(messages) {
  let seq = 0;
  for (const message of messages || []) {
    if (Number.isFinite(message.seq) && message.seq > seq) seq = message.seq;
  }
  return seq;
}
