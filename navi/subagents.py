"""Subagents: ``spawn_agent`` runs a bounded task in a child session actor.

A subagent is a session of its own (its own stream, ``session.created`` with
``parent_stream_id`` and ``parent_call_id``) whose actor is a *child* of its parent's
session actor. The parent's ``spawn_agent`` call:

1. records ``subagent.spawned`` (child stream id, task, profile) in the parent's stream
   — durable before the child exists;
2. asks the parent's actor to start the child actor, and the child to run the task
   (``run.started`` with mode ``ephemeral`` and the profile used);
3. waits for the child's run to end, or for the child actor to die (a crash), or for
   its time limit (the child is then stopped);
4. records ``subagent.finished`` (result, ``completed_normally``) in the parent's
   stream and gives the result text to the LLM.

A parent's stop reaches its children as a ``StopRun`` message (the parent's actor
sends it); the call then waits a little for the child to end and records what it got.
On resume the call is re-run, and because ``subagent.spawned`` says which child it
started, it re-attaches: the child goes on with its own interrupted run (or its recorded
result is taken) instead of starting again. See docs/planning-subagents-compression.md.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from actors import ActorRef, ActorStopped, MailboxFull, Stop
from events.envelope import Recorded
from events.types import (
    TERMINAL_RUN_EVENTS,
    RunCompleted,
    RunFailed,
    RunStopped,
    SubagentFinished,
    SubagentSpawned,
)
from navi.session import messages as m
from navi.session.actor import SessionActor
from profiles import ProfileRegistry, UnknownProfile
from tools import Tool, ToolContext, ToolResult, fail, ok
from tools.base import Approval, CallDescription, SessionScope, shorten

if TYPE_CHECKING:
    from events.store import EventStore

log = structlog.get_logger(__name__)

# How long a subagent may work before it is stopped (its partial answer is returned).
SUBAGENT_TIMEOUT_S = 1800.0
# After a stop or a timeout, how long to wait for the child to record its end.
STOP_GRACE_S = 15.0
ASK_TIMEOUT_S = 30.0
NOT_NORMAL_NOTE = "[The subagent did not finish its task normally: {why}.]"


@dataclass(frozen=True)
class SubagentOutcome:
    text: str
    completed_normally: bool
    failed: bool = False  # the child crashed or its run failed: a failed tool call


def outcome_of(record: Recorded | None) -> SubagentOutcome:
    """What the child's terminal event (or its absence: a crash) means for the parent."""
    event = record.event if record is not None else None
    if isinstance(event, RunCompleted):
        return SubagentOutcome(event.content, event.completed_normally)
    if isinstance(event, RunStopped):
        why = "it ran out of time" if event.reason == "timeout" else "it was stopped"
        return SubagentOutcome(f"The subagent stopped before it finished ({why}).", False)
    if isinstance(event, RunFailed):
        return SubagentOutcome(f"The subagent failed: {event.error}", False, failed=True)
    return SubagentOutcome("The subagent crashed before it finished.", False, failed=True)


class Spawner:
    """The ``spawn`` hook of one ``spawn_agent`` call, bound to the parent session."""

    def __init__(
        self,
        parent: SessionActor,
        call_id: str,
        *,
        store: EventStore,
        new_id: Callable[[], str],
        timeout_s: float,
    ) -> None:
        self.parent = parent
        self.call_id = call_id
        self.store = store
        self.new_id = new_id
        self.timeout_s = timeout_s

    @cached_property
    def log(self) -> Any:
        # Bound when first used: a Spawner is made for every tool call, spawn_agent or not.
        return log.bind(session_id=self.parent.session_id, call_id=self.call_id)

    async def __call__(self, task: str, profile_id: str) -> SubagentOutcome:
        progress = self.parent.state.progress
        finished = progress.subagent_finished(self.call_id)
        if finished is not None:  # resumed after the result was recorded
            return SubagentOutcome(finished.result, finished.completed_normally)
        spawned = progress.subagent_of(self.call_id)
        if spawned is None:
            spawned = SubagentSpawned(
                child_stream_id=self.new_id(),
                call_id=self.call_id,
                task=task,
                profile_id=profile_id,
            )
            await self.parent.record(spawned)  # durable before the child exists
        else:
            self.log.info("subagent.reattaching", child=spawned.child_stream_id)
        try:
            # The parent waits on its subagent (which may wait for a person): a shutdown
            # leaves the parent's run here, to re-attach on resume.
            with self.parent.waits.waiting():
                outcome = await self._run_child(spawned)
        except Exception as exc:  # the child could not be started or followed
            self.log.exception("subagent.failed", child=spawned.child_stream_id)
            outcome = SubagentOutcome(f"The subagent could not run: {exc}", False, failed=True)
        await self.parent.record(
            SubagentFinished(
                child_stream_id=spawned.child_stream_id,
                call_id=self.call_id,
                result=outcome.text,
                completed_normally=outcome.completed_normally,
            )
        )
        return outcome

    async def _run_child(self, spawned: SubagentSpawned) -> SubagentOutcome:
        child_id = spawned.child_stream_id
        ref: ActorRef[object] | None = None
        started: m.SubtaskStarted | None = None
        try:
            ref = await self._ask(self.parent.ref, m.SpawnSubagent(child_id))
            created = self.parent.state.created
            started = await self._ask(
                ref,
                m.StartSubtask(
                    task=spawned.task,
                    profile_id=spawned.profile_id,
                    parent_stream_id=self.parent.session_id,
                    parent_call_id=self.call_id,
                    user_id=created.user_id if created else "local",
                ),
            )
            if started.ended_seq is not None:  # it had ended before the parent crashed
                _stop_quietly(ref)
                return outcome_of(await self._terminal(child_id, started))
            end: Recorded | None = None
            with anyio.move_on_after(self.timeout_s):
                end = await self._wait_for_end(ref, child_id, started)
            if end is None and not ref.is_stopped and not self.parent.stop_signal.is_set():
                self.log.warning("subagent.timeout", child=child_id, timeout_s=self.timeout_s)
                end = await self._stop_and_wait(ref, child_id, started, "timeout")
            return outcome_of(end)
        except anyio.get_cancelled_exc_class():
            if self.parent.stop_signal.is_set():
                # The parent was stopped (its actor told the child too): wait for the
                # child's end and record it, then let the cancellation go on. Without a
                # stop (a shutdown), nothing is recorded: the call re-attaches on resume.
                with anyio.CancelScope(shield=True):
                    end = None
                    if ref is not None and started is not None:
                        end = await self._stop_and_wait(ref, child_id, started, "user")
                    await self.parent.record(
                        SubagentFinished(
                            child_stream_id=child_id,
                            call_id=self.call_id,
                            result=outcome_of(end).text if end else "The subagent was stopped.",
                            completed_normally=False,
                        )
                    )
            raise

    async def _ask(self, ref: ActorRef[object], message: object) -> Any:
        reply = await ref.ask(message, timeout=ASK_TIMEOUT_S)
        if isinstance(reply, m.Refusal):
            raise reply.error
        return reply

    async def _wait_for_end(
        self, ref: ActorRef[object], child_id: str, started: m.SubtaskStarted
    ) -> Recorded | None:
        """The child run's terminal event, or None if the child actor died first."""
        end: Recorded | None = None
        async with anyio.create_task_group() as tg:

            async def watch_actor() -> None:
                await ref.wait_stopped()
                tg.cancel_scope.cancel()

            tg.start_soon(watch_actor)
            async for record in self.store.subscribe(child_id, after_seq=started.after_seq):
                if record.run_id == started.run_id and record.type in TERMINAL_RUN_EVENTS:
                    end = record
                    break
            tg.cancel_scope.cancel()
        # The actor may have stopped right after its end was recorded.
        return end or await self._terminal(child_id, started)

    async def _terminal(self, child_id: str, started: m.SubtaskStarted) -> Recorded | None:
        for record in await self.store.read(child_id, after_seq=started.after_seq):
            if record.run_id == started.run_id and record.type in TERMINAL_RUN_EVENTS:
                return record
        return None

    async def _stop_and_wait(
        self, ref: ActorRef[object], child_id: str, started: m.SubtaskStarted, reason: str
    ) -> Recorded | None:
        if not ref.is_stopped:
            try:
                await ref.ask(m.StopRun(reason=reason), timeout=STOP_GRACE_S, priority=True)
            except Exception as exc:
                self.log.warning("subagent.stop_failed", child=child_id, error=repr(exc))
        with anyio.move_on_after(STOP_GRACE_S):
            return await self._wait_for_end(ref, child_id, started)
        return await self._terminal(child_id, started)


def _stop_quietly(ref: ActorRef[object]) -> None:
    with suppress(ActorStopped, MailboxFull):
        ref.tell_nowait(Stop("subagent already ended"))


# ---------------------------------------------------------------- the tool


def entered_name(profiles: ProfileRegistry, profile_id: str) -> str:
    """A profile a call enters, as a person knows it: its name (and id)."""
    if profile_id not in profiles:
        return f"{profile_id!r} (no such profile: the call will fail)"
    profile = profiles.get(profile_id)
    return profile.name if profile.name == profile.id else f"{profile.name} ({profile.id})"


def entered_risk(profiles: ProfileRegistry, profile_id: str, whose: str) -> str:
    """What entering a profile lets its tools do that they could not before."""
    if profile_id not in profiles:
        return "nothing: the profile does not exist"
    profile = profiles.get(profile_id)
    wider = []
    if profile.tool_network:
        wider.append("code and commands get the network (the internet and the LAN)")
    if profile.allow_private_urls:
        wider.append("web requests may reach private (LAN) addresses")
    unasked = sorted(name for name, rule in profile.tool_policy.items() if rule == "auto")
    if unasked:
        wider.append(f"{', '.join(unasked)} run without asking")
    if not wider:
        return f"{whose} tools and instructions become the profile's"
    return f"{whose} tools and instructions become the profile's: " + "; ".join(wider)


class SpawnAgentTool(Tool):
    name = "spawn_agent"
    uses_files = False
    description = (
        "Delegate a bounded subtask (typically three or more tool calls, e.g. research a "
        "topic, inspect a server) to a subagent that works on its own and returns its "
        "result as text. Give it everything it needs in 'task': it cannot ask you "
        "questions. Optionally pick the subagent's profile with 'profile_id' (default: "
        "this conversation's profile). Several spawn_agent calls in one step run in "
        "parallel."
    )
    parameters = {
        "type": "object",
        "properties": {
            "task": {
                "type": "string",
                "minLength": 1,
                "description": "The complete, self-contained task for the subagent.",
            },
            "profile_id": {
                "type": "string",
                "description": "The profile the subagent uses (its model, prompt and tools).",
            },
        },
        "required": ["task"],
        "additionalProperties": False,
    }
    # Re-running it after a crash re-attaches to the child it started (subagent.spawned).
    idempotent = True
    # Several calls of one step run side by side (see navi/run/tool_step.py).
    concurrent = True

    def __init__(self, profiles: ProfileRegistry, *, timeout_s: float = SUBAGENT_TIMEOUT_S) -> None:
        self.profiles = profiles
        self.subagent_timeout_s = timeout_s
        self.timeout_s = timeout_s + 2 * STOP_GRACE_S + ASK_TIMEOUT_S

    def approval_for(self, args: dict[str, Any]) -> Approval:
        # Without a profile_id the subagent has this conversation's profile: nothing widens.
        return "ask" if self.profiles.entering_asks(args.get("profile_id")) else "auto"

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        profile_id = str(args.get("profile_id") or ctx.profile.id or self.profiles.default_id)
        name = entered_name(self.profiles, profile_id)
        task = shorten(str(args.get("task", "")), 200)
        return CallDescription(
            summary=f"Start a subagent with the profile {name} for the task: {task}",
            target=name,
            risk=entered_risk(self.profiles, profile_id, "the subagent's"),
            default_asker="Navi asks before entering a profile with a wider reach",
            scope=SessionScope(f"spawn_agent:{profile_id}", f"Allow subagents with {name}"),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if ctx.spawn is None:
            return fail("spawn_agent works only inside a session's run")
        task = args["task"].strip()
        if not task:
            return fail("'task' must say what the subagent should do")
        requested = args.get("profile_id")
        profile_id = requested or ctx.profile.id or self.profiles.default_id
        try:
            profile = self.profiles.get(profile_id)
        except UnknownProfile as exc:
            return fail(str(exc))
        outcome: SubagentOutcome = await ctx.spawn(task=task, profile_id=profile.id)
        if outcome.failed:
            return fail(outcome.text, completed_normally=False, profile_id=profile.id)
        text = outcome.text or "(the subagent gave no answer)"
        if not outcome.completed_normally:
            text = f"{text}\n\n" + NOT_NORMAL_NOTE.format(why="it was cut short")
        return ok(text, completed_normally=outcome.completed_normally, profile_id=profile.id)
