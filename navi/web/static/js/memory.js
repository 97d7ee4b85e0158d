// The Memory page (#memory, the brain in the sidebar): the facts Navi remembers, each
// with a link to the chat it was learned from, edited in place or forgotten. And the
// quiet notices: "Memory updated" after a run taught something, and, once, that the
// model cannot pick out facts. GET/PATCH/DELETE /memory/facts, GET /memory/status.

import { api } from './api.js';
import { confirmDialog } from './dialogs.js';
import { h } from './dom.js';
import { icon } from './icons.js';

const SEEN_KEY = 'navi.memory.seen';
const TOLD_KEY = 'navi.memory.cannotExtractTold';
const CANNOT = 'This model cannot pick out facts to remember, so Navi will not learn from your chats. A larger model (Settings) can.';

function stored(key) {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}

function store(key, value) {
  try {
    localStorage.setItem(key, value);
  } catch {
    // No storage: told again on the next visit.
  }
}

function factRow(fact, { openSource, onError }) {
  const value = h('span', { class: 'memory-value', text: fact.value });
  const row = h('li', { class: 'memory-fact', 'data-fact-id': fact.id });
  const source = fact.source
    ? h('a', {
      class: 'memory-source', href: `#${encodeURIComponent(fact.source.session_id)}`, text: 'From a chat',
      title: 'Open the chat this was learned from',
      onclick: (event) => {
        event.preventDefault();
        openSource(fact.source);
      },
    })
    : h('span', { class: 'memory-source', text: fact.edited_by_user ? 'Set by you' : '' });
  const edit = () => {
    const field = h('input', { class: 'memory-edit', value: fact.value, 'aria-label': `New value of ${fact.key}` });
    const done = async (save) => {
      if (save && field.value.trim() && field.value !== fact.value) {
        try {
          // The edited fact is the user's word: no source any more. Drawn again.
          row.replaceWith(factRow(await api.editFact(fact.id, field.value.trim()), { openSource, onError }));
          return;
        } catch (error) {
          onError(`Not saved: ${error.message}`);
        }
      }
      value.textContent = fact.value;
      field.replaceWith(value);
    };
    field.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') done(true);
      if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        done(false);
      }
    });
    value.replaceWith(field);
    field.focus();
  };
  const forget = async () => {
    const ok = await confirmDialog(`Forget "${fact.value}"? Navi will not use it again.`, {
      title: 'Forget this?', confirmLabel: 'Forget', danger: true,
    });
    if (!ok) return;
    try {
      await api.forgetFact(fact.id);
      row.remove();
    } catch (error) {
      onError(`Not forgotten: ${error.message}`);
    }
  };
  row.append(
    h('div', { class: 'memory-line' },
      h('span', { class: 'memory-key', text: `${fact.category} · ${fact.key.replaceAll('_', ' ')}` }), source),
    value,
    h('div', { class: 'memory-actions' },
      h('button', { type: 'button', class: 'button small', 'data-action': 'edit-fact', text: 'Edit', onclick: edit }),
      h('button', { type: 'button', class: 'button small danger', 'data-action': 'forget-fact', text: 'Forget', onclick: forget })));
  return row;
}

/** Opens the Memory page (a dialog); resolves with the source picked, or null. */
export async function openMemory() {
  const [facts, status] = await Promise.all([api.memoryFacts(), api.memoryStatus().catch(() => null)]);
  const error = h('div', { class: 'settings-error', role: 'alert', hidden: true });
  const onError = (message) => {
    error.textContent = message;
    error.hidden = false;
  };
  let picked = null;
  const openSource = (source) => {
    picked = source;
    dialog.close('source');
  };
  const list = h('ul', { class: 'memory-list' }, ...facts.map((fact) => factRow(fact, { openSource, onError })));
  const dialog = h('dialog', { class: 'dialog settings-dialog memory-dialog', 'data-testid': 'memory-page', 'aria-label': 'Memory' },
    h('div', { class: 'settings-head' }, h('h2', { text: 'Memory' }),
      h('button', { type: 'button', class: 'icon-button small', 'aria-label': 'Close memory', onclick: () => dialog.close('cancel') }, icon('close'))),
    h('p', { class: 'settings-hint', text: 'What Navi remembers about you across chats: what you ask it to remember (“remember that …”), and what it learns from your chats a couple of minutes after each answer.' }),
    status?.cannot_extract ? h('p', { class: 'memory-cannot', text: CANNOT }) : null,
    facts.length ? list : h('p', { class: 'memory-empty', text: 'Nothing remembered yet.' }),
    error);
  document.body.append(dialog);
  dialog.showModal();
  await new Promise((resolve) => dialog.addEventListener('close', resolve));
  dialog.remove();
  return picked;
}

/** Polls GET /memory/status after runs; shows "Memory updated" and the once-told note. */
export function mountMemoryNotices(container, { openPage }) {
  const notice = h('div', { class: 'memory-notice', 'data-testid': 'memory-notice', role: 'status', hidden: true });
  container.append(notice);
  const show = (text, link) => {
    notice.replaceChildren(h('span', { text }), link
      ? h('a', { href: '#memory', text: 'See', onclick: (event) => { event.preventDefault(); notice.hidden = true; openPage(); } })
      : null,
    h('button', { type: 'button', class: 'icon-button small', 'aria-label': 'Dismiss', onclick: () => { notice.hidden = true; } }, icon('close')));
    notice.hidden = false;
  };
  let extractAfter = 120;
  const poll = async () => {
    let status;
    try {
      status = await api.memoryStatus();
    } catch {
      return;
    }
    extractAfter = status.extract_after_s ?? extractAfter;
    const seen = stored(SEEN_KEY);
    const now = status.updated_at || '';
    if (seen !== null && now && now !== seen) show('Memory updated', true);
    store(SEEN_KEY, now);
    if (status.cannot_extract && !stored(TOLD_KEY)) {
      store(TOLD_KEY, '1');
      show(CANNOT, false);
    }
  };
  poll();
  return {
    poll,
    /** A run ended: extraction comes `extract_after_s` later. */
    runEnded() {
      setTimeout(poll, (extractAfter + 2) * 1000);
      setTimeout(poll, (extractAfter + 8) * 1000);
    },
  };
}
