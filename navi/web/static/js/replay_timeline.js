// The Replay view's timeline (GET /sessions/{id}/timeline): one lane per stream (the
// session, then its subagents, nested), each event a tick coloured by its family, runs,
// LLM calls, tool calls, approvals (the wait for a decision), compressions and subagents
// as bars with their durations, and a cursor that can be dragged (or moved with the
// arrow keys) to any event of the session.
// Events are placed on the replay clock, so the cursor moves as a replay plays.

import { clear, formatSeconds, h } from './dom.js';
import { spanWords } from './replay_words.js';

const ROW = 15; // px per row of bars
const TICKS = 12; // px of the row of event ticks
// An approval's wait shares the LLM row: the LLM is never called while a call waits.
const ROWS = { run: 0, llm: 1, compress: 1, subagent: 1, approval: 1, tool: 2 };
const COLORS = {
  user: '#2f6fde', llm: '#8b5cf6', tool: '#e07b00', run: '#15803d', context: '#0f9aa8',
  plan: '#d9468f', subagent: '#7c7c7c', profile: '#b08900', stop: '#d13b2e',
};

function family(type) {
  return type.split('.')[0];
}

/** The index of the event nearest to `t` in the sorted array `times` (the last of equals). */
export function nearestIndex(times, t) {
  let lo = 0;
  let hi = times.length - 1;
  if (hi < 0) return -1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (times[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  if (lo + 1 < times.length && times[lo + 1] - t < t - times[lo]) {
    let next = lo + 1;
    while (next + 1 < times.length && times[next + 1] === times[next]) next += 1;
    return next;
  }
  return lo;
}

export class Timeline {
  /** onScrub(seq): while the cursor is dragged; onSeek(seq): where it was let go. */
  constructor(root, { onScrub, onSeek }) {
    this.root = root;
    this.onScrub = onScrub;
    this.onSeek = onSeek;
    this.data = null;
    this.technical = false; // bars labelled as recorded ("LLM loop"), not in words
    this.cursorSeq = 0;
    this.dragging = false;
    this.lanesEl = h('div', { class: 'tl-lanes' });
    this.cursor = h('div', { class: 'tl-cursor', 'aria-hidden': 'true' }, h('span', { class: 'tl-handle' }));
    this.axis = h('div', { class: 'tl-axis' });
    this.frame = h('div', {
      class: 'tl-frame', tabindex: '0', role: 'slider', 'aria-label': 'Replay position (event)',
    }, this.lanesEl, this.cursor);
    root.append(this.frame, this.axis);
    this.frame.addEventListener('pointerdown', (event) => this.pointerDown(event));
    this.frame.addEventListener('pointermove', (event) => this.pointerMove(event));
    this.frame.addEventListener('pointerup', (event) => this.pointerUp(event));
    this.frame.addEventListener('pointercancel', (event) => this.pointerUp(event));
    this.frame.addEventListener('keydown', (event) => this.key(event));
    this.resize = new ResizeObserver(() => this.drawTicks());
    this.resize.observe(this.frame);
  }

  get main() {
    return this.data?.lanes[0] || null;
  }

  get head() {
    return this.data?.head || 0;
  }

  get firstSeq() {
    return this.main?.first_seq || 1;
  }

  load(data) {
    this.data = data;
    clear(this.lanesEl);
    const duration = Math.max(data.duration || 0, 1e-6);
    this.canvases = [];
    for (const lane of data.lanes) {
      const rows = this.rowsFor(lane);
      const track = h('div', { class: 'tl-track', style: `height:${TICKS + rows * ROW + 4}px` });
      const canvas = h('canvas', { class: 'tl-ticks', height: String(TICKS) });
      track.append(canvas);
      this.canvases.push({ canvas, lane });
      for (const span of lane.spans) track.append(this.spanEl(span, duration));
      this.lanesEl.append(h('div', {
        class: `tl-lane${lane.depth ? ' subagent' : ''}`, 'data-lane': lane.id, style: `--depth:${lane.depth}`,
      },
      h('div', { class: 'tl-label', title: lane.label, text: lane.depth ? `↳ ${lane.label}` : lane.label }),
      track));
    }
    this.axis.replaceChildren(h('span', { text: '0 s' }),
      h('span', { text: `${formatSeconds(data.duration || 0)} · ${data.head} events` }));
    this.drawTicks();
    this.setCursor(this.cursorSeq || data.head);
  }

  /** Rows of bars: runs, then LLM calls (and compressions, subagents), then tools. */
  rowsFor(lane) {
    // Tools that overlap in time stack on extra rows.
    const ends = [];
    for (const span of lane.spans) {
      if (span.kind !== 'tool') {
        span.row = ROWS[span.kind] ?? 1;
        continue;
      }
      let row = ends.findIndex((end) => end <= span.t0);
      if (row < 0) row = ends.push(0) - 1;
      ends[row] = span.t1 + 1e-9;
      span.row = ROWS.tool + row;
    }
    return Math.max(1, ...lane.spans.map((s) => s.row + 1));
  }

  spanEl(span, duration) {
    const left = (span.t0 / duration) * 100;
    const width = Math.max(((span.t1 - span.t0) / duration) * 100, 0.4);
    const state = span.open ? 'open' : span.ok ? 'ok' : 'failed';
    const took = span.open ? 'did not end' : formatSeconds(span.duration);
    return h('div', {
      class: `tl-span ${span.kind} ${state}`,
      'data-kind': span.kind,
      'data-first': span.first,
      style: `left:${left}%;width:${width}%;top:${TICKS + 2 + span.row * ROW}px`,
      title: `${span.label} · ${took} (events ${span.first}–${span.last})`,
    }, h('span', { class: 'tl-span-label', text: this.technical ? span.label : spanWords(span) }));
  }

  drawTicks() {
    if (!this.data) return;
    const duration = Math.max(this.data.duration || 0, 1e-6);
    const ratio = window.devicePixelRatio || 1;
    for (const { canvas, lane } of this.canvases) {
      const width = canvas.parentElement.clientWidth;
      if (!width) continue;
      canvas.width = Math.round(width * ratio);
      canvas.height = Math.round(TICKS * ratio);
      canvas.style.width = `${width}px`;
      const g = canvas.getContext('2d');
      g.clearRect(0, 0, canvas.width, canvas.height);
      let lastX = -1;
      let lastColor = '';
      lane.type.forEach((typeIndex, i) => {
        const color = COLORS[family(this.data.types[typeIndex])] || '#9a9a9a';
        const x = Math.round((lane.t[i] / duration) * (canvas.width - ratio));
        if (x === lastX && color === lastColor) return; // thousands of chunks: one line each pixel
        g.fillStyle = color;
        g.fillRect(x, 0, Math.max(1, ratio), canvas.height);
        lastX = x;
        lastColor = color;
      });
    }
  }

  // ---------------------------------------------------------------- the cursor

  timeOf(seq) {
    const lane = this.main;
    if (!lane || !lane.t.length) return 0;
    const index = Math.min(Math.max(seq - this.firstSeq, 0), lane.t.length - 1);
    return seq < this.firstSeq ? 0 : lane.t[index];
  }

  typeOf(seq) {
    const lane = this.main;
    const index = seq - this.firstSeq;
    if (!lane || index < 0 || index >= lane.type.length) return null;
    return this.data.types[lane.type[index]];
  }

  setCursor(seq) {
    if (!this.data) return;
    this.cursorSeq = Math.max(0, Math.min(seq, this.head));
    const duration = Math.max(this.data.duration || 0, 1e-6);
    const fraction = this.cursorSeq === 0 ? 0 : this.timeOf(this.cursorSeq) / duration;
    const track = this.lanesEl.querySelector('.tl-track');
    const left = track ? track.offsetLeft : 0;
    this.cursor.style.left = `calc(${left}px + (100% - ${left}px) * ${fraction})`;
    this.frame.setAttribute('aria-valuemin', '0');
    this.frame.setAttribute('aria-valuemax', String(this.head));
    this.frame.setAttribute('aria-valuenow', String(this.cursorSeq));
    this.frame.setAttribute('aria-valuetext', `event ${this.cursorSeq} of ${this.head}`);
  }

  seqAt(clientX) {
    const track = this.lanesEl.querySelector('.tl-track');
    if (!track || !this.main) return null;
    const box = track.getBoundingClientRect();
    const fraction = Math.min(Math.max((clientX - box.left) / box.width, 0), 1);
    const index = nearestIndex(this.main.t, fraction * (this.data.duration || 0));
    return index < 0 ? null : index + this.firstSeq;
  }

  pointerDown(event) {
    if (event.button !== 0 || !this.data) return;
    const track = this.lanesEl.querySelector('.tl-track');
    if (track && event.clientX < track.getBoundingClientRect().left) return; // the labels
    this.dragging = true;
    this.frame.setPointerCapture(event.pointerId);
    this.frame.focus();
    this.pointerMove(event);
  }

  pointerMove(event) {
    if (!this.dragging) return;
    const seq = this.seqAt(event.clientX);
    if (seq === null || seq === this.cursorSeq) return;
    this.setCursor(seq);
    this.onScrub(seq);
  }

  pointerUp(event) {
    if (!this.dragging) return;
    this.dragging = false;
    if (this.frame.hasPointerCapture(event.pointerId)) this.frame.releasePointerCapture(event.pointerId);
    this.onSeek(this.cursorSeq);
  }

  key(event) {
    const moves = { ArrowLeft: -1, ArrowRight: 1, PageDown: 20, PageUp: -20 };
    let seq = null;
    if (event.key in moves) seq = this.cursorSeq + moves[event.key];
    else if (event.key === 'Home') seq = 0;
    else if (event.key === 'End') seq = this.head;
    if (seq === null) return;
    event.preventDefault();
    this.setCursor(seq);
    this.onSeek(this.cursorSeq);
  }
}
