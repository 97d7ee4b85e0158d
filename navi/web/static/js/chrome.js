// The page's chrome around the conversation: the sidebar drawer (phone width), the top
// bar's Export and Replay buttons, Esc, the theme switch, the keyboard shortcuts, and
// unexpected script errors shown in place (never a blank page).

import { $ } from './dom.js';
import { exportChat } from './export.js';
import { icon } from './icons.js';
import { mountSettingsButton } from './settings.js';
import { mountShortcuts } from './shortcuts.js';
import { profileById, state, subscribe } from './state.js';
import { mountThemeSwitch, toggleTheme } from './theme.js';

const app = $('#app');

export function openSidebar() {
  app.classList.add('sidebar-open');
  $('#scrim').hidden = false;
}

export function closeSidebar() {
  app.classList.remove('sidebar-open');
  $('#scrim').hidden = true;
}

/** view: the ConversationView; stop(): stop the run; newChat(), openReplay(): navigate. */
export function mountChrome({ view, composer, stop, newChat, openReplay }) {
  $('#menu-button').append(icon('menu'));
  $('#menu-button').addEventListener('click', openSidebar);
  $('#sidebar-close').append(icon('close'));
  $('#sidebar-close').addEventListener('click', closeSidebar);
  $('#scrim').addEventListener('click', closeSidebar);

  document.addEventListener('keydown', (event) => {
    if (event.key !== 'Escape' || event.defaultPrevented) return;
    if (document.querySelector('dialog[open], .lightbox')) return;
    if (state.running) {
      event.preventDefault();
      stop();
    } else if (app.classList.contains('sidebar-open')) {
      closeSidebar();
    }
  });

  window.addEventListener('error', (event) => view.error(`Page error: ${event.message}`));
  window.addEventListener('unhandledrejection', (event) => {
    view.error(`Page error: ${event.reason?.message || event.reason}`);
  });

  const replayButton = $('#replay-button');
  replayButton.append(icon('replay'));
  replayButton.addEventListener('click', () => {
    if (state.sessionId) openReplay();
  });
  const exportButton = $('#export-button');
  exportButton.append(icon('download'));
  const exportCurrent = async () => {
    if (!state.sessionId || app.classList.contains('replaying')) return;
    try {
      await exportChat(state.sessionId, { profileName: profileById(state.profileId)?.name });
    } catch (error) {
      view.error(`Could not export the chat: ${error.message}`);
    }
  };
  exportButton.addEventListener('click', exportCurrent);
  subscribe(['sessionId', 'running'], () => {
    replayButton.hidden = !state.sessionId || app.classList.contains('replaying');
    exportButton.hidden = replayButton.hidden;
  });

  mountThemeSwitch($('#sidebar-prefs'));
  mountSettingsButton($('#settings-button'), { onError: (message) => view.error(message) });
  const showShortcuts = mountShortcuts({
    newChat,
    focusSearch: () => {
      openSidebar();
      $('#session-search').focus();
    },
    focusPrompt: () => composer.focus(),
    toggleTheme,
    exportChat: exportCurrent,
  });
  $('#shortcuts-button').append(icon('keyboard'));
  $('#shortcuts-button').addEventListener('click', showShortcuts);
}
