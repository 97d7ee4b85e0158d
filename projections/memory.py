"""The ``memory`` projection: what Navi remembers about one user, folded from the user's
memory stream (``memory:<user_id>``).

- ``memory.fact_learned`` sets a fact's value (a newer value for the same id replaces the
  older one; every value stays in the fact's ``history``) and its source: the session and
  the messages it was learned from.
- ``memory.fact_edited`` sets the value as the user wrote it; ``memory.fact_forgotten``
  turns the fact into a tombstone whose values are gone from the state (the log keeps
  them, nothing reads them). Both are *user decisions*: ``decided_at`` records when, so
  extraction never lets an older message overrule them.
- ``memory.summary_updated`` keeps the latest narrative; it is *current* while no fact
  changed after it was written, and is dropped when a fact it was written from is
  edited or forgotten (a forgotten value must not linger in the summary).
- ``memory.session_processed`` advances the session's processed seq;
  ``memory.extraction_failed`` counts consecutive unusable answers for one range.
- ``memory.reset`` starts a re-extraction: learned facts, processed ranges and the
  summary no longer count; facts with a user decision (edits, tombstones) stay.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.types import (
    MemoryExtractionFailed,
    MemoryFactEdited,
    MemoryFactForgotten,
    MemoryFactLearned,
    MemoryReset,
    MemorySessionProcessed,
    MemorySummaryUpdated,
)
from projections.fold import Projection

VersionKind = Literal["learned", "edited", "forgotten"]


class FactSource(msgspec.Struct, frozen=True, kw_only=True):
    """Where a value was learned: messages ``seqs`` of ``session_id``, within the range
    ``from_seq``..``to_seq`` that extraction read."""

    session_id: str
    from_seq: int
    to_seq: int
    seqs: tuple[int, ...] = ()


class FactVersion(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a fact's history (a forgotten fact's versions have no value left)."""

    kind: VersionKind
    value: str
    seq: int  # of the memory event
    timestamp: float
    model: str = ""
    source: FactSource | None = None


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    fact_id: str
    category: str
    key: str
    value: str
    source: FactSource | None  # of the current value; None when the user wrote it
    model: str
    learned_at: float  # when the fact was first learned (or learned again after a forget)
    updated_at: float
    updated_seq: int  # memory seq of the fact's last change
    said_at: float  # when the current value's source messages were written
    edited_by_user: bool = False
    forgotten: bool = False
    decided_at: float = 0.0  # last edit or forget by the user; 0: none
    history: tuple[FactVersion, ...] = ()


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    model: str
    fact_ids: tuple[str, ...]
    based_on_seq: int
    seq: int
    timestamp: float


class FailedRange(msgspec.Struct, frozen=True, kw_only=True):
    """Consecutive unusable extraction answers for the range starting at ``from_seq``."""

    from_seq: int
    attempts: int


class MemoryState(msgspec.Struct, frozen=True, kw_only=True):
    seq: int = 0  # the last memory event applied
    # Never mutated: an update makes a new dict (facts number in the hundreds, not millions).
    facts: dict[str, Fact] = msgspec.field(default_factory=dict)
    processed: dict[str, int] = msgspec.field(default_factory=dict)
    failures: dict[str, FailedRange] = msgspec.field(default_factory=dict)
    summary: Summary | None = None
    facts_seq: int = 0  # the last event that changed any fact (or reset them)
    reset_seq: int = 0
    generation: int = 0  # number of resets

    def active(self) -> list[Fact]:
        """Facts not forgotten, by category then key."""
        live = [fact for fact in self.facts.values() if not fact.forgotten]
        live.sort(key=lambda f: (f.category, f.key, f.fact_id))
        return live

    def active_fact(self, fact_id: str) -> Fact | None:
        fact = self.facts.get(fact_id)
        return None if fact is None or fact.forgotten else fact

    def processed_seq(self, session_id: str) -> int:
        return self.processed.get(session_id, 0)

    def attempts(self, session_id: str, from_seq: int) -> int:
        failed = self.failures.get(session_id)
        return failed.attempts if failed is not None and failed.from_seq == from_seq else 0

    @property
    def summary_is_current(self) -> bool:
        """The summary was written from the facts as they are now."""
        return self.summary is not None and self.summary.based_on_seq >= self.facts_seq


# ---------------------------------------------------------------- handlers


def _with_fact(state: MemoryState, fact: Fact, seq: int) -> MemoryState:
    return replace(state, facts={**state.facts, fact.fact_id: fact}, facts_seq=seq)


def _on_learned(state: MemoryState, record: Recorded) -> MemoryState:
    event: MemoryFactLearned = record.event  # type: ignore[assignment]
    source = FactSource(
        session_id=event.session_id,
        from_seq=event.from_seq,
        to_seq=event.to_seq,
        seqs=event.source_seqs,
    )
    version = FactVersion(
        kind="learned",
        value=event.value,
        seq=record.seq,
        timestamp=record.timestamp,
        model=event.model,
        source=source,
    )
    old = state.facts.get(event.fact_id)
    fact = Fact(
        fact_id=event.fact_id,
        category=event.category,
        key=event.key,
        value=event.value,
        source=source,
        model=event.model,
        learned_at=record.timestamp if old is None or old.forgotten else old.learned_at,
        updated_at=record.timestamp,
        updated_seq=record.seq,
        said_at=event.said_at,
        decided_at=0.0 if old is None else old.decided_at,
        history=(() if old is None else old.history) + (version,),
    )
    return _with_fact(state, fact, record.seq)


def _drop_summary_of(state: MemoryState, fact_id: str) -> Summary | None:
    summary = state.summary
    return None if summary is not None and fact_id in summary.fact_ids else summary


def _on_edited(state: MemoryState, record: Recorded) -> MemoryState:
    event: MemoryFactEdited = record.event  # type: ignore[assignment]
    old = state.facts.get(event.fact_id)
    if old is None:
        return state  # nothing to edit: the decision layer refuses this, a log may not
    version = FactVersion(
        kind="edited", value=event.value, seq=record.seq, timestamp=record.timestamp
    )
    fact = replace(
        old,
        value=event.value,
        source=None,
        model="",
        learned_at=record.timestamp if old.forgotten else old.learned_at,
        updated_at=record.timestamp,
        updated_seq=record.seq,
        said_at=record.timestamp,
        edited_by_user=True,
        forgotten=False,
        decided_at=record.timestamp,
        history=(*old.history, version),
    )
    state = replace(state, summary=_drop_summary_of(state, event.fact_id))
    return _with_fact(state, fact, record.seq)


def _on_forgotten(state: MemoryState, record: Recorded) -> MemoryState:
    event: MemoryFactForgotten = record.event  # type: ignore[assignment]
    old = state.facts.get(event.fact_id)
    if old is None or old.forgotten:
        return state
    # The tombstone keeps when and where, never what.
    scrubbed = tuple(replace(v, value="") for v in old.history)
    version = FactVersion(kind="forgotten", value="", seq=record.seq, timestamp=record.timestamp)
    fact = replace(
        old,
        value="",
        updated_at=record.timestamp,
        updated_seq=record.seq,
        forgotten=True,
        decided_at=record.timestamp,
        history=(*scrubbed, version),
    )
    state = replace(state, summary=_drop_summary_of(state, event.fact_id))
    return _with_fact(state, fact, record.seq)


def _on_summary(state: MemoryState, record: Recorded) -> MemoryState:
    event: MemorySummaryUpdated = record.event  # type: ignore[assignment]
    summary = Summary(
        text=event.text,
        model=event.model,
        fact_ids=event.fact_ids,
        based_on_seq=event.based_on_seq,
        seq=record.seq,
        timestamp=record.timestamp,
    )
    return replace(state, summary=summary)


def _on_processed(state: MemoryState, record: Recorded) -> MemoryState:
    event: MemorySessionProcessed = record.event  # type: ignore[assignment]
    done = max(state.processed_seq(event.session_id), event.to_seq)
    failures = {k: v for k, v in state.failures.items() if k != event.session_id}
    return replace(state, processed={**state.processed, event.session_id: done}, failures=failures)


def _on_failed(state: MemoryState, record: Recorded) -> MemoryState:
    event: MemoryExtractionFailed = record.event  # type: ignore[assignment]
    attempts = state.attempts(event.session_id, event.from_seq) + 1
    failed = FailedRange(from_seq=event.from_seq, attempts=attempts)
    return replace(state, failures={**state.failures, event.session_id: failed})


def _on_reset(state: MemoryState, record: Recorded) -> MemoryState:
    kept = {fid: fact for fid, fact in state.facts.items() if fact.decided_at > 0}
    return replace(
        state,
        facts=kept,
        processed={},
        failures={},
        summary=None,
        facts_seq=record.seq,
        reset_seq=record.seq,
        generation=state.generation + 1,
    )


_Handler = Callable[[MemoryState, Recorded], MemoryState]

_HANDLERS: dict[type, _Handler] = {
    MemoryFactLearned: _on_learned,
    MemoryFactEdited: _on_edited,
    MemoryFactForgotten: _on_forgotten,
    MemorySummaryUpdated: _on_summary,
    MemorySessionProcessed: _on_processed,
    MemoryExtractionFailed: _on_failed,
    MemoryReset: _on_reset,
}


def evolve(state: MemoryState, record: Recorded) -> MemoryState:
    handler = _HANDLERS.get(type(record.event))
    if handler is not None:
        state = handler(state, record)
    return replace(state, seq=record.seq)


INITIAL = MemoryState()
MEMORY: Projection[MemoryState] = Projection("memory", INITIAL, evolve)
