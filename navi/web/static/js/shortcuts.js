// Keyboard shortcuts and their sheet (`?`, or the keyboard button in the sidebar).
// Letters act only when no text field has the caret; chords with Ctrl (⌘ on a Mac)
// work anywhere.

import { h } from './dom.js';

const MAC = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
const MOD = MAC ? '⌘' : 'Ctrl';

function typing(target) {
  return target instanceof Element && Boolean(target.closest('input, textarea, select, [contenteditable="true"]'));
}

/**
 * actions: {newChat, focusSearch, focusPrompt, toggleTheme, exportChat}
 * Esc (stop, close) stays where it is handled (main.js, composer.js).
 */
export function mountShortcuts(actions) {
  const sheet = [
    ['Send the message', ['Enter']],
    ['New line in the message', ['Shift', 'Enter']],
    ['Queue a message while Navi answers', ['Enter']],
    ['Stop the answer (never denies a waiting tool call)', ['Esc']],
    // No key approves: a card never takes the focus, so nothing typed for the message
    // box can press Approve or Deny (issue 30).
    ['Approve or deny a tool call that waits', ['click its button']],
    ['Decline it with the reason you typed in its field', ['Enter']],
    ['New chat', [MOD, 'Shift', 'O']],
    ['Search chats', [MOD, 'K']],
    ['Focus the message box', ['/']],
    ['Light or dark theme', [MOD, 'Shift', 'L']],
    ['Export this chat as Markdown', [MOD, 'Shift', 'S']],
    ['Rename a chat', ['double-click its title']],
    ['This sheet', ['?']],
  ];
  document.addEventListener('keydown', (event) => {
    if (event.defaultPrevented || event.isComposing || document.querySelector('dialog[open]')) return;
    const mod = MAC ? event.metaKey : event.ctrlKey;
    const key = event.key.toLowerCase();
    let action = null;
    if (mod && event.shiftKey && key === 'o') action = actions.newChat;
    else if (mod && !event.shiftKey && key === 'k') action = actions.focusSearch;
    else if (mod && event.shiftKey && key === 'l') action = actions.toggleTheme;
    else if (mod && event.shiftKey && key === 's') action = actions.exportChat;
    else if (!mod && !event.altKey && !typing(event.target)) {
      if (event.key === '?') action = () => showShortcuts(sheet);
      else if (event.key === '/') action = actions.focusPrompt;
    }
    if (!action) return;
    event.preventDefault();
    action();
  });
  return () => showShortcuts(sheet);
}

export function showShortcuts(sheet) {
  const rows = sheet.map(([what, keys]) => h('tr', {},
    h('td', { text: what }),
    h('td', { class: 'keys' }, keys.map((key, i) => [i ? ' ' : '', key.includes(' ') && key === key.toLowerCase()
      ? h('span', { class: 'key-text', text: key })
      : h('kbd', { text: key })]))));
  const dialog = h('dialog', { class: 'dialog shortcuts', 'data-testid': 'shortcuts', 'aria-label': 'Keyboard shortcuts' },
    h('form', { method: 'dialog' },
      h('h2', { text: 'Keyboard shortcuts' }),
      h('table', {}, h('tbody', {}, rows)),
      h('div', { class: 'dialog-actions' }, h('button', { value: 'close', class: 'button primary', text: 'Close' }))));
  document.body.append(dialog);
  dialog.addEventListener('close', () => dialog.remove());
  dialog.showModal();
}
