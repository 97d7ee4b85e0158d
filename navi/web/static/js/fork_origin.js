// A fork says where it came from: a line at the top of its conversation with a link to
// the chat it was forked from (edit & resend, regenerate, Retry, "continue from here").

import { h } from './dom.js';
import { icon } from './icons.js';

/** The line for a fork `session` (GET /sessions/{id}); `origin`: the chat it came from
 *  (null: deleted since); title(s): a chat's title. */
export function forkOriginLine(session, origin, title) {
  const originId = session.forked_from;
  const where = Number.isInteger(session.forked_at_seq) ? ` at step ${session.forked_at_seq}` : '';
  const body = origin
    ? [h('span', { text: 'Continued from ' }),
      h('a', { href: `#${encodeURIComponent(originId)}`, class: 'fork-origin-link', text: `“${title(origin)}”` }),
      h('span', { text: `${where}; that chat stays as it was.` })]
    : [h('span', { text: `Continued from a chat that was since deleted${where}.` })];
  return h('div', { class: 'fork-origin', 'data-testid': 'fork-origin' }, icon('fork'), ...body);
}
