"""The session actor: the one writer of a session's stream.

It recovers its state from the log, takes requests from its mailbox (a user message,
a stop, a profile switch, …), records each decision as events, and only then acts.
A run is a child actor that drives the tool-calling loop; the session actor stays
free meanwhile, so a stop is handled at once: the stop signal reaches the LLM stream
and the tools, and ``stop.requested`` is recorded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import structlog

from actors import (
    Actor,
    ActorRef,
    ActorStopped,
    ChildFailed,
    ChildStopped,
    MailboxFull,
    Reply,
    Supervision,
)
from events.errors import EventDecodeError, is_storage_full
from events.store import EventStore
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
from navi.run.limiter import RunSlot
from navi.run.recompress import recompress_range, recompress_selection
from navi.run.state import IllegalTransition, RunState
from navi.run.workers import Worker
from navi.session import approvals
from navi.session import messages as m
from navi.session.errors import (
    AlreadyDecided,
    AmbiguousCall,
    ApprovalNotFound,
    NotWaitingForLLM,
    QueueFull,
    RunActive,
    SessionDamaged,
    SessionError,
    SessionNotFound,
)
from navi.session.input import check_files, check_text, decode_images, store_images
from navi.session.run_actor import JobActor, RunActor, Waits, slot_given_back
from navi.session.state import SessionState
from navi.session.stream import SessionStream
from profiles import UnknownProfile, profile_hash

log = structlog.get_logger(__name__)

MAX_QUEUED = 16
ASK_CHILD_S = 10.0  # a subagent's answer to where a call waits


@dataclass
class SessionDeps:
    store: EventStore
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
        # Set when a decision is recorded: the run's driver, waiting for it, goes on.
        self._decided: anyio.Event | None = None
        # Set by Try again: the run waiting for the model's server goes on at once.
        self._try_again = anyio.Event()
        # Where the run waits on someone else (a shutdown leaves it there at once).
        self.waits = Waits()
        self._run_child: str | None = None
        # The run's slot of the node (NAVI_MAX_LIVE_RUNS) while it runs; a subagent's None.
        self.slot: RunSlot | None = None
        self._runs = 0
        self._queue: deque[tuple[m.Send, str, tuple[str | ImageRef, ...]]] = deque()
        # A recompression asked for while the last run was winding down: (model, its reply).
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
        # The state folds the session's stream; after a failure, the last writer first
        # commits what it took.
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
        # Recovery continues what the log shows open (a crash, a restart, a takeover):
        # the one way a run resumes. A subagent's run resumes under its parent's run,
        # which re-attaches to it; opened on its own, it only answers.
        if self.state.run_active and not self.is_orphaned_subagent:
            log.info("run.resuming", session_id=self.session_id, run_id=self.stream.run_id)
            await self.spawn_run(resumed=True)

    async def on_stop(self) -> None:
        await self.stream.close()

    # ------------------------------------------------------------------ requests

    async def receive(self, message: object) -> Any:
        # A refused request is an answer, not a failure of the actor: it must not
        # restart the session (and with it a running run).
        command = COMMANDS.get(type(message))
        if command is None:
            return m.Refusal(SessionError(f"unknown request {type(message).__name__}"))
        if self.damaged is not None:
            return None if command.notice else m.Refusal(self.damaged)
        if command.needs_session and (self.state.created is None or self.state.deleted):
            return None if command.notice else m.Refusal(SessionNotFound(self.session_id))
        try:
            return await command.handle(self, message)
        except (SessionError, UnknownProfile, IllegalTransition) as refused:
            return m.Refusal(refused)

    async def _switch_profile(self, message: m.SwitchProfile) -> str:
        profile = self.deps.run.profiles.get(message.profile_id)
        check_entry(self.deps.run.users, self.state.user_id, profile)
        await self.record(ProfileSwitched(profile_id=profile.id, profile_name=profile.name))
        return profile.id

    async def _choose_model(self, message: m.ChooseModel) -> str:
        await self.record(SessionModelChosen(model=message.model))
        return message.model

    async def _pin(self, message: m.Pin) -> bool:
        pinned = not self.state.pinned if message.pinned is None else message.pinned
        await self.record(SessionPinned(pinned=pinned))
        return pinned

    async def _rename(self, message: m.Rename) -> None:
        await self.record(SessionRenamed(title=message.title.strip()[:200]))

    async def _delete(self, message: m.Delete) -> None:
        if self.state.run_active:
            await self.request_stop("deleted")
        await self.record(SessionDeleted())

    async def _stop_run(self, message: m.StopRun) -> bool:
        return await self.request_stop(message.reason)

    async def _child_failed(self, message: ChildFailed) -> None:
        if message.name != self._run_child:
            # A subagent's session: its parent's tool call reports it as failed.
            log.error("subagent.crashed", child=message.name, error=repr(message.error))
            return
        await self._run_crashed(message)

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
        await self.spawn_run(resumed=False)
        return m.RunStartedReply(run_id=run_id, after_seq=after)

    # ------------------------------------------------------------------ the run's life

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

    async def _run_ended(self, message: ChildStopped) -> None:
        if message.name != self._run_child:
            return
        self._run_child = None
        if self._pending_recompress is not None:
            model, reply = self._pending_recompress
            self._pending_recompress = None
            try:
                reply.set(await self.recompress(model))
                return  # queued messages start when the recompression has ended
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
        if is_storage_full(message.error):
            # Not the run's fault but the disk's: this actor fails with it, its
            # supervision restarts it with back-off, and recovery continues the run once
            # the store takes writes again (docs/deployment.md, "A full disk").
            raise message.error
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

    # ------------------------------------------------------------------ children at work

    async def spawn_run(self, *, resumed: bool) -> None:
        """Start the session's run (``resumed``: after a crash) in a child actor."""
        self._runs += 1
        name = self._run_child = f"run-{self._runs}"
        ref = await self.spawn_child(RunActor(self), name, supervision=Supervision.stop())
        await ref.tell(m.Drive(resumed=resumed))

    async def recompress(self, model: str | None) -> int | None:
        """Start a recompression in a child actor; answers the seq it starts after. Asked
        while the last run winds down (post-turn workers), it starts when that ends (the
        session keeps the deferred reply)."""
        if self.state.run_active or self._pending_recompress is not None:
            raise RunActive()
        if self._run_child is not None:
            self._pending_recompress = (model, self.defer_reply())
            return None
        records = await self.deps.store.read(self.session_id)
        keep = self.deps.run.settings.compression_keep_recent
        selection = recompress_selection(self.state.context, records, keep)
        if selection is None:
            raise SessionError("there is nothing to summarise in this session's context yet")
        after = self.state.last_seq

        async def job(session: SessionActor) -> None:
            await recompress_range(session, session.deps.run, selection, model)

        self._runs += 1
        name = self._run_child = f"recompress-{self._runs}"  # a message sent meanwhile waits
        self.stop_signal = StopSignal()  # the last run's stop is not this job's
        ref = await self.spawn_child(JobActor(self, job), name, supervision=Supervision.stop())
        await ref.tell(m.Drive())
        return after

    async def _recompress(self, message: m.Recompress) -> int | None:
        return await self.recompress(message.model)

    # ------------------------------------------------------------------ subagents

    async def _spawn_subagent(self, message: m.SpawnSubagent) -> ActorRef[object]:
        """The actor of subagent stream ``child_id``, started as a child of this one."""
        if self.stop_signal.is_set():
            raise SessionError("the run is stopping: no subagent starts now")
        existing = self.children.get(message.child_id)
        if existing is not None and not existing.is_stopped:
            return existing
        child = SessionActor(message.child_id, self.deps, parent=self)
        return await self.spawn_child(child, message.child_id, supervision=Supervision.stop())

    async def _start_subtask(self, message: m.StartSubtask) -> m.SubtaskStarted:
        """Run the subagent's task; after a crash, its run goes on (``on_start``)."""
        if self.parent is not None and self.parent.stop_signal.is_set():
            raise SessionError("the parent's run is stopping: the subagent does not start")
        if self.state.created is None:
            await self._create(
                m.Create(
                    profile_id=message.profile_id,
                    user_id=message.user_id,
                    parent_stream_id=message.parent_stream_id,
                    parent_call_id=message.parent_call_id,
                )
            )
        progress = self.state.progress
        if progress.run_id is None:
            reply = await self._start_run(message.task, (), (), "ephemeral")
            return m.SubtaskStarted(run_id=reply.run_id, after_seq=reply.after_seq)
        after = progress.started_seq - 1
        if not self.state.run_active:
            return m.SubtaskStarted(
                run_id=progress.run_id, after_seq=after, ended_seq=self.state.last_seq
            )
        return m.SubtaskStarted(run_id=progress.run_id, after_seq=after)  # going on since on_start

    def _subagents(self) -> list[ActorRef[object]]:
        """The running subagents' actors (children other than the run's)."""
        return [
            child
            for name, child in self.children.items()
            if name != self._run_child and not child.is_stopped
        ]

    # ------------------------------------------------------------------ decisions

    async def decide(self, message: m.Decide) -> str:
        """Record the decision on the call it names, here or in a running subagent;
        answers the stream id where it was recorded."""
        approvals.check(message)
        if message.stream_id:
            return await self._decide_in(message)
        streams = await self._waiting_on(m.WaitingOn(message.call_id))
        if len(streams) > 1:
            raise AmbiguousCall(
                f"{len(streams)} calls {message.call_id!r} wait for approval (in streams "
                f"{', '.join(streams)}): send the stream_id of the one you decide"
            )
        if streams:
            return await self._decide_in(replace(message, stream_id=streams[0]))
        return await self._not_waiting(message.call_id)

    async def _waiting_on(self, message: m.WaitingOn) -> tuple[str, ...]:
        """The streams of this session's tree where a call ``call_id`` waits."""
        found = [self.session_id] if self._awaits(message.call_id) else []
        for child in self._subagents():
            try:
                reply = await child.ask(message, ASK_CHILD_S)
            except (ActorStopped, MailboxFull, TimeoutError):
                continue
            if isinstance(reply, tuple):
                found.extend(reply)
        return tuple(found)

    async def _decide_in(self, message: m.Decide) -> str:
        """Decide the call in the stream ``message.stream_id`` names: this one, or one
        of its running subagents' (or theirs)."""
        if message.stream_id == self.session_id:
            async with self.stream.lock:
                awaiting = self.state.progress.awaiting
                if awaiting is not None and self._awaits(message.call_id):
                    await self.stream.record_locked([approvals.decision(awaiting, message)])
                    if self._decided is not None:
                        self._decided.set()
                    return self.session_id
            return await self._not_waiting(message.call_id)
        for child in self._subagents():
            try:
                reply = await child.ask(message, ASK_CHILD_S)
            except (ActorStopped, MailboxFull, TimeoutError):
                continue
            if isinstance(reply, m.Refusal):
                if isinstance(reply.error, ApprovalNotFound):
                    continue  # not in that child's tree
                raise reply.error
            if isinstance(reply, str):
                return reply
        raise ApprovalNotFound(
            f"no call {message.call_id!r} waits for approval in stream "
            f"{message.stream_id!r} of this session"
        )

    def _awaits(self, call_id: str) -> bool:
        awaiting = self.state.progress.awaiting
        waiting = self.state.run_state is RunState.AWAITING_APPROVAL
        return waiting and awaiting is not None and awaiting.call_id == call_id

    async def _not_waiting(self, call_id: str) -> str:
        if await approvals.was_asked(self.deps.store, self.session_id, call_id):
            raise AlreadyDecided(f"call {call_id!r} was already decided or has ended")
        raise ApprovalNotFound(f"no call {call_id!r} waits for approval in this session")

    async def wait_for_decision(self, deadline: float) -> None:
        """Until the waiting call is decided, the run is stopped, or ``deadline``
        (``anyio.current_time()``'s clock)."""
        self._decided = decided = anyio.Event()
        if self.state.run_state is not RunState.AWAITING_APPROVAL:
            return  # decided (or stopped) before the driver got here
        with self.waits.waiting(), self.stop_signal.scope(deadline):
            await decided.wait()

    # ------------------------------------------------------------------ the model's server

    async def wait_for_llm(self, deadline: float) -> bool:
        """Until Try again (True), a stop, or ``deadline`` (the driver's next probe)."""
        with self.waits.waiting(), self.stop_signal.scope(deadline):
            await self._try_again.wait()
        asked = self._try_again.is_set()
        if asked:
            self._try_again = anyio.Event()
        return asked

    def slot_given_back(self) -> AbstractAsyncContextManager[None]:
        """The run's slot of the node given back while it waits for the model's server."""
        return slot_given_back(self)

    async def _try_again_now(self, message: m.TryAgain) -> bool:
        """Try again: the run waiting for the model's server (here, or in a running
        subagent) goes on now."""
        if self.state.run_state is RunState.WAITING_FOR_LLM:
            self._try_again.set()
            return True
        for child in self._subagents():
            with suppress(ActorStopped, MailboxFull, TimeoutError):
                if await child.ask(message, ASK_CHILD_S) is True:
                    return True
        raise NotWaitingForLLM("no run of this session waits for the model's server")

    # ------------------------------------------------------------------ writing

    async def record(self, *events: Event) -> None:
        """Check, append and apply events; returns when they are durable."""
        await self.stream.record(*events)

    async def stage(self, event: Event) -> None:
        """Check, stage and apply a chunk event (durable soon, not awaited)."""
        await self.stream.stage(event)

    async def commit(self) -> None:
        await self.stream.commit()


@dataclass(frozen=True)
class Command:
    """How the session takes one type of message: the method that handles it;
    ``needs_session``: refused (``SessionNotFound``) before the session is created or
    once deleted; ``notice``: a child's news, never refused, ignored when refused."""

    handle: Callable[[SessionActor, Any], Awaitable[Any]]
    needs_session: bool = True
    notice: bool = False


S = SessionActor
# fmt: off
COMMANDS: dict[type, Command] = {
    m.Create:         Command(S._create, needs_session=False),
    m.StartSubtask:   Command(S._start_subtask, needs_session=False),
    m.Send:           Command(S._send),
    m.StopRun:        Command(S._stop_run),
    m.Decide:         Command(S.decide),
    m.WaitingOn:      Command(S._waiting_on),
    m.SpawnSubagent:  Command(S._spawn_subagent),
    m.Recompress:     Command(S._recompress),
    m.TryAgain:       Command(S._try_again_now),
    m.SwitchProfile:  Command(S._switch_profile),
    m.ChooseModel:    Command(S._choose_model),
    m.Pin:            Command(S._pin),
    m.Rename:         Command(S._rename),
    m.Delete:         Command(S._delete),
    ChildStopped:     Command(S._run_ended, notice=True),
    ChildFailed:      Command(S._child_failed, notice=True),
}
# fmt: on
