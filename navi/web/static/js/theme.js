// The theme switch: System · Light · Dark, saved in localStorage (navi.theme). The page
// is themed by <html data-theme="light|dark"> (set first by theme-boot.js); "system"
// follows the system's setting as it changes. highlight.js's two stylesheets are
// switched with it.

import { h } from './dom.js';
import { icon } from './icons.js';

const KEY = 'navi.theme';
const CHOICES = [
  ['system', 'monitor', 'Follow the system'],
  ['light', 'sun', 'Light'],
  ['dark', 'moon', 'Dark'],
];
const systemDark = window.matchMedia('(prefers-color-scheme: dark)');

export function themeChoice() {
  try {
    const saved = localStorage.getItem(KEY);
    return CHOICES.some(([name]) => name === saved) ? saved : 'system';
  } catch {
    return 'system';
  }
}

function apply(choice) {
  const dark = choice === 'dark' || (choice === 'system' && systemDark.matches);
  const root = document.documentElement;
  root.dataset.theme = dark ? 'dark' : 'light';
  root.dataset.themeChoice = choice;
  for (const link of document.querySelectorAll('link[data-theme-sheet]')) {
    link.media = link.dataset.themeSheet === root.dataset.theme ? 'all' : 'not all';
  }
  for (const button of document.querySelectorAll('.theme-switch button')) {
    button.setAttribute('aria-pressed', String(button.dataset.choice === choice));
  }
}

export function setTheme(choice) {
  try {
    if (choice === 'system') localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, choice);
  } catch {
    // No storage: the choice lasts for this page.
  }
  apply(choice);
}

/** Light ↔ dark (the keyboard shortcut): from what is shown now. */
export function toggleTheme() {
  setTheme(document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark');
}

export function mountThemeSwitch(container) {
  const group = h('div', { class: 'theme-switch', role: 'group', 'aria-label': 'Theme' },
    CHOICES.map(([choice, iconName, label]) => h('button', {
      type: 'button', class: 'icon-button small', title: label, 'aria-label': label,
      'data-choice': choice, onclick: () => setTheme(choice),
    }, icon(iconName))));
  container.append(group);
  systemDark.addEventListener('change', () => apply(themeChoice()));
  apply(themeChoice());
}
