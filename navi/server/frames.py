"""Log events → WebSocket frames, in the original Navi's protocol (plus ``seq``).

A ``FrameTranslator`` follows one session's log and turns each event into zero or
more frames. It keeps the little it must remember (the arguments of open tool calls,
whether thinking is streaming, the run's counters) and can be primed with the log up
to a seq, so a client that reconnects with ``after`` gets the same frames it would
have got live.
"""

from __future__ import annotations

from typing import Any

from events.envelope import Recorded
from events.types import (
    TERMINAL_RUN_EVENTS,
    ContextCompressed,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    PlanReady,
    PlanStatus,
    ProfileSwitched,
    RunCompleted,
    RunFailed,
    RunStarted,
    RunStopped,
    SubagentFinished,
    SubagentSpawned,
    TodoUpdated,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    UserMessage,
)
from projections import messages as messages_projection
from projections.tool_results import shown_images

Frame = dict[str, Any]
_CHUNKS = frozenset({LLMText, LLMThinking, LLMToolCalls})


class FrameTranslator:
    def __init__(self, *, max_context_tokens: int, is_subagent: bool = False) -> None:
        self.max_context_tokens = max_context_tokens
        self.is_subagent = is_subagent
        self._thinking = False
        self._calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self._run_started = 0.0
        self._tool_calls = 0
        self._tokens = 0
        self._context_tokens = 0
        self._messages = messages_projection.INITIAL
        # ``approval_required`` frames of calls still waiting for a decision, by call id.
        self._awaiting: dict[str, Frame] = {}
        self._llm_call = LLMRequested()  # the last one: its purpose, attempt and maximum

    def prime(self, records: list[Recorded]) -> None:
        """Take in events the client already has, sending nothing."""
        for record in records:
            self.frames(record)

    def awaiting_frames(self) -> list[Frame]:
        """The ``approval_required`` frames of calls that still wait: sent again to a
        client that connects while they wait (it may have missed them, or lost its page)."""
        return [dict(frame) for frame in self._awaiting.values()]

    def frames(self, record: Recorded) -> list[Frame]:
        if type(record.event) not in _CHUNKS:  # chunks never change the message count
            self._messages = messages_projection.evolve(self._messages, record)
        if record.type in TERMINAL_RUN_EVENTS:
            self._awaiting.clear()
        out = self._translate(record)
        for frame in out:
            frame["seq"] = record.seq
            if self.is_subagent:
                frame["is_subagent"] = True
                frame["subagent_id"] = record.stream_id
        return out

    def _end_thinking(self, out: list[Frame]) -> None:
        if self._thinking:
            self._thinking = False
            out.append({"type": "thinking_end"})

    def _translate(self, record: Recorded) -> list[Frame]:
        e = record.event
        out: list[Frame] = []
        sub = self.is_subagent
        if isinstance(e, LLMText):
            self._end_thinking(out)
            if not sub:  # a subagent's text is its result, shown in its tool card
                out.append({"type": "stream_delta", "delta": e.text})
            return out
        if isinstance(e, LLMThinking):
            if not sub:
                self._thinking = True
                out.append({"type": "thinking_delta", "delta": e.text})
            return out
        if isinstance(e, LLMToolCalls):
            self._end_thinking(out)
            return out
        if isinstance(e, LLMRequested):
            self._llm_call = e
            if e.purpose == "loop" and e.attempt > 1 and not sub:
                # An interrupted call is asked again: drop the partial answer shown so far.
                self._end_thinking(out)
                out.append(
                    {"type": "stream_retry", "attempt": e.attempt, "max_attempts": e.max_attempts}
                )
            return out
        if isinstance(e, LLMFailed):
            if self._llm_call.purpose == "loop" and not sub:
                self._end_thinking(out)
                out.append(self._llm_failed(e))
            return out
        if isinstance(e, LLMCompleted):
            self._end_thinking(out)
            self._tokens += e.completion_tokens
            self._context_tokens = e.prompt_tokens + e.completion_tokens
            if sub and e.thinking:
                out.append({"type": "turn_thinking", "thinking": e.thinking, "is_subagent": True})
            return out
        if isinstance(e, ToolRequested):
            self._calls[e.call_id] = (e.name, e.arguments)
            self._tool_calls += 1
            out.append(
                {
                    "type": "tool_started",
                    "tool": e.name,
                    "args": e.arguments,
                    "is_subagent": sub,
                    "call_id": e.call_id,
                }
            )
            return out
        if isinstance(e, ToolApprovalRequested):
            waiting = approval_required(e, record.stream_id, is_subagent=sub)
            self._awaiting[e.call_id] = waiting
            out.append(waiting)
            return out
        if isinstance(e, ToolApprovalDecided):
            self._awaiting.pop(e.call_id, None)
            out.append(
                {
                    "type": "approval_decided",
                    "call_id": e.call_id,
                    "stream_id": record.stream_id,
                    "approved": e.approved,
                    "scope": e.scope,
                    "scope_label": e.scope_label,
                    "by": e.by,
                    "reason": e.reason,
                    "is_subagent": sub,
                }
            )
            return out
        if isinstance(e, ToolCompleted | ToolFailed):
            self._awaiting.pop(e.call_id, None)  # a stop ended the wait
            name, args = self._calls.pop(e.call_id, (e.name, {}))
            ok = isinstance(e, ToolCompleted) and e.success
            result = e.output if isinstance(e, ToolCompleted) else e.error
            frame: Frame = {
                "type": "tool_call",
                "tool": name,
                "args": args,
                "result": result,
                "success": ok,
                "is_subagent": sub,
                "call_id": e.call_id,
            }
            if isinstance(e, ToolFailed):
                frame["reason"] = e.reason
            if isinstance(e, ToolCompleted) and e.metadata.get("is_image"):
                frame["is_image"] = True
                # The image as the user sees it: a reference to the blob store.
                if images := shown_images(e):
                    frame["images"] = list(images)
            out.append(frame)
            return out
        if isinstance(e, RunStarted):
            self._run_started = record.timestamp
            self._tool_calls = 0
            self._tokens = 0
            if not sub:
                out.append({"type": "stream_start", "run_id": record.run_id})
            return out
        if isinstance(e, UserMessage):
            if not sub:
                out.append(
                    {
                        "type": "user_message",
                        "content": e.text,
                        "images": list(e.images),
                        "files": [{"name": f.name, "path": f.path} for f in e.files],
                    }
                )
            return out
        if isinstance(e, PlanStatus):
            out.append(
                {"type": "planning_status", "phase": e.phase, "label": e.label, "is_subagent": sub}
            )
            return out
        if isinstance(e, PlanReady):
            out.append({"type": "plan_ready", "plan": e.plan, "is_subagent": sub})
            return out
        if isinstance(e, TodoUpdated):
            items = [{"id": i.id, "text": i.text, "status": i.status} for i in e.items]
            out.append({"type": "todo_updated", "items": items, "is_subagent": sub})
            return out
        if isinstance(e, ProfileSwitched):
            out.append(
                {
                    "type": "profile_switched",
                    "profile_id": e.profile_id,
                    "profile_name": e.profile_name,
                }
            )
            return out
        if isinstance(e, ContextCompressed):
            out.append(
                {
                    "type": "context_compressed",
                    "messages_before": e.messages_before,
                    "messages_after": e.messages_after,
                }
            )
            return out
        if isinstance(e, SubagentSpawned | SubagentFinished):
            return out  # the server follows the child stream itself
        if sub:
            return out  # a subagent's run ends inside its parent's tool call
        if isinstance(e, RunCompleted):
            self._end_thinking(out)
            out.append(self._stream_end(record, e.content, e.completed_normally))
            return out
        if isinstance(e, RunStopped):
            self._end_thinking(out)
            out.append({"type": "stream_stopped"})
            return out
        if isinstance(e, RunFailed):
            self._end_thinking(out)
            out.append({"type": "error", "message": e.error, "fatal": True})
            # Clients of the original unlock their input at stream_end.
            out.append(self._stream_end(record, "", False))
            return out
        return out

    def _llm_failed(self, e: LLMFailed) -> Frame:
        """An attempt failed; ``retrying``: another follows after a back-off (else the
        run fails, and an ``error`` frame says so)."""
        call = self._llm_call
        left = call.max_attempts == 0 or call.attempt < call.max_attempts
        return {
            "type": "llm_failed",
            "error": e.error,
            "attempt": call.attempt,
            "max_attempts": call.max_attempts,
            "retrying": e.retryable and left,
        }

    def _stream_end(self, record: Recorded, content: str, normally: bool) -> Frame:
        count = len(self._messages.messages(with_streaming=False))
        return {
            "type": "stream_end",
            "content": content,
            "context_tokens": self._context_tokens,
            "max_context_tokens": self.max_context_tokens,
            "elapsed_seconds": round(max(0.0, record.timestamp - self._run_started), 3),
            "tool_call_count": self._tool_calls,
            "token_count": self._tokens,
            "message_index": max(0, count - 1),
            "completed_normally": normally,
        }


def approval_required(e: ToolApprovalRequested, stream_id: str, *, is_subagent: bool) -> Frame:
    """A waiting call as a client shows it and answers it: ``call_id`` and ``stream_id``
    name it in a decision; ``summary``, ``target``, ``risk`` and ``asked_by`` say what it
    does, where, and who asked; ``session_scope`` (``{"key", "label"}``, or null: it can
    only be approved once) what "for this session" would approve. A request of an older
    log (described by nothing but its tool) offered the whole tool, as it then did."""
    described = bool(e.asked_by or e.scope_key or e.once_only)
    scope: dict[str, str] | None = None
    if e.scope_key:
        scope = {"key": e.scope_key, "label": e.scope_label}
    elif not described:
        scope = {"key": e.name, "label": f"Allow every {e.name} call in this chat"}
    return {
        "type": "approval_required",
        "call_id": e.call_id,
        "stream_id": stream_id,
        "tool": e.name,
        "args": e.arguments,
        "policy": e.policy,
        "summary": e.summary or f"Run the tool {e.name} with the arguments shown",
        "target": e.target or e.name,
        "risk": e.risk,
        "asked_by": e.asked_by or e.policy,
        "session_scope": scope,
        "is_subagent": is_subagent,
    }


def running_subagents(records: list[Recorded]) -> list[str]:
    """The child streams of subagents spawned in ``records`` and not finished there."""
    running: dict[str, None] = {}
    for record in records:
        if isinstance(record.event, SubagentSpawned):
            running[record.event.child_stream_id] = None
        elif isinstance(record.event, SubagentFinished):
            running.pop(record.event.child_stream_id, None)
    return list(running)


_DELTAS = frozenset({"stream_delta", "thinking_delta"})


def coalesce(frames: list[Frame]) -> list[Frame]:
    """Merge runs of consecutive deltas of one kind (and one stream) into one frame
    carrying their text and the last one's seq. Used only when a client lags behind:
    it then gets the same text in fewer WebSocket messages, and ``after=seq`` still
    resumes exactly (every merged event is at or before the seq)."""
    out: list[Frame] = []
    run: list[str] = []  # the texts of the run of deltas that out[-1] starts
    seq = 0
    for frame in frames:
        if (
            run
            and frame["type"] == out[-1]["type"]
            and frame.get("subagent_id") == out[-1].get("subagent_id")
        ):
            run.append(frame["delta"])
            seq = frame["seq"]
            continue
        _merge_run(out, run, seq)
        out.append(frame)
        run = [frame["delta"]] if frame["type"] in _DELTAS else []
        seq = frame.get("seq", 0)
    _merge_run(out, run, seq)
    return out


def _merge_run(out: list[Frame], run: list[str], seq: int) -> None:
    # Joined once at the end of the run: a lagging client's run may hold thousands.
    if len(run) > 1:
        out[-1] = {**out[-1], "delta": "".join(run), "seq": seq}
