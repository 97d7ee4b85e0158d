"""The long-term memory's events: one stream per user, ``memory:<user_id>``; their
projection is ``projections.memory`` (docs/memory.md). ``events.types`` re-exports them."""

from __future__ import annotations

from events.event import Event


class MemoryFactLearned(Event, frozen=True, kw_only=True, tag="memory.fact_learned"):
    """Extraction learned the value of the fact ``fact_id`` (derived from category + key;
    a newer value for the same key replaces the older one). It comes from the messages
    ``source_seqs`` of ``session_id``, all between ``from_seq`` and ``to_seq``; ``said_at``
    is the time of the latest of them."""

    fact_id: str
    category: str
    key: str
    value: str
    session_id: str
    from_seq: int
    to_seq: int
    source_seqs: tuple[int, ...] = ()
    said_at: float = 0.0
    model: str = ""


class MemoryFactEdited(Event, frozen=True, kw_only=True, tag="memory.fact_edited"):
    """The user set the fact's value (REST)."""

    fact_id: str
    value: str


class MemoryFactForgotten(Event, frozen=True, kw_only=True, tag="memory.fact_forgotten"):
    """A tombstone: the fact is gone from search, the summary and every future context."""

    fact_id: str
    reason: str = "user"


class MemorySummaryUpdated(Event, frozen=True, kw_only=True, tag="memory.summary_updated"):
    """A narrative written from the facts ``fact_ids`` as of memory seq ``based_on_seq``."""

    text: str
    model: str = ""
    fact_ids: tuple[str, ...] = ()
    based_on_seq: int = 0


class MemorySessionProcessed(Event, frozen=True, kw_only=True, tag="memory.session_processed"):
    """Seqs ``from_seq`` to ``to_seq`` of session ``session_id`` went through extraction
    (``skipped`` says why they were passed over without it, e.g. "deleted")."""

    session_id: str
    from_seq: int
    to_seq: int
    facts: int = 0
    model: str = ""
    skipped: str = ""


class MemoryExtractionFailed(Event, frozen=True, kw_only=True, tag="memory.extraction_failed"):
    """The model's extraction answer for the range was unusable; nothing else was written."""

    session_id: str
    from_seq: int
    to_seq: int
    error: str
    model: str = ""


class MemoryReset(Event, frozen=True, kw_only=True, tag="memory.reset"):
    """A re-extraction starts over: learned facts and processed ranges before this no
    longer count (the user's own edits and forgets do)."""

    reason: str = "reextract"
    model: str = ""
    prompt_sha: str = ""
