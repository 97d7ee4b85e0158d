// Tool calls of the open chat that wait for the user's decision (issue 21): the
// approval_required / approval_decided frames → an approval panel in the call's tool
// card, decisions sent with POST /sessions/{id}/approvals/{call_id}, and
// `state.approvals` (how many wait here) for the page title and the sidebar's mark.
//
// The server sends approval_required again to every client that (re)connects while
// the call waits, so one call may arrive twice: it is known by its call_id (and its
// subagent's id: a subagent numbers its calls as its parent does, so ids may repeat).
//
// Focus: a new request takes the focus on its Approve button (Enter approves), unless
// the user is typing: a text field that holds text keeps the caret (Tab or a click
// reaches the buttons). Esc never denies: it stops the run, as everywhere.

import { api } from './api.js';
import { approvalPanel } from './approval_card.js';
import { state, update } from './state.js';

/** Whether a request may move the focus: not while the caret is in a text field with
 *  something typed, nor away from another request's panel, nor under a dialog. */
/** A call's key: its call_id within its stream (the session's, or a subagent's). */
function keyOf(frame) {
  return `${frame.is_subagent ? frame.subagent_id || '?' : ''}/${frame.call_id}`;
}

function mayTakeFocus() {
  if (document.querySelector('dialog[open], .lightbox')) return false;
  const active = document.activeElement;
  if (!active || active === document.body) return true;
  if (active.closest('.approval')) return false;
  if (active.matches('input, textarea, select, [contenteditable="true"]')) {
    return !active.value;
  }
  return true;
}

export class Approvals {
  /** onReleased(): the focus was on a panel that closed (main.js gives it back to the
   *  composer). */
  constructor({ onReleased }) {
    this.onReleased = onReleased;
    this.waiting = new Map(); // keyOf(frame) → {panel, card, sent}
  }

  /** Another chat is shown: its requests arrive with its connection. */
  reset() {
    this.waiting.clear();
    this.count();
  }

  count() {
    update({ approvals: this.waiting.size });
  }

  /** An approval_required frame; `scope`: where its frame belongs (turns.js). */
  required(frame, scope) {
    const callId = frame.call_id;
    const key = keyOf(frame);
    if (!callId || this.waiting.has(key)) return; // sent again on a reconnect
    let card = scope.turn.tools.find((t) => t.callId === callId && t.scope === scope)?.card;
    if (!card) card = scope.toolStarted(frame.tool, frame.args || {}, callId);
    if (card.done) return; // its result is in already: nothing to decide
    const panel = approvalPanel(frame, { onDecide: (choice) => this.decide(key, callId, choice) });
    card.attach(panel.el);
    card.setAwaiting(true);
    this.waiting.set(key, { panel, card });
    this.count();
    if (mayTakeFocus()) panel.focus();
  }

  /** An approval_decided frame: from this page, another tab, the terminal or a timeout. */
  decided(frame) {
    const entry = this.take(keyOf(frame));
    if (!entry) return;
    entry.panel.decided(frame);
    // Approved: the tool runs now (the spinner); declined: its tool_call follows.
    entry.card.setAwaiting(false);
  }

  /** A tool_call frame: a call that still showed its buttons ended without a decision
   *  (the run was stopped while it waited). */
  settled(frame) {
    this.end(keyOf(frame));
  }

  /** The run ended: nothing waits any more. */
  endAll() {
    for (const key of [...this.waiting.keys()]) this.end(key);
  }

  end(key) {
    const entry = this.take(key);
    if (entry) entry.panel.ended('Not decided: the run ended while this call waited');
  }

  take(key) {
    const entry = this.waiting.get(key);
    if (!entry) return null;
    // A click disables the buttons (the focus may drop to the body meanwhile).
    const active = document.activeElement;
    const hadFocus = entry.panel.el.contains(active) || (entry.sent && (!active || active === document.body));
    this.waiting.delete(key);
    this.count();
    if (hadFocus) {
      // The next request keeps the keyboard on the approvals; else back to the composer.
      const next = this.waiting.values().next().value;
      if (next) next.panel.focus();
      else this.onReleased();
    }
    return entry;
  }

  async decide(key, callId, { approved, scope = 'once', reason = '' }) {
    const entry = this.waiting.get(key);
    const sessionId = state.sessionId;
    if (!entry || !sessionId) return;
    entry.sent = true;
    entry.panel.busy(true);
    entry.panel.failed(null);
    const body = approved ? { decision: 'approve', scope } : { decision: 'deny', reason };
    try {
      await api.decideApproval(sessionId, callId, body);
      // The approval_decided frame updates the panel (for every tab alike).
    } catch (error) {
      if (!this.waiting.has(key)) return; // decided meanwhile: the frame said so
      entry.panel.busy(false);
      entry.panel.failed(error.status === 409 ? 'Someone decided this call already.'
        : error.status === 404 ? 'This call no longer waits for a decision.'
          : `Could not send your decision: ${error.message}`);
    }
  }
}
