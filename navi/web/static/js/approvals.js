// Tool calls of the open chat that wait for the user's decision (issues 21 and 30): the
// approval_required / approval_decided frames → an approval panel in the call's tool
// card, decisions sent with POST /sessions/{id}/approvals/{call_id} (with the frame's
// `stream_id` when it has one: the call is named exactly, never guessed by its id), and
// `state.approvals` (how many wait here) for the page title and the sidebar's mark.
//
// The server sends approval_required again to every client that (re)connects while
// the call waits, so one call may arrive twice: it is known by its stream and call_id
// (a subagent numbers its calls as its parent does, so call ids alone may repeat).
//
// Focus: an approval is given on purpose. A request never moves the keyboard focus —
// not when the composer is empty, not after a reload, not from one decided card to the
// next — so no key typed for the composer (Space, Enter) can press Approve or Deny.
// Esc never denies: it stops the run, as everywhere.

import { api } from './api.js';
import { approvalPanel } from './approval_card.js';
import { state, update } from './state.js';

/** A call's key: its call_id within its stream (the frame's `stream_id`; from an older
 *  server, the subagent's id, or '' for the session's own stream). */
function keyOf(frame) {
  const stream = frame.stream_id || (frame.is_subagent ? frame.subagent_id || '?' : '');
  return `${stream}/${frame.call_id}`;
}

/** The older key of the same call: a decision frame without `stream_id` still finds
 *  a request that had one. */
function legacyKeyOf(frame) {
  return `${frame.is_subagent ? frame.subagent_id || '?' : ''}/${frame.call_id}`;
}

export class Approvals {
  /** onReleased(): the focus was on a panel that closed (main.js gives it back to the
   *  composer). */
  constructor({ onReleased }) {
    this.onReleased = onReleased;
    this.waiting = new Map(); // keyOf(frame) → {panel, card, legacyKey, streamId, sent}
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
    const streamId = typeof frame.stream_id === 'string' && frame.stream_id ? frame.stream_id : null;
    this.waiting.set(key, { panel, card, legacyKey: legacyKeyOf(frame), streamId });
    this.count();
    // No focus(): the user's caret stays where it is (see the top of this file).
  }

  /** The key of the waiting call a decision or result frame is about, or null. */
  keyFor(frame) {
    const key = keyOf(frame);
    if (this.waiting.has(key)) return key;
    const legacy = legacyKeyOf(frame);
    for (const [other, entry] of this.waiting) {
      // Only when one side has no stream_id (an older frame): never across streams.
      if (entry.legacyKey === legacy && !(entry.streamId && frame.stream_id)) return other;
    }
    return null;
  }

  /** An approval_decided frame: from this page, another tab, the terminal or a timeout. */
  decided(frame) {
    const entry = this.take(this.keyFor(frame));
    if (!entry) return;
    entry.panel.decided(frame);
    // Approved: the tool runs now (the spinner); declined: its tool_call follows.
    entry.card.setAwaiting(false);
  }

  /** A tool_call frame: a call that still showed its buttons ended without a decision
   *  (the run was stopped while it waited). */
  settled(frame) {
    this.end(this.keyFor(frame));
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
    const entry = key === null ? null : this.waiting.get(key);
    if (!entry) return null;
    // A click disables the buttons (the focus may drop to the body meanwhile).
    const active = document.activeElement;
    const hadFocus = entry.panel.el.contains(active) || (entry.sent && (!active || active === document.body));
    this.waiting.delete(key);
    this.count();
    // Back to the composer, never to another request's buttons: a second Enter or
    // Space must not decide the next call.
    if (hadFocus) this.onReleased();
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
    // The call's stream, from its frame: the server decides exactly this call. (An older
    // server sends none and would refuse the field.)
    if (entry.streamId) body.stream_id = entry.streamId;
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
