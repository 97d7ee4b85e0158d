// The approval panel inside the tool card of a call that waits for the user (issue 21):
// what the call would do (its arguments, long values folded), which policy asked, and
// Approve · Approve for this session · Deny (with an optional reason). Once decided, it
// says the outcome and who decided; the card then shows the tool's result as usual.
// It knows nothing of frames or of the server: approvals.js drives it.

import { h } from './dom.js';
import { icon } from './icons.js';

// A value longer than this (characters or lines) is folded behind its first line:
// a file's whole content or a script must not push the buttons off the screen.
const FOLD_CHARS = 240;
const FOLD_LINES = 6;

function valueText(value) {
  if (typeof value === 'string') return value;
  return JSON.stringify(value, null, 2) ?? String(value);
}

/** One argument's value: as it is, or folded with its first line and its size. */
function argumentValue(value) {
  const text = valueText(value);
  const lines = text.split('\n');
  const pre = h('pre', { class: 'approval-value', text });
  if (text.length <= FOLD_CHARS && lines.length <= FOLD_LINES) return pre;
  const first = lines[0].length > 80 ? `${lines[0].slice(0, 79)}…` : lines[0];
  const size = lines.length > 1 ? `${lines.length} lines` : `${text.length} characters`;
  return h('details', { class: 'approval-fold' },
    h('summary', {}, h('span', { class: 'approval-first', text: first }),
      h('span', { class: 'approval-size', text: ` (${size})` })),
    pre);
}

export function argumentList(args) {
  const entries = args && typeof args === 'object' ? Object.entries(args) : [['', args]];
  if (!entries.length) return h('p', { class: 'approval-none', text: 'No arguments.' });
  return h('dl', { class: 'approval-args' }, entries.map(([key, value]) => [
    h('dt', { text: key }), h('dd', {}, argumentValue(value)),
  ]));
}

/** The words for a decision (an approval_decided frame). */
export function outcomeText({ approved, scope, by, reason }) {
  const who = by ? ` by ${by}` : '';
  if (approved) return `${scope === 'session' ? 'Approved for this session' : 'Approved'}${who}`;
  return `Declined${who}${reason ? `: ${reason}` : ''}`;
}

/** The line a decided call's card keeps in the history (a message's `approval`). */
export function decidedNote(approval) {
  const waited = approval.waited_seconds >= 1 ? ` after ${Math.round(approval.waited_seconds)} s` : '';
  const kind = approval.approved ? 'approved' : 'declined';
  return h('div', {
    class: `approval decided ${kind}`, 'data-testid': 'approval', text: outcomeText(approval) + waited,
  });
}

/**
 * request: an approval_required frame. onDecide({approved, scope, reason}) sends the
 * decision (approvals.js). Returns {el, focus(), busy(on), failed(message),
 * decided(frame), ended(text)}.
 */
export function approvalPanel(request, { onDecide }) {
  const tool = request.tool || 'tool';
  const headline = h('strong', { class: 'approval-title', text: 'Waiting for your approval' });
  const who = request.is_subagent ? `A subagent asks to run ${tool}` : `Navi asks to run ${tool}`;
  const approve = h('button', {
    type: 'button', class: 'button small primary', 'data-action': 'approve', text: 'Approve',
    title: 'Run this call once (Enter)',
  });
  const approveSession = h('button', {
    type: 'button', class: 'button small', 'data-action': 'approve-session',
    text: 'Approve for this session', title: `Run this and later ${tool} calls of this chat without asking`,
  });
  const reason = h('input', {
    type: 'text', class: 'approval-reason', maxlength: 500, placeholder: 'Reason (optional)',
    'aria-label': 'Reason for declining (optional)',
  });
  const deny = h('button', {
    type: 'button', class: 'button small deny', 'data-action': 'deny', text: 'Deny',
    title: 'Do not run it; the reason, if any, goes to the model',
  });
  const actions = h('div', { class: 'approval-actions' }, approve, approveSession,
    h('span', { class: 'approval-deny' }, reason, deny));
  const error = h('div', { class: 'approval-error', role: 'alert', hidden: true });
  const args = argumentList(request.args);
  const whoLine = h('p', { class: 'approval-who' }, h('span', { text: who }),
    request.policy && h('span', { class: 'approval-policy', text: ` · asked by: ${request.policy}` }));
  const el = h('div', {
    class: 'approval', role: 'group', 'aria-label': `Approval: ${tool}`,
    'data-testid': 'approval', 'data-call-id': request.call_id,
  },
  h('div', { class: 'approval-head' }, icon('shield'), headline),
  whoLine, args, actions, error);

  const buttons = [approve, approveSession, deny, reason];
  approve.addEventListener('click', () => onDecide({ approved: true, scope: 'once' }));
  approveSession.addEventListener('click', () => onDecide({ approved: true, scope: 'session' }));
  deny.addEventListener('click', () => onDecide({ approved: false, reason: reason.value.trim() }));
  reason.addEventListener('keydown', (event) => {
    // Enter in the reason field declines with it (the field belongs to Deny).
    if (event.key !== 'Enter' || event.isComposing) return;
    event.preventDefault();
    deny.click();
  });

  const settle = (text, kind) => {
    // One line stays: how it ended; the card's own Arguments section keeps the rest.
    for (const part of [whoLine, args, actions, error]) part.remove();
    el.classList.remove('sending');
    el.classList.add('decided', kind);
    headline.textContent = text;
  };
  return {
    el,
    focus() {
      approve.focus();
    },
    busy(on) {
      for (const control of buttons) control.disabled = on;
      el.classList.toggle('sending', on);
    },
    failed(message) {
      error.hidden = !message;
      error.textContent = message || '';
    },
    decided(frame) {
      settle(outcomeText(frame), frame.approved ? 'approved' : 'declined');
      el.setAttribute('aria-label', `${tool}: ${outcomeText(frame)}`);
    },
    /** No decision will come (the run stopped or failed while the call waited). */
    ended(text) {
      settle(text, 'ended');
    },
  };
}
