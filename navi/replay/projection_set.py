"""The projections of one session that replay folds, snapshots and inspects together.

``messages`` and ``context`` (projections/), ``todo``, ``scratchpad``,
``active_profile`` (projections/tool_state.py), ``run_state`` (the run state machine,
navi/run/state.py) and ``llm_requests``, defined here: an index of the LLM calls of the
session with what each was sent besides its messages (the messages are the ``context``
projection as of the seq before the call: see inspect.py).

``States`` holds one state per projection. Folding goes projection by projection over a
page of records (a tight loop each), not event by event over a bundle: that is faster
and keeps every projection exactly as it is elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.types import LLMRequested, RunStarted
from navi.run.state import INITIAL as RUN_INITIAL
from navi.run.state import IllegalTransition, RunState, event_kind, next_state
from projections.context import CONTEXT
from projections.fold import Projection, fold
from projections.messages import MESSAGES
from projections.tool_state import ACTIVE_PROFILE, SCRATCHPAD, TODO
from projections.types import iso_time
from projections.vec import Vec

# ---------------------------------------------------------------- run_state


class RunStateInfo(msgspec.Struct, frozen=True, kw_only=True):
    """The run state machine's state. An event it refuses does not stop the fold (the
    messages of a session must still show): the state stays, and the first refusal is
    kept in ``error`` with its seq, for ``state_at`` and ``verify`` to report."""

    state: RunState = RUN_INITIAL
    error: str | None = None
    error_seq: int | None = None


def evolve_run_state(info: RunStateInfo, record: Recorded) -> RunStateInfo:
    try:
        state = next_state(info.state, event_kind(record.event), seq=record.seq)
    except IllegalTransition as exc:
        if info.error is not None:
            return info
        return replace(info, error=str(exc), error_seq=record.seq)
    return info if state is info.state else replace(info, state=state)


RUN_STATE: Projection[RunStateInfo] = Projection("run_state", RunStateInfo(), evolve_run_state)

# ---------------------------------------------------------------- llm_requests


class RunInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What ``run.started`` says about the run: which profile (and version of it) built
    the system prompt, which model and backend."""

    seq: int
    profile_id: str
    profile_hash: str = ""
    model: str = ""
    backend: str = ""
    mode: str = "stream"


class LLMRequestInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One ``llm.requested``: everything the log says about the request except its
    messages."""

    seq: int
    created_at: str
    purpose: str
    iteration: int
    attempt: int
    model: str
    tools: tuple[str, ...]
    options: dict[str, Any]
    run: RunInfo | None = None  # the run it belongs to (None outside a run)


class LLMRequestsState(msgspec.Struct, frozen=True, kw_only=True):
    requests: Vec[LLMRequestInfo]
    run: RunInfo | None = None  # the last run started


def evolve_llm_requests(state: LLMRequestsState, record: Recorded) -> LLMRequestsState:
    event = record.event
    if isinstance(event, RunStarted):
        run = RunInfo(
            seq=record.seq,
            profile_id=event.profile_id,
            profile_hash=event.profile_hash,
            model=event.model,
            backend=event.backend,
            mode=event.mode,
        )
        return replace(state, run=run)
    if isinstance(event, LLMRequested):
        info = LLMRequestInfo(
            seq=record.seq,
            created_at=iso_time(record.timestamp),
            purpose=event.purpose,
            iteration=event.iteration,
            attempt=event.attempt,
            model=event.model or (state.run.model if state.run else ""),
            tools=event.tools,
            options=event.options,
            run=state.run,
        )
        return replace(state, requests=state.requests.append(info))
    return state


LLM_REQUESTS: Projection[LLMRequestsState] = Projection(
    "llm_requests", LLMRequestsState(requests=Vec()), evolve_llm_requests
)

# ---------------------------------------------------------------- the set

PROJECTIONS: dict[str, Projection[Any]] = {
    p.name: p
    for p in (MESSAGES, CONTEXT, TODO, SCRATCHPAD, ACTIVE_PROFILE, RUN_STATE, LLM_REQUESTS)
}
ALL: tuple[str, ...] = tuple(PROJECTIONS)

States = dict[str, Any]


def initial_states(names: Iterable[str] = ALL) -> States:
    return {name: PROJECTIONS[name].initial for name in names}


def fold_states(states: States, records: Sequence[Recorded]) -> States:
    """Every state of ``states`` after ``records`` (a new dict; states are values)."""
    return {name: fold(PROJECTIONS[name], records, state) for name, state in states.items()}
