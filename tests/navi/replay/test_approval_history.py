"""What the log tells of approvals (navi/replay/approvals.py) and the timeline's
approval spans: from event timestamps only."""

from __future__ import annotations

from events.envelope import Recorded
from events.types import (
    Event,
    LLMRequested,
    RunStopped,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
)
from navi.replay.approvals import approval_lines, fold_approvals
from navi.server.replay.timeline import _spans_of


def _log(*timed: tuple[float, Event]) -> list[Recorded]:
    return [
        Recorded(stream_id="s", seq=i, position=i, event_id=f"e{i}", timestamp=t, event=e)
        for i, (t, e) in enumerate(timed, start=1)
    ]


def _asked(call: str, at: float) -> list[tuple[float, Event]]:
    return [
        (at, ToolRequested(call_id=call, name="terminal", arguments={"command": "ls"})),
        (at, ToolApprovalRequested(call_id=call, name="terminal", arguments={"command": "ls"})),
    ]


RECORDS = _log(
    (100.0, LLMRequested(purpose="loop")),  # seq 1
    *_asked("a", 101.0),  # 2, 3
    *_asked("b", 101.0),  # 4, 5
    (104.5, ToolApprovalDecided(call_id="a", approved=True, scope="session", by="ann")),  # 6
    (104.6, ToolCompleted(call_id="a", name="terminal", output="ok")),  # 7
    (110.0, ToolApprovalDecided(call_id="b", approved=False, by="bob", reason="no")),  # 8
    (110.0, ToolFailed(call_id="b", name="terminal", error="declined", reason="denied")),  # 9
    (111.0, LLMRequested(purpose="loop")),  # 10
    *_asked("c", 112.0),  # 11, 12
    (130.0, ToolFailed(call_id="c", name="terminal", error="stopped", reason="stopped")),  # 13
    (130.0, RunStopped()),  # 14
    *_asked("d", 140.0),  # 15, 16: still waiting
)


def test_each_request_with_its_decision_who_and_how_long() -> None:
    a, b, c, d = fold_approvals(RECORDS)
    assert (a.outcome, a.scope, a.by, a.waited_s, a.decided_seq) == (
        "approved",
        "session",
        "ann",
        3.5,
        6,
    )
    assert (a.requested_seq, a.llm_request_seq, a.tool) == (3, 1, "terminal")
    assert a.requested_at == "1970-01-01T00:01:41.000+00:00"
    assert (b.outcome, b.by, b.reason, b.waited_s) == ("denied", "bob", "no", 9.0)
    assert (c.outcome, c.reason, c.waited_s, c.llm_request_seq) == ("stopped", "stopped", 18.0, 10)
    assert (d.outcome, d.decided_seq, d.waited_s) == ("pending", None, None)
    # Up to a seq: what was known then.
    assert [v.outcome for v in fold_approvals(RECORDS[:6])] == ["approved", "pending"]


def test_the_text_points_at_the_llm_context_and_the_moment() -> None:
    text = "\n".join(approval_lines("S", fold_approvals(RECORDS)))
    assert "seq 3: terminal (call a, policy: ask)" in text
    # An older log's session scope: the whole tool, as it then meant.
    assert "approved for the session: every terminal call by ann at seq 6, after 3.5 s" in text
    assert "denied by bob at seq 8, after 9 s: no" in text
    assert "stopped while waiting (seq 13, after 18 s)" in text
    assert "waiting for a decision" in text
    assert "navi inspect S --request 1" in text and "navi inspect S --at 3" in text


def test_the_timeline_shows_each_wait_as_a_span() -> None:
    spans, _ = _spans_of(RECORDS, [r.timestamp for r in RECORDS])
    waits = [s for s in spans if s.kind == "approval"]
    assert [(s.label, s.first, s.last, s.duration, s.ok, s.open) for s in waits] == [
        ("approval · terminal · approved (for the session) by ann", 3, 6, 3.5, True, False),
        ("approval · terminal · denied by bob", 5, 8, 9.0, False, False),
        ("approval · terminal", 12, 13, 18.0, False, False),
        ("approval · terminal", 16, 16, 0.0, True, True),
    ]


def test_a_session_scope_shows_exactly_what_was_allowed() -> None:
    write = {"action": "write", "path": "notes.txt", "content": "x"}
    records = _log(
        (100.0, LLMRequested(purpose="loop")),
        (101.0, ToolRequested(call_id="w", name="filesystem", arguments=write)),
        (
            101.0,
            ToolApprovalRequested(
                call_id="w",
                name="filesystem",
                arguments=write,
                summary="Write the file /f/notes.txt",
                asked_by="Navi asks before file changes",
                scope_key="filesystem:write:/f",
                scope_label="Allow file writes in this chat",
            ),
        ),
        (
            102.0,
            ToolApprovalDecided(
                call_id="w",
                approved=True,
                scope="session",
                by="ann",
                scope_key="filesystem:write:/f",
                scope_label="Allow file writes in this chat",
            ),
        ),
    )
    [view] = fold_approvals(records)
    assert (view.scope_key, view.scope_label) == (
        "filesystem:write:/f",
        "Allow file writes in this chat",
    )
    text = "\n".join(approval_lines("S", [view]))
    assert "Write the file /f/notes.txt" in text and "asked by Navi asks before" in text
    assert (
        "approved for the session: Allow file writes in this chat [filesystem:write:/f] by ann"
    ) in text
    spans, _ = _spans_of(records, [r.timestamp for r in records])
    [wait] = [s for s in spans if s.kind == "approval"]
    assert wait.label == "approval · filesystem · approved (Allow file writes in this chat) by ann"
