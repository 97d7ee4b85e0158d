// Versions of a message in place: edit & resend and regenerate fork the chat just before
// a user message (replay_actions.js), so the chat and those forks are versions of the
// conversation from that message on. A user message with more than one version gets
// ‹ 2/3 › arrows that open the neighbouring version (a chat of its own, in the URL).
//
// Versions are read from the session list (`forked_from`, `forked_at_seq`): the versions
// of the message at history seq `s` are the chat that owns that seq and the forks made
// at `s - 1` (of it, or of one another), oldest first. The forks also stay in the sidebar and in the Replay view.

import { h } from './dom.js';
import { icon } from './icons.js';

function created(session) {
  return Date.parse(session.created_at || 0) || 0;
}

/** {list, index} of the versions of the message at `seq` in `sessionId`, or null. */
export function versionsAt(sessions, sessionId, seq) {
  const byId = new Map(sessions.map((s) => [s.session_id, s]));
  const chain = []; // the chat shown, then what it was forked from, and so on
  let owner = byId.get(sessionId);
  for (let s = owner; s && !chain.includes(s.session_id); s = byId.get(s.forked_from)) {
    chain.push(s.session_id);
  }
  // Up the lineage to the chat whose own events hold `seq`.
  while (owner && owner.forked_from && Number.isInteger(owner.forked_at_seq) && seq <= owner.forked_at_seq) {
    owner = byId.get(owner.forked_from);
  }
  if (!owner) return null;
  // A version of a version (regenerate in an edited chat) forks at the same point: the
  // versions are the first chat there and every fork made at that point, transitively.
  const atMessage = (s) => s.forked_from && s.forked_at_seq === seq - 1;
  let base = owner;
  for (let hops = 0; atMessage(base) && byId.has(base.forked_from) && hops < sessions.length; hops += 1) {
    base = byId.get(base.forked_from);
  }
  const members = new Set([base.session_id]);
  for (let grew = true; grew;) {
    grew = false;
    for (const s of sessions) {
      if (!members.has(s.session_id) && atMessage(s) && members.has(s.forked_from)) {
        members.add(s.session_id);
        grew = true;
      }
    }
  }
  const forks = sessions.filter((s) => s !== base && members.has(s.session_id));
  const list = [base, ...forks.sort((a, b) => created(a) - created(b))];
  if (list.length < 2) return null;
  // The version shown is the nearest of its lineage (a fork's origin is in it too).
  const mine = chain.find((id) => members.has(id));
  const index = list.findIndex((s) => s.session_id === mine);
  return index < 0 ? null : { list, index };
}

/**
 * Keep ‹ i/n › on the user messages of `container`. sessions() is the session list,
 * sessionId() the chat shown, open(id) opens another version. Call the returned
 * function when the session list changes.
 */
export function mountVersions(container, { sessions, sessionId, open }) {
  let scheduled = false;
  const decorate = () => {
    scheduled = false;
    const current = sessionId();
    for (const message of container.querySelectorAll('.message.user[data-seq]')) {
      const found = current ? versionsAt(sessions(), current, Number(message.dataset.seq)) : null;
      const key = found ? `${found.index}/${found.list.map((s) => s.session_id).join(',')}` : '';
      const nav = message.querySelector(':scope > .versions');
      if ((nav?.dataset.key || '') === key) continue;
      nav?.remove();
      if (!found) continue;
      const { list, index } = found;
      const go = (step) => open(list[index + step].session_id);
      message.append(h('div', { class: 'versions', 'data-key': key, role: 'group', 'aria-label': 'Versions' },
        h('button', {
          type: 'button', class: 'icon-button small flip', 'data-action': 'previous-version',
          title: 'Previous version', 'aria-label': 'Previous version', disabled: index === 0,
          onclick: () => go(-1),
        }, icon('chevron')),
        h('span', { class: 'version-count', text: `${index + 1}/${list.length}` }),
        h('button', {
          type: 'button', class: 'icon-button small', 'data-action': 'next-version',
          title: 'Next version', 'aria-label': 'Next version', disabled: index === list.length - 1,
          onclick: () => go(1),
        }, icon('chevron'))));
    }
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(decorate);
  };
  new MutationObserver(schedule).observe(container, { childList: true, subtree: true, attributes: true, attributeFilter: ['data-seq'] });
  return schedule;
}
