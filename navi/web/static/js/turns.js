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

  /** A whole reasoning block (turn_thinking, or an assistant message's thinking). */
  reasoning(text) {
    if (text) this.add(thinkingBlock({ text, label: 'Reasoning' }).el, 'thinking');
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

  toolFinished(tool, args, result, success, callId, { history = false } = {}) {
    let card = this.turn.takeTool(tool, this, callId);
    if (!card) {
      card = this.toolStarted(tool, args, callId, { history });
      this.turn.takeTool(tool, this, callId);
    } else {
      card.setArgs(args);
    }
    card.complete(result, success);
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

  /** An LLM call was re-issued (after a restart): drop what its lost attempt streamed. */
  dropAttempt() {
    this.thinking = null;
    this.text = null;
    while (this.lastKind === 'text' || this.lastKind === 'thinking') {
      const last = this.container.lastElementChild;
      if (!last || !last.matches('.text-block, .thinking')) break;
      last.remove();
      const previous = this.container.lastElementChild;
      this.lastKind = previous?.matches('.text-block') ? 'text'
        : previous?.matches('.thinking') ? 'thinking' : 'other';
    }
  }

  notice(text, kind) {
    this.add(notice(text, kind), 'notice');
  }

  error(message) {
    this.add(errorBlock(message), 'error');
  }

  settle() {
    this.thinkingEnd();
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

  /** A silent prefill: show that the model is working, with a seconds counter. */
  startWaiting() {
    if (this.waiting || !this.isEmpty) return;
    const started = Date.now();
    const line = planningStatus('Waiting for the model… 0 s');
    line.el.classList.add('waiting-status');
    line.el.dataset.testid = 'waiting';
    const timer = setInterval(() => {
      line.set(`Waiting for the model… ${Math.floor((Date.now() - started) / 1000)} s`);
    }, 1000);
    this.waiting = { el: line.el, timer };
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

  error(message, options) {
    this.root.add(errorBlock(message, options), 'error');
  }
}
