// Live frames from the WebSocket → the conversation. One method per frame type of the
// protocol (API-SHAPES.md); frames from subagents (`is_subagent`) are drawn inside their
// spawn_agent card. Page-level effects (run lock, context meter, profile, todo) go
// through `hooks`.

import { formatCount, formatSeconds } from './dom.js';
import { callIdOf } from './turns.js';

// Frames that only a running run sends: seeing one means input must stay locked (after a
// reload mid-run, stream_start is in the past).
const RUN_FRAMES = new Set([
  'stream_start', 'thinking_delta', 'thinking_end', 'turn_thinking', 'planning_status',
  'plan_ready', 'tool_started', 'tool_progress', 'tool_call', 'stream_delta', 'stream_retry',
  'llm_failed', 'llm_waiting', 'approval_required', 'approval_decided', 'run_queued',
]);

// Frames that show the model answered (or the run ended): they end "Waiting for the model…".
const ENDING_FRAMES = new Set(['error', 'stream_end', 'stream_stopped']);
// Frames after which the run no longer waits for the model's server (its banner goes).
const BACK_FRAMES = new Set(['stream_retry', 'stream_end', 'stream_stopped', 'error']);
const ANSWER_FRAMES = new Set([
  'thinking_delta', 'thinking_end', 'turn_thinking', 'planning_status', 'plan_ready',
  'tool_started', 'tool_call', 'stream_delta', 'stream_end', 'stream_stopped', 'error',
]);

export class LiveRenderer {
  /**
   * hooks: {isRunning(), setRunning(bool), setContext(tokens, max), setProfile(id, name),
   *         setTodo(items), runEnded({figures}), llm(status, detail), llmAway(error),
   *         approvals}
   *  llmAway(error, who): the run waits for the model's server ('' once it no longer
   *  does); who: 'subagent' when a subagent's run is the one that waits.
   *  llm() tells the footer's dot what the model's server is doing: 'waiting',
   *  'answering', 'retrying', 'failed' or 'idle'.
   *  approvals: the Approvals of approvals.js (calls that wait for the user).
   */
  constructor(view, hooks) {
    this.view = view;
    this.hooks = hooks;
    this.awaySubagent = null; // the subagent whose wait for the model the banner shows
  }

  handle(frame) {
    if (!frame || typeof frame.type !== 'string') return;
    if (RUN_FRAMES.has(frame.type) && !frame.is_subagent && !this.hooks.isRunning()) {
      this.hooks.setRunning(true);
    }
    if (BACK_FRAMES.has(frame.type) && !frame.is_subagent) this.hooks.llmAway?.('');
    else if (this.awaySubagent && this.subagentBack(frame)) {
      this.awaySubagent = null;
      this.hooks.llmAway?.('');
    }
    if (ANSWER_FRAMES.has(frame.type)) {
      this.view.turn?.stopWaiting();
      // The model said something; an error, a stop or the run's end is not that (a
      // fatal error's stream_end shares its seq and follows it).
      if (!frame.is_subagent && !ENDING_FRAMES.has(frame.type)) this.hooks.llm?.('answering');
    }
    const method = HANDLERS[frame.type];
    if (method) method.call(this, frame);
  }

  /** Whether the subagent whose wait the banner shows no longer waits: it asked the
   *  model again (its stream_retry), or the parent has its result (its tool_call). */
  subagentBack(frame) {
    if (frame.is_subagent) return frame.type === 'stream_retry' && frame.subagent_id === this.awaySubagent;
    return frame.type === 'tool_call';
  }

  scope(frame) {
    return this.view.currentTurn().scopeFor(frame);
  }

  // ---------------------------------------------------------------- frame handlers

  user_message(frame) {
    this.view.echoUser({
      content: frame.content ?? frame.text ?? '',
      images: frame.images || [],
      files: frame.files || [],
      seq: frame.seq,
    });
  }

  stream_start(frame) {
    if (frame.is_subagent) return;
    this.view.currentTurn({ fresh: true }).startWaiting();
    this.hooks.llm?.('waiting');
  }

  thinking_delta(frame) {
    this.scope(frame).thinkingDelta(frame.delta || '');
  }

  thinking_end(frame) {
    this.scope(frame).thinkingEnd();
  }

  turn_thinking(frame) {
    this.scope(frame).reasoning(frame.thinking || '');
  }

  planning_status(frame) {
    this.scope(frame).planningStatus(frame.phase, frame.label);
  }

  plan_ready(frame) {
    this.scope(frame).showPlan(frame.plan || '', { open: !frame.is_subagent });
  }

  tool_started(frame) {
    this.scope(frame).toolStarted(frame.tool, frame.args, callIdOf(frame));
  }

  /** How far a running call has got: a bar (when the tool said its total) and a line. */
  tool_progress(frame) {
    this.view.currentTurn().toolProgress(callIdOf(frame), frame);
  }

  tool_call(frame) {
    this.scope(frame).toolFinished(frame.tool, frame.args, frame.result, frame.success !== false,
      callIdOf(frame), { images: frame.images || [] });
    this.hooks.approvals?.settled(frame);
  }

  /** A call waits for the user (again, after a reconnect: approvals.js knows it). */
  approval_required(frame) {
    this.hooks.approvals?.required(frame, this.scope(frame));
  }

  approval_decided(frame) {
    this.hooks.approvals?.decided(frame);
  }

  stream_delta(frame) {
    this.scope(frame).textDelta(frame.delta || '');
  }

  /** The server is full: the run waits in line (`ahead` before it), updated as it moves. */
  run_queued(frame) {
    this.view.currentTurn().queued(frame.ahead ?? 0);
    this.hooks.llm?.('waiting');
  }

  /** The run left the line: it now waits for the model (or was stopped). */
  run_dequeued() {
    const turn = this.view.turn;
    if (!turn) return;
    turn.stopWaiting();
    turn.startWaiting();
  }

  /** The server asked the model again (after a failure or a restart): what the lost
   *  attempt streamed is superseded, and the turn waits for the new one. */
  stream_retry(frame) {
    if (frame.is_subagent) return; // a subagent's: it asks again after a wait (no text shown)
    this.scope(frame).dropAttempt();
    const of = frame.max_attempts ? `/${frame.max_attempts}` : '';
    this.view.currentTurn().startWaiting(`Retrying ${frame.attempt}${of} · `);
    this.hooks.llm?.('retrying', `attempt ${frame.attempt}${of}`);
  }

  /** An attempt failed; `retrying`: another follows after a back-off (else an error
   *  frame ends the run). */
  llm_failed(frame) {
    if (frame.is_subagent) return;
    const turn = this.view.currentTurn();
    if (frame.retrying) {
      turn.retrying(frame);
      this.hooks.llm?.('retrying', frame.error || '');
    } else {
      turn.stopWaiting();
      this.hooks.llm?.('failed', frame.error || '');
    }
  }

  /** The retries are spent: the run stays open and waits for the model's server (a
   *  banner with Try again, until the next attempt's stream_retry or the run's end). */
  llm_waiting(frame) {
    if (frame.is_subagent) {
      // A subagent waits: the same banner, saying whose wait it is; Try again now in
      // this session goes on with the subagent's run.
      this.awaySubagent = frame.subagent_id;
      this.hooks.llmAway?.(frame.error || 'the server does not answer', 'subagent');
      return;
    }
    this.view.currentTurn().stopWaiting();
    this.hooks.llm?.('retrying', frame.error || '');
    this.hooks.llmAway?.(frame.error || 'the server does not answer');
  }

  stream_end(frame) {
    if (frame.is_subagent) {
      this.scope(frame).setText(frame.content || '');
      return;
    }
    this.hooks.setContext(frame.context_tokens, frame.max_context_tokens);
    const turn = this.view.turn;
    if (!turn && !this.hooks.isRunning()) return; // an end we already showed (history)
    const current = turn || this.view.currentTurn();
    current.root.setText(frame.content || '');
    current.abandonTools('no result');
    current.finish({ content: frame.content || '', stats: runStats(frame) });
    this.endRun({ figures: true });
  }

  stream_stopped(frame) {
    if (frame.is_subagent) return;
    const turn = this.view.turn;
    if (turn) {
      turn.settle();
      turn.abandonTools('stopped');
      const content = turn.root.text?.view.text || '';
      turn.root.notice('Stopped', 'stopped');
      // Copy and Regenerate under a stopped answer at once, as after a reload.
      turn.finish({ content });
    } else {
      this.view.notice('Stopped', 'stopped');
    }
    this.endRun();
  }

  error(frame) {
    const message = frame.message || 'Unknown error';
    if (frame.is_subagent) {
      this.scope(frame).error(message);
      return;
    }
    this.view.error(message, { runError: Boolean(frame.fatal) });
    if (this.view.turn) this.view.turn.settle();
    if (this.hooks.isRunning()) this.endRun();
  }

  context_compressed(frame) {
    const { messages_before: before, messages_after: after } = frame;
    const detail = Number.isFinite(before) && Number.isFinite(after) ? `: ${before} → ${after} messages` : '';
    this.view.notice(`Context compressed${detail}`, 'compress');
  }

  profile_switched(frame) {
    this.hooks.setProfile(frame.profile_id, frame.profile_name);
    this.view.notice(`Switched to ${frame.profile_name || frame.profile_id}`, 'profile');
  }

  todo_updated(frame) {
    const items = frame.items || [];
    this.hooks.setTodo(items);
    const plan = this.view.turn?.root.plan;
    if (plan) plan.setProgress(items.filter((i) => i.status === 'done').length, items.length);
  }

  /** `figures`: the end frame carried the context figures (a stop or an error does not). */
  endRun({ figures = false } = {}) {
    this.hooks.approvals?.endAll();
    this.hooks.llm?.('idle');
    this.view.turn = null;
    this.hooks.setRunning(false);
    this.hooks.runEnded({ figures });
  }
}

// The frame types drawn here, each by the method of the same name.
const HANDLERS = Object.fromEntries([
  'user_message', 'stream_start', 'thinking_delta', 'thinking_end', 'turn_thinking',
  'planning_status', 'plan_ready', 'tool_started', 'tool_progress', 'tool_call', 'stream_delta', 'stream_retry', 'llm_failed', 'llm_waiting',
  'stream_end', 'stream_stopped', 'error', 'context_compressed', 'profile_switched', 'todo_updated',
  'approval_required', 'approval_decided', 'run_queued', 'run_dequeued',
].map((type) => [type, LiveRenderer.prototype[type]]));

/** The figures under an answer: a stream_end frame's, or a history message's. */
export function runStats(frame) {
  const parts = [];
  if (frame.elapsed_seconds >= 0.05) parts.push(formatSeconds(frame.elapsed_seconds));
  if (frame.tool_call_count) parts.push(`${frame.tool_call_count} tool call${frame.tool_call_count === 1 ? '' : 's'}`);
  if (frame.token_count) parts.push(`${formatCount(frame.token_count)} token${frame.token_count === 1 ? '' : 's'}`);
  return parts;
}
