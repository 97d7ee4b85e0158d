// The top bar and the strips around the conversation: profile switcher, context meter,
// connection banner and the todo progress dock.

import { clear, formatCount, h } from './dom.js';
import { icon } from './icons.js';
import { state, subscribe } from './state.js';

const WARN_FRACTION = 0.8;

/** Why an account may not pick a profile, in the words of the grant it lacks. */
export function needsGrants(profile) {
  const grants = (profile.missing_grants || []).map((g) => `'${g}'`).join(', ');
  return `Needs the account grant ${grants}, which an admin gives in the users file.`;
}

export function mountProfileSwitcher(select, onChange) {
  const render = () => {
    clear(select);
    const known = state.profiles.some((p) => p.id === state.profileId);
    for (const profile of state.profiles) {
      // A profile the account lacks a grant for is listed but cannot be picked.
      const locked = profile.usable === false && profile.id !== state.profileId;
      select.append(h('option', {
        value: profile.id,
        text: profile.name || profile.id,
        disabled: locked,
        title: locked ? needsGrants(profile) : undefined,
      }));
    }
    if (state.profileId && !known) {
      select.append(h('option', { value: state.profileId, text: state.profileId }));
    }
    select.value = state.profileId || '';
    select.disabled = state.running || !state.profiles.length;
  };
  select.addEventListener('change', () => onChange(select.value));
  subscribe(['profiles', 'profileId', 'running'], render);
  render();
}

export function mountContextMeter(el) {
  const fill = el.querySelector('.meter-fill');
  const text = el.querySelector('.meter-text');
  subscribe(['contextTokens', 'maxContextTokens', 'sessionId'], () => {
    const used = state.contextTokens;
    const max = state.maxContextTokens;
    el.hidden = !state.sessionId || !Number.isFinite(max) || max <= 0;
    if (el.hidden) return;
    // The server counts the context from the model's answers: until the first one (a
    // first message waiting, or stopped before the model said anything) it is not known,
    // and the meter says so rather than 0.
    const known = Number.isFinite(used) && used > 0;
    el.classList.toggle('unknown', !known);
    const fraction = known ? Math.min(used / max, 1) : 0;
    fill.style.width = `${(fraction * 100).toFixed(1)}%`;
    el.classList.toggle('warn', fraction >= WARN_FRACTION);
    text.textContent = `${known ? formatCount(used) : '–'} / ${formatCount(max)}`;
    el.title = known
      ? `Context: ${used.toLocaleString()} of ${max.toLocaleString()} tokens (${Math.round(fraction * 100)}%)`
      : `Context window: ${max.toLocaleString()} tokens (how much is used is known once the model has answered)`;
  });
}

export function mountConnectionBanner(el) {
  let previous = 'idle';
  let timer = null;
  const show = (kind, text) => {
    clearTimeout(timer);
    el.className = `banner ${kind}`;
    clear(el).append(icon(kind === 'ok' ? 'check' : 'alert'), h('span', { text }));
    el.hidden = false;
  };
  subscribe('connection', () => {
    const now = state.connection;
    if (now === 'lost') show('warn', 'Connection lost. Reconnecting…');
    else if (now === 'gone') show('error', 'This chat no longer exists on the server.');
    else if (now === 'open' && previous === 'lost') {
      show('ok', 'Reconnected');
      timer = setTimeout(() => { el.hidden = true; }, 1500);
    } else if (now !== 'connecting') el.hidden = true;
    previous = now;
  });
}

function whoWaits() {
  return state.llmAwayWho === 'subagent'
    ? 'A subagent waits for the model\'s server, which is not answering'
    : 'The model\'s server is not answering';
}

/** While the run (or a subagent's) waits for the model's server: what happened, and Try again now
 *  (`onTryAgain`). The banner is made here, under the connection banner. */
export function mountLLMAwayBanner(after, onTryAgain) {
  const el = h('div', { class: 'banner warn', id: 'llm-away-banner', role: 'status' });
  el.hidden = true;
  after.after(el);
  subscribe(['llmAway', 'llmAwayWho', 'sessionId'], () => {
    const error = state.llmAway;
    el.hidden = !error;
    if (!error) return;
    const button = h('button', { type: 'button', class: 'link-button', text: 'Try again now' });
    button.addEventListener('click', () => {
      button.disabled = true;
      onTryAgain();
    });
    clear(el).append(
      icon('alert'),
      h('span', { text: `${whoWaits()}; Navi will go on when it is back · `, title: error }),
      button,
    );
  });
}

const STATUS_ICON = { done: 'check', failed: 'cross', skipped: 'cross', in_progress: null, pending: null };

export function mountTodoDock(el) {
  let open = null; // the user's choice; null: open while a run works
  const render = () => {
    // The dock follows the run that works on the list: it closes when the run ends (the
    // plan's card in the conversation keeps the count).
    const items = state.running ? state.todo || [] : [];
    el.hidden = !items.length;
    clear(el);
    if (!items.length) return;
    const done = items.filter((i) => i.status === 'done').length;
    const expanded = open ?? state.running;
    const current = items.find((i) => i.status === 'in_progress');
    const head = h('button', { type: 'button', class: 'todo-head', 'aria-expanded': String(expanded) },
      icon('list'),
      h('span', { class: 'todo-title', text: current ? current.text : done === items.length ? 'All tasks done' : 'Tasks' }),
      h('span', { class: 'todo-count', text: `${done}/${items.length}` }),
      icon('chevron', expanded ? 'icon chevron open' : 'icon chevron'));
    head.addEventListener('click', () => {
      open = !expanded;
      render();
    });
    const bar = h('div', { class: 'todo-bar' }, h('div', { class: 'todo-bar-fill', style: `width:${(done / items.length) * 100}%` }));
    el.append(head, bar);
    if (expanded) {
      el.append(h('ol', { class: 'todo-list' }, items.map((item) => {
        const mark = STATUS_ICON[item.status];
        return h('li', { class: `todo-item ${item.status || 'pending'}` },
          h('span', { class: 'todo-mark' }, mark ? icon(mark) : item.status === 'in_progress' ? h('span', { class: 'spinner' }) : ''),
          h('span', { text: item.text }));
      })));
    }
  };
  subscribe(['todo', 'running'], render);
  subscribe('sessionId', () => {
    open = null;
  });
}
