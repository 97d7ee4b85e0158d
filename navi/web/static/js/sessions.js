// The sidebar: sessions (pinned first, then by last activity, grouped by day), search by
// title and content, rename (double-click or the pencil), pin/unpin, delete with
// confirmation, new chat, the backend, and a mark on chats with tool calls that wait for
// the user's approval (also chats not open: the list is fetched again now and then).

import { api } from './api.js';
import { confirmDialog } from './dialogs.js';
import { clear, h } from './dom.js';
import { icon } from './icons.js';
import { profileById, state, subscribe, update } from './state.js';

const SEARCH_DELAY_MS = 250;
const FOCUS_REFRESH_MS = 5000;
// Another chat's run may start waiting for an approval while this page shows another
// one: the list (with `pending_approvals`) is fetched again this often while visible.
const POLL_MS = 15_000;
const DAY_MS = 24 * 60 * 60 * 1000;

const TITLE_CHARS = 60;
// A chat's first message, sent from this page, until the server's list has a title:
// the sidebar never says "New chat" for a chat that is already answering.
const provisional = new Map();

export function provisionalTitle(sessionId, text) {
  const flat = (text || '').split(/\s+/).join(' ').trim();
  if (!sessionId || !flat) return;
  provisional.set(sessionId, flat.length > TITLE_CHARS ? `${flat.slice(0, TITLE_CHARS - 1).trimEnd()}…` : flat);
}

export function sessionTitle(session) {
  const title = (session.title || '').trim();
  if (title) return title;
  const preview = (session.preview || '').trim();
  return preview || provisional.get(session.session_id) || 'New chat';
}

function sortSessions(list) {
  const time = (s) => Date.parse(s.last_active || s.created_at || 0) || 0;
  return [...list].sort((a, b) => (b.pinned ? 1 : 0) - (a.pinned ? 1 : 0) || time(b) - time(a));
}

function groupOf(session, now) {
  if (session.pinned) return 'Pinned';
  const time = Date.parse(session.last_active || session.created_at || 0) || 0;
  const today = new Date(now);
  today.setHours(0, 0, 0, 0);
  if (time >= today.getTime()) return 'Today';
  if (time >= today.getTime() - DAY_MS) return 'Yesterday';
  if (time >= today.getTime() - 7 * DAY_MS) return 'Previous 7 days';
  if (time >= today.getTime() - 30 * DAY_MS) return 'Previous 30 days';
  return 'Older';
}

/** Started by `navi chat "…"` or a /v1 client, and neither pinned nor open now. */
function isApart(session) {
  return (session.origin === 'cli' || session.origin === 'api') && !session.pinned
    && session.session_id !== state.sessionId;
}

function lastActive(session) {
  return Date.parse(session.last_active || session.created_at || 0) || 0;
}

/**
 * Versions of one chat fold into one entry. A fork that kept its origin's title (edit &
 * resend, regenerate, continue from here: versions.js shows them as ‹ i/n ›) belongs to
 * its origin's family; the entry is the version open now, else the one used last, with
 * the number of versions. A renamed fork is a chat of its own.
 */
export function foldVersions(list, activeId, all = list) {
  // `all`: where lineage is looked up (a search folds its hits by the whole list's
  // families, so that a chat's versions found by one query make one row).
  const byId = new Map(all.map((s) => [s.session_id, s]));
  const rootOf = (session) => {
    let root = session;
    for (let hops = 0; hops < all.length; hops += 1) {
      const origin = root.forked_from && byId.get(root.forked_from);
      if (!origin || sessionTitle(origin) !== sessionTitle(root)) break;
      root = origin;
    }
    return root;
  };
  const families = new Map();
  for (const session of list) {
    const root = rootOf(session).session_id;
    if (!families.has(root)) families.set(root, []);
    families.get(root).push(session);
  }
  const sizes = new Map(); // versions per family, counted in the whole list
  for (const session of all) {
    const root = rootOf(session).session_id;
    if (families.has(root)) sizes.set(root, (sizes.get(root) || 0) + 1);
  }
  return [...families.entries()].map(([root, members]) => {
    const shown = members.find((s) => s.session_id === activeId) ||
      members.reduce((a, b) => (lastActive(b) > lastActive(a) ? b : a));
    const size = Math.max(sizes.get(root) || 0, members.length);
    if (size === 1) return shown;
    const elsewhere = members.reduce((sum, s) => sum + (s === shown ? 0 : s.pending_approvals || 0), 0);
    // A search hit's found words, from whichever version they were found in.
    const match = shown.match || members.find((s) => s.match)?.match;
    return { ...shown, versions: size, pending_elsewhere: elsewhere, ...(match ? { match } : {}) };
  });
}

/** The mark of a chat with tool calls waiting for the user: the open chat counts its
 *  live requests (approvals.js), the others what the list says. */
function approvalMark(session, active) {
  const own = active ? state.approvals : session.pending_approvals || 0;
  const count = own + (session.pending_elsewhere || 0);
  if (!count) return null;
  const words = count === 1 ? '1 tool call waits for your approval' : `${count} tool calls wait for your approval`;
  return h('span', { class: 'approval-badge', role: 'img', title: words, 'aria-label': words, 'data-testid': 'approval-badge' },
    icon('shield'), h('span', { text: String(count), 'aria-hidden': 'true' }));
}

function matches(session, query) {
  const text = `${session.title || ''}\n${session.preview || ''}`.toLowerCase();
  return text.includes(query.toLowerCase());
}

export class Sidebar {
  constructor({ root, list, search, error, newChat, backend, onNewChat, onDeleted, onNavigate }) {
    this.root = root;
    this.list = list;
    this.search = search;
    this.errorEl = error;
    this.backend = backend;
    this.onDeleted = onDeleted;
    this.onNavigate = onNavigate;
    this.query = '';
    this.remote = null; // {query, sessions} from GET /sessions?q=
    this.renaming = null; // {id, draft}: the chat whose title is being edited
    this.searchTimer = null;
    this.loaded = false;

    newChat.append(icon('plus'), h('span', { text: 'New chat' }));
    newChat.addEventListener('click', onNewChat);
    root.querySelector('.search-icon').append(icon('search'));
    search.addEventListener('input', () => this.searchChanged());
    search.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && search.value) {
        event.stopPropagation();
        search.value = '';
        this.searchChanged();
      }
    });
    subscribe(['sessions', 'sessionId', 'approvals'], () => this.render());
    this.watch();
    subscribe(['health', 'profileId', 'profiles', 'connection'], () => this.renderBackend());
  }

  /** `quiet`: a background poll, which neither shows a failure nor redraws the same list. */
  async refresh({ quiet = false } = {}) {
    try {
      const sessions = await api.listSessions();
      const list = Array.isArray(sessions) ? sessions : [];
      if (quiet && JSON.stringify(list) === JSON.stringify(state.sessions)) return;
      this.loaded = true;
      this.showError(null);
      update({ sessions: list });
    } catch (error) {
      if (!quiet) this.showError(`Could not load chats: ${error.message}`, () => this.refresh());
    }
  }

  /** Fetch the list again when the window gets the focus, and every POLL_MS while the
   *  page is visible. */
  watch() {
    let last = 0;
    window.addEventListener('focus', () => {
      if (Date.now() - last < FOCUS_REFRESH_MS) return;
      last = Date.now();
      this.refresh();
    });
    setInterval(() => {
      if (this.loaded && document.visibilityState === 'visible') this.refresh({ quiet: true });
    }, POLL_MS);
  }

  showError(message, retry) {
    this.errorEl.hidden = !message;
    clear(this.errorEl);
    if (!message) return;
    this.errorEl.append(icon('alert'), h('span', { text: message }),
      retry && h('button', { type: 'button', class: 'link-button', text: 'Retry', onclick: retry }),
      h('button', { type: 'button', class: 'link-button', text: 'Dismiss', onclick: () => this.showError(null) }));
  }

  searchChanged() {
    this.query = this.search.value.trim();
    this.render();
    clearTimeout(this.searchTimer);
    if (!this.query) {
      this.remote = null;
      return;
    }
    const query = this.query;
    this.searchTimer = setTimeout(async () => {
      try {
        const found = await api.listSessions(query);
        if (query === this.query) {
          this.remote = { query, sessions: Array.isArray(found) ? found : [] };
          this.render();
        }
      } catch (error) {
        this.showError(`Search failed: ${error.message}`);
      }
    }, SEARCH_DELAY_MS);
  }

  /** Local matches (title, preview) plus the server's content matches. */
  visibleSessions() {
    const all = state.sessions;
    if (!this.query) return foldVersions(all, state.sessionId);
    const local = all.filter((s) => matches(s, this.query));
    let remote = this.remote && this.remote.query === this.query ? this.remote.sessions : [];
    // A server that ignores ?q= answers with every session: then only local matches count.
    if (remote.length && remote.length === all.length && local.length < all.length &&
        remote.every((s) => all.some((a) => a.session_id === s.session_id))) {
      remote = [];
    }
    const seen = new Set(local.map((s) => s.session_id));
    // Versions of one chat (its forks) are one row, as in the list: the version open now,
    // else the one used last; its found text is shown.
    const hits = [...local, ...remote.filter((s) => !seen.has(s.session_id))];
    return sortSessions(foldVersions(hits, state.sessionId, all));
  }

  /** The found text of a search hit (`match` from GET /sessions?q=), if any. */
  matchOf(session) {
    if (!this.query || !this.remote || this.remote.query !== this.query) return '';
    const hit = typeof session.match === 'string' ? session
      : this.remote.sessions.find((s) => s.session_id === session.session_id);
    return (hit && typeof hit.match === 'string' && hit.match !== sessionTitle(session)) ? hit.match : '';
  }

  render() {
    const sessions = this.visibleSessions();
    clear(this.list);
    if (!sessions.length) {
      const text = this.query ? `No chats match “${this.query}”.` : this.loaded ? 'No chats yet.' : '';
      if (text) this.list.append(h('div', { class: 'session-empty', text }));
      return;
    }
    const now = Date.now();
    // One-shots of `navi chat "…"` and /v1 clients' chats sit in a folded group of their
    // own (not while searching): they would push the user's own chats down the list.
    const apart = this.query ? [] : sessions.filter((s) => isApart(s));
    const folded = new Set(apart);
    let group = null;
    for (const session of sortSessions(sessions.filter((s) => !folded.has(s)))) {
      const name = groupOf(session, now);
      if (name !== group) {
        group = name;
        this.list.append(h('div', { class: 'session-group', text: name }));
      }
      this.list.append(this.item(session));
    }
    if (apart.length) this.list.append(this.apartGroup(sortSessions(apart)));
    const input = this.list.querySelector('.rename-input');
    if (input && document.activeElement !== input) {
      input.focus();
      input.setSelectionRange(input.value.length, input.value.length);
    }
  }

  /** The folded group of chats started elsewhere; it stays as the user left it. */
  apartGroup(sessions) {
    const group = h('details', { class: 'session-apart' },
      h('summary', { class: 'session-group', text: `From the terminal and other apps (${sessions.length})` }),
      ...sessions.map((session) => this.item(session)));
    group.open = Boolean(this.apartOpen);
    group.addEventListener('toggle', () => { this.apartOpen = group.open; });
    return group;
  }

  item(session) {
    const id = session.session_id;
    const active = id === state.sessionId;
    const pin = h('button', {
      type: 'button', class: 'icon-button small', 'data-action': 'pin',
      title: session.pinned ? 'Unpin' : 'Pin', 'aria-label': session.pinned ? 'Unpin chat' : 'Pin chat',
      onclick: (event) => this.togglePin(event, session),
    }, icon(session.pinned ? 'unpin' : 'pin'));
    const rename = h('button', {
      type: 'button', class: 'icon-button small', 'data-action': 'rename',
      title: 'Rename', 'aria-label': 'Rename chat',
      onclick: (event) => this.startRename(event, session),
    }, icon('edit'));
    const remove = h('button', {
      type: 'button', class: 'icon-button small danger', 'data-action': 'delete',
      title: 'Delete', 'aria-label': 'Delete chat',
      onclick: (event) => this.remove(event, session),
    }, icon('trash'));
    const classes = `session-item${active ? ' active' : ''}${session.pinned ? ' pinned' : ''}`;
    if (this.renaming && this.renaming.id === id) {
      return h('div', { class: `${classes} renaming`, 'data-session-id': id }, this.renameInput(session));
    }
    const match = this.matchOf(session);
    const link = h('a', {
      href: `#${id}`, class: 'session-link', title: session.preview || sessionTitle(session),
      onclick: () => this.onNavigate(),
      ondblclick: (event) => this.startRename(event, session),
    },
    session.pinned && icon('pin', 'icon pin-mark'),
    session.forked_from && this.lineage(session),
    session.versions > 1 && h('span', { class: 'version-badge', title: `${session.versions} versions`, text: String(session.versions) }),
    approvalMark(session, active),
    h('span', { class: 'session-text' },
      h('span', { class: 'session-title', text: sessionTitle(session) }),
      match && h('span', { class: 'session-match', text: match })));
    return h('div', {
      class: `${classes}${match ? ' with-match' : ''}`,
      'data-session-id': id,
      'aria-current': active ? 'page' : false,
    }, link, h('span', { class: 'session-actions' }, rename, pin, remove));
  }

  startRename(event, session) {
    event.preventDefault();
    event.stopPropagation();
    this.renaming = { id: session.session_id, draft: sessionTitle(session) };
    this.render();
  }

  renameInput(session) {
    const input = h('input', {
      type: 'text', class: 'rename-input', value: this.renaming.draft, maxlength: 200,
      'aria-label': 'Chat title',
    });
    let done = false;
    const finish = (save) => {
      if (done) return;
      done = true;
      this.finishRename(session, save ? input.value : null);
    };
    input.addEventListener('input', () => { this.renaming.draft = input.value; });
    input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') {
        event.preventDefault();
        finish(true);
      } else if (event.key === 'Escape') {
        event.preventDefault();
        event.stopPropagation();
        finish(false);
      }
    });
    // A re-render replaces the input (and may blur it): only a real blur saves.
    input.addEventListener('blur', () => setTimeout(() => { if (input.isConnected) finish(true); }, 0));
    return input;
  }

  async finishRename(session, value) {
    this.renaming = null;
    const title = (value ?? '').trim();
    if (!title || title === sessionTitle(session)) {
      this.render();
      return;
    }
    // Shown at once; the server's answer (or the list) confirms it.
    update({ sessions: state.sessions.map((s) => (s.session_id === session.session_id ? { ...s, title } : s)) });
    try {
      await api.renameSession(session.session_id, title);
    } catch (error) {
      this.showError(`Could not rename the chat: ${error.message}`);
    }
    await this.refresh();
  }

  /** A fork's mark: what it was forked from, and where. */
  lineage(session) {
    const origin = state.sessions.find((s) => s.session_id === session.forked_from);
    const name = origin ? `“${sessionTitle(origin)}”` : 'a deleted chat';
    const mark = icon('fork', 'icon fork-mark');
    mark.setAttribute('title', `Fork of ${name} at step ${session.forked_at_seq}`);
    mark.dataset.forkedFrom = session.forked_from;
    return mark;
  }

  async togglePin(event, session) {
    event.preventDefault();
    event.stopPropagation();
    try {
      await api.pinSession(session.session_id, !session.pinned);
      await this.refresh();
    } catch (error) {
      this.showError(`Could not ${session.pinned ? 'unpin' : 'pin'} the chat: ${error.message}`);
    }
  }

  async remove(event, session) {
    event.preventDefault();
    event.stopPropagation();
    const ok = await confirmDialog(`“${sessionTitle(session)}” and its uploaded files will be deleted.`, {
      title: 'Delete chat?', confirmLabel: 'Delete', danger: true,
    });
    if (!ok) return;
    try {
      await api.deleteSession(session.session_id);
    } catch (error) {
      this.showError(`Could not delete the chat: ${error.message}`);
      return;
    }
    update({ sessions: state.sessions.filter((s) => s.session_id !== session.session_id) });
    if (this.remote) {
      this.remote.sessions = this.remote.sessions.filter((s) => s.session_id !== session.session_id);
    }
    this.onDeleted(session.session_id);
    await this.refresh();
  }

  renderBackend() {
    const health = state.health || {};
    const profile = profileById(state.profileId);
    const none = health.backend === 'none'; // no LLM at all (navi/llm/missing.py)
    const backend = none ? 'no LLM' : health.backend || profile?.llm_backend || '';
    const model = none ? '' : health.model || profile?.model || '';
    const text = [backend, model].filter(Boolean).join(' · ') || (state.health ? 'server ready' : 'server unreachable');
    const label = this.backend.querySelector('.backend-text');
    label.textContent = text;
    label.title = text; // the full name, even where it wraps
    // Why this model, when Navi chose it or it is missing (navi/llm/model_choice.py).
    const note = this.backend.querySelector('#model-note');
    if (note) {
      note.textContent = none ? '' : health.model_reason || '';
      note.hidden = !note.textContent;
      note.classList.toggle('missing', Boolean(health.model_missing));
      if (health.model_missing) note.setAttribute('role', 'alert');
      else note.removeAttribute('role');
    }
    const noLLM = this.backend.querySelector('#no-llm-notice');
    if (noLLM) noLLM.hidden = !none;
    this.backend.classList.toggle('offline', !state.health || state.connection === 'lost');
  }
}
