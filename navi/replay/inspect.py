"""Time travel: a session as it was right after any event (``GET /sessions/{id}/state?at=``,
``navi inspect SESSION --at SEQ``), and the request Navi sent for any LLM call.

What an LLM request is made of, and what the log can give back of it:

- **messages**: the ``context`` projection as of the seq just before the call's
  ``llm.requested`` — exactly what a tool-loop call sends after the system prompt. For
  ``plan`` and ``compress`` calls it is the conversation they were built from (their own
  prompt is made by the planner or the compressor from it).
- **tools** (names), **options**, **model**, purpose, iteration, attempt: as recorded in
  ``llm.requested``.
- **system prompt**: not in the log. ``run.started`` records the profile (``profile_id``
  and ``profile_hash``, a hash of the profile's files) that made it, so it can be
  rebuilt from the profile folder while that hash still matches.
- Tool schemas come from the tools' code of that version, by name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec

from events.envelope import Recorded
from events.store import EventStore
from events.types import LLMRequested, TodoItem, ToolProgress
from navi.replay.errors import SeqOutOfRangeError
from navi.replay.history import pages, session_head
from navi.replay.projection_set import LLMRequestInfo, LLMRequestsState, RunInfo
from navi.replay.snapshot_store import snapshots_for
from navi.replay.snapshots import SNAPSHOT_EVERY, Folded, latest_snapshot, states_at
from navi.run.state import RunState
from projections.context import CONTEXT, ContextState
from projections.messages import MessagesState
from projections.tool_state import ActiveProfile
from projections.types import Message


class LLMRequestView(msgspec.Struct, frozen=True, kw_only=True):
    """One LLM call as Navi sent it. ``messages`` is ``None`` where it was not asked for
    (``state_at`` gives it for the calls of the run in progress at the seq, or of the
    last run; ``llm_request`` for any call)."""

    seq: int
    created_at: str
    purpose: str
    iteration: int
    attempt: int
    model: str
    tools: tuple[str, ...]
    options: dict[str, object]
    run: RunInfo | None = None
    messages: list[Message] | None = None


class SessionStateAt(msgspec.Struct, frozen=True, kw_only=True):
    """A session right after the event ``seq`` of its history (0: before any event)."""

    session_id: str
    seq: int
    head: int  # the last seq of the session's history
    event_type: str | None  # the type of the event at ``seq``
    run_state: RunState
    # The first event the run state machine refused, if any (the log is not one Navi
    # writes: ``navi verify`` reports it too).
    run_state_error: str | None
    messages: list[Message]  # with the answer being streamed, if any, last
    context: list[Message]
    context_token_count: int
    todo: list[TodoItem]
    scratchpad: dict[str, str]
    active_profile: ActiveProfile
    llm_requests: list[LLMRequestView]
    # The last progress of each tool call running at ``seq`` (its card's bar).
    tool_progress: list[ToolProgress] = []


def _view(info: LLMRequestInfo, messages: list[Message] | None = None) -> LLMRequestView:
    return LLMRequestView(
        seq=info.seq,
        created_at=info.created_at,
        purpose=info.purpose,
        iteration=info.iteration,
        attempt=info.attempt,
        model=info.model,
        tools=info.tools,
        options=info.options,
        run=info.run,
        messages=messages,
    )


async def contexts_at(
    store: EventStore,
    session_id: str,
    seqs: list[int],
    *,
    every: int = SNAPSHOT_EVERY,
    known: Folded | None = None,
) -> dict[int, ContextState]:
    """The ``context`` projection as of each of ``seqs``, in one pass from the newest
    snapshot before the first of them (or from ``known``, a fold that already read the
    events they need)."""
    if not seqs:
        return {}
    wanted = sorted(set(seqs))
    records: list[Recorded] | None = None
    if known is not None and known.records is not None and known.from_seq <= wanted[0]:
        start, state = known.from_seq, known.start_states["context"]
        records = known.records
    else:
        found = await latest_snapshot(
            snapshots_for(store), session_id, ("context",), at_most=wanted[0]
        )
        start, state = (found.seq, found.states["context"]) if found else (0, CONTEXT.initial)
    result: dict[int, ContextState] = {}
    index = 0
    if wanted[0] == start:
        result[start] = state
        index = 1
    if index == len(wanted):
        return result
    evolve = CONTEXT.evolve
    source = (
        _one_page(records)
        if records is not None
        else pages(store, session_id, after_seq=start, to_seq=wanted[-1], size=every)
    )
    async for page in source:
        for record in page:
            state = evolve(state, record)
            while index < len(wanted) and wanted[index] == record.seq:
                result[record.seq] = state
                index += 1
            if index == len(wanted):
                return result
    return result


async def _one_page(records: list[Recorded]) -> AsyncIterator[list[Recorded]]:
    yield records


async def state_at(
    store: EventStore, session_id: str, seq: int, *, every: int = SNAPSHOT_EVERY
) -> SessionStateAt:
    """The session right after ``seq``: run state, projections, and its LLM requests (with
    their messages for the calls of the run in progress at ``seq``, or of the last run)."""
    head = await session_head(store, session_id)
    if not 0 <= seq <= head:
        raise SeqOutOfRangeError(session_id, seq, head)
    folded = await states_at(store, session_id, seq, head=head, every=every, keep_records=True)
    states = folded.states
    messages: MessagesState = states["messages"]
    context: ContextState = states["context"]
    requests: LLMRequestsState = states["llm_requests"]
    infos = requests.requests.to_list()
    last_run = requests.run
    current = [i for i in infos if last_run is not None and i.run == last_run]
    contexts = await contexts_at(
        store, session_id, [i.seq - 1 for i in current], every=every, known=folded
    )
    detailed = {i.seq: contexts[i.seq - 1].as_list() for i in current}
    event_type = None
    if folded.records:
        event_type = folded.records[-1].type
    elif seq > 0:
        [record] = await store.read(session_id, after_seq=seq - 1, to_seq=seq)
        event_type = record.type
    return SessionStateAt(
        session_id=session_id,
        seq=seq,
        head=head,
        event_type=event_type,
        run_state=states["run_state"].state,
        run_state_error=states["run_state"].error,
        messages=messages.messages(),
        context=context.as_list(),
        context_token_count=context.token_count,
        todo=list(states["todo"]),
        scratchpad=dict(states["scratchpad"]),
        active_profile=states["active_profile"],
        llm_requests=[_view(info, detailed.get(info.seq)) for info in infos],
        tool_progress=list(messages.progress),
    )


async def llm_request(
    store: EventStore, session_id: str, request_seq: int, *, every: int = SNAPSHOT_EVERY
) -> LLMRequestView:
    """The request of the LLM call recorded at ``request_seq`` (an ``llm.requested``)."""
    head = await session_head(store, session_id)
    if not 1 <= request_seq <= head:
        raise SeqOutOfRangeError(session_id, request_seq, head)
    records = await store.read(session_id, after_seq=request_seq - 1, to_seq=request_seq)
    record: Recorded = records[0]
    if not isinstance(record.event, LLMRequested):
        raise ValueError(
            f"session {session_id!r}: seq {request_seq} is a {record.type}, not an llm.requested"
        )
    folded = await states_at(
        store, session_id, request_seq, names=("llm_requests",), head=head, every=every
    )
    info = folded.states["llm_requests"].requests[-1]
    contexts = await contexts_at(store, session_id, [request_seq - 1], every=every)
    return _view(info, contexts[request_seq - 1].as_list())
