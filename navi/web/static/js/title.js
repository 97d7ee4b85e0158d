// The page title: what is shown ("Trip plan · Navi", "Replay · … · Navi"), and first,
// while tool calls wait for the user, how many: "(1) Approval needed · Navi" — a tab in
// the background says it needs you. The open chat counts its live requests
// (state.approvals); the other chats count what the session list says
// (`pending_approvals`, refreshed by the sidebar).

import { state, subscribe } from './state.js';

let base = 'Navi';

/** Every chat's waiting calls: the open one's live, the others' from the list. */
export function approvalsWaiting() {
  let count = state.approvals || 0;
  for (const session of state.sessions) {
    if (session.session_id !== state.sessionId) count += session.pending_approvals || 0;
  }
  return count;
}

function render() {
  const waiting = approvalsWaiting();
  document.title = waiting ? `(${waiting}) Approval needed · ${base}` : base;
}

/** The title without the approvals' prefix. */
export function setTitle(text) {
  base = text || 'Navi';
  render();
}

subscribe(['approvals', 'sessions', 'sessionId'], render);
