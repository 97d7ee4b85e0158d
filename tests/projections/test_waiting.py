"""The one fold of which calls wait for a person (projections/waiting.py), and the views
that read it agreeing: the frames sent on connect, the REST list's frames, the sessions
list's count."""

from __future__ import annotations

from events.envelope import Recorded
from events.types import (
    Event,
    LLMText,
    RunCompleted,
    RunStopped,
    SessionCreated,
    SubagentFinished,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
)
from navi.server.frames import FrameTranslator
from projections import sessions, waiting
from projections.fold import fold

ROOT = "00000000-0000-4000-8000-000000000001"
CHILD = "00000000-0000-4000-8000-000000000002"


class Log:
    def __init__(self) -> None:
        self.records: list[Recorded] = []
        self.seqs: dict[str, int] = {}

    def add(self, stream: str, event: Event) -> Recorded:
        seq = self.seqs[stream] = self.seqs.get(stream, 0) + 1
        record = Recorded(
            stream_id=stream,
            seq=seq,
            position=len(self.records) + 1,
            event_id=f"e{len(self.records)}",
            timestamp=1_700_000_000.0 + len(self.records),
            event=event,
        )
        self.records.append(record)
        return record


def ask(call_id: str) -> ToolApprovalRequested:
    return ToolApprovalRequested(call_id=call_id, name="code_exec")


def keys(calls: waiting.Waiting) -> list[tuple[str, str]]:
    return [(call.stream_id, call.call_id) for call in calls]


def test_a_call_waits_until_its_own_stream_ends_it() -> None:
    log = Log()
    log.add(ROOT, ask("c1"))
    log.add(CHILD, ask("c1"))  # the same call id in another stream is another call
    log.add(ROOT, ask("c2"))
    assert keys(waiting.fold(log.records)) == [(ROOT, "c1"), (CHILD, "c1"), (ROOT, "c2")]
    log.add(ROOT, ToolApprovalDecided(call_id="c1", approved=True))
    log.add(ROOT, ToolFailed(call_id="c2", name="code_exec", reason="stopped"))
    assert keys(waiting.fold(log.records)) == [(CHILD, "c1")]
    log.add(ROOT, SubagentFinished(child_stream_id=CHILD, call_id="spawn"))
    assert waiting.fold(log.records) == ()


def test_a_runs_end_ends_its_streams_waits_and_the_roots_ends_all() -> None:
    log = Log()
    log.add(ROOT, ask("a"))
    log.add(CHILD, ask("b"))
    log.add(CHILD, RunCompleted())
    assert keys(waiting.fold(log.records, root=ROOT)) == [(ROOT, "a")]
    log.add(CHILD, ask("c"))
    log.add(ROOT, RunStopped())
    assert waiting.fold(log.records, root=ROOT) == ()
    # Without a root, a stream's run end is that stream's alone.
    assert keys(waiting.fold(log.records)) == [(CHILD, "c")]


def test_an_event_that_changes_nothing_gives_the_same_state_back() -> None:
    log = Log()
    state = waiting.fold([log.add(ROOT, ask("a"))])
    for event in (
        LLMText(text="x"),
        ToolCompleted(call_id="other", name="t", output=""),
        RunCompleted(),
    ):
        assert waiting.evolve(state, log.add(CHILD, event), root=ROOT) is state


def test_the_frames_the_rest_list_and_the_sessions_list_agree() -> None:
    log = Log()
    log.add(ROOT, SessionCreated(profile_id="p", user_id="u"))
    asked = log.add(ROOT, ask("a"))
    log.add(ROOT, ask("b"))
    log.add(ROOT, ToolApprovalDecided(call_id="b", approved=False))
    calls = waiting.fold(log.records, root=ROOT)
    translator = FrameTranslator(max_context_tokens=0)
    translator.prime(log.records)
    (frame,) = translator.awaiting_frames()
    assert (frame.call_id, frame.stream_id, frame.seq) == ("a", ROOT, asked.seq)  # type: ignore[attr-defined]
    assert keys(calls) == [(ROOT, "a")]
    listed = fold(sessions.SESSIONS, log.records).get(ROOT)
    assert listed is not None and listed.pending_approvals == len(calls) == 1
