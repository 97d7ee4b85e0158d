"""A small log whose frames are every kind the log makes that the golden logs lack:
retries and a failed LLM call, approvals of both kinds (decided, denied, still waiting),
a tool's image, a subagent's thinking and its own approval and profile switch, and a
failed run."""

from __future__ import annotations

from events.envelope import Recorded
from events.types import (
    Event,
    ImageRef,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    LLMText,
    LLMThinking,
    ProfileSwitched,
    RunFailed,
    RunStarted,
    SubagentSpawned,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    UserMessage,
)

SESSION = "00000000-0000-4000-8000-0000000000b1"
CHILD = "00000000-0000-4000-8000-0000000000b2"
RUN = "00000000-0000-7000-8000-0000000000c1"
IMAGE = ImageRef(sha256="a" * 64, size=67, media_type="image/png")

WRITE = ToolApprovalRequested(
    call_id="call-2",
    name="filesystem",
    arguments={"action": "write", "path": "notes.txt"},
    policy="ask",
    summary="Write the file notes.txt",
    target="notes.txt",
    risk="changes a file",
    asked_by="Navi asks before file changes",
    scope_key="filesystem:write",
    scope_label="Allow file writes in this chat",
)

SESSION_EVENTS: list[Event] = [
    UserMessage(text="look at this", images=(IMAGE, "aW1n")),
    RunStarted(profile_id="general"),
    LLMRequested(attempt=1, max_attempts=3),
    LLMThinking(text="hmm"),
    LLMFailed(error="connection reset", retryable=True),
    LLMRequested(attempt=2, max_attempts=3),
    LLMText(text="Let me "),
    LLMCompleted(content="Let me ", prompt_tokens=40, completion_tokens=3),
    ToolRequested(call_id="call-1", name="image_view", arguments={"path": "a.png"}),
    ToolCompleted(
        call_id="call-1",
        name="image_view",
        output="an image",
        metadata={"is_image": True, "image": {"sha256": "a" * 64, "size": 67}},
    ),
    ToolRequested(call_id="call-2", name="filesystem", arguments=WRITE.arguments),
    WRITE,
    ToolApprovalDecided(
        call_id="call-2",
        approved=True,
        scope="session",
        by="local",
        scope_key=WRITE.scope_key,
        scope_label=WRITE.scope_label,
    ),
    ToolCompleted(call_id="call-2", name="filesystem", output="written"),
    ToolRequested(call_id="call-3", name="code_exec", arguments={"code": "1"}),
    ToolApprovalRequested(call_id="call-3", name="code_exec", arguments={"code": "1"}),
    ToolApprovalDecided(call_id="call-3", approved=False, by="local", reason="no"),
    ToolFailed(call_id="call-3", name="code_exec", reason="denied", error="denied: no"),
    ToolRequested(call_id="call-4", name="spawn_agent", arguments={"task": "t"}),
    SubagentSpawned(child_stream_id=CHILD, call_id="call-4", task="t"),
    RunFailed(error="the LLM server went away"),
    UserMessage(text="again"),
    RunStarted(profile_id="general"),
    LLMRequested(),
    LLMCompleted(prompt_tokens=50, completion_tokens=1),
    ToolRequested(call_id="call-5", name="web_fetch", arguments={"url": "x"}),
    # An older log's request (no description), left waiting: sent again on connect.
    ToolApprovalRequested(call_id="call-5", name="web_fetch", arguments={"url": "x"}),
]

CHILD_EVENTS: list[Event] = [
    RunStarted(profile_id="researcher"),
    LLMRequested(),
    LLMCompleted(thinking="think small", prompt_tokens=5, completion_tokens=2),
    ProfileSwitched(profile_id="coder", profile_name="Coder"),
    ToolRequested(call_id="call-x", name="terminal", arguments={"cmd": "ls"}),
    ToolApprovalRequested(
        call_id="call-x", name="terminal", arguments={"cmd": "ls"}, once_only=True
    ),
]


def _records(stream_id: str, events: list[Event], start: float) -> list[Recorded]:
    return [
        Recorded(
            stream_id=stream_id,
            seq=seq,
            position=seq,
            event_id=f"{stream_id}-{seq}",
            timestamp=start + seq / 4,
            event=event,
            run_id=None if seq == 1 and stream_id == SESSION else RUN,
        )
        for seq, event in enumerate(events, start=1)
    ]


STREAMS: dict[str, list[Recorded]] = {
    SESSION: _records(SESSION, SESSION_EVENTS, 1_700_000_000.0),
    CHILD: _records(CHILD, CHILD_EVENTS, 1_700_000_005.0),
}
