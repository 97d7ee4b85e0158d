// "Edit and resend" on a user message, "Regenerate" under an answer and "Retry" on a
// failed turn's error. All are forks
// (POST /sessions/{id}/fork): a new chat whose history is this one's up to just before
// that message, where the message (edited, or as it was) is sent again; the original
// chat stays as it is. Messages are found by their log seq (`data-seq`), so this works
// on any conversation drawn by history.js or live.js — the chat and the Replay view.

import { h } from './dom.js';
import { icon } from './icons.js';

function previousUser(turn) {
  for (let el = turn?.previousElementSibling; el; el = el.previousElementSibling) {
    if (el.matches('.message.user')) return el.dataset.seq ? el : null;
    if (el.matches('.message.assistant')) return null;
  }
  return null;
}

/**
 * Decorate `container`'s messages as they appear. sessionId() is the chat they belong to;
 * onFork(sessionId, seq, text) forks before the user message at `seq` and sends `text`
 * (null: the message as it was). It returns a promise; a rejection is shown in place.
 */
export function mountForkActions(container, { sessionId, onFork }) {
  let scheduled = false;

  const run = async (place, seq, text) => {
    const origin = sessionId();
    if (!origin) return;
    place.querySelector('.fork-error')?.remove();
    try {
      await onFork(origin, seq, text);
    } catch (error) {
      place.append(h('div', { class: 'fork-error', role: 'alert', text: `Could not start the new chat: ${error.message}` }));
    }
  };

  const startEdit = (message) => {
    if (message.querySelector('.edit-form')) return;
    const bubble = message.querySelector('.bubble');
    const box = h('textarea', { class: 'edit-box', rows: '3', 'aria-label': 'Edited message' });
    box.value = bubble ? bubble.textContent : '';
    const close = () => {
      form.remove();
      message.classList.remove('editing');
    };
    const submit = () => {
      const text = box.value.trim();
      if (text) run(message, Number(message.dataset.seq), text);
    };
    const form = h('div', { class: 'edit-form' }, box,
      h('div', { class: 'edit-actions' },
        h('span', { class: 'edit-hint', text: 'Sends it in a new chat from this point; this chat stays as it is.' }),
        h('button', { type: 'button', class: 'button small', 'data-action': 'cancel-edit', text: 'Cancel', onclick: close }),
        h('button', { type: 'button', class: 'button small primary', 'data-action': 'send-edit', text: 'Send', onclick: submit })));
    box.addEventListener('keydown', (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        close();
      } else if (event.key === 'Enter' && !event.shiftKey) {
        event.preventDefault();
        submit();
      }
    });
    message.classList.add('editing');
    message.append(form);
    box.focus();
  };

  const decorate = () => {
    scheduled = false;
    for (const message of container.querySelectorAll('.message.user[data-seq]')) {
      if (message.querySelector('.fork-actions') || message.classList.contains('pending')) continue;
      message.append(h('div', { class: 'fork-actions' },
        h('button', {
          type: 'button', class: 'icon-button small', 'data-action': 'edit',
          title: 'Edit and resend (in a new chat)', 'aria-label': 'Edit and resend',
          onclick: () => startEdit(message),
        }, icon('edit'))));
    }
    for (const footer of container.querySelectorAll('.message.assistant .turn-footer')) {
      if (footer.querySelector('[data-action="regenerate"]')) continue;
      const turn = footer.closest('.message.assistant');
      const user = previousUser(turn);
      if (!user) continue;
      footer.prepend(h('button', {
        type: 'button', class: 'footer-button', 'data-action': 'regenerate',
        title: 'Regenerate (in a new chat)', 'aria-label': 'Regenerate this answer',
        onclick: () => run(footer, Number(user.dataset.seq), null),
      }, icon('regenerate')));
    }
    // A failed turn: Retry sends its message again, as regenerate does.
    for (const block of container.querySelectorAll('.message.assistant .error-block.run-error')) {
      if (block.querySelector('[data-action="retry"]')) continue;
      const user = previousUser(block.closest('.message.assistant'));
      if (!user) continue;
      block.append(h('button', {
        type: 'button', class: 'button small', 'data-action': 'retry', text: 'Retry',
        title: 'Send this message again (a new version of the chat; this one stays)',
        onclick: () => run(block, Number(user.dataset.seq), null),
      }));
    }
  };

  new MutationObserver(() => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(decorate);
  }).observe(container, { childList: true, subtree: true, attributes: true, attributeFilter: ['data-seq', 'class'] });
}
