// An assistant turn: everything Navi shows between one user message and the next.
// A Scope is a column of blocks (thinking, plan, tools, text) in arrival order; the turn
// has a root scope, and each spawn_agent card holds a nested scope for its subagent.
// History (history.js) and live frames (live.js) both draw through these classes.

import {
  assistantTurn,
  errorBlock,
  notice,
  planCard,
  planningStatus,
  textBlock,
  thinkingBlock,
  toolCard,
  turnFooter,
} from './cards.js';

/** The id pairing tool_started with tool_call, when the server sends one. */
export function callIdOf(frame) {
  return frame.call_id ?? frame.tool_call_id ?? frame.id ?? null;
}

export class Scope {
  constructor(turn, container) {
    this.turn = turn;
    this.container = container;
    this.lastKind = null;
    this.thinking = null; // the live thinking block, until thinking_end
    this.text = null; // the text block that stream_delta appends to
    this.planning = null; // the "Planning…" line, until the plan arrives
    this.plan = null;
  }

  add(el, kind) {
    if (kind !== 'planning' && this.planning) {
      this.planning.el.remove();
      this.planning = null;
    }
    if (kind !== 'notice' && kind !== 'error') this.dropSuperseded();
    if (kind !== 'text') this.text = null;
    this.container.append(el);
    this.lastKind = kind;
    return el;
  }

  thinkingDelta(delta) {
    if (!this.thinking) {
      this.thinking = thinkingBlock({ live: true });
      this.add(this.thinking.el, 'thinking');
    }
    this.thinking.append(delta);
  }

  thinkingEnd() {
    if (this.thinking) this.thinking.end();
    this.thinking = null;
  }

  /** A whole reasoning block (turn_thinking, or an assistant message's thinking);
   *  with `seconds` (history: how long it streamed) labelled as it was live. */
  reasoning(text, seconds) {
    if (!text) return;
    const block = thinkingBlock({ text, label: 'Reasoning' });
    if (Number.isFinite(seconds)) block.end(seconds);
    this.add(block.el, 'thinking');
  }

  planningStatus(phase, label) {
    const text = label || `Planning (phase ${phase})`;
    if (this.planning) this.planning.set(text);
    else {
      this.planning = planningStatus(text);
      this.add(this.planning.el, 'planning');
    }
  }

  showPlan(plan, { open = true } = {}) {
    this.plan = planCard(plan, { open });
    this.add(this.plan.el, 'plan');
    return this.plan;
  }

  toolStarted(tool, args, callId, { history = false } = {}) {
    this.thinkingEnd();
    const card = toolCard(tool, args);
    if (history) card.el.dataset.history = '1';
    this.add(card.el, 'tool');
    this.turn.trackTool(card, this, callId);
    return card;
  }

  toolFinished(tool, args, result, success, callId, { history = false, images = [] } = {}) {
    let card = this.turn.takeTool(tool, this, callId);
    if (!card) {
      card = this.toolStarted(tool, args, callId, { history });
      this.turn.takeTool(tool, this, callId);
    } else {
      card.setArgs(args);
    }
    card.complete(result, success, images);
    return card;
  }

  textDelta(delta) {
    this.thinkingEnd();
    if (!this.text) {
      this.text = textBlock();
      this.add(this.text.el, 'text');
    }
    this.text.view.append(delta);
  }

  /** Text known whole (history, or stream_end's content when nothing streamed). */
  setText(content) {
    if (!content) return;
    if (this.text) {
      if (this.text.view.text !== content) this.text.view.set(content);
      return;
    }
    this.text = textBlock(content);
    this.add(this.text.el, 'text');
  }

  /** An LLM call failed or is asked again: what its attempt streamed is superseded. It
   *  stays on screen, dimmed, until the next attempt says something (then it goes), or
   *  the run ends first (then it stays: the messages projection keeps it too). */
  dropAttempt() {
    this.thinkingEnd();
    if (this.text) this.text.view.flush();
    this.thinking = null;
    this.text = null;
    for (let el = this.container.lastElementChild; el; el = el.previousElementSibling) {
      if (el.matches('.planning-status, .notice, .error-block')) continue;
      if (!el.matches('.text-block, .thinking')) break;
      el.classList.add('superseded');
    }
  }

  dropSuperseded() {
    for (const el of this.container.querySelectorAll(':scope > .superseded')) el.remove();
  }

  notice(text, kind) {
    this.add(notice(text, kind), 'notice');
  }

  error(message) {
    this.add(errorBlock(message), 'error');
  }

  settle() {
    this.thinkingEnd();
    for (const el of this.container.querySelectorAll(':scope > .superseded')) el.classList.remove('superseded');
    if (this.planning) {
      this.planning.el.remove();
      this.planning = null;
    }
    if (this.text) this.text.view.flush();
  }
}

export class Turn {
  constructor() {
    const { el, body } = assistantTurn();
    this.el = el;
    this.root = new Scope(this, body);
    this.tools = []; // {card, scope, callId} not yet completed
    this.agentCards = []; // spawn_agent cards, in start order
    this.subagents = new Map(); // subagent_id → Scope
    this.footer = null;
    this.waiting = null; // the "Waiting for the model… N s" line, until the first frame
  }

  get isEmpty() {
    return this.root.container.childElementCount === (this.waiting ? 1 : 0);
  }

  /** An attempt failed and will be retried: its partial answer dims, and a line says
   *  why and which attempt comes next. */
  retrying({ error = '', attempt = 1, max_attempts: max = 0 } = {}) {
    this.root.dropAttempt();
    const next = max ? `${attempt + 1}/${max}` : `${attempt + 1}`;
    const line = planningStatus(`The model's server failed${error ? `: ${error}` : ''} · retrying ${next}…`);
    line.el.classList.add('waiting-status', 'retry-status');
    line.el.dataset.testid = 'retrying';
    this.stopWaiting();
    this.waiting = { el: line.el, timer: null };
    this.root.container.append(line.el);
  }

  /** A silent prefill: show that the model is working, with a seconds counter. A retry
   *  (`prefix`: "Retrying 2/4 · ") shows it whatever the turn already holds. */
  startWaiting(prefix = '') {
    if (!prefix && (this.waiting || !this.isEmpty)) return;
    this.stopWaiting();
    const started = Date.now();
    const label = () => `${prefix}Waiting for the model… ${Math.floor((Date.now() - started) / 1000)} s`;
    const line = planningStatus(label());
    line.el.classList.add('waiting-status');
    line.el.dataset.testid = prefix ? 'retrying' : 'waiting';
    const timer = setInterval(() => line.set(label()), 1000);
    this.waiting = { el: line.el, timer };
    this.root.container.append(line.el);
  }

  /** The server is full (NAVI_MAX_LIVE_RUNS): the run waits in line, `ahead` before it.
   *  Counts as the waiting line: the run's first frame (or run_dequeued) replaces it. */
  queued(ahead) {
    const text = `Queued (${ahead} ahead) · the server is busy`;
    if (this.waiting?.el.dataset.testid === 'queued') {
      this.waiting.set(text);
      return;
    }
    this.stopWaiting();
    const line = planningStatus(text);
    line.el.classList.add('waiting-status');
    line.el.dataset.testid = 'queued';
    this.waiting = { el: line.el, timer: null, set: line.set };
    this.root.container.append(line.el);
  }

  /** The first thinking/text/tool frame (or the end) replaces the waiting line. */
  stopWaiting() {
    if (!this.waiting) return;
    clearInterval(this.waiting.timer);
    this.waiting.el.remove();
    this.waiting = null;
  }

  trackTool(card, scope, callId) {
    this.tools.push({ card, scope, callId });
    if (card.tool === 'spawn_agent') this.agentCards.push(card);
  }

  /** A running call's progress (tool_progress) into its card; a call not shown: none. */
  toolProgress(callId, frame) {
    const found = callId ? this.tools.find((t) => t.callId === callId) : null;
    found?.card.progress(frame);
  }

  /** The pending card that a tool_call completes: by id, else oldest of that name. */
  takeTool(tool, scope, callId) {
    const pick = (test) => {
      const index = this.tools.findIndex(test);
      return index < 0 ? null : this.tools.splice(index, 1)[0].card;
    };
    if (callId) {
      const byId = pick((t) => t.callId === callId);
      if (byId) return byId;
    }
    return pick((t) => t.card.tool === tool && t.scope === scope && !t.callId) ||
      pick((t) => t.card.tool === tool && t.scope === scope) ||
      pick((t) => t.card.tool === tool);
  }

  /** Where a frame goes: the root, or the scope of the subagent that sent it. */
  scopeFor(frame) {
    if (!frame.is_subagent) return this.root;
    const key = frame.subagent_id || null;
    if (key && this.subagents.has(key)) return this.subagents.get(key);
    const pending = this.agentCards.filter((card) => !card.done);
    let host = null;
    if (key) host = [...pending].reverse().find((card) => !card.subagentKey);
    if (!host) host = pending[pending.length - 1] || this.agentCards[this.agentCards.length - 1];
    if (!host) {
      // A subagent frame with no spawn_agent card (it started before this page): host it.
      host = this.root.toolStarted('spawn_agent', {}, null);
    }
    if (!host.scope) {
      host.scope = new Scope(this, host.subagent);
    }
    if (key && !host.subagentKey) {
      host.subagentKey = key;
      this.subagents.set(key, host.scope);
    }
    return host.scope;
  }

  /** Cards that will never get their result (a stopped or failed run, old history). */
  abandonTools(reason) {
    for (const { card } of this.tools) card.abandon(reason);
    this.tools = [];
  }

  settle() {
    this.root.settle();
    for (const card of this.agentCards) card.scope?.settle();
  }

  finish({ content = '', stats = [] } = {}) {
    this.settle();
    if (this.footer) this.footer.remove();
    this.footer = turnFooter({ content, stats });
    this.el.querySelector('.turn-body').append(this.footer);
  }

  /** An error in the turn; `runError`: the run failed here (a Retry button joins it). */
  error(message, { runError = false, ...options } = {}) {
    const block = errorBlock(message, options);
    if (runError) block.classList.add('run-error');
    this.root.add(block, 'error');
  }
}
