"""The ``sessions`` projection: the session list, folded from the global log (all streams).

One ``SessionSummary`` per session stream (a stream that starts with ``session.created``):

- ``title``: ``session.created``'s title, else the first user message cut to 60
  characters; ``session.renamed`` sets it for good.
- ``profile_id`` follows ``profile.switched``; ``pinned`` follows ``session.pinned``;
  ``model`` follows ``session.model_chosen`` (the chat's model picker);
  ``deleted`` is set by ``session.deleted`` (the list leaves it out; the log keeps it).
- ``message_count`` counts what the ``messages`` projection shows (a test checks they
  agree); ``preview`` is the last 60 characters (white space collapsed) of the last user
  or assistant message with text. A stopped answer's partial text counts as a message
  but does not change the preview (that would rewrite the list on every chunk); so does
  the partial answer a retry superseded, when it is the one kept, and the message that
  carries a run's end when its last message is not an answer.
- ``last_active`` is the time of the stream's last event, not counting chunks (a
  boundary event always follows them) and the bookkeeping events ``session.pinned``,
  ``session.renamed``, ``session.deleted``, ``note.*``.
- ``context_token_count``: prompt + completion tokens of the last tool-loop
  ``llm.completed``; 0 after a compression, as in the original Navi (the ``context``
  projection of the session has a better estimate).
- ``pending_approvals``: how many tool calls wait for a person's decision, in the
  session's run and in its subagents' (the ``waiting`` projection): the web client
  marks such a session in its list, including one that is not open.

Subagent streams (``session.created`` with ``parent_stream_id``) are not listed; their
approval events count in their top-level session's ``pending_approvals`` (nothing else
of theirs does). Events of streams that never had ``session.created`` are ignored.

One bad record never breaks the list (it is every user's): an event the fold cannot take
(a time no calendar has, such as ``1e300``, or a stored payload that cannot be decoded,
which the log hands over as ``Unreadable``) leaves the summary as it was, with
``error`` saying which event is damaged; that session's own views report it, the others
never see it. A damaged ``session.created`` still lists its session, with empty times
(an unreadable one cannot say whose session it is: that stream is not listed).

The state is persistent (``rpds.HashTrieMap``, a hash array mapped trie): an event
makes a new state that shares all but the changed session's path with the old one, so
applying an event costs O(log n), not a copy of every session, and an old state never
changes. ``by_user`` indexes the live (not deleted) sessions of each user: a user's
list and count cost what their own sessions cost, whoever else has thousands.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import msgspec
from msgspec.structs import replace
from rpds import HashTrieMap, HashTrieSet

from events.envelope import Recorded
from events.types import (
    Chunk,
    ContextCompressed,
    LLMCompleted,
    LLMRequested,
    LLMText,
    LLMThinking,
    PlanReady,
    ProfileSwitched,
    RunCompleted,
    RunFailed,
    RunStopped,
    SessionCreated,
    SessionDeleted,
    SessionModelChosen,
    SessionPinned,
    SessionRenamed,
    ToolCompleted,
    ToolFailed,
    Unreadable,
    UserMessage,
)
from projections import waiting
from projections.fold import Projection
from projections.types import iso_time

TITLE_LENGTH = 60
PREVIEW_LENGTH = 60

# Events that are bookkeeping, not activity: they do not move ``last_active``.
_NOT_ACTIVITY: frozenset[str] = frozenset(
    {
        "session.pinned",
        "session.renamed",
        "session.deleted",
        "session.model_chosen",
        "note.saved",
        "note.deleted",
    }
)


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    session_id: str
    profile_id: str
    user_id: str
    title: str
    pinned: bool
    created_at: str
    last_active: str
    message_count: int
    preview: str
    context_token_count: int
    forked_from: str | None = None
    forked_at_seq: int | None = None
    model: str = ""  # the chat's model picker (session.model_chosen); "": the profile's
    pending_approvals: int = 0  # tool calls waiting for a person (here or in a subagent)
    origin: str = ""  # SessionCreated.origin: "", "cli" or "api"
    deleted: bool = False
    error: str | None = None  # the first event of the session the fold could not take


class SessionEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A summary and what the fold needs to keep it up to date."""

    summary: SessionSummary
    last_active_ts: float
    title_fixed: bool  # set by session.created or session.renamed: messages do not change it
    llm_purpose: str = "loop"
    has_partial: bool = False  # a tool-loop answer is being streamed
    had_partial: bool = False  # a retry superseded a partial answer (messages keeps it aside)
    run_answered: bool = False  # a tool-loop llm.completed came in the run going on
    answer_last: bool = False  # the last message shown is the model's answer
    # The calls waiting for a person (subagents' included).
    awaiting: waiting.Waiting = waiting.NONE
    # A fork's seqs 2..copied_to are its origin's events (navi/replay/fork.py).
    copied_to: int = 0


class SessionsState(msgspec.Struct, frozen=True, kw_only=True):
    # Persistent maps (see the module doc): ``insert`` makes a new map, never changes one.
    entries: HashTrieMap[str, SessionEntry] = msgspec.field(default_factory=HashTrieMap)
    subagent_streams: HashTrieSet[str] = msgspec.field(default_factory=HashTrieSet)
    # A subagent's stream → its top-level session (whose approvals it asks for).
    roots: HashTrieMap[str, str] = msgspec.field(default_factory=HashTrieMap)
    damaged: frozenset[str] = frozenset()  # sessions with an ``error``
    # A user → the ids of their sessions not deleted.
    by_user: HashTrieMap[str, HashTrieSet[str]] = msgspec.field(default_factory=HashTrieMap)

    def get(self, session_id: str) -> SessionSummary | None:
        entry = self.entries.get(session_id)
        return None if entry is None else entry.summary

    def listing(self) -> list[SessionSummary]:
        """Sessions not deleted: pinned first, then the most recently active first."""
        live = [entry for entry in self.entries.values() if not entry.summary.deleted]
        return _ordered(live)

    def listing_of(self, user_id: str) -> list[SessionSummary]:
        """``listing()`` of one user's sessions, at the cost of theirs alone."""
        ids = self.by_user.get(user_id, HashTrieSet())
        return _ordered([self.entries[session_id] for session_id in ids])

    def count_of(self, user_id: str) -> int:
        """How many sessions the user has, not counting the deleted ones."""
        return len(self.by_user.get(user_id, ()))


def _ordered(entries: list[SessionEntry]) -> list[SessionSummary]:
    entries.sort(key=lambda e: (not e.summary.pinned, -e.last_active_ts, e.summary.session_id))
    return [entry.summary for entry in entries]


def _with_entry(state: SessionsState, session_id: str, entry: SessionEntry) -> SessionsState:
    """The state with the session's entry set, and its owner's live sessions kept in step."""
    before = state.entries.get(session_id)
    entries = state.entries.insert(session_id, entry)
    was_live = before is not None and not before.summary.deleted
    live = not entry.summary.deleted
    if was_live == live:
        return replace(state, entries=entries)
    user = entry.summary.user_id
    own: HashTrieSet[str] = state.by_user.get(user, HashTrieSet())
    own = own.insert(session_id) if live else own.discard(session_id)
    by_user = state.by_user.insert(user, own) if own else state.by_user.discard(user)
    return replace(state, entries=entries, by_user=by_user)


def cut_title(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= TITLE_LENGTH else text[: TITLE_LENGTH - 1].rstrip() + "…"


def preview_of(text: str) -> str:
    return " ".join(text.split())[-PREVIEW_LENGTH:]


def _counted(entry: SessionEntry, text: str) -> SessionEntry:
    """One more message; ``text`` (if any) becomes the preview."""
    summary = entry.summary
    preview = preview_of(text) if text.strip() else summary.preview
    return replace(
        entry,
        summary=replace(summary, message_count=summary.message_count + 1, preview=preview),
    )


def _approval_event(entry: SessionEntry, record: Recorded) -> SessionEntry:
    """A call of ``record``'s stream (the session's or a subagent's) starts or stops
    waiting for a person (projections/waiting.py says when)."""
    awaiting = waiting.evolve(entry.awaiting, record, root=entry.summary.session_id)
    if awaiting is entry.awaiting:
        return entry
    summary = replace(entry.summary, pending_approvals=len(awaiting))
    return replace(entry, awaiting=awaiting, summary=summary)


def _on_user_message(entry: SessionEntry, record: Recorded) -> SessionEntry:
    event: UserMessage = record.event  # type: ignore[assignment]
    entry = replace(_counted(entry, event.text), answer_last=False)
    if entry.title_fixed or entry.summary.title:
        return entry
    return replace(entry, summary=replace(entry.summary, title=cut_title(event.text)))


def _on_llm_requested(entry: SessionEntry, record: Recorded) -> SessionEntry:
    event: LLMRequested = record.event  # type: ignore[assignment]
    if event.purpose == "loop":
        had = entry.had_partial or entry.has_partial
        return replace(entry, llm_purpose="loop", has_partial=False, had_partial=had)
    return replace(entry, llm_purpose=event.purpose)


def _on_llm_completed(entry: SessionEntry, record: Recorded) -> SessionEntry:
    if entry.llm_purpose != "loop":
        return entry
    event: LLMCompleted = record.event  # type: ignore[assignment]
    entry = replace(
        _counted(entry, event.content),
        has_partial=False,
        had_partial=False,
        answer_last=True,
        run_answered=True,
    )
    tokens = event.prompt_tokens + event.completion_tokens
    if not tokens:
        return entry
    return replace(entry, summary=replace(entry.summary, context_token_count=tokens))


def _on_tool_result(entry: SessionEntry, record: Recorded) -> SessionEntry:
    return replace(_counted(entry, ""), answer_last=False)


def _on_plan_ready(entry: SessionEntry, record: Recorded) -> SessionEntry:
    event: PlanReady = record.event  # type: ignore[assignment]
    return replace(_counted(entry, event.plan), answer_last=False)


def _on_run_ended(entry: SessionEntry, record: Recorded) -> SessionEntry:
    # As the messages projection: the partial answer shown (or the one a retry
    # superseded) is a message; the run's end goes on it, or on the answer, or on one more.
    event = record.event
    silent = isinstance(event, RunCompleted) and not event.content and not entry.run_answered
    if not silent and (entry.has_partial or entry.had_partial or not entry.answer_last):
        entry = _counted(entry, "")
    return replace(
        entry,
        llm_purpose="loop",
        has_partial=False,
        had_partial=False,
        answer_last=entry.answer_last if silent else True,
        run_answered=False,
    )


def _on_compressed(entry: SessionEntry, record: Recorded) -> SessionEntry:
    return replace(entry, summary=replace(entry.summary, context_token_count=0))


def _on_profile_switched(entry: SessionEntry, record: Recorded) -> SessionEntry:
    event: ProfileSwitched = record.event  # type: ignore[assignment]
    return replace(entry, summary=replace(entry.summary, profile_id=event.profile_id))


def _on_model_chosen(entry: SessionEntry, record: Recorded) -> SessionEntry:
    event: SessionModelChosen = record.event  # type: ignore[assignment]
    return replace(entry, summary=replace(entry.summary, model=event.model))


def _on_pinned(entry: SessionEntry, record: Recorded) -> SessionEntry:
    event: SessionPinned = record.event  # type: ignore[assignment]
    return replace(entry, summary=replace(entry.summary, pinned=event.pinned))


def _on_renamed(entry: SessionEntry, record: Recorded) -> SessionEntry:
    event: SessionRenamed = record.event  # type: ignore[assignment]
    return replace(entry, title_fixed=True, summary=replace(entry.summary, title=event.title))


def _on_deleted(entry: SessionEntry, record: Recorded) -> SessionEntry:
    return replace(entry, summary=replace(entry.summary, deleted=True))


def _unchanged(entry: SessionEntry, record: Recorded) -> SessionEntry:
    return entry


_Handler = Callable[[SessionEntry, Recorded], SessionEntry]

_HANDLERS: dict[type, _Handler] = {
    UserMessage: _on_user_message,
    LLMRequested: _on_llm_requested,
    LLMCompleted: _on_llm_completed,
    ToolCompleted: _on_tool_result,
    ToolFailed: _on_tool_result,
    PlanReady: _on_plan_ready,
    RunCompleted: _on_run_ended,
    RunStopped: _on_run_ended,
    RunFailed: _on_run_ended,
    ContextCompressed: _on_compressed,
    ProfileSwitched: _on_profile_switched,
    SessionPinned: _on_pinned,
    SessionModelChosen: _on_model_chosen,
    SessionRenamed: _on_renamed,
    SessionDeleted: _on_deleted,
}


# What the origin's pins, renames and deletion said of the origin, not of a fork that
# holds a copy of them.
_ABOUT_THE_SESSION = frozenset({SessionPinned, SessionRenamed, SessionDeleted})


def copied_to(created: SessionCreated) -> int:
    """The last seq of a fork's copy of its origin's events (0: not a copying fork)."""
    if created.forked_from is None or not created.history_copied:
        return 0
    return created.forked_at_seq or 0


def _on_created(state: SessionsState, record: Recorded) -> SessionsState:
    event: SessionCreated = record.event  # type: ignore[assignment]
    stream_id = record.stream_id
    if event.parent_stream_id is not None:
        root = state.roots.get(event.parent_stream_id, event.parent_stream_id)
        return replace(
            state,
            subagent_streams=state.subagent_streams.insert(stream_id),
            roots=state.roots.insert(stream_id, root),
        )
    if stream_id in state.entries:
        return state  # a second session.created does not reset a session
    created_at = iso_time(record.timestamp)
    summary = SessionSummary(
        session_id=stream_id,
        profile_id=event.profile_id,
        user_id=event.user_id,
        title=cut_title(event.title),
        pinned=False,
        created_at=created_at,
        last_active=created_at,
        message_count=0,
        preview="",
        context_token_count=0,
        forked_from=event.forked_from,
        forked_at_seq=event.forked_at_seq,
        origin=event.origin,
    )
    entry = SessionEntry(
        summary=summary,
        last_active_ts=record.timestamp,
        title_fixed=bool(event.title),
        copied_to=copied_to(event),
    )
    return _with_entry(state, stream_id, entry)


def _damaged(state: SessionsState, record: Recorded, reason: str) -> SessionsState:
    """The state with the record's session marked damaged (the first damage is kept)."""
    event = record.event
    kind = event.stored_type if isinstance(event, Unreadable) else record.type
    error = f"its event at seq {record.seq} ({kind}) cannot be read: {reason}"
    entry = state.entries.get(record.stream_id)
    if entry is None:
        if not isinstance(event, SessionCreated) or event.parent_stream_id is not None:
            return state  # nothing lists this stream
        summary = SessionSummary(
            session_id=record.stream_id,
            profile_id=event.profile_id,
            user_id=event.user_id,
            title=cut_title(event.title),
            pinned=False,
            created_at="",
            last_active="",
            message_count=0,
            preview="",
            context_token_count=0,
            error=error,
        )
        entry = SessionEntry(summary=summary, last_active_ts=0.0, title_fixed=True)
    elif entry.summary.error is None:
        entry = replace(entry, summary=replace(entry.summary, error=error))
    else:
        return state
    state = _with_entry(state, record.stream_id, entry)
    return replace(state, damaged=state.damaged | {record.stream_id})


def evolve(state: SessionsState, record: Recorded) -> SessionsState:
    if isinstance(record.event, Unreadable):
        return _damaged(state, record, record.event.reason)
    if not math.isfinite(record.timestamp):
        return _damaged(state, record, f"its time is {record.timestamp!r}")
    try:
        return _evolve(state, record)
    except (ValueError, OverflowError, OSError) as exc:
        # A time out of the calendar's range (datetime), a value no handler expects:
        # that session is damaged, the list of everyone's sessions must go on.
        return _damaged(state, record, str(exc) or type(exc).__name__)


def _evolve(state: SessionsState, record: Recorded) -> SessionsState:
    event = record.event
    if isinstance(event, SessionCreated):
        return _on_created(state, record)
    entry = state.entries.get(record.stream_id)
    if entry is None:
        root = state.roots.get(record.stream_id)
        if root is None or root not in state.entries:
            return state  # not a session's stream
        # A subagent's: only its approvals show, in its top-level session's summary.
        before = state.entries[root]
        after = _approval_event(before, record)
        if after is before:
            return state
        return _with_entry(state, root, after)
    if isinstance(event, Chunk):
        # Only the first text/thinking chunk of a tool-loop answer matters (a partial answer).
        if entry.llm_purpose != "loop":
            return state
        if isinstance(event, LLMText | LLMThinking):
            if entry.has_partial or not event.text:
                return state
            updated = replace(entry, has_partial=True, had_partial=False)
        elif entry.had_partial:  # the next attempt answered with tool calls
            updated = replace(entry, had_partial=False)
        else:
            return state
    elif record.seq <= entry.copied_to and type(event) in _ABOUT_THE_SESSION:
        return state  # a fork's copy of its origin's events: said of the origin
    else:
        updated = _HANDLERS.get(type(event), _unchanged)(entry, record)
        updated = _approval_event(updated, record)
        if record.type not in _NOT_ACTIVITY:
            updated = replace(
                updated,
                last_active_ts=record.timestamp,
                summary=replace(updated.summary, last_active=iso_time(record.timestamp)),
            )
    return _with_entry(state, record.stream_id, updated)


def merged(state: SessionsState, part: SessionsState) -> SessionsState:
    """``state`` with the sessions of ``part``: the fold of streams ``state`` has never
    seen (a big import's, folded on its own). Each stream's summary depends on its own
    events alone (and a subagent's on its session's, imported with it), so this is the
    fold of both logs together."""
    for session_id, entry in part.entries.items():
        state = _with_entry(state, session_id, entry)
    return replace(
        state,
        subagent_streams=state.subagent_streams.update(part.subagent_streams),
        roots=state.roots.update(part.roots),
        damaged=state.damaged | part.damaged,
    )


INITIAL = SessionsState()
SESSIONS: Projection[SessionsState] = Projection("sessions", INITIAL, evolve)
