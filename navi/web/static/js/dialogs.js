// Modal dialogs on the native <dialog> element: a confirmation and a secret prompt.

import { h } from './dom.js';

function openDialog(dialog) {
  document.body.append(dialog);
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue);
    });
  });
}

/** Resolves to true when the user confirms. */
export async function confirmDialog(message, { title = 'Are you sure?', confirmLabel = 'OK', danger = false } = {}) {
  const dialog = h('dialog', { class: 'dialog', 'data-testid': 'confirm-dialog' },
    h('form', { method: 'dialog' },
      h('h2', { text: title }),
      h('p', { text: message }),
      h('div', { class: 'dialog-actions' },
        h('button', { value: 'cancel', class: 'button', text: 'Cancel' }),
        h('button', { value: 'ok', class: danger ? 'button danger' : 'button primary', text: confirmLabel }),
      ),
    ),
  );
  return (await openDialog(dialog)) === 'ok';
}

/** Resolves to the entered text, or null when the user cancels. */
export async function promptSecret(message, { title = 'Access token', placeholder = 'Token' } = {}) {
  const input = h('input', { type: 'password', name: 'secret', placeholder, autocomplete: 'current-password', required: true });
  const dialog = h('dialog', { class: 'dialog', 'data-testid': 'token-dialog' },
    h('form', { method: 'dialog' },
      h('h2', { text: title }),
      h('p', { text: message }),
      input,
      h('div', { class: 'dialog-actions' },
        h('button', { value: 'cancel', class: 'button', formnovalidate: true, text: 'Cancel' }),
        h('button', { value: 'ok', class: 'button primary', text: 'Continue' }),
      ),
    ),
  );
  const result = await openDialog(dialog);
  return result === 'ok' && input.value.trim() ? input.value.trim() : null;
}
