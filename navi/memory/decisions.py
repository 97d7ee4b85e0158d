"""Pure decisions: given the memory state, which events to append.

Each function returns the events to append (maybe none) and is re-run from a fresh
state when an append loses a race (``ConcurrencyError``), so a decision never rests on
a stale state. Extraction decisions name the range and the generation they were made
for: if that range was processed meanwhile, or a reset happened, they decide nothing,
which is what makes processing the same range twice change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from events.envelope import Recorded
from events.types import (
    Event,
    MemoryExtractionFailed,
    MemoryFactEdited,
    MemoryFactForgotten,
    MemoryFactLearned,
    MemoryReset,
    MemorySessionProcessed,
    MemorySummaryUpdated,
)
from navi.memory.extraction import ExtractedFact
from navi.memory.facts import fact_id, normalize_key
from navi.memory.turns import TurnChunk
from projections.memory import MEMORY, Fact, MemoryState

MAX_VALUE_LENGTH = 2000


class FactNotFound(LookupError):
    """No such fact (or it was forgotten); the message says which."""

    def __init__(self, fact_id: str, *, forgotten: bool = False) -> None:
        self.fact_id = fact_id
        self.forgotten = forgotten
        what = "was forgotten" if forgotten else "does not exist"
        super().__init__(f"the fact {fact_id!r} {what}")


def _fresh(state: MemoryState, session_id: str, chunk: TurnChunk, generation: int) -> bool:
    """The range is still the next one to process for this session, in this generation."""
    return state.generation == generation and state.processed_seq(session_id) == chunk.after_seq


def _changes(old: Fact | None, new: MemoryFactLearned) -> bool:
    if old is None:
        return True
    if new.said_at <= old.decided_at:
        return False  # said before the user edited or forgot it: the user's word stands
    if old.forgotten:
        return True  # said again after it was forgotten: new knowledge
    if new.said_at < old.said_at:
        return False  # older than the value we have
    return new.value != old.value


def learn(
    state: MemoryState,
    chunk: TurnChunk,
    facts: Sequence[ExtractedFact],
    *,
    session_id: str,
    generation: int,
    model: str,
) -> list[Event]:
    """The facts of one extraction answer that change something, and the range processed."""
    if not _fresh(state, session_id, chunk, generation):
        return []
    said = {turn.seq: turn.timestamp for turn in chunk.turns}
    latest: dict[str, MemoryFactLearned] = {}
    for fact in facts:
        key = normalize_key(fact.key)
        seqs = tuple(sorted(set(fact.source_seqs)))
        event = MemoryFactLearned(
            fact_id=fact_id(fact.category, key),
            category=fact.category,
            key=key,
            value=fact.value.strip(),
            session_id=session_id,
            from_seq=chunk.from_seq,
            to_seq=chunk.to_seq,
            source_seqs=seqs,
            said_at=max(said[seq] for seq in seqs),
            model=model,
        )
        earlier = latest.get(event.fact_id)
        if earlier is None or event.said_at >= earlier.said_at:
            latest[event.fact_id] = event  # one answer, two values: the later message wins
    learned: list[Event] = [e for e in latest.values() if _changes(state.facts.get(e.fact_id), e)]
    done = MemorySessionProcessed(
        session_id=session_id,
        from_seq=chunk.from_seq,
        to_seq=chunk.to_seq,
        facts=len(learned),
        model=model,
    )
    return [*learned, done]


def skip(
    state: MemoryState, chunk: TurnChunk, *, session_id: str, generation: int, reason: str
) -> list[Event]:
    """Mark a range processed without extraction (``reason`` says why)."""
    if not _fresh(state, session_id, chunk, generation):
        return []
    return [
        MemorySessionProcessed(
            session_id=session_id, from_seq=chunk.from_seq, to_seq=chunk.to_seq, skipped=reason
        )
    ]


def fail(
    state: MemoryState,
    chunk: TurnChunk,
    error: str,
    *,
    session_id: str,
    generation: int,
    model: str,
    max_attempts: int,
) -> list[Event]:
    """Record an unusable answer; after ``max_attempts`` of them in a row for the same
    range, the range is skipped (its messages stay in the log for a re-extraction)."""
    if not _fresh(state, session_id, chunk, generation):
        return []
    events: list[Event] = [
        MemoryExtractionFailed(
            session_id=session_id,
            from_seq=chunk.from_seq,
            to_seq=chunk.to_seq,
            error=error,
            model=model,
        )
    ]
    attempts = state.attempts(session_id, chunk.from_seq) + 1
    if attempts >= max_attempts:
        events.append(
            MemorySessionProcessed(
                session_id=session_id,
                from_seq=chunk.from_seq,
                to_seq=chunk.to_seq,
                model=model,
                skipped=f"{attempts} unusable extraction answers",
            )
        )
    return events


def active_fact(state: MemoryState, fact_id: str) -> Fact:
    fact = state.facts.get(fact_id)
    if fact is None or fact.forgotten:
        raise FactNotFound(fact_id, forgotten=fact is not None)
    return fact


def forget(state: MemoryState, fact_id: str, *, reason: str = "user") -> list[Event]:
    active_fact(state, fact_id)
    return [MemoryFactForgotten(fact_id=fact_id, reason=reason)]


def clean_value(value: str) -> str:
    """A fact value as the user typed it, or ``ValueError`` saying what is wrong."""
    cleaned = value.strip()
    if not cleaned:
        raise ValueError("the value must not be empty")
    if len(cleaned) > MAX_VALUE_LENGTH:
        raise ValueError(f"the value is longer than {MAX_VALUE_LENGTH} characters")
    return cleaned


def edit(state: MemoryState, fact_id: str, value: str) -> list[Event]:
    fact = active_fact(state, fact_id)
    cleaned = clean_value(value)
    if cleaned == fact.value and fact.edited_by_user:
        return []
    return [MemoryFactEdited(fact_id=fact_id, value=cleaned)]


REMEMBERED_BY = "memory_remember"  # a told fact's `model`: who wrote it down


def remember(
    state: MemoryState,
    *,
    category: str,
    key: str,
    value: str,
    session_id: str,
    said_seq: int,
    said_at: float,
) -> list[Event]:
    """A fact the user asked to be remembered ("remember that …"), from the message at
    ``said_seq``: it replaces an older value of the same key, as a learned one does."""
    cleaned = clean_value(value)
    normalized = normalize_key(key)
    if not normalized:
        raise ValueError("the key must hold a letter or a digit")
    event = MemoryFactLearned(
        fact_id=fact_id(category, normalized),
        category=category,
        key=normalized,
        value=cleaned,
        session_id=session_id,
        from_seq=said_seq,
        to_seq=said_seq,
        source_seqs=(said_seq,) if said_seq > 0 else (),
        said_at=said_at,
        model=REMEMBERED_BY,
    )
    return [event] if _changes(state.facts.get(event.fact_id), event) else []


def summarize(
    state: MemoryState, text: str, *, model: str, based_on_seq: int, fact_ids: Sequence[str]
) -> list[Event]:
    """A summary written from the facts as of ``based_on_seq``; nothing if they changed
    since (a fact forgotten meanwhile must not come back through the summary)."""
    if state.facts_seq != based_on_seq:
        return []
    return [
        MemorySummaryUpdated(
            text=text, model=model, fact_ids=tuple(fact_ids), based_on_seq=based_on_seq
        )
    ]


def reset(*, model: str, prompt_sha: str, reason: str = "reextract") -> list[Event]:
    return [MemoryReset(reason=reason, model=model, prompt_sha=prompt_sha)]


class ChunkOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What extraction made of one chunk of a session: facts, an unusable answer
    (``problem``), or nothing to ask (``skipped`` is not None: "" when the chunk has no
    turns, "deleted" for a deleted session)."""

    session_id: str
    chunk: TurnChunk
    facts: tuple[ExtractedFact, ...] = ()
    problem: str = ""
    skipped: str | None = None
    model: str = ""


def outcome_events(
    state: MemoryState, outcome: ChunkOutcome, *, generation: int, max_attempts: int
) -> list[Event]:
    """The events one chunk's outcome adds to the memory (none if it is stale)."""
    session_id, chunk = outcome.session_id, outcome.chunk
    if outcome.skipped is not None:
        return skip(
            state, chunk, session_id=session_id, generation=generation, reason=outcome.skipped
        )
    if outcome.problem:
        return fail(
            state,
            chunk,
            outcome.problem,
            session_id=session_id,
            generation=generation,
            model=outcome.model,
            max_attempts=max_attempts,
        )
    return learn(
        state,
        chunk,
        outcome.facts,
        session_id=session_id,
        generation=generation,
        model=outcome.model,
    )


def applied(state: MemoryState, events: Iterable[Event], *, timestamp: float) -> MemoryState:
    """The state once ``events`` are appended (at ``timestamp``): for deciding a batch of
    steps before any of it is written."""
    for event in events:
        record = Recorded(
            stream_id="",
            seq=state.seq + 1,
            position=0,
            event_id="",
            timestamp=timestamp,
            event=event,
        )
        state = MEMORY.evolve(state, record)
    return state
