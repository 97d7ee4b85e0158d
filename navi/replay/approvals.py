"""The approvals of a session, as the log tells them (``navi inspect SESSION
--approvals``): each ``tool.approval_requested`` with the LLM call that asked for the
tool, the decision (``tool.approval_decided``, or the ``tool.failed`` of a stop that
ended the wait), who decided, and how long the call waited.

Built from the events alone — the wait is the decision's timestamp minus the
request's, never the clock of the machine that reads the log — so it reads the same
on any copy of the log, today or in a year.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.store import EventStore
from events.types import LLMRequested, ToolApprovalDecided, ToolApprovalRequested, ToolFailed
from navi.replay.events_query import iter_events
from projections.types import iso_time

# The events an approval's story is made of (llm.requested: the call that asked).
TYPES = ["llm.requested", "tool.approval_requested", "tool.approval_decided", "tool.failed"]


class ApprovalView(msgspec.Struct, frozen=True, kw_only=True):
    """One request and what became of it. ``outcome``: ``pending``, ``approved``,
    ``denied`` (``by`` ``navi`` with reason ``timeout``: nobody answered in time) or
    ``stopped`` (the run was stopped while the call waited)."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    policy: str
    # What the person was shown (empty in older logs): the call in a sentence, who
    # asked, and what "for this session" would approve.
    summary: str = ""
    asked_by: str = ""
    offered_scope: str = ""
    requested_seq: int
    requested_at: str
    # The LLM call whose answer asked for the tool: its messages are the context the
    # LLM had (navi inspect SESSION --request SEQ).
    llm_request_seq: int | None
    outcome: str = "pending"
    decided_seq: int | None = None
    decided_at: str | None = None
    scope: str = ""
    # What a session scope approved: its key and label (older logs: the whole tool).
    scope_key: str = ""
    scope_label: str = ""
    by: str = ""
    reason: str = ""
    waited_s: float | None = None  # from the request to the decision (or the stop)
    imported: bool = False  # decided in the log an import brought: it approves nothing here


def fold_approvals(records: Iterable[Recorded]) -> list[ApprovalView]:
    """The approvals told by ``records`` (a session's history, in order), oldest first."""
    found: dict[str, ApprovalView] = {}
    asked_at: dict[str, float] = {}
    last_llm: int | None = None
    for record in records:
        e = record.event
        if isinstance(e, LLMRequested):
            if e.purpose == "loop":  # plan and compress calls never ask for tools
                last_llm = record.seq
        elif isinstance(e, ToolApprovalRequested):
            asked_at[e.call_id] = record.timestamp
            found[e.call_id] = ApprovalView(
                call_id=e.call_id,
                tool=e.name,
                arguments=e.arguments,
                policy=e.policy,
                summary=e.summary,
                asked_by=e.asked_by,
                offered_scope=e.scope_label,
                requested_seq=record.seq,
                requested_at=iso_time(record.timestamp),
                llm_request_seq=last_llm,
            )
        elif isinstance(e, ToolApprovalDecided | ToolFailed):
            view = found.get(e.call_id)
            if view is None or view.outcome != "pending":
                continue  # not an approval, or a denied call's own tool.failed
            if isinstance(e, ToolApprovalDecided):
                outcome = "approved" if e.approved else "denied"
                decision: dict[str, Any] = {
                    "scope": e.scope,
                    "scope_key": e.scope_key,
                    "scope_label": e.scope_label,
                    "by": e.by,
                    "reason": e.reason,
                    "imported": e.imported,
                }
            else:
                outcome, decision = "stopped", {"reason": e.reason}
            found[e.call_id] = replace(
                view,
                outcome=outcome,
                decided_seq=record.seq,
                decided_at=iso_time(record.timestamp),
                waited_s=round(max(0.0, record.timestamp - asked_at[e.call_id]), 3),
                **decision,
            )
    return list(found.values())


async def approvals(
    store: EventStore, session_id: str, *, to_seq: int | None = None
) -> list[ApprovalView]:
    """The approvals of ``session_id``'s history (up to ``to_seq``)."""
    records = [
        record
        async for record in iter_events(store, session_id, types=TYPES)
        if to_seq is None or record.seq <= to_seq
    ]
    return fold_approvals(records)


def approval_lines(session_id: str, views: list[ApprovalView], indent: str = "  ") -> list[str]:
    """``navi inspect``'s text for them."""
    lines = []
    for v in views:
        args = msgspec.json.encode(v.arguments).decode()
        args = args if len(args) <= 160 else args[:159] + "…"
        lines += [
            f"{indent}seq {v.requested_seq}: {v.tool} (call {v.call_id}, policy: {v.policy}) {args}",
            *([f"{indent}    {v.summary}"] if v.summary else []),
            *([f"{indent}    asked by {v.asked_by}"] if v.asked_by else []),
            f"{indent}    {_decision(v)}",
            f"{indent}    asked {v.requested_at}; the session then: "
            f"navi inspect {session_id} --at {v.requested_seq}",
        ]
        if v.llm_request_seq is not None:
            lines.append(
                f"{indent}    the LLM's context when it asked: "
                f"navi inspect {session_id} --request {v.llm_request_seq}"
            )
    return lines


def _decision(v: ApprovalView) -> str:
    if v.outcome == "pending":
        return "waiting for a decision"
    waited = f"after {v.waited_s:g} s" if v.waited_s is not None else ""
    if v.outcome == "stopped":
        return f"stopped while waiting (seq {v.decided_seq}, {waited})"
    scope = ""
    if v.outcome == "approved" and v.scope == "session":
        # Exactly what was allowed: the scope's label and key; older logs, the whole tool.
        scope = (
            f" for the session: {v.scope_label} [{v.scope_key}]"
            if v.scope_key
            else f" for the session: every {v.tool} call"
        )
    reason = f": {v.reason}" if v.reason else ""
    where = " (in the imported log)" if v.imported else ""
    return f"{v.outcome}{scope} by {v.by or '?'}{where} at seq {v.decided_seq}, {waited}{reason}"
