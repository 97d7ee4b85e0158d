// The page: wires the views together and owns the flow — the session in the URL hash,
// its history, its live connection, sending, stopping and switching profiles.

import { api } from './api.js';
import { Approvals } from './approvals.js';
import { onBackendChange } from './backend_watch.js';
import { imageToSend } from './cards.js';
import { closeSidebar, mountChrome } from './chrome.js';
import { Composer } from './composer.js';
import { Connection } from './connection.js';
import { ConversationView } from './conversation.js';
import { confirmDialog } from './dialogs.js';
import { $ } from './dom.js';
import { forkOriginLine } from './fork_origin.js';
import {
  mountConnectionBanner, mountContextMeter, mountLLMAwayBanner, mountProfileSwitcher, mountTodoDock,
} from './header.js';
import { highestSeq, renderHistory } from './history.js';
import { icon } from './icons.js';
import { LiveRenderer } from './live.js';
import { llmActivity, mountLLMStatus } from './llm_status.js';
import { mountMemoryNotices, openMemory } from './memory.js';
import { mountModelPicker } from './model_picker.js';
import { ReplayView } from './replay.js';
import { mountForkActions } from './replay_actions.js';
import { Sidebar, provisionalTitle, sessionTitle } from './sessions.js';
import { rememberProfile, rememberedProfile } from './profile_memory.js';
import { profileById, state, subscribe, update } from './state.js';
import { setTitle } from './title.js';
import { mountVersions } from './versions.js';
import { demoNotice } from './welcome_demo.js';

const REPLAY = 'replay/'; // `#replay/<id>`: the Replay view of a session

const app = $('#app');
const view = new ConversationView($('#conversation'), $('#conversation-inner'), $('#jump-bottom'));
let connection = null;
let loading = 0; // bumps on every navigation, so a slow load never draws over a newer one
let creating = null;
let route; // the hash target shown: a session id, `replay/<id>` or null

// ---------------------------------------------------------------- views

const sidebar = new Sidebar({
  root: $('#sidebar'),
  list: $('#session-list'),
  search: $('#session-search'),
  error: $('#sidebar-error'),
  newChat: $('#new-chat'),
  backend: $('#backend-info'),
  onNewChat: () => {
    closeSidebar();
    navigate(null);
  },
  onDeleted: (sessionId) => {
    if (sessionId === state.sessionId) navigate(null, { replace: true });
  },
  onNavigate: () => closeSidebar(),
});

const composer = new Composer({
  form: $('#composer'),
  textarea: $('#prompt'),
  send: $('#send-button'),
  stop: $('#stop-button'),
  attach: $('#attach-button'),
  fileInput: $('#file-input'),
  attachments: $('#attachments'),
  error: $('#composer-error'),
  onSend: send,
  onStop: stop,
  ensureSession,
});

const approvals = new Approvals({ onReleased: () => composer.focus() });

const live = new LiveRenderer(view, {
  isRunning: () => state.running,
  setRunning: (running) => update({ running }),
  setContext: (tokens, max) => {
    if (Number.isFinite(tokens)) update({ contextTokens: tokens });
    if (Number.isFinite(max)) update({ maxContextTokens: max });
  },
  setProfile: (profileId, name) => {
    if (profileId && !profileById(profileId)) {
      update({ profiles: [...state.profiles, { id: profileId, name: name || profileId }] });
    }
    update({ profileId });
  },
  setTodo: (items) => update({ todo: items }),
  llm: llmActivity,
  llmAway: (error, who = '') => update({ llmAway: error, llmAwayWho: error ? who : '' }),
  approvals,
  runEnded: ({ figures }) => {
    sidebar.refresh();
    composer.focus();
    if (!figures) refreshContext(); // a stop's or an error's end has none: ask
  },
});

const replay = new ReplayView($('#replay'), {
  onBack: (sessionId) => navigate(sessionId),
  onForked: (sessionId) => {
    sidebar.refresh();
    navigate(sessionId);
  },
  onFork: forkAndResend,
});
mountForkActions(view.inner, { sessionId: () => state.sessionId, onFork: forkAndResend });
subscribe('sessions', mountVersions(view.inner, {
  sessions: () => state.sessions, sessionId: () => state.sessionId, open: (id) => navigate(id),
}));

mountProfileSwitcher($('#profile-select'), changeProfile);
mountModelPicker($('#model-select'), { ensureSession });
mountLLMStatus($('#backend-info'));
const memoryNotices = mountMemoryNotices($('#memory-notices'), { openPage: () => navigate(MEMORY) });
subscribe('running', () => {
  if (!state.running) memoryNotices.runEnded();
});
$('#memory-button').append(icon('brain'));
$('#memory-button').addEventListener('click', () => navigate(MEMORY));
mountContextMeter($('#context-meter'));
mountConnectionBanner($('#connection-banner'));
mountLLMAwayBanner($('#connection-banner'), tryAgain);
mountTodoDock($('#todo-dock'));

// ---------------------------------------------------------------- navigation

function sessionFromHash() {
  return decodeURIComponent(location.hash.slice(1)) || null;
}

/** Go to a session (or to a new chat with null, or to `replay/<id>`); the hash is the
 *  source of truth. Resolves once the session is shown. */
function navigate(sessionId, { replace = false } = {}) {
  const url = sessionId ? `#${sessionId.split('/').map(encodeURIComponent).join('/')}` : location.pathname + location.search;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  return openSession(sessionId);
}

function onLocationChange() {
  const target = sessionFromHash();
  if (target !== route) openSession(target);
}

function disconnect() {
  if (connection) connection.stop();
  connection = null;
  update({ connection: 'idle' });
}

function showEmpty() {
  // On the embedded demo model the welcome screen says so, and offers the user's
  // Ollama models once Ollama answers.
  const notice = state.health?.demo_model
    ? demoNotice({ profileId: state.profileId || '', pick: pickModel, onOllama: loadHealth })
    : null;
  view.showEmpty({ profile: profileById(state.profileId), profiles: state.profiles, onPick: changeProfile, notice });
}

/** The chat's model (the welcome screen's offer): creates the chat first on a new one. */
async function pickModel(name) {
  const sessionId = await ensureSession();
  await api.chooseModel(sessionId, name);
  update({ chatModel: name });
}

// /health may answer after the welcome screen is drawn: the demo notice joins it then.
subscribe(['health'], () => {
  const empty = document.querySelector('#conversation-inner .empty-state');
  if (empty && state.health?.demo_model && !empty.querySelector('.welcome-demo')) showEmpty();
});

// Another backend, model or window (Settings → Connection, or the status poll): the
// welcome screen's notice and the chat's context meter follow (the footer and the model
// picker follow on their own).
onBackendChange(async () => {
  const empty = document.querySelector('#conversation-inner .empty-state');
  if (empty && route !== MEMORY) showEmpty();
  await refreshContext();
});

/** The chat's context figures as the server has them now. */
async function refreshContext() {
  const sessionId = state.sessionId;
  if (!sessionId || app.classList.contains('replaying')) return;
  const session = await api.getSession(sessionId).catch(() => null);
  if (!session || state.sessionId !== sessionId) return;
  update({
    contextTokens: session.context_token_count ?? state.contextTokens,
    maxContextTokens: session.max_context_tokens ?? state.maxContextTokens,
  });
}

const MEMORY = 'memory';

/** The Memory page over whatever is shown; a fact's source opens its chat. */
async function showMemory() {
  const behind = route === MEMORY ? null : route;
  route = MEMORY;
  if (behind === null && !state.sessionId) showEmpty();
  let source = null;
  try {
    source = await openMemory();
  } catch (error) {
    view.error(`Could not open the memory: ${error.message}`);
  }
  if (source) {
    await navigate(source.session_id, { replace: true });
    highlightSeqs(source.seqs || []);
    return;
  }
  route = behind;
  const url = behind ? `#${behind.split('/').map(encodeURIComponent).join('/')}` : location.pathname + location.search;
  history.replaceState(null, '', url);
}

function highlightSeqs(seqs) {
  const found = seqs.map((seq) => view.inner.querySelector(`[data-seq="${seq}"]`)).filter(Boolean);
  for (const el of found) el.classList.add('memory-highlight');
  found[0]?.scrollIntoView({ block: 'center' });
}

async function openSession(sessionId) {
  if (sessionId === MEMORY) return showMemory();
  const token = ++loading;
  route = sessionId;
  disconnect();
  approvals.reset();
  if (sessionId && sessionId.startsWith(REPLAY)) return openReplay(sessionId.slice(REPLAY.length));
  leaveReplay();
  update({ sessionId, running: false, todo: [], contextTokens: null, maxContextTokens: null, chatModel: '', llmAway: '', llmAwayWho: '' });
  composer.showError(null);
  if (!sessionId) {
    update({ profileId: rememberedProfile() });
    setTitle('Navi');
    showEmpty();
    composer.focus();
    return;
  }
  view.showLoading();
  let session;
  try {
    session = await api.getSession(sessionId);
  } catch (error) {
    if (token !== loading) return;
    if (error.status === 404) {
      view.showError('This chat does not exist. It may have been deleted.', () => navigate(null), 'New chat');
    } else {
      view.showError(`Could not load this chat: ${error.message}`, () => openSession(sessionId));
    }
    return;
  }
  if (token !== loading) return;
  const running = Boolean(session.run_active ?? session.running ?? false);
  update({
    profileId: session.profile_id || state.profileId,
    chatModel: session.model || '',
    contextTokens: session.context_token_count ?? null,
    maxContextTokens: session.max_context_tokens ?? null,
    todo: Array.isArray(session.todo) ? session.todo : [],
  });
  const messages = session.messages || [];
  const turn = renderHistory(view, messages, { running });
  view.adoptTurn(running ? turn : null);
  if (!messages.length && !running) showEmpty();
  if (session.forked_from) showForkOrigin(session, token);
  update({ running });
  const listed = state.sessions.find((s) => s.session_id === sessionId);
  setTitle(listed ? `${sessionTitle(listed)} · Navi` : 'Navi');
  connect(sessionId, Number.isInteger(session.last_seq) ? session.last_seq : highestSeq(messages));
  view.scrollToBottom();
  composer.focus();
}

// ---------------------------------------------------------------- replay and forks

/** A fork's first line: the chat it came from, linked (fetched when the list lacks it). */
async function showForkOrigin(session, token) {
  const id = session.forked_from;
  const origin = state.sessions.find((s) => s.session_id === id) ||
    await api.getSession(id).catch((error) => (error.status === 404 ? null : undefined));
  if (token !== loading || origin === undefined) return;
  view.inner.querySelector('.fork-origin')?.remove();
  view.inner.prepend(forkOriginLine(session, origin, sessionTitle));
}

function openReplay(sessionId) {
  app.classList.add('replaying');
  $('#replay').hidden = false;
  update({ sessionId, running: false, todo: [], contextTokens: null, maxContextTokens: null, llmAway: '', llmAwayWho: '' });
  $('#replay-button').hidden = true;
  const listed = state.sessions.find((s) => s.session_id === sessionId);
  const title = listed ? sessionTitle(listed) : '';
  setTitle(`Replay${title ? ` · ${title}` : ''} · Navi`);
  return replay.open(sessionId, title);
}

function leaveReplay() {
  if (!app.classList.contains('replaying')) return;
  replay.close();
  app.classList.remove('replaying');
  $('#replay').hidden = true;
}

/** Edit and resend, regenerate: a fork just before the user message at `seq`, where the
 *  message is sent again (`text`, or as it was). */
async function forkAndResend(originId, seq, text) {
  const origin = await api.getSession(originId);
  const message = (origin.messages || []).find((m) => m.role === 'user' && m.seq === seq);
  if (!message) throw new Error('that message is not in this chat');
  const fork = await api.forkSession(originId, seq - 1);
  sidebar.refresh();
  await navigate(fork.session_id);
  const images = (await Promise.all((message.images || []).map((i) => imageToSend(originId, i)))).filter(Boolean);
  const sent = await send({ content: text ?? message.content, images, files: message.files || [] });
  if (!sent) throw new Error('the new chat was created, but the message could not be sent');
}

function connect(sessionId, after) {
  connection = new Connection(sessionId, {
    after,
    onFrame: (frame) => live.handle(frame),
    onStatus: (status) => {
      if (connection && connection.sessionId !== sessionId) return;
      update({ connection: status });
      if (status === 'gone') update({ running: false });
    },
    probe: async () => {
      try {
        await api.getSession(sessionId);
        return 'ok';
      } catch (error) {
        return error.status === 404 ? 'gone' : 'retry';
      }
    },
  });
  connection.start();
}

// ---------------------------------------------------------------- actions

/** The current session's id, creating the session first on a new chat. */
async function ensureSession() {
  if (state.sessionId) return state.sessionId;
  if (!creating) {
    creating = (async () => {
      const created = await api.createSession(state.profileId);
      history.pushState(null, '', `#${encodeURIComponent(created.session_id)}`);
      await openSession(created.session_id);
      sidebar.refresh();
      return created.session_id;
    })().finally(() => {
      creating = null;
    });
  }
  return creating;
}

async function send(message) {
  try {
    await ensureSession();
  } catch (error) {
    composer.showError(`Could not start a chat: ${error.message}`);
    return false;
  }
  try {
    if (!connection) throw new Error('no connection');
    await connection.whenOpen(8000);
  } catch {
    composer.showError('Not connected to the server. Your message is kept; send it again when the connection is back.');
    return false;
  }
  // While an answer streams, the message waits on the server for the run to end.
  const queued = state.running;
  const frame = { type: 'message', content: message.content };
  if (message.images.length) frame.images = message.images;
  if (message.files.length) frame.files = message.files;
  if (queued) frame.queue = true;
  if (!view.inner.querySelector('.message.user')) {
    provisionalTitle(state.sessionId, message.content);
    sidebar.render();
  }
  const bubble = view.addUser(message, { pending: true, queued });
  if (!connection.send(frame)) {
    view.removePending(bubble);
    composer.showError('The connection dropped before the message was sent. It is kept; try again.');
    return false;
  }
  update({ running: true });
  return true;
}

/** Go on now with a run that waits for the model's server: a `try_again` message on
 *  the socket, or POST …/try-again when it is down. */
async function tryAgain() {
  if (!state.sessionId || (connection && connection.send({ type: 'try_again' }))) return;
  try {
    await api.tryAgain(state.sessionId);
  } catch (error) {
    composer.showError(error.message);
  }
}

/** Stop the run: a `stop` message on the socket, or POST …/stop when it is down. */
async function stop() {
  if (!state.running || !state.sessionId) return;
  if (connection && connection.send({ type: 'stop' })) return;
  const button = $('#stop-button');
  button.disabled = true;
  try {
    await api.stopRun(state.sessionId);
  } catch (error) {
    view.error(`Could not stop the run: ${error.message}`);
  } finally {
    button.disabled = false;
  }
}

/** The profile picker: a new chat takes it; an ongoing chat asks the server to switch. */
async function changeProfile(profileId) {
  if (!profileId || profileId === state.profileId) return;
  const previous = state.profileId;
  if (!state.sessionId) {
    rememberProfile(profileId);
    update({ profileId });
    showEmpty();
    return;
  }
  if (!view.inner.querySelector('.message')) {
    // Nothing said yet: start the chat over with the chosen profile.
    const old = state.sessionId;
    update({ profileId });
    try {
      const created = await api.createSession(profileId);
      rememberProfile(profileId);
      navigate(created.session_id, { replace: true });
      api.deleteSession(old).then(() => sidebar.refresh(), (error) => console.warn('navi: empty chat not deleted', error));
    } catch (error) {
      update({ profileId: previous });
      view.error(`Could not start a chat with that profile: ${error.message}`);
    }
    return;
  }
  update({ profileId });
  try {
    await api.switchProfile(state.sessionId, profileId);
    rememberProfile(profileId);
  } catch (error) {
    update({ profileId: previous });
    if (error.status !== 404 && error.status !== 405) {
      view.error(`Could not switch the profile: ${error.message}`);
      return;
    }
    // This server cannot switch an ongoing chat: offer a new chat with that profile.
    const name = profileById(profileId)?.name || profileId;
    const ok = await confirmDialog(`This chat keeps its profile. Start a new chat with ${name}?`, {
      title: 'Switch profile', confirmLabel: 'New chat',
    });
    if (ok) {
      rememberProfile(profileId);
      navigate(null);
    }
  }
}

// ---------------------------------------------------------------- page chrome

mountChrome({
  view,
  composer,
  stop,
  newChat: () => navigate(null),
  openReplay: () => navigate(`${REPLAY}${state.sessionId}`),
});

subscribe('sessions', () => {
  const listed = state.sessions.find((s) => s.session_id === state.sessionId);
  if (listed && !app.classList.contains('replaying')) setTitle(`${sessionTitle(listed)} · Navi`);
});

window.addEventListener('hashchange', onLocationChange);
window.addEventListener('popstate', onLocationChange);

async function loadProfiles() {
  try {
    const profiles = await api.profiles();
    update({ profiles: Array.isArray(profiles) ? profiles : [] });
  } catch (error) {
    sidebar.showError(`Could not load profiles: ${error.message}`, () => loadProfiles());
  }
}

async function loadHealth() {
  try {
    update({ health: await api.health() });
  } catch {
    update({ health: null });
  }
}

async function boot() {
  loadHealth();
  sidebar.refresh();
  await loadProfiles();
  await openSession(sessionFromHash());
}

boot();
