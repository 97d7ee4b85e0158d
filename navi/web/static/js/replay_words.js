// The Replay view in plain words: what each recorded event means to the person who had
// the chat, the run's state and the timeline's bars. The technical view (event types,
// log seqs, LLM call options) stays one click away (replay.js).

const EVENT_WORDS = {
  'session.created': 'the chat was created',
  'session.pinned': 'the chat was pinned',
  'session.renamed': 'the chat was renamed',
  'session.deleted': 'the chat was deleted',
  'session.model_chosen': 'a model was chosen for the chat',
  'user.message': 'you sent a message',
  'run.started': 'Navi started working',
  'plan.status': 'Navi was planning',
  'plan.ready': 'Navi made a plan',
  'context.injected': 'Navi added a note for the model',
  'llm.requested': 'Navi asked the model',
  'llm.thinking': 'the model was thinking',
  'llm.text': 'the model was writing',
  'llm.tool_calls': 'the model asked for tools',
  'llm.completed': 'the model finished its reply',
  'llm.failed': 'the model’s server failed',
  'llm.waiting': 'the run waited for the model’s server',
  'tool.requested': 'a tool was asked for',
  'tool.started': 'a tool started',
  'tool.progress': 'a tool said how far it got',
  'tool.completed': 'a tool finished',
  'tool.failed': 'a tool failed',
  'tool.approval_requested': 'a tool waited for your approval',
  'tool.approval_decided': 'you decided on a tool',
  'context.compressing': 'Navi was summarising older messages',
  'context.compression_failed': 'summarising older messages failed',
  'context.compressed': 'older messages were summarised',
  'profile.switched': 'the profile was switched',
  'subagent.spawned': 'a helper agent started',
  'subagent.finished': 'a helper agent finished',
  'stop.requested': 'you asked Navi to stop',
  'run.stopped': 'Navi stopped',
  'run.completed': 'Navi finished answering',
  'run.failed': 'the answer failed',
  'todo.updated': 'the task list changed',
  'scratchpad.updated': 'Navi wrote in its notes',
  'note.saved': 'a note was saved',
  'note.deleted': 'a note was deleted',
};

/** What an event type means, in words ("" for none). */
export function eventWords(type) {
  if (!type) return '';
  return EVENT_WORDS[type] || type.replace(/[._]/g, ' ');
}

const RUN_WORDS = {
  idle: 'not working',
  planning: 'planning',
  awaiting_llm: 'waiting for the model',
  streaming: 'the model is writing',
  executing_tools: 'running tools',
  awaiting_approval: 'waiting for your approval',
  answered: 'answered',
  compressing: 'summarising older messages',
  stopping: 'stopping',
  done: 'done',
  compressing_after_run: 'summarising older messages',
  stopped: 'stopped',
  failed: 'failed',
};

export function runStateWords(runState) {
  return RUN_WORDS[runState] || (runState || '').replace(/_/g, ' ');
}

// What the model was asked for, by an LLM call's purpose.
const PURPOSE_WORDS = {
  loop: 'Model answers',
  plan: 'Model plans',
  compress: 'Model summarises',
  memory: 'Model picks out facts',
};

/** A timeline bar's label in words; the server's own label (e.g. "LLM loop · qwen3")
 *  stays in the technical view. */
export function spanWords(span) {
  if (span.kind !== 'llm') return span.label;
  const found = /^LLM (\w+)(?: · (.+))?$/.exec(span.label || '');
  if (!found) return span.label;
  const words = PURPOSE_WORDS[found[1]] || `Model: ${found[1]}`;
  return found[2] ? `${words} · ${found[2]}` : words;
}
