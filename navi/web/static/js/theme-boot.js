// The colour theme, set before the page is first painted (a classic script in <head>,
// so a dark page never flashes light): "system" (the default) follows the system's
// setting, "light" and "dark" are the reader's choice, kept in localStorage
// (navi.theme). theme.js offers the switch and follows later changes.
(function bootTheme() {
  let choice = 'system';
  try {
    choice = localStorage.getItem('navi.theme') || 'system';
  } catch (error) {
    choice = 'system';
  }
  const dark = choice === 'dark' ||
    (choice !== 'light' && window.matchMedia('(prefers-color-scheme: dark)').matches);
  document.documentElement.dataset.theme = dark ? 'dark' : 'light';
  document.documentElement.dataset.themeChoice = choice;
}());
