// The approval panel inside the tool card of a call that waits for the user (issues 21
// and 30): what will happen and where, in plain words (the frame's `summary`, `target`,
// `risk` and `asked_by`), the arguments whole (code and long values in a bounded,
// scrollable monospace block: nothing folded behind a first line), and Approve · the
// session scope's own button (`session_scope.label`, absent when the call can only be
// approved once) · Deny with an optional reason. Once decided, it says the outcome and
// who decided; the card then shows the tool's result as usual.
//
// It never takes the keyboard focus: a decision is a click on a button (or Enter in the
// reason field, once the user has typed a reason there). A frame from an older server
// (or an old log) has none of the plain-words fields: the panel then shows the tool, the
// rule that asked and "Approve for this session", as before.
//
// It knows nothing of frames' delivery or of the server: approvals.js drives it.

import { h } from './dom.js';
import { icon } from './icons.js';

// Argument names whose value is code: shown as written (no wrapping), scrolled sideways.
const CODE_KEYS = new Set(['code', 'command', 'script', 'source', 'program', 'patch', 'diff', 'sql']);
// A value longer than this (lines or characters) gets its size beside its name, and its
// block is a labelled region the keyboard can scroll (its height is bounded by the CSS).
const LONG_LINES = 6;
const LONG_CHARS = 240;

function valueText(value) {
  if (typeof value === 'string') return value;
  return JSON.stringify(value, null, 2) ?? String(value);
}

/** A plain-words field of the frame: a non-empty string, else null (an older server). */
function words(value) {
  return typeof value === 'string' && value.trim() ? value.trim() : null;
}

/** One argument: its name (with its size when long) and its whole value. */
function argumentEntry(key, value) {
  const text = valueText(value);
  const lines = text.split('\n').length;
  const long = lines > LONG_LINES || text.length > LONG_CHARS;
  const size = lines > 1 ? `${lines} lines` : `${text.length} characters`;
  const code = typeof value === 'string' && CODE_KEYS.has(key);
  const pre = h('pre', {
    class: code ? 'approval-value code' : 'approval-value', text,
    // A long value scrolls inside its block: the keyboard reaches it too (Tab, arrows).
    tabindex: long ? 0 : null, role: long ? 'region' : null,
    'aria-label': long ? `${key || 'value'}, ${size}` : null,
  });
  return [
    h('dt', {}, h('span', { class: 'approval-key', text: key }),
      long && h('span', { class: 'approval-size', text: size })),
    h('dd', {}, pre),
  ];
}

export function argumentList(args) {
  const entries = args && typeof args === 'object' ? Object.entries(args) : [['', args]];
  if (!entries.length) return h('p', { class: 'approval-none', text: 'No arguments.' });
  return h('dl', { class: 'approval-args' }, entries.map(([key, value]) => argumentEntry(key, value)));
}

/** Where, what risk, who asked: the frame's plain words (those it has). */
function facts(request) {
  const rows = [['Where', words(request.target)], ['Risk', words(request.risk)],
    ['Asked by', words(request.asked_by)]].filter(([, text]) => text);
  if (!rows.length) return null;
  return h('dl', { class: 'approval-facts' }, rows.map(([label, text]) => [
    h('dt', { text: label }), h('dd', { class: `approval-${label.toLowerCase().replace(' ', '-')}`, text }),
  ]));
}

/** The line of an older frame (no `asked_by`): which tool, and which rule asked. */
function whoLine(request, tool) {
  const who = request.is_subagent ? `A subagent asks to run ${tool}` : `Navi asks to run ${tool}`;
  return h('p', { class: 'approval-who' }, h('span', { text: who }),
    request.policy && h('span', { class: 'approval-policy', text: ` · asked by: ${request.policy}` }));
}

/** The button that approves for the rest of the chat: named by the frame's scope; none
 *  when the call can only be approved once (`session_scope: null`); today's words when
 *  the frame predates scopes (no `session_scope` at all). */
function sessionButton(request, tool) {
  const scope = request.session_scope;
  if (scope === null) return null;
  const label = scope && typeof scope === 'object' ? words(scope.label) : null;
  if (scope !== undefined && !label) return null; // a scope without words: never guess
  return h('button', {
    type: 'button', class: 'button small', 'data-action': 'approve-session',
    'data-scope-key': label ? scope.key : null,
    text: label || 'Approve for this session',
    title: label ? `${label}: this call, and later ones it covers, run without asking`
      : `Run this and later ${tool} calls of this chat without asking`,
  });
}

/** The words for a decision (an approval_decided frame, or a history message's
 *  `approval` with how long the call waited). Who decided is the chat's own user: it
 *  goes in the tooltip, not in the line; the reason comes last, quoted, so that it never
 *  runs into the figures. */
export function outcomeText({ approved, scope, reason, waited_seconds: waited }) {
  const outcome = approved ? (scope === 'session' ? 'Approved for this session' : 'Approved') : 'Declined';
  const after = waited >= 1 ? ` after ${Math.round(waited)} s` : '';
  const why = !approved && reason ? ` · “${reason}”` : '';
  return `${outcome}${after}${why}`;
}

/** The tooltip of a decision: who decided. */
export function deciderText({ by }) {
  return by ? `Decided by ${by}` : '';
}

/** The line a decided call's card keeps in the history (a message's `approval`). */
export function decidedNote(approval) {
  const kind = approval.approved ? 'approved' : 'declined';
  return h('div', {
    class: `approval decided ${kind}`, 'data-testid': 'approval', text: outcomeText(approval),
    title: deciderText(approval) || undefined,
  });
}

/**
 * request: an approval_required frame. onDecide({approved, scope, reason}) sends the
 * decision (approvals.js). Returns {el, busy(on), failed(message), decided(frame),
 * ended(text)}. Nothing here ever calls focus().
 */
export function approvalPanel(request, { onDecide }) {
  const tool = request.tool || 'tool';
  const summary = words(request.summary);
  const headline = h('strong', { class: 'approval-title', text: 'Waiting for your approval' });
  const approve = h('button', {
    type: 'button', class: 'button small primary', 'data-action': 'approve', text: 'Approve',
    title: 'Run this call once',
  });
  const approveSession = sessionButton(request, tool);
  const reason = h('input', {
    type: 'text', class: 'approval-reason', maxlength: 500, placeholder: 'Reason (optional)',
    'aria-label': 'Reason for declining (optional)', enterkeyhint: 'send',
  });
  const deny = h('button', {
    type: 'button', class: 'button small deny', 'data-action': 'deny', text: 'Deny',
    title: 'Do not run it; the reason, if any, goes to the model',
  });
  const actions = h('div', { class: 'approval-actions' }, approve, approveSession,
    h('span', { class: 'approval-deny' }, reason, deny));
  const error = h('div', { class: 'approval-error', role: 'alert', hidden: true });
  const details = [
    summary && h('p', { class: 'approval-summary', 'data-testid': 'approval-summary', text: summary }),
    facts(request),
    !words(request.asked_by) && whoLine(request, tool),
    argumentList(request.args),
  ].filter(Boolean);
  const el = h('div', {
    class: 'approval', role: 'group', 'aria-label': `Approval: ${summary || tool}`,
    'data-testid': 'approval', 'data-call-id': request.call_id,
    'data-stream-id': words(request.stream_id),
  },
  h('div', { class: 'approval-head' }, icon('shield'), headline),
  details, actions, error);

  const controls = [approve, approveSession, deny, reason].filter(Boolean);
  approve.addEventListener('click', () => onDecide({ approved: true, scope: 'once' }));
  approveSession?.addEventListener('click', () => onDecide({ approved: true, scope: 'session' }));
  deny.addEventListener('click', () => onDecide({ approved: false, reason: reason.value.trim() }));
  reason.addEventListener('keydown', (event) => {
    // Enter declines this call only with a reason the user typed here: an empty field,
    // a held-down key or an IME's Enter does nothing (the Deny button declines without).
    if (event.key !== 'Enter' || event.isComposing || event.repeat) return;
    event.preventDefault();
    if (event.target === reason && reason.value.trim()) deny.click();
  });

  const settle = (text, kind) => {
    // One line stays: how it ended; the card's own Arguments section keeps the rest.
    for (const part of [...details, actions, error]) part.remove();
    el.classList.remove('sending');
    el.classList.add('decided', kind);
    headline.textContent = text;
  };
  return {
    el,
    busy(on) {
      for (const control of controls) control.disabled = on;
      el.classList.toggle('sending', on);
    },
    failed(message) {
      error.hidden = !message;
      error.textContent = message || '';
    },
    decided(frame) {
      settle(outcomeText(frame), frame.approved ? 'approved' : 'declined');
      el.setAttribute('aria-label', `${tool}: ${outcomeText(frame)}`);
      if (frame.by) el.title = deciderText(frame);
    },
    /** No decision will come (the run stopped or failed while the call waited). */
    ended(text) {
      settle(text, 'ended');
    },
  };
}
