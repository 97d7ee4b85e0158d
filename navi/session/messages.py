"""What a session actor's mailbox takes. Each is a plain request; the actor decides."""

from __future__ import annotations

from dataclasses import dataclass

from events.types import CallOptions, FileRef, RunMode


@dataclass(frozen=True)
class Create:
    profile_id: str
    user_id: str = "local"
    title: str = ""
    parent_stream_id: str | None = None
    parent_call_id: str | None = None
    origin: str = ""  # SessionCreated.origin


@dataclass(frozen=True)
class Send:
    """A user message. ``queue``: run it after the active run instead of refusing it."""

    text: str
    images: tuple[str, ...] = ()
    files: tuple[FileRef, ...] = ()
    mode: RunMode = "stream"
    queue: bool = False
    # The run's id, when the sender fixed it (navi/cluster: the durable inbox row's id,
    # so a redelivered message is recognised in the log).
    run_id: str | None = None
    # What the caller asks of the run's LLM calls (/v1), recorded in run.started.
    call_options: CallOptions | None = None


@dataclass(frozen=True)
class StopRun:
    reason: str = "user"


@dataclass(frozen=True)
class SwitchProfile:
    profile_id: str


@dataclass(frozen=True)
class ChooseModel:
    model: str  # "": the profile's


@dataclass(frozen=True)
class Pin:
    pinned: bool | None = None  # None toggles


@dataclass(frozen=True)
class Rename:
    title: str


@dataclass(frozen=True)
class Delete:
    pass


@dataclass(frozen=True)
class RunStartedReply:
    """What ``Send`` answers: the run's id and the seq just before its first event."""

    run_id: str
    after_seq: int
    queued: bool = False


@dataclass(frozen=True)
class Refusal:
    """The answer to a request the session refused; the asker raises ``error``."""

    error: Exception


@dataclass(frozen=True)
class Drive:
    """A run or job child's one message: do the work to its end."""

    resumed: bool = False


@dataclass(frozen=True)
class SpawnSubagent:
    """To a parent session: start (or find) the session actor of subagent stream
    ``child_id`` as a child actor. Answers its ``ActorRef``."""

    child_id: str


@dataclass(frozen=True)
class StartSubtask:
    """To a subagent session: be created for ``task`` if not yet, then run it (or go on
    with the run a crash interrupted). Answers a ``SubtaskStarted``."""

    task: str
    profile_id: str
    parent_stream_id: str
    parent_call_id: str
    user_id: str = "local"


@dataclass(frozen=True)
class SubtaskStarted:
    """The subagent's run: its id and the seq before its ``run.started``; ``ended`` is
    the seq of its terminal event if it had already ended."""

    run_id: str
    after_seq: int
    ended_seq: int | None = None


@dataclass(frozen=True)
class Recompress:
    """Summarise the latest compressed range again (or compress now), at rest."""

    model: str | None = None


@dataclass(frozen=True)
class Decide:
    """A person's answer to a tool call waiting for approval (``tool.approval_decided``).
    Sent to the top-level session; a subagent's call is found in its running children.
    Answers the stream id of the session whose call it was."""

    call_id: str
    approved: bool
    scope: str = "once"  # "once" | "session"
    by: str = ""
    reason: str = ""
    # The stream where the call waits (the session's, or a subagent's); "": the one
    # waiting call of the session's tree with that id, if only one has it.
    stream_id: str = ""


@dataclass(frozen=True)
class WaitingOn:
    """Which streams of this session's tree have a call ``call_id`` waiting for a
    decision (a tuple of stream ids): how a decision without a stream id is checked to
    name exactly one call."""

    call_id: str


@dataclass(frozen=True)
class TryAgain:
    """Go on now with a run that waits for the model's server (``waiting_for_llm``), in
    this session or its running subagents. Answers True; refused if none waits."""
