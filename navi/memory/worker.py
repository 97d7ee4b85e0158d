"""``MemoryWorker``: extraction of facts from idle sessions, the summary, re-extraction.

A sweep (``process_stale``) looks at every session stream: one idle for more than
``idle_seconds`` whose log goes past what memory processed is read from there, cut into
chunks that fit the model's context, and each chunk is one LLM call whose facts and
``memory.session_processed`` are appended together (all or nothing). Then the summary
of every user whose facts changed is rewritten.

Faults: a failed LLM call leaves the range unprocessed (the next sweep retries it, and
nothing is recorded). An unusable answer is logged and recorded as
``memory.extraction_failed``; the next sweep retries it, and after ``max_attempts``
unusable answers in a row the range is skipped (its messages stay in the log, for a
re-extraction with a better model or prompt).

Re-extraction (``reextract_all``) asks the model about every session first, then
appends ``memory.reset`` and everything learned in one append per user: if a call fails
midway, that user's memory is left as it was.

The worker runs in the server's task group (``run_periodic``): a sweep every
``interval`` seconds, and at once when ``trigger()`` is called (a session was created,
a fact was edited or forgotten). Creating a worker sets ``service.on_change`` to it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial

import anyio
import msgspec
import structlog

from events.envelope import Recorded
from events.errors import EventDecodeError
from events.types import Event, MemoryFactLearned, SessionDeleted
from navi.llm.base import LLMBackend
from navi.llm.errors import LLMError
from navi.llm.types import ChatMessage, Completion, LLMOptions
from navi.memory import decisions
from navi.memory.decisions import ChunkOutcome
from navi.memory.extraction import (
    DEFAULT_EXTRACTION_PROMPT,
    BrokenAnswer,
    extraction_messages,
    parse_answer,
    prompt_sha,
)
from navi.memory.facts import user_of_stream
from navi.memory.service import MemoryService
from navi.memory.summary import DEFAULT_SUMMARY_PROMPT, summary_messages
from navi.memory.turns import TurnChunk, chunk_turns, session_user, turns_of
from projections.memory import Fact, MemoryState

log = structlog.get_logger(__name__)

IDLE_SECONDS = 30 * 60
SWEEP_INTERVAL = 5 * 60
AFTER_RUN_MARGIN = 1.0  # past the quiet time, so that the session counts as idle
# About 3,000 tokens of conversation per call: fits small local models with room to answer.
MAX_CHUNK_CHARS = 12_000
MAX_ATTEMPTS = 3
SUMMARY_RACES = 3


class SweepReport(msgspec.Struct, kw_only=True):
    """What one sweep (or re-extraction) did, for logs and tests."""

    sessions: list[str] = msgspec.field(default_factory=list)  # processed (fully or partly)
    chunks: int = 0  # extraction calls answered
    facts: int = 0  # facts learned or changed
    failed_calls: int = 0
    broken_answers: int = 0
    summaries: int = 0


class _Run(msgspec.Struct, frozen=True, kw_only=True):
    """The model and prompts of one sweep (a re-extraction may override them)."""

    model: str | None
    prompt: str
    summary_prompt: str


class MemoryWorker:
    def __init__(
        self,
        service: MemoryService,
        backend: LLMBackend,
        *,
        now: Callable[[], float] = time.time,
        idle_seconds: float = IDLE_SECONDS,
        model: str | None = None,
        prompt: str = DEFAULT_EXTRACTION_PROMPT,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        options: LLMOptions | None = None,
        max_chunk_chars: int = MAX_CHUNK_CHARS,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        if max_chunk_chars < 200:
            raise ValueError("max_chunk_chars must be at least 200")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.service = service
        self.store = service.store
        self.backend = backend
        self.now = now
        self.idle_seconds = idle_seconds
        self.options = options if options is not None else LLMOptions(temperature=0.0)
        self.max_chunk_chars = max_chunk_chars
        self.max_attempts = max_attempts
        self._run = _Run(model=model, prompt=prompt, summary_prompt=summary_prompt)
        # stream id → its user, or None for a stream that is not a user's session.
        self._session_users: dict[str, str | None] = {}
        self._sweep_lock = anyio.Lock()
        self._wake = anyio.Event()
        # When runs ended: a sweep is due once each session has been quiet long enough.
        self._due: list[float] = []
        self._sweep_asked = False
        service.on_change = lambda _user: self.trigger()
        service.extract_after_s = idle_seconds

    # ------------------------------------------------------------ scheduling

    def trigger(self) -> None:
        """Ask for a sweep soon (handled by ``run_periodic``); never blocks, never fails."""
        self._sweep_asked = True
        self._wake.set()

    async def after_run(self, _host: object) -> None:
        """A post-turn worker (``navi.run.workers``): a run ended, so a sweep is due once
        its session has been quiet for ``idle_seconds`` (not at the next periodic one)."""
        self._due.append(self.now() + self.idle_seconds + AFTER_RUN_MARGIN)
        self._wake.set()  # run_periodic recomputes how long it waits (no sweep now)

    def _wait_for(self, interval: float) -> float:
        """Seconds until the next sweep: ``interval``, or sooner when a run's is due."""
        now = self.now()
        self._due = [due for due in self._due if due > now]
        return min([interval, *(due - now for due in self._due)])

    async def run_periodic(self, interval: float = SWEEP_INTERVAL) -> None:
        """Sweep now, then every ``interval`` seconds, when a run's sweep is due (see
        ``after_run``) or when triggered, until cancelled. A failed sweep is logged; the
        next one tries again."""
        sweep = True
        while True:
            self._wake = anyio.Event()
            if sweep:
                self._sweep_asked = False
                try:
                    await self.process_stale()
                except Exception:
                    log.exception("memory.sweep_failed")
            # A run that ended only wakes this loop to wait less; a trigger() sweeps.
            with anyio.move_on_after(self._wait_for(interval)) as waited:
                await self._wake.wait()
            sweep = waited.cancelled_caught or self._sweep_asked

    # ------------------------------------------------------------ sweeps

    async def process_stale(self, now: float | None = None) -> SweepReport:
        """One sweep: extract from every idle, unprocessed session; refresh summaries."""
        moment = self.now() if now is None else now
        report = SweepReport()
        async with self._sweep_lock:
            heads = await self.store.stream_heads()
            users = set(_memory_users(heads))
            for head in _oldest_first(heads):
                if moment - head.timestamp <= self.idle_seconds:
                    continue
                user = await self._process_if_new(head, report)
                if user is not None:
                    users.add(user)
            await self._refresh_summaries(sorted(users), report, self._run)
        if report.sessions or report.summaries or report.failed_calls or report.broken_answers:
            log.info("memory.sweep", **msgspec.structs.asdict(report))
        return report

    async def process_session(self, session_id: str) -> SweepReport:
        """Extract from one session now, idle or not (then refresh its user's summary)."""
        report = SweepReport()
        async with self._sweep_lock:
            last = await self.store.last_seq(session_id)
            if not last:
                return report
            [head] = await self.store.read(session_id, after_seq=last - 1, to_seq=last)
            user = await self._process_if_new(head, report)
            if user is not None:
                await self._refresh_summaries([user], report, self._run)
        return report

    async def _process_if_new(self, head: Recorded, report: SweepReport) -> str | None:
        """Extract from the session ``head`` ends, if its log goes past what was processed.
        Returns the session's user (None: not a user's session). A session whose log
        holds a damaged event is passed over (logged): the others' go on."""
        try:
            user = await self._user_of(head.stream_id)
            if user is None:
                return None
            state = await self.service.state(user)
            after = state.processed_seq(head.stream_id)
            if head.seq > after:
                await self._extract(user, head.stream_id, after, state.generation, report)
        except LLMError as exc:
            report.failed_calls += 1
            log.warning(
                "memory.extraction_call_failed",
                session_id=head.stream_id,
                error=exc.message,
                kind=exc.kind,
            )
        except (EventDecodeError, ValueError, OverflowError) as exc:
            # An event no projection can take (a corrupt payload, a time out of range).
            log.warning("memory.session_damaged", session_id=head.stream_id, error=str(exc))
            return None
        return user

    async def _extract(
        self, user: str, session_id: str, after: int, generation: int, report: SweepReport
    ) -> None:
        """Chunk by chunk, each appended as soon as it is answered; stops at the first
        chunk that is not processed (ranges are processed in order)."""
        records = await self.store.read(session_id, after_seq=after)
        if not records:
            return
        report.sessions.append(session_id)
        for chunk, skipped in self._chunks(records, after):
            known = (await self.service.state(user)).active()
            outcome = await self._ask(session_id, chunk, skipped, known, self._run, report)
            decide = partial(
                decisions.outcome_events,
                outcome=outcome,
                generation=generation,
                max_attempts=self.max_attempts,
            )
            appended = await self.service.append(user, decide)
            report.facts += _learned(e.event for e in appended)
            if not any(r.type == "memory.session_processed" for r in appended):
                return

    # ------------------------------------------------------------ re-extraction

    async def reextract_all(
        self, model: str | None = None, prompt: str | None = None
    ) -> SweepReport:
        """Rebuild every user's memory from every session's log, with ``model`` /
        ``prompt`` instead of the configured ones for this run. The user's edits and
        forgets still hold. Per user it is all or nothing: the answers are gathered
        first, then ``memory.reset`` and what they teach are appended at once, so a
        failed LLM call (raised) leaves that user's memory as it was."""
        run = _Run(
            model=model or self._run.model,
            prompt=prompt or self._run.prompt,
            summary_prompt=self._run.summary_prompt,
        )
        report = SweepReport()
        async with self._sweep_lock:
            heads = await self.store.stream_heads()
            sessions: dict[str, list[str]] = {}
            for head in _oldest_first(heads):
                user = await self._user_of(head.stream_id)
                if user is not None:
                    sessions.setdefault(user, []).append(head.stream_id)
            users = sorted(set(sessions) | set(_memory_users(heads)))
            for user in users:
                await self._reextract_user(user, sessions.get(user, []), run, report)
            await self._refresh_summaries(users, report, run)
        log.info("memory.reextracted", users=users, **msgspec.structs.asdict(report))
        return report

    async def _reextract_user(
        self, user: str, session_ids: Sequence[str], run: _Run, report: SweepReport
    ) -> None:
        reset = decisions.reset(
            model=run.model or self.backend.model, prompt_sha=prompt_sha(run.prompt)
        )
        # What the memory will be, step by step, so each prompt lists the facts known so far.
        planned = self._planned(await self.service.state(user), reset)
        outcomes: list[ChunkOutcome] = []
        for session_id in session_ids:
            records = await self.store.read(session_id)
            report.sessions.append(session_id)
            for chunk, skipped in self._chunks(records, 0):
                outcome = await self._ask(session_id, chunk, skipped, planned.active(), run, report)
                outcomes.append(outcome)
                planned = self._planned(planned, self._decide(planned, outcome))
                if outcome.problem:
                    break  # the rest of this session waits for the sweeps

        def decide(state: MemoryState) -> list[Event]:
            # Decided again on the memory as it is when appending: a fact forgotten
            # while the model was being asked stays forgotten.
            events = list(reset)
            state = self._planned(state, reset)
            for outcome in outcomes:
                step = self._decide(state, outcome)
                events += step
                state = self._planned(state, step)
            return events

        appended = await self.service.append(user, decide)
        report.facts += _learned(r.event for r in appended)

    def _decide(self, state: MemoryState, outcome: ChunkOutcome) -> list[Event]:
        return decisions.outcome_events(
            state, outcome, generation=state.generation, max_attempts=self.max_attempts
        )

    def _planned(self, state: MemoryState, events: Sequence[Event]) -> MemoryState:
        return decisions.applied(state, events, timestamp=self.now())

    # ------------------------------------------------------------ asking the model

    def _chunks(
        self, records: Sequence[Recorded], after: int
    ) -> list[tuple[TurnChunk, str | None]]:
        """The chunks of a session's new records, each with why it needs no LLM call
        (None: it needs one)."""
        to_seq = records[-1].seq
        if any(isinstance(r.event, SessionDeleted) for r in records):
            return [(TurnChunk(after_seq=after, to_seq=to_seq, turns=()), "deleted")]
        chunks = chunk_turns(
            turns_of(records), after_seq=after, to_seq=to_seq, max_chars=self.max_chunk_chars
        )
        return [(chunk, None if chunk.turns else "") for chunk in chunks]

    async def _ask(
        self,
        session_id: str,
        chunk: TurnChunk,
        skipped: str | None,
        known: Sequence[Fact],
        run: _Run,
        report: SweepReport,
    ) -> ChunkOutcome:
        """The model's facts for one chunk. An unusable answer is an outcome (logged);
        a failed call raises ``LLMError``."""
        if skipped is not None:
            return ChunkOutcome(session_id=session_id, chunk=chunk, skipped=skipped)
        messages = extraction_messages(chunk, known, prompt=run.prompt)
        completion = await self._complete(messages, run.model)
        model = completion.model or run.model or self.backend.model
        report.chunks += 1
        try:
            facts = parse_answer(completion.content, chunk)
        except BrokenAnswer as exc:
            report.broken_answers += 1
            log.warning(
                "memory.extraction_answer_unusable",
                session_id=session_id,
                from_seq=chunk.from_seq,
                to_seq=chunk.to_seq,
                error=str(exc),
                model=model,
            )
            return ChunkOutcome(session_id=session_id, chunk=chunk, problem=str(exc), model=model)
        return ChunkOutcome(session_id=session_id, chunk=chunk, facts=tuple(facts), model=model)

    async def _complete(self, messages: Sequence[ChatMessage], model: str | None) -> Completion:
        options = self.options
        if model is not None:
            options = msgspec.structs.replace(options, model=model)
        return await self.backend.complete(messages, (), options)

    async def _user_of(self, stream_id: str) -> str | None:
        if stream_id not in self._session_users:
            first = await self.store.read(stream_id, limit=1)
            self._session_users[stream_id] = session_user(first[0]) if first else None
        return self._session_users[stream_id]

    # ------------------------------------------------------------ summary

    async def _refresh_summaries(
        self, users: Sequence[str], report: SweepReport, run: _Run
    ) -> None:
        for user in users:
            try:
                if await self._refresh_summary(user, run):
                    report.summaries += 1
            except LLMError as exc:
                report.failed_calls += 1
                log.warning("memory.summary_call_failed", user_id=user, error=exc.message)

    async def _refresh_summary(self, user_id: str, run: _Run) -> bool:
        """Rewrite the user's summary if the facts changed since it was written.
        True when a new summary was recorded; raises ``LLMError`` if the call fails."""
        for _ in range(SUMMARY_RACES):
            state = await self.service.state(user_id)
            facts = state.active()
            if not facts or state.summary_is_current:
                return False
            completion = await self._complete(
                summary_messages(facts, prompt=run.summary_prompt), run.model
            )
            text = completion.content.strip()
            if not text:
                log.warning("memory.summary_empty", user_id=user_id)
                return False
            decide = partial(
                decisions.summarize,
                text=text,
                model=completion.model or run.model or self.backend.model,
                based_on_seq=state.facts_seq,
                fact_ids=[f.fact_id for f in facts],
            )
            if await self.service.append(user_id, decide):
                return True
            # The facts changed while the summary was being written: write it again.
        return False


def _oldest_first(heads: dict[str, Recorded]) -> list[Recorded]:
    return sorted(heads.values(), key=lambda r: (r.timestamp, r.stream_id))


def _memory_users(heads: dict[str, Recorded]) -> list[str]:
    return sorted(u for u in map(user_of_stream, heads) if u is not None)


def _learned(events: Iterable[Event]) -> int:
    return sum(1 for e in events if isinstance(e, MemoryFactLearned))
