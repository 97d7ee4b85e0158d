"""Log events → WebSocket frames, in the original Navi's protocol (plus ``seq``).

A ``FrameTranslator`` follows one session's log and turns each event into zero or
more frames. It keeps the little it must remember (the arguments of open tool calls,
whether thinking is streaming, the run's counters) and can be primed with the log up
to a seq, so a client that reconnects with ``after`` gets the same frames it would
have got live.
"""

from __future__ import annotations

from msgspec.structs import replace

from events.envelope import Recorded
from events.types import (
    LLMText,
    LLMThinking,
    LLMToolCalls,
    SubagentFinished,
    SubagentSpawned,
)
from navi.server.frame_table import TABLE, FrameState, approval_required
from navi.server.protocol import DELTAS, Frame
from projections import messages as messages_projection
from projections import waiting as waiting_projection
from projections.waiting import WaitingCall

__all__ = [
    "Frame",
    "FrameTranslator",
    "coalesce",
    "running_subagents",
    "waiting_frame",
]

_CHUNKS = frozenset({LLMText, LLMThinking, LLMToolCalls})


class FrameTranslator:
    """Turns one stream's records into frames through ``frame_table.TABLE``."""

    def __init__(self, *, max_context_tokens: int, is_subagent: bool = False) -> None:
        self._state = FrameState(max_context_tokens=max_context_tokens, is_subagent=is_subagent)

    @property
    def max_context_tokens(self) -> int:
        return self._state.max_context_tokens

    @property
    def is_subagent(self) -> bool:
        return self._state.is_subagent

    def prime(self, records: list[Recorded]) -> None:
        """Take in events the client already has, sending nothing."""
        for record in records:
            self.frames(record)

    def awaiting_frames(self) -> list[Frame]:
        """The ``approval_required`` frames of calls that still wait: sent again to a
        client that connects while they wait (it may have missed them, or lost its page);
        so is a subagent's ``llm_waiting`` while it waits for the model's server."""
        state = self._state
        out = [waiting_frame(call, is_subagent=self.is_subagent) for call in state.waiting]
        if state.is_subagent and state.away is not None:
            out.append(state.away)  # a subagent waits for the model's server: the banner
        return out

    def frames(self, record: Recorded) -> list[Frame]:
        state = self._state
        if type(record.event) not in _CHUNKS:  # chunks never change the message count
            state.messages = messages_projection.evolve(state.messages, record)
            state.waiting = waiting_projection.evolve(state.waiting, record)
        handler = TABLE.get(type(record.event))
        out = handler(state, record, record.event) if handler is not None else []
        for frame in out:
            frame.seq = record.seq
            if state.is_subagent:
                frame.is_subagent = True
                frame.subagent_id = record.stream_id
        return out


def waiting_frame(call: WaitingCall, *, is_subagent: bool) -> Frame:
    """The ``approval_required`` frame of a call that waits, as it was sent live."""
    frame = approval_required(call.request, call.stream_id, is_subagent=is_subagent)
    frame.seq = call.seq
    if is_subagent:
        frame.subagent_id = call.stream_id
    return frame


def running_subagents(records: list[Recorded]) -> list[str]:
    """The child streams of subagents spawned in ``records`` and not finished there."""
    running: dict[str, None] = {}
    for record in records:
        if isinstance(record.event, SubagentSpawned):
            running[record.event.child_stream_id] = None
        elif isinstance(record.event, SubagentFinished):
            running.pop(record.event.child_stream_id, None)
    return list(running)


def coalesce(frames: list[Frame]) -> list[Frame]:
    """Merge runs of consecutive deltas of one kind (and one stream) into one frame
    carrying their text and the last one's seq. Used only when a client lags behind:
    it then gets the same text in fewer WebSocket messages, and ``after=seq`` still
    resumes exactly (every merged event is at or before the seq)."""
    out: list[Frame] = []
    run: list[str] = []  # the texts of the run of deltas that out[-1] starts
    seq: int | None = None
    for frame in frames:
        if run and type(frame) is type(out[-1]) and frame.subagent_id == out[-1].subagent_id:
            run.append(frame.delta)  # type: ignore[attr-defined]
            seq = frame.seq
            continue
        _merge_run(out, run, seq)
        out.append(frame)
        run = [frame.delta] if isinstance(frame, DELTAS) else []
        seq = frame.seq
    _merge_run(out, run, seq)
    return out


def _merge_run(out: list[Frame], run: list[str], seq: int | None) -> None:
    # Joined once at the end of the run: a lagging client's run may hold thousands.
    if len(run) > 1:
        out[-1] = replace(out[-1], delta="".join(run), seq=seq)
