"""Which tool calls wait for a person's decision: the one fold of it.

The WebSocket's ``approval_required`` frames (sent again to a client that connects
while a call waits), ``GET /sessions/{id}/approvals``, replay and the sessions list's
``pending_approvals`` all read it here.

A call waits from its ``tool.approval_requested`` until, in the same stream, its
``tool.approval_decided``, ``tool.completed`` or ``tool.failed`` (a stop ends the wait
with one), or the end of that stream's run (``run.completed`` / ``run.stopped`` /
``run.failed``), or the ``subagent.finished`` that ends the subagent whose stream it is.
The end of the top-level session's run (``root``) ends the waits of its whole tree.

Records of several streams (a session and its subagents) fold into one state, in the
order they were written. The state is a tuple, oldest request first: an event that
changes nothing gives back the very same tuple, so a caller can tell with ``is``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import msgspec

from events.envelope import Recorded
from events.types import (
    RunCompleted,
    RunFailed,
    RunStopped,
    SubagentFinished,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
)


class WaitingCall(msgspec.Struct, frozen=True, kw_only=True):
    """A call that waits: where (its stream), since which event, and the request."""

    stream_id: str
    seq: int
    request: ToolApprovalRequested

    @property
    def call_id(self) -> str:
        return self.request.call_id


Waiting = tuple[WaitingCall, ...]
NONE: Waiting = ()

_ENDS_ONE = (ToolApprovalDecided, ToolCompleted, ToolFailed)
_ENDS_RUN = (RunCompleted, RunStopped, RunFailed)


def evolve(waiting: Waiting, record: Recorded, *, root: str | None = None) -> Waiting:
    """``waiting`` after ``record``; ``root``: the top-level session's stream id."""
    event = record.event
    if isinstance(event, ToolApprovalRequested):
        call = WaitingCall(stream_id=record.stream_id, seq=record.seq, request=event)
        return (*_without(waiting, record.stream_id, event.call_id), call)
    if not waiting:
        return waiting
    if isinstance(event, _ENDS_ONE):
        return _without(waiting, record.stream_id, event.call_id)
    if isinstance(event, _ENDS_RUN):
        if record.stream_id == root:
            return NONE  # the session's run ends its subagents' too
        return _kept(waiting, lambda call: call.stream_id != record.stream_id)
    if isinstance(event, SubagentFinished):
        child = event.child_stream_id
        return _kept(waiting, lambda call: call.stream_id != child)
    return waiting


def fold(
    records: Iterable[Recorded], waiting: Waiting = NONE, *, root: str | None = None
) -> Waiting:
    for record in records:
        waiting = evolve(waiting, record, root=root)
    return waiting


def _without(waiting: Waiting, stream_id: str, call_id: str) -> Waiting:
    return _kept(waiting, lambda call: call.stream_id != stream_id or call.call_id != call_id)


def _kept(waiting: Waiting, keep: Callable[[WaitingCall], bool]) -> Waiting:
    kept = tuple(call for call in waiting if keep(call))
    return waiting if len(kept) == len(waiting) else kept
