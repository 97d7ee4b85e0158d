"""The run driver: Navi's tool-calling loop, one decision at a time.

It looks at the run's progress (a fold of the log), does the next step, records what
happened, and looks again. A fresh run and one resumed after a crash are therefore the
same code: an LLM call left open is re-issued, a tool call left open is re-run if its
tool is idempotent and otherwise marked ``interrupted``, and nothing that completed is
ever done twice. Every decision is durable before its effect starts.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

import anyio
import structlog

from events.envelope import Recorded
from events.types import (
    Event,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    LLMText,
    LLMThinking,
    LLMToolCalls,
    NoteDeleted,
    NoteSaved,
    RunCompleted,
    RunFailed,
    RunStopped,
    TodoItem,
    TodoUpdated,
    ToolCall,
    ToolCompleted,
    ToolFailed,
    ToolRequested,
    ToolStarted,
)
from navi.accounts import Users
from navi.blobs import BlobStore, keep_tool_image
from navi.config import Settings
from navi.ids import session_folder
from navi.llm.base import LLMBackend
from navi.llm.errors import LLMError, ThinkingNotSupported
from navi.llm.stop import StopSignal
from navi.llm.types import FinalChunk, LLMOptions, TextPiece, ThinkingPiece, ToolCallsChunk
from navi.run import compression, injections, permissions
from navi.run.context_builder import ContextBuilder
from navi.run.planning import Planner
from navi.run.state import IllegalTransition, RunState
from navi.session.state import SessionState
from profiles import Profile, ProfileRegistry
from tools import ProfileInfo, ToolContext, ToolRegistry, ToolResult

log = structlog.get_logger(__name__)

BackendFor = Callable[[Profile], Awaitable[LLMBackend]]
Hook = Callable[..., Awaitable[object]]

INTERRUPTED = (
    "Navi was restarted while this call was running, so it may or may not have happened. "
    "Check its effect before trying it again."
)
STOPPED = "The user stopped the run before this call finished."


class RunHost(Protocol):
    """What the driver needs from the session actor that owns the stream."""

    session_id: str
    state: SessionState
    stop_signal: StopSignal

    async def record(self, *events: Event) -> None:
        """Check, append and apply events; returns when they are durable."""

    async def stage(self, event: Event) -> None:
        """Check, stage and apply a chunk event (durable soon, not awaited)."""

    async def request_stop(self, reason: str = "user") -> bool:
        """Record ``stop.requested`` (if not yet) and set the stop signal."""

    @property
    def data_owner(self) -> RunHost:
        """The session whose files, todo list and notes the tools work on: the host
        itself, or for a subagent its top-level session (also a host)."""


@dataclass
class RunDeps:
    settings: Settings
    profiles: ProfileRegistry
    tools: ToolRegistry
    builder: ContextBuilder
    backend_for: BackendFor
    files_root: Path
    # Who may use which tools (checked before every call: navi/run/permissions.py).
    # Without users files, only the local user is known.
    users: Users = field(default_factory=lambda: Users([], open_access=True))
    # Where images tools return are kept (navi/blobs.py); None: inline in the log.
    blobs: BlobStore | None = None
    # Hooks offered to tools (spawn_agent, switch_profile), built per call by the host.
    tool_hooks: Callable[[RunHost, str], dict[str, Hook | None]] = field(
        default=lambda host, call_id: {}
    )
    # The context window of a profile's model, as its backend tells (Navi.context_window).
    context_window: Callable[[Profile], int] = field(
        default=lambda profile: profile.num_ctx or 65536
    )


class RunDriver:
    def __init__(self, host: RunHost, deps: RunDeps, *, resumed: bool = False) -> None:
        self.host = host
        self.deps = deps
        self.state = host.state
        self.log = log.bind(session_id=host.session_id, run_id=self.state.progress.run_id)
        progress = self.state.progress
        # Calls that were open when the run was recovered follow the resume rules.
        self._in_doubt = {c.id for c in progress.open_calls} if resumed else set()
        self._think_off = False
        self._planned = False  # planning (or the decision not to plan) is behind us
        self._compression_checked = -1  # the iteration whose pre-turn check was done
        # The call whose tool.started went into the commit of its decision (see
        # _record_answer): _execute does not stage it again.
        self._started: str | None = None
        self._info: tuple[Profile, ProfileInfo] | None = None  # of the profile last used
        self._files: tuple[str, Path, str] | None = None  # owner, files folder, its name

    # ------------------------------------------------------------------ the loop

    async def drive(self) -> None:
        # A compression that a crash interrupted: recorded as failed, then checked again.
        await compression.abandon_interrupted(self.host)
        while True:
            p = self.state.progress
            if p.ended:
                return
            if p.stop_requested or self.host.stop_signal.is_set():
                await self._finish_stopped()
                return
            if self.state.run_state is RunState.ANSWERED:
                await self._complete(p.last_completion.content if p.last_completion else "")
                return
            if p.unrequested_calls:
                await self.host.record(
                    *(
                        ToolRequested(
                            call_id=c.id, name=c.name, arguments=c.arguments, step=p.iterations
                        )
                        for c in p.unrequested_calls
                    )
                )
                continue
            if p.open_calls:
                batch = self._concurrent_batch(p.open_calls)
                if len(batch) > 1:
                    await self._execute_together(batch)
                else:
                    await self._execute(p.open_calls[0], last=len(p.open_calls) == 1)
                continue
            if p.failures:
                if not await self._may_retry():
                    await self.host.record(RunFailed(error=p.last_error))
                    return
                await self._call_llm(p.iterations, p.attempt + 1)
                continue
            if p.llm_open:  # a call interrupted by a crash: ask again
                await self._call_llm(p.iterations, p.attempt + 1)
                continue
            if p.iterations >= p.max_iterations:
                await self._complete(
                    f"I stopped after {p.max_iterations} steps, the limit for one turn, "
                    "before finishing. Tell me to continue if you want me to go on.",
                    completed_normally=False,
                )
                return
            await self._before_llm_call(p.iterations + 1)
            if not self._planned:
                self._planned = True
                if self._wants_plan():
                    await self._plan()
                continue  # a stop may have come meanwhile
            await self._inject()
            await self._call_llm(p.iterations + 1, 1)

    # ------------------------------------------------------------------ before a call

    async def _before_llm_call(self, iteration: int) -> None:
        """The pre-turn compression check, once per iteration."""
        if self._compression_checked == iteration:
            return
        self._compression_checked = iteration
        await compression.compress_if_needed(self.host, self.deps)

    def _wants_plan(self) -> bool:
        """Planning runs before the first iteration of a streamed turn when the profile
        enables it; in a subagent when the profile enables subagent planning."""
        p = self.state.progress
        if p.iterations > 0 or p.plan_ready or self.deps.settings.planning == "off":
            return False
        profile = self._profile()
        if self.deps.settings.planning == "auto" and self.state.progress.backend == "embedded":
            return False  # a tiny local model plans badly and slowly: NAVI_PLANNING=on forces it
        if self._subagent():
            return profile.subagent_planning_enabled
        return p.mode == "stream" and profile.planning_enabled

    async def _plan(self) -> None:
        planner = Planner(
            self.host,
            self.deps,
            self._profile(),
            goal=self._goal(),
            subagent=self._subagent(),
        )
        await planner.run()

    async def _complete(self, content: str, *, completed_normally: bool = True) -> None:
        await self.host.record(
            RunCompleted(
                content=content,
                completed_normally=completed_normally,
                iterations=self.state.progress.iterations,
            )
        )

    async def _may_retry(self) -> bool:
        p = self.state.progress
        last = self._last_failure
        if last is not None and isinstance(last, ThinkingNotSupported):
            self._think_off = True
            return p.failures <= self.deps.settings.llm_retries
        retryable = last.retryable if last is not None else True
        if not retryable or p.failures > self.deps.settings.llm_retries:
            return False
        delay = self.deps.settings.llm_retry_backoff_s * 2 ** (p.failures - 1)
        with anyio.move_on_after(delay):
            await self.host.stop_signal.wait()
        return not self.host.stop_signal.is_set()

    _last_failure: LLMError | None = None

    # ------------------------------------------------------------------ LLM

    def _profile(self) -> Profile:
        profile_id = self.state.profile.profile_id or self.deps.profiles.default_id
        return self.deps.profiles.get(profile_id)

    def _subagent(self) -> bool:
        created = self.state.created
        return created is not None and created.parent_stream_id is not None

    async def _inject(self) -> None:
        events = self._injections()
        if events:
            await self.host.record(*events)

    def _injections(self) -> list[Event]:
        """What Navi puts in front of the next LLM call (pure: progress, profile, todo)."""
        p = self.state.progress
        profile = self._profile()
        todo = self.state.todo_items
        found = [
            injections.iteration_budget(p, profile),
            injections.goal_anchor(p, profile, self._goal),
            injections.anti_stall(p, profile, todo),
            injections.replan(p, profile, todo),
        ]
        return [e for e in found if e is not None]

    def _goal(self) -> str:
        """The user's message that started this run."""
        for message in reversed(self.state.context.as_list()):
            if (
                message.role == "user"
                and not message.is_summary
                and message.seq < (self.state.progress.started_seq)
            ):
                return message.content
        return ""

    def _options(self, profile: Profile, backend: LLMBackend) -> LLMOptions:
        think: bool | str | None = None
        if profile.think_enabled and not self._think_off:
            think = self.deps.settings.llm.think
        elif not profile.think_enabled or self._think_off:
            think = False
        return LLMOptions(
            model=profile.model,
            temperature=profile.temperature,
            num_ctx=profile.num_ctx or self.deps.settings.llm.num_ctx,
            think=think,
        )

    async def _call_llm(self, iteration: int, attempt: int) -> None:
        await self._make_call(await self._prepare_call(iteration, attempt))

    async def _prepare_call(self, iteration: int, attempt: int) -> _Call:
        """What the call will be: its backend, tools, options and ``llm.requested``."""
        profile = self._profile()
        backend = await self.deps.backend_for(profile)
        subagent = self._subagent()
        names = permissions.allowed_tools(
            self.deps.builder,
            self.deps.users,
            profile,
            subagent=subagent,
            user_id=self.state.user_id,
        )
        if backend.name == "embedded" and not self.deps.settings.embedded_tools:
            # The small packaged model cannot drive tools (it loops on them), and their
            # schemas triple its prompt: it chats unless NAVI_EMBEDDED_TOOLS=true.
            names = []
        options = self._options(profile, backend)
        request = LLMRequested(
            iteration=iteration,
            attempt=attempt,
            model=options.model or backend.model,
            tools=tuple(names),
            options={
                "temperature": options.temperature,
                "num_ctx": options.num_ctx,
                "think": options.think,
                "backend": backend.name,
            },
        )
        return _Call(profile, backend, subagent, names, options, request)

    async def _make_call(self, call: _Call, *, first: Sequence[Event] = ()) -> bool:
        """One LLM call of the loop: ``llm.requested`` (after the events ``first``, in the
        same commit), then the stream, then the answer and what it decides. False when
        ``first`` was given and a stop came before the commit: nothing was recorded."""
        profile, backend, subagent, names, options, request = call
        attempt = request.attempt
        try:
            await self.host.record(*first, request)
        except IllegalTransition:
            # A stop was recorded while this commit waited for the session's lock.
            if not first or not self._stopping():
                raise
            return False
        # The context as of the decision (with what ``first`` added to it).
        messages = await self.deps.builder.messages(
            self.state.context.as_list(), profile, user_id=self.state.user_id, subagent=subagent
        )
        requested_seq = self.state.last_seq
        content: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        final: FinalChunk | None = None
        # Tool calls are staged as a chunk only if more of the answer follows them (text,
        # thinking) or it breaks off (a failure, a stop). Usually the answer ends right
        # after its calls, and llm.completed, which carries the same calls, is committed
        # at once: the chunk would be a row that no reader could ever see on its own.
        held: list[LLMToolCalls] = []
        try:
            async with aclosing(
                backend.stream_complete(
                    messages,
                    self.deps.builder.tool_specs(names),
                    options,
                    stop=self.host.stop_signal,
                )
            ) as stream:
                async for chunk in stream:
                    if type(chunk) is TextPiece or type(chunk) is ThinkingPiece:
                        if held:
                            for event in held:
                                await self.host.stage(event)
                            held.clear()
                        if type(chunk) is TextPiece:
                            content.append(chunk.text)
                            await self.host.stage(LLMText(text=chunk.text))
                        else:
                            thinking.append(chunk.text)
                            await self.host.stage(LLMThinking(text=chunk.text))
                    elif type(chunk) is ToolCallsChunk:
                        named = _name_calls(chunk.calls, requested_seq, len(calls))
                        calls.extend(named)
                        held.append(LLMToolCalls(calls=tuple(named)))
                    elif type(chunk) is FinalChunk:
                        final = chunk
                        if chunk.finish_reason == "stopped":
                            for event in held:
                                await self.host.stage(event)
        except LLMError as exc:
            self._last_failure = exc
            self.log.warning("llm.failed", error=exc.message, kind=exc.kind, attempt=attempt)
            failed = LLMFailed(error=exc.message, kind=exc.kind, retryable=exc.retryable)
            await self.host.record(*held, failed)
            return True
        self._last_failure = None
        if final is None or final.finish_reason == "stopped":
            return True  # the stop is handled at the top of the loop
        await self._record_answer(
            LLMCompleted(
                content="".join(content),
                thinking="".join(thinking),
                tool_calls=tuple(calls),
                finish_reason=final.finish_reason,
                prompt_tokens=final.prompt_tokens,
                completion_tokens=final.completion_tokens,
            )
        )
        return True

    async def _record_answer(self, completed: LLMCompleted) -> None:
        """Record an answer together with what the loop decides from it, in one commit:
        its calls' ``tool.requested`` (and ``tool.started`` of the call that runs first),
        or ``run.completed`` for a final answer. The decisions are durable before their
        effects all the same; recorded one by one they would cost a commit each.

        Once a stop is under way, only the answer is recorded: the stop is handled at
        the top of the loop, and nothing new may start."""
        if self._stopping():
            await self.host.record(completed)
            return
        p = self.state.progress
        decided: list[Event]
        started: str | None = None
        if completed.tool_calls:
            decided = [
                ToolRequested(call_id=c.id, name=c.name, arguments=c.arguments, step=p.iterations)
                for c in completed.tool_calls
            ]
            first = completed.tool_calls[0]
            if len(self._concurrent_batch(completed.tool_calls)) <= 1:
                decided.append(ToolStarted(call_id=first.id, name=first.name))
                started = first.id
        else:
            decided = [RunCompleted(content=completed.content, iterations=p.iterations)]
        try:
            await self.host.record(completed, *decided)
        except IllegalTransition:
            # A stop was recorded while this commit waited for the session's lock.
            if not self._stopping():
                raise
            await self.host.record(completed)
            return
        self._started = started

    def _stopping(self) -> bool:
        return self.state.progress.stop_requested or self.host.stop_signal.is_set()

    # ------------------------------------------------------------------ tools

    def _concurrent_batch(self, calls: Sequence[ToolCall]) -> list[ToolCall]:
        """Leading open calls of tools that may run side by side (``concurrent``), e.g.
        several ``spawn_agent`` calls: subagents work in parallel."""
        batch = []
        for call in calls:
            if not getattr(self.deps.tools.get(call.name), "concurrent", False):
                break
            batch.append(call)
        return batch

    async def _execute_together(self, calls: Sequence[ToolCall]) -> None:
        async with anyio.create_task_group() as tg:
            for call in calls:
                tg.start_soon(self._execute, call)

    async def _execute(self, call: ToolCall, *, last: bool = False) -> None:
        """Run one call and record its result; ``last``: no other call of the step is
        open, so the next LLM call may share the result's commit."""
        tools = self.deps.tools
        if call.id in self._in_doubt:
            self._in_doubt.discard(call.id)
            if not tools.is_idempotent(call.name, call.arguments):
                await self.host.record(
                    ToolFailed(
                        call_id=call.id, name=call.name, reason="interrupted", error=INTERRUPTED
                    )
                )
                return
            self.log.info("tool.rerun_idempotent", tool=call.name, call_id=call.id)
        refused = permissions.refusal(
            self.deps.builder,
            self.deps.users,
            call.name,
            self._profile(),
            subagent=self._subagent(),
            user_id=self.state.user_id,
        )
        if refused is not None:
            self.log.warning("tool.refused", tool=call.name, call_id=call.id, why=refused)
            if call.id == self._started:
                self._started = None
            await self.host.record(ToolFailed(call_id=call.id, name=call.name, error=refused))
            return
        if call.id == self._started:
            self._started = None  # recorded with the decision to run it
        else:
            await self.host.stage(ToolStarted(call_id=call.id, name=call.name))
        result = await tools.execute(call.name, call.arguments, self._tool_context(call))
        # An image it returned goes to the blob store; the log keeps a reference.
        result = await keep_tool_image(
            self.deps.blobs,
            result,
            user_id=self.state.user_id,
            session_id=self.host.data_owner.session_id,
        )
        event = _result_event(call, result)
        if last and await self._request_next_with(event):
            return
        await self.host.record(event)

    async def _request_next_with(self, result: Event) -> bool:
        """After the last call of a step the loop's next step is usually the next LLM
        call: then it is made here, and the result goes into the commit of its
        ``llm.requested`` (after the context injected before it). The log holds the same
        events in the same order as when the loop records them one by one, with one
        commit fewer, and the result is durable before any effect that follows it.

        False, with nothing recorded, when anything else would come first (a stop, the
        iteration limit, a retry, a compression): the loop then goes on as usual."""
        p = self.state.progress
        if (
            self._stopping()
            or p.iterations == 0
            or p.iterations >= p.max_iterations
            or p.failures
            or p.llm_open
            or p.unrequested_calls
            or self.state.run_state is not RunState.EXECUTING_TOOLS
        ):
            return False
        iteration = p.iterations + 1
        ahead = Recorded(
            stream_id=self.host.session_id,
            seq=self.state.last_seq + 1,
            position=0,
            event_id="",
            timestamp=self.state.last_timestamp,
            event=result,
            run_id=p.run_id,
        )
        if self._compression_checked != iteration and compression.would_compress(
            self.host, self.deps, ahead
        ):
            return False
        # What the loop would do next: the pre-turn check is done (above, with the
        # result), planning is for the first iteration only, then the injections.
        try:
            call = await self._prepare_call(iteration, 1)
            injected = self._injections()
        except Exception:
            await self.host.record(result)  # the result is kept whatever fails next
            raise
        self._compression_checked = iteration
        self._planned = True
        return await self._make_call(call, first=(result, *injected))

    def _tool_context(self, call: ToolCall) -> ToolContext:
        state = self.state
        profile = self._profile()
        owner = self.host.data_owner
        # A subagent works on its top-level session's files, todo list and notes; its
        # scratchpad stays its own (isolated from its parent and its siblings). A child
        # session run on its own (run_ephemeral) uses the files of the session it names.
        created = state.created
        files_owner = owner.session_id
        if owner is self.host and created is not None and created.parent_stream_id:
            files_owner = created.parent_stream_id
        # A tool that never touches the files folder does not need it made.
        uses_files = getattr(self.deps.tools.get(call.name), "uses_files", True)
        files_dir = self._files_dir(files_owner, make=uses_files)
        hooks = self.deps.tool_hooks(self.host, call.id)
        shared = owner is not self.host
        return ToolContext(
            session_id=self.host.session_id,
            files_dir=files_dir,
            emit=self._emit_shared if shared else self._emit,
            state=SharedToolState(own=state, owner=owner.state) if shared else state,
            user_id=state.user_id,
            stop=self.host.stop_signal,
            settings=self.deps.settings.tools,
            profile=self._profile_info(profile),
            call_id=call.id,
            spawn=hooks.get("spawn"),
            switch_profile=hooks.get("switch_profile"),
        )

    def _files_dir(self, owner: str, *, make: bool = True) -> Path:
        """The session's files folder; with ``make``, made if missing (checked before
        every call of a tool that uses it: another tool may have removed it)."""
        if self._files is None or self._files[0] != owner:
            path = session_folder(self.deps.files_root, owner)  # a UUID, or InvalidId
            self._files = (owner, path, os.fspath(path))
        _, path, name = self._files
        if make and not os.path.isdir(name):  # one stat, where mkdir(exist_ok) costs two
            path.mkdir(parents=True, exist_ok=True)
        return path

    def _profile_info(self, profile: Profile) -> ProfileInfo:
        if self._info is None or self._info[0] is not profile:
            info = ProfileInfo(
                id=profile.id,
                name=profile.name,
                scratchpad_sections=profile.scratchpad_sections,
                step_validation_enabled=profile.step_validation_enabled,
                tool_network=profile.tool_network,
                allow_private_urls=profile.allow_private_urls,
            )
            self._info = (profile, info)
        return self._info[1]

    async def _emit(self, event: Event) -> None:
        await self.host.record(event)

    async def _emit_shared(self, event: Event) -> None:
        if isinstance(event, TodoUpdated | NoteSaved | NoteDeleted):
            await self.host.data_owner.record(event)
        else:
            await self.host.record(event)

    async def _finish_stopped(self) -> None:
        if not self.state.progress.stop_requested:
            # The signal came first (it ends a stream at once); the event follows it.
            await self.host.request_stop(self.host.stop_signal.reason or "user")
        for call in self.state.progress.open_calls:
            await self.host.record(
                ToolFailed(call_id=call.id, name=call.name, reason="stopped", error=STOPPED)
            )
        await self.host.record(RunStopped(reason=self.host.stop_signal.reason or "user"))


class _Call(NamedTuple):
    """An LLM call of the loop, prepared: what ``llm.requested`` records and the stream
    needs."""

    profile: Profile
    backend: LLMBackend
    subagent: bool
    names: list[str]
    options: LLMOptions
    request: LLMRequested


class SharedToolState:
    """What a subagent's tools read: its top-level session's todo list and notes, its
    own scratchpad."""

    def __init__(self, *, own: SessionState, owner: SessionState) -> None:
        self.own = own
        self.owner = owner

    def todo(self) -> Sequence[TodoItem]:
        return self.owner.todo()

    def scratchpad(self) -> Mapping[str, str]:
        return self.own.scratchpad()

    def notes(self) -> Mapping[str, str]:
        return self.owner.notes()


def _name_calls(calls: Sequence[ToolCall], requested_seq: int, offset: int) -> list[ToolCall]:
    """Give calls ids unique in the session (servers' ids repeat across turns)."""
    return [
        ToolCall(id=f"call_{requested_seq}_{offset + i}", name=c.name, arguments=c.arguments)
        for i, c in enumerate(calls)
    ]


def _result_event(call: ToolCall, result: ToolResult) -> Event:
    if result.success:
        return ToolCompleted(
            call_id=call.id, name=call.name, output=result.output, metadata=result.metadata
        )
    return ToolFailed(
        call_id=call.id,
        name=call.name,
        reason=result.failure_reason or "error",
        error=result.output or result.error or "the tool failed",
    )
