// The conversation column: user messages and assistant turns in order, kept scrolled to
// the bottom while the reader is there, with a "jump to latest" button when they are not.
// Messages typed while an answer streams wait, marked "Queued", in an area below it;
// each moves into the conversation when its run starts (its user_message echo).

import { clear, h } from './dom.js';
import { errorBlock, notice, userMessage } from './cards.js';
import { needsGrants } from './header.js';
import { icon } from './icons.js';
import { Turn } from './turns.js';

const NEAR_BOTTOM = 80; // px

export class ConversationView {
  constructor(scroller, inner, jumpButton) {
    this.scroller = scroller;
    this.inner = inner;
    this.jump = jumpButton;
    this.turn = null; // the assistant turn live frames go to
    this.pendingUser = []; // bubbles sent from this tab, waiting for their user_message echo
    this.queueEl = h('div', { class: 'queued-messages', 'aria-label': 'Queued messages' });
    this.stick = true;
    this.jump.append(icon('down'));
    this.jump.addEventListener('click', () => this.scrollToBottom(true));
    scroller.addEventListener('scroll', () => {
      this.stick = this.distanceFromBottom() < NEAR_BOTTOM;
      this.jump.hidden = this.stick;
    });
    // Content grows (streamed text, images loading): follow it if the reader is at the end.
    new ResizeObserver(() => {
      if (this.stick) this.scrollToBottom();
    }).observe(inner);
  }

  distanceFromBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight;
  }

  scrollToBottom(smooth = false) {
    this.stick = true;
    this.jump.hidden = true;
    this.scroller.scrollTo({ top: this.scroller.scrollHeight, behavior: smooth ? 'smooth' : 'auto' });
  }

  reset() {
    clear(this.inner);
    clear(this.queueEl);
    this.turn = null;
    this.pendingUser = [];
    this.stick = true;
    this.jump.hidden = true;
  }

  /** The welcome screen; `notice`: an element shown under its title (the demo model's). */
  showEmpty({ profile, onPick, profiles = [], notice = null }) {
    this.reset();
    const cards = profiles.map((p) =>
      h('button', {
        type: 'button',
        class: p.id === profile?.id ? 'profile-card selected' : 'profile-card',
        'data-profile': p.id,
        disabled: p.usable === false,
        onclick: () => onPick(p.id),
      },
      h('span', { class: 'profile-card-name', text: p.name || p.id }),
      h('span', { class: 'profile-card-desc', text: p.usable === false ? needsGrants(p) : p.description || '' })));
    this.inner.append(h('div', { class: 'empty-state' },
      h('div', { class: 'empty-mark', 'aria-hidden': 'true', text: 'N' }),
      h('h1', { text: 'How can I help?' }),
      profile && h('p', { class: 'empty-sub', text: `You are talking to ${profile.name || profile.id}.` }),
      notice,
      cards.length > 1 && h('div', { class: 'profile-cards' }, cards)));
  }

  showLoading() {
    this.reset();
    this.inner.append(h('div', { class: 'loading' }, h('span', { class: 'spinner' }), h('span', { text: 'Loading…' })));
  }

  showError(message, retry, label = 'Retry') {
    this.reset();
    this.inner.append(h('div', { class: 'page-error' }, errorBlock(message, { retry, label })));
  }

  removeEmpty() {
    this.inner.querySelector('.empty-state')?.remove();
    this.inner.querySelector('.loading')?.remove();
    this.inner.querySelector('.replay-empty')?.remove(); // replay: the first frame played
  }

  /** Add to the conversation, above the queued messages (which stay last). */
  place(el) {
    if (this.queueEl.parentNode === this.inner) this.inner.insertBefore(el, this.queueEl);
    else this.inner.append(el);
  }

  /** A user message; `pending` marks one sent from here until its echo arrives, `queued`
   *  one sent while a run is active (it waits below the answer). */
  addUser(message, { pending = false, queued = false } = {}) {
    this.removeEmpty();
    const el = userMessage(message, { pending });
    if (queued) {
      el.classList.add('queued');
      el.querySelector('.bubble')?.after(h('span', { class: 'queued-mark', text: 'Queued' }));
      this.queueEl.append(el);
      this.inner.append(this.queueEl);
    } else {
      this.place(el);
      this.turn = null; // the next assistant output starts a new turn
    }
    if (pending) this.pendingUser.push({ el, content: message.content });
    this.scrollToBottom();
    return el;
  }

  /** A user_message frame: confirms this tab's pending bubble, or shows another tab's. */
  echoUser(message) {
    const index = this.pendingUser.findIndex((p) => p.content === message.content);
    if (index >= 0) {
      const [{ el }] = this.pendingUser.splice(index, 1);
      el.classList.remove('pending');
      if (Number.isInteger(message.seq)) el.dataset.seq = String(message.seq);
      if (el.classList.contains('queued')) {
        // Its run starts now: into the conversation, after the answer before it.
        el.classList.remove('queued');
        el.querySelector('.queued-mark')?.remove();
        this.place(el);
        this.turn = null;
        if (!this.queueEl.childElementCount) this.queueEl.remove();
      }
      return;
    }
    this.addUser(message);
  }

  /** Remove a pending bubble whose message could not be sent (the composer keeps it). */
  removePending(el) {
    this.pendingUser = this.pendingUser.filter((p) => p.el !== el);
    el.remove();
    if (!this.queueEl.childElementCount) this.queueEl.remove();
  }

  /** The turn live frames go to; `fresh` starts a new one (stream_start). */
  currentTurn({ fresh = false } = {}) {
    if (this.turn && !(fresh && !this.turn.isEmpty)) return this.turn;
    this.removeEmpty();
    this.turn = new Turn();
    this.place(this.turn.el);
    return this.turn;
  }

  /** After history: live frames continue the last turn when it is the last thing shown. */
  adoptTurn(turn) {
    this.turn = turn && this.inner.lastElementChild === turn.el ? turn : null;
  }

  notice(text, kind) {
    this.removeEmpty();
    if (this.turn) this.turn.root.notice(text, kind);
    else this.place(notice(text, kind));
  }

  error(message, options) {
    this.removeEmpty();
    if (this.turn) this.turn.error(message, options);
    else this.place(errorBlock(message, options));
    this.scrollToBottom();
  }
}
