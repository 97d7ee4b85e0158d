"""The session actor: the one writer of a session's stream.

It recovers its state from the log, takes requests from its mailbox (a user message,
a stop, a profile switch, …), records each decision as events, and only then acts.
A run is a child actor that drives the tool-calling loop; the session actor stays
free meanwhile, so a stop is handled at once: the stop signal reaches the LLM stream
and the tools, and ``stop.requested`` is recorded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import structlog

from actors import Actor, ActorStopped, ChildFailed, ChildStopped, MailboxFull, Reply
from events.base import BaseEventStore
from events.errors import EventDecodeError
from events.types import (
    CallOptions,
    Event,
    ImageRef,
    ProfileSwitched,
    RunFailed,
    RunStarted,
    SessionCreated,
    SessionDeleted,
    SessionModelChosen,
    SessionPinned,
    SessionRenamed,
    StopRequested,
    UserMessage,
)
from navi.blobs import BlobStore
from navi.grants import check_entry
from navi.llm.stop import StopSignal
from navi.run import compression
from navi.run.host import RunDeps
from navi.run.state import IllegalTransition, RunState
from navi.run.workers import Worker
from navi.session import approvals, run_actor, subtasks
from navi.session import messages as m
from navi.session.errors import (
    QueueFull,
    RunActive,
    SessionDamaged,
    SessionError,
    SessionNotFound,
)
from navi.session.input import check_files, check_text, decode_images, store_images
from navi.session.state import SessionState
from navi.session.stream import SessionStream
from profiles import UnknownProfile, profile_hash

log = structlog.get_logger(__name__)

MAX_QUEUED = 16


@dataclass
class SessionDeps:
    store: BaseEventStore
    run: RunDeps
    new_id: Callable[[], str]
    clock: Callable[[], float]
    workers: Sequence[Worker] = field(default=())
    # Where a message's images are kept (navi/blobs.py); None: inline in the log.
    blobs: BlobStore | None = None


class SessionActor(Actor[object]):
    """One session's stream. A subagent's session is a child actor of its parent's
    (``parent``); see docs/planning-subagents-compression.md."""

    mailbox_size = 32

    def __init__(
        self, session_id: str, deps: SessionDeps, *, parent: SessionActor | None = None
    ) -> None:
        self.session_id = session_id
        self.deps = deps
        self.parent = parent
        self.stream = SessionStream(deps.store, session_id, deps.clock)
        self.stop_signal = StopSignal()
        self.decisions = approvals.DecisionWait()
        self._run_child: str | None = None
        self._runs = 0
        self._queue: deque[tuple[m.Send, str, tuple[str | ImageRef, ...]]] = deque()
        # A re-summary asked for while the last run was winding down: (model, its reply).
        self._pending_recompress: tuple[str | None, Reply] | None = None
        # Set when the log holds an event no Navi can read: every request is refused.
        self.damaged: SessionDamaged | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def state(self) -> SessionState:
        return self.stream.state

    @state.setter
    def state(self, state: SessionState) -> None:
        self.stream.state = state

    async def on_start(self) -> None:
        # The state folds the session's history (a fork's: its origin's events up to
        # the fork point, then its own); after a failure, the last writer first commits
        # what it took.
        try:
            writer = await self.stream.open()
        except (EventDecodeError, ValueError, OverflowError) as exc:
            # An event no Navi can read, or a value no fold can take (a time out of the
            # calendar's range): it would fail the same way on every restart. This
            # session refuses every request with the reason, at once; the others go on.
            reason = exc.reason if isinstance(exc, EventDecodeError) else f"{exc}"
            self.damaged = SessionDamaged(
                self.session_id, f"its log holds a damaged event ({reason})"
            )
            return
        self.start_soon(writer.run, "writer")
        self._run_child = None
        self.stop_signal = StopSignal()
        if self.state.run_state is RunState.STOPPING:
            self.stop_signal.set("user")

    async def on_stop(self) -> None:
        await self.stream.close()

    # ------------------------------------------------------------------ requests

    async def receive(self, message: object) -> Any:
        # A refused request is an answer, not a failure of the actor: it must not
        # restart the session (and with it a running run).
        if self.damaged is not None:
            if isinstance(message, ChildStopped | ChildFailed):
                return None
            return m.Refusal(self.damaged)
        try:
            return await self._handle(message)
        except (SessionError, UnknownProfile, IllegalTransition) as refused:
            return m.Refusal(refused)

    async def _handle(self, message: object) -> Any:
        if isinstance(message, m.Create):
            return await self._create(message)
        if isinstance(message, m.StartSubtask):
            return await subtasks.start_subtask(self, message)
        if self.state.created is None or self.state.deleted:
            if isinstance(message, ChildStopped | ChildFailed):
                return None
            raise SessionNotFound(self.session_id)
        if isinstance(message, m.Send):
            return await self._send(message)
        if isinstance(message, m.StopRun):
            return await self.request_stop(message.reason)
        if isinstance(message, m.Decide):
            return await approvals.decide(self, message)
        if isinstance(message, m.WaitingOn):
            return await approvals.waiting_streams(self, message.call_id)
        if isinstance(message, m.Resume):
            return await self._resume()
        if isinstance(message, m.SpawnSubagent):
            return await subtasks.spawn_subagent(self, message.child_id)
        if isinstance(message, m.Recompress):
            return await run_actor.recompress(self, message.model)
        if isinstance(message, m.SwitchProfile):
            profile = self.deps.run.profiles.get(message.profile_id)
            check_entry(self.deps.run.users, self.state.user_id, profile)
            await self.record(ProfileSwitched(profile_id=profile.id, profile_name=profile.name))
            return profile.id
        if isinstance(message, m.ChooseModel):
            await self.record(SessionModelChosen(model=message.model))
            return message.model
        if isinstance(message, m.Pin):
            pinned = message.pinned
            if pinned is None:
                pinned = not self.state.pinned
            await self.record(SessionPinned(pinned=pinned))
            return pinned
        if isinstance(message, m.Rename):
            await self.record(SessionRenamed(title=message.title.strip()[:200]))
            return None
        if isinstance(message, m.Delete):
            if self.state.run_active:
                await self.request_stop("deleted")
            await self.record(SessionDeleted())
            return None
        if isinstance(message, ChildStopped):
            return await self._run_ended(message.name)
        if isinstance(message, ChildFailed):
            if message.name != self._run_child:
                # A subagent's session: its parent's tool call reports it as failed.
                log.error("subagent.crashed", child=message.name, error=repr(message.error))
                return None
            return await self._run_crashed(message)
        raise SessionError(f"unknown request {type(message).__name__}")

    async def _create(self, message: m.Create) -> str:
        if self.state.created is not None:
            raise SessionError(f"session {self.session_id!r} already exists")
        profile = self.deps.run.profiles.get(message.profile_id)
        check_entry(self.deps.run.users, message.user_id, profile)
        await self.record(
            SessionCreated(
                profile_id=profile.id,
                user_id=message.user_id,
                title=message.title,
                parent_stream_id=message.parent_stream_id,
                parent_call_id=message.parent_call_id,
                origin=message.origin,
            )
        )
        return self.session_id

    async def _send(self, message: m.Send) -> m.RunStartedReply:
        if self.is_orphaned_subagent:
            raise SessionError("this is a subagent's session: it runs only under its parent")
        decoded = decode_images(message.images)
        text = check_text(message.text, tuple(decoded))
        files = check_files(message.files)
        if self.state.run_active and not message.queue:
            raise RunActive()
        queued = self.state.run_active or self._run_child is not None or bool(self._queue)
        if queued and len(self._queue) >= MAX_QUEUED:
            raise QueueFull(f"{MAX_QUEUED} messages are already waiting in this session")
        # Stored before the event that refers to them is written (quota checked here).
        images = await store_images(
            self.deps.blobs, decoded, user_id=self.state.user_id, session_id=self.session_id
        )
        if queued:
            # Queued: asked for, or the last run has ended but is still winding down
            # (post-turn workers) — a message sent after stream_end is never refused.
            run_id = message.run_id or self.deps.new_id()
            self._queue.append((message, run_id, images))
            return m.RunStartedReply(run_id=run_id, after_seq=self.state.last_seq, queued=True)
        return await self._start_run(
            text, images, files, message.mode, message.run_id, message.call_options
        )

    async def _start_run(
        self,
        text: str,
        images: tuple[str | ImageRef, ...],
        files: tuple[Any, ...],
        mode: Any,
        run_id: str | None = None,
        call_options: CallOptions | None = None,
    ) -> m.RunStartedReply:
        # A post-turn compression that a crash interrupted ends before the new turn.
        await compression.abandon_interrupted(self)
        after = self.state.last_seq
        profile_id = self.state.profile.profile_id or self.deps.run.profiles.default_id
        profile = self.deps.run.profiles.get(profile_id)
        run_id = run_id or self.deps.new_id()
        backend = await self.deps.run.backend_for(profile)
        self.stream.run_id = run_id
        self.stop_signal = StopSignal()
        await self.record(
            UserMessage(text=text, images=images, files=files),
            RunStarted(
                profile_id=profile.id,
                profile_hash=profile_hash(profile),
                mode=mode,
                max_iterations=profile.max_iterations,
                backend=backend.name,
                model=self.state.chosen_model or profile.model or backend.model,
                call_options=call_options,
            ),
        )
        await run_actor.spawn_run(self, resumed=False)
        return m.RunStartedReply(run_id=run_id, after_seq=after)

    async def _resume(self) -> bool:
        if self.is_orphaned_subagent:
            # Its parent's run resumes it (re-attaching to it as its child actor).
            self.stop("a subagent session resumes under its parent")
            return False
        if not self.state.run_active or self._run_child is not None:
            return False
        log.info("run.resuming", session_id=self.session_id, run_id=self.stream.run_id)
        await run_actor.spawn_run(self, resumed=True)
        return True

    # ------------------------------------------------------------------ subagents

    @property
    def data_owner(self) -> SessionActor:
        """The session whose files, todo list and notes tools work on: this one, or for a
        subagent its top-level session."""
        return self if self.parent is None else self.parent.data_owner

    @property
    def is_orphaned_subagent(self) -> bool:
        """A subagent's stream opened as a session of its own (not under its parent)."""
        created = self.state.created
        return self.parent is None and created is not None and created.parent_call_id is not None

    async def _run_ended(self, name: str) -> None:
        if name != self._run_child:
            return
        self._run_child = None
        if self._pending_recompress is not None:
            model, reply = self._pending_recompress
            self._pending_recompress = None
            try:
                reply.set(await run_actor.recompress(self, model))
                return  # queued messages start when the re-summary has ended
            except (SessionError, IllegalTransition) as refused:
                reply.set(m.Refusal(refused))
        if self.parent is not None and not self._queue:
            self.stop("subagent run ended")  # a subagent session runs one task
            return
        if self._queue and not self.state.run_active:
            queued, run_id, images = self._queue.popleft()
            try:
                await self._start_run(
                    queued.text, images, queued.files, queued.mode, run_id, queued.call_options
                )
            except SessionError as exc:
                log.warning("queued_message.refused", session_id=self.session_id, error=str(exc))

    async def _run_crashed(self, message: ChildFailed) -> None:
        log.error(
            "run.crashed",
            session_id=self.session_id,
            run_id=self.stream.run_id,
            error=repr(message.error),
        )
        if self.state.run_active:
            await self.record(RunFailed(error=f"internal error: {message.error}"))

    async def request_stop(self, reason: str = "user") -> bool:
        """Stop the active run: the signal first (it ends a stream at once), then the event.
        Running subagents get the stop as a message."""
        if not self.state.run_active:
            return False
        self.stop_signal.set(reason)
        for name, child in self.children.items():
            if name != self._run_child:
                with suppress(ActorStopped, MailboxFull):
                    child.tell_nowait(m.StopRun(reason=reason), priority=True)
        async with self.stream.lock:
            if self.state.run_active and self.state.run_state is not RunState.STOPPING:
                await self.stream.record_locked([StopRequested(reason=reason)])
        return True

    # ------------------------------------------------------------------ approvals

    def approval_decided(self) -> None:
        """A decision was recorded: the run's driver, waiting for it, goes on."""
        self.decisions.wake()

    async def wait_for_decision(self, deadline: float) -> None:
        """Until the waiting call is decided, the run is stopped, or ``deadline``
        (``anyio.current_time()``'s clock)."""
        await self.decisions.wait(self, deadline)

    # ------------------------------------------------------------------ writing

    async def record(self, *events: Event) -> None:
        """Check, append and apply events; returns when they are durable."""
        await self.stream.record(*events)

    async def stage(self, event: Event) -> None:
        """Check, stage and apply a chunk event (durable soon, not awaited)."""
        await self.stream.stage(event)

    async def commit(self) -> None:
        await self.stream.commit()
