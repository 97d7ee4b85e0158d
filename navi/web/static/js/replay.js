// The Replay view of a session (`#replay/<id>`): its timeline, play / pause / speed, a
// cursor that can be put on any event, and at the cursor the conversation as the user saw
// it beside the context as the LLM saw it. Playing uses the replay WebSocket, which sends
// the recorded frames in the live protocol: the chat's own live renderer draws them.
// "Continue from here" forks the session at the cursor.

import { api } from './api.js';
import { clear, h } from './dom.js';
import { icon } from './icons.js';
import { LiveRenderer } from './live.js';
import { mountForkActions } from './replay_actions.js';
import { ReplayPanes, baselineRequest } from './replay_panes.js';
import { ReplaySocket } from './replay_socket.js';
import { Timeline } from './replay_timeline.js';
import { eventWords } from './replay_words.js';

const SPEEDS = ['0.5', '1', '2', '5', '20', 'max'];
const REFRESH_MS = 400; // the context pane follows a playing replay at most this often
const TECHNICAL_KEY = 'navi.replayTechnical';

function technicalChosen() {
  try {
    return localStorage.getItem(TECHNICAL_KEY) === '1';
  } catch {
    return false;
  }
}

export class ReplayView {
  /** onBack(sessionId), onForked(newSessionId), onFork(origin, seq, text) (replay_actions). */
  constructor(root, { onBack, onForked, onFork }) {
    this.root = root;
    this.onBack = onBack;
    this.onForked = onForked;
    this.sessionId = null;
    this.cursor = 0;
    this.speed = '1';
    this.playing = false;
    this.pausing = false;
    this.liveAt = null; // the seq the conversation drawn by live frames is at (null: drawn from a state)
    this.socket = null;
    this.showing = 0; // bumps per state request: only the latest one is drawn
    this.requests = new Map(); // llm.requested seq → its request (with messages)
    this.build();
    mountForkActions(this.panes.view.inner, { sessionId: () => this.sessionId, onFork });
  }

  build() {
    const button = (id, label, iconName, onclick, text) => h('button', {
      type: 'button', class: text ? 'button small' : 'icon-button', id, title: label, 'aria-label': label, onclick,
    }, icon(iconName), text && h('span', { text }));
    this.playButton = button('replay-play', 'Play', 'play', () => (this.playing ? this.pause() : this.play()));
    this.speedSelect = h('select', { id: 'replay-speed', 'aria-label': 'Replay speed', title: 'Speed' },
      SPEEDS.map((s) => h('option', { value: s, text: s === 'max' ? 'max' : `${s}×` })));
    this.speedSelect.value = this.speed;
    this.speedSelect.addEventListener('change', () => this.setSpeed(this.speedSelect.value));
    this.position = h('span', { class: 'replay-position', id: 'replay-position' });
    this.title = h('h2', { class: 'replay-title', text: 'Replay' });
    this.forkButton = button('replay-fork', 'Continue from here (a new chat)', 'fork', () => this.forkHere(), 'Continue from here');
    // Plain words by default; event types, log seqs and the LLM calls' options one click away.
    this.technicalButton = h('button', {
      type: 'button', class: 'button small replay-technical', id: 'replay-technical',
      title: 'Show the recorded events as they are (types, numbers, LLM call options)',
      'aria-pressed': 'false', text: 'Technical view', onclick: () => this.setTechnical(!this.technical),
    });
    this.errorEl = h('div', { class: 'replay-error', role: 'alert', hidden: true });
    const timelineEl = h('div', { class: 'replay-timeline', id: 'replay-timeline' });
    const info = h('div', { class: 'replay-info', id: 'replay-info' });
    const scroller = h('div', { class: 'replay-conversation', id: 'replay-conversation' });
    const inner = h('div', { class: 'conversation-inner' });
    const jump = h('button', { type: 'button', class: 'jump-bottom', hidden: true, 'aria-label': 'Scroll to the end' });
    scroller.append(inner);
    const context = h('div', { class: 'replay-context', id: 'replay-context' });
    clear(this.root).append(
      h('div', { class: 'replay-bar' },
        button('replay-back', 'Back to the chat', 'back', () => this.onBack(this.sessionId)),
        this.title, h('span', { class: 'topbar-spacer' }),
        button('replay-step-back', 'Previous event', 'chevron', () => this.step(-1)),
        this.playButton,
        button('replay-step', 'Next event', 'chevron', () => this.step(1)),
        this.speedSelect, this.position, this.forkButton, this.technicalButton),
      this.errorEl, timelineEl, info,
      h('div', { class: 'replay-panes' },
        h('section', { class: 'replay-pane' }, h('h3', { text: 'Conversation · as the user saw it' }), scroller, jump),
        h('section', { class: 'replay-pane' }, h('h3', { text: 'Context · as the LLM saw it' }), context)));
    this.root.querySelector('#replay-step-back').classList.add('flip');
    this.timeline = new Timeline(timelineEl, {
      onScrub: (seq) => this.moveTo(seq),
      onSeek: (seq) => this.moveTo(seq),
    });
    this.panes = new ReplayPanes({ scroller, inner, jump, context, info });
    this.setTechnical(technicalChosen());
  }

  setTechnical(on) {
    this.technical = on;
    this.root.classList.toggle('technical', on);
    this.technicalButton.setAttribute('aria-pressed', String(on));
    try {
      localStorage.setItem(TECHNICAL_KEY, on ? '1' : '0');
    } catch {
      // Private mode: the choice lasts for this page.
    }
    this.timeline.technical = on;
    if (this.timeline.data) this.timeline.load(this.timeline.data);
    this.updateControls();
  }

  // ---------------------------------------------------------------- opening

  async open(sessionId, title = '') {
    this.close();
    this.sessionId = sessionId;
    this.requests.clear();
    this.title.textContent = title ? `Replay · ${title}` : 'Replay';
    this.showError(null);
    this.panes.view.showLoading();
    let timeline;
    try {
      timeline = await api.timeline(sessionId);
    } catch (error) {
      if (this.sessionId === sessionId) this.showError(`Could not load this chat's timeline: ${error.message}`);
      return;
    }
    if (this.sessionId !== sessionId) return;
    this.timeline.cursorSeq = timeline.head;
    this.timeline.load(timeline);
    this.cursor = timeline.head;
    await this.show(this.cursor);
  }

  close() {
    this.stopSocket();
    this.playing = false;
    this.pausing = false;
    this.live = null;
    this.liveAt = null;
    this.sessionId = null;
    this.showing += 1;
    this.updateControls();
  }

  showError(message) {
    this.errorEl.hidden = !message;
    this.errorEl.textContent = message || '';
  }

  // ---------------------------------------------------------------- the state at the cursor

  /** Draw the session right after `seq`; `conversation: false` keeps the conversation. */
  async show(seq, { conversation = true } = {}) {
    const ticket = ++this.showing;
    const sessionId = this.sessionId;
    let state;
    let baseline = null;
    try {
      state = await api.sessionState(sessionId, seq);
      const request = baselineRequest(state.llm_requests || [], state.seq);
      if (request) baseline = request.messages ? request : await this.request(sessionId, request.seq);
    } catch (error) {
      if (ticket === this.showing) this.showError(`Could not load event ${seq}: ${error.message}`);
      return null;
    }
    if (ticket !== this.showing) return null;
    this.showError(null);
    let running = false;
    if (conversation) running = this.panes.renderConversation(state);
    this.panes.renderContext(state, baseline);
    this.panes.renderInfo(state);
    this.updateControls();
    return { state, running };
  }

  async request(sessionId, seq) {
    if (!this.requests.has(seq)) this.requests.set(seq, await api.llmRequest(sessionId, seq));
    return this.requests.get(seq);
  }

  moveTo(seq) {
    if (this.playing) this.pause({ keepPosition: true });
    this.pausing = false;
    this.liveAt = null;
    this.cursor = Math.max(0, Math.min(seq, this.timeline.head));
    this.timeline.setCursor(this.cursor);
    this.updateControls();
    this.show(this.cursor);
  }

  step(delta) {
    this.moveTo(this.cursor + delta);
  }

  updateControls() {
    const head = this.timeline.head;
    const type = this.timeline.typeOf(this.cursor);
    this.position.textContent = this.technical
      ? `event ${this.cursor} of ${head}${type ? ` · ${type}` : ''}`
      : `Step ${this.cursor} of ${head}${type ? ` · ${eventWords(type)}` : ''}`;
    this.position.title = type ? `event ${this.cursor} of ${head} · ${type}` : '';
    this.playButton.replaceChildren(icon(this.playing ? 'pause' : 'play'));
    const label = this.playing ? 'Pause' : 'Play';
    this.playButton.title = label;
    this.playButton.setAttribute('aria-label', label);
    // "pausing": until the server says where it stopped (the cursor moves there).
    this.playButton.dataset.state = this.playing ? 'playing' : this.pausing ? 'pausing' : 'paused';
    this.forkButton.disabled = this.cursor < 1 || !this.sessionId;
  }

  // ---------------------------------------------------------------- playing

  async play() {
    if (this.playing || !this.sessionId) return;
    if (this.cursor >= this.timeline.head) { // from the start again
      this.cursor = 0;
      this.liveAt = null;
    }
    this.timeline.setCursor(this.cursor);
    if (this.liveAt !== this.cursor || !this.live) {
      // Draw the conversation at the cursor; the live renderer goes on from there (as the
      // chat does after a reload). Otherwise it goes on where it paused.
      const shown = await this.show(this.cursor);
      if (!shown) return;
      let running = shown.running;
      this.live = new LiveRenderer(this.panes.view, {
        isRunning: () => running,
        setRunning: (value) => { running = value; },
        setContext: () => {},
        setProfile: () => {},
        setTodo: () => {},
        runEnded: () => {},
      });
    }
    this.liveAt = null;
    this.playing = true;
    this.pausing = false;
    this.updateControls();
    const from = this.cursor + 1;
    if (this.socket && !this.socket.closed) {
      this.socket.send({ type: 'speed', speed: this.speed === 'max' ? 'max' : Number(this.speed) });
      this.socket.send({ type: 'seek', seq: from });
      this.socket.send({ type: 'resume' });
      return;
    }
    this.socket = new ReplaySocket(this.sessionId, {
      from,
      speed: this.speed,
      onFrame: (frame) => this.frame(frame),
      onClose: (code) => this.socketClosed(code),
    });
  }

  /** Pause at the event the server says it reached (the frames sent until then are
   *  drawn); `keepPosition`: the cursor is being moved, drop them. */
  pause({ keepPosition = false } = {}) {
    if (!this.playing) return;
    this.playing = false;
    this.pausing = !keepPosition;
    if (this.socket) this.socket.send({ type: 'pause' });
    this.updateControls();
  }

  setSpeed(speed) {
    this.speed = speed;
    if (this.socket && !this.socket.closed) {
      this.socket.send({ type: 'speed', speed: speed === 'max' ? 'max' : Number(speed) });
    }
  }

  frame(frame) {
    if (frame.type === 'replay_status') {
      if (frame.state === 'paused' && this.pausing) {
        this.pausing = false;
        this.settle(frame.seq);
      }
      return;
    }
    if (frame.type === 'replay_end') {
      if (this.playing) {
        this.playing = false;
        this.settle(frame.seq);
      }
      return;
    }
    if (!this.playing && !this.pausing) return; // sent before our seek reached the server
    if (frame.type === 'error' && !Number.isInteger(frame.seq)) {
      this.showError(frame.message || 'The replay failed.');
      return;
    }
    this.live.handle(frame);
    if (!frame.is_subagent && Number.isInteger(frame.seq) && frame.seq > this.cursor) {
      this.cursor = frame.seq;
      this.timeline.setCursor(this.cursor);
      this.updateControls();
      this.refreshSoon();
    }
  }

  /** Stopped at `seq` with the conversation drawn by live frames: keep it (it has what a
   *  state cannot give, like subagents' cards), refresh the rest. */
  settle(seq) {
    this.cursor = seq;
    this.liveAt = seq;
    this.timeline.setCursor(seq);
    this.updateControls();
    this.show(seq, { conversation: false });
  }

  refreshSoon() {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      if (this.playing) this.show(this.cursor, { conversation: false });
    }, REFRESH_MS);
  }

  socketClosed(code) {
    this.socket = null;
    if (this.playing) {
      this.playing = false;
      this.updateControls();
      this.showError(code === 4004 ? 'This chat no longer exists.' : 'The replay connection closed.');
    }
  }

  stopSocket() {
    if (this.socket) this.socket.close();
    this.socket = null;
    clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
  }

  // ---------------------------------------------------------------- forking

  async forkHere() {
    if (this.cursor < 1 || !this.sessionId) return;
    this.pause({ keepPosition: true });
    this.forkButton.disabled = true;
    try {
      const fork = await api.forkSession(this.sessionId, this.cursor);
      this.onForked(fork.session_id);
    } catch (error) {
      this.showError(`Could not continue from here: ${error.message}`);
      this.updateControls();
    }
  }
}
