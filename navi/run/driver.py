"""The run driver: Navi's tool-calling loop. It asks the decision table what comes next
(navi/run/decide.py), carries the step out, and asks again.

A fresh run and one resumed after a crash are the same code: the table looks at the
run's state and progress, both folds of the log. An LLM call left open is re-issued, a
tool call left open is re-run if its tool is idempotent and otherwise marked
``interrupted`` (navi/run/tool_step.py), and nothing that completed is ever done twice.
Every decision is durable before its effect starts; the outcome of an effect is held
and committed with the next step's events ("Commits" in navi/run/decide.py).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Sequence

import anyio
import structlog

from events.envelope import Recorded
from events.types import (
    Event,
    LLMWaiting,
    RunCompleted,
    RunFailed,
    RunStopped,
    ToolApprovalDecided,
    ToolFailed,
    ToolRequested,
)
from navi.llm.errors import LLMError
from navi.run import compression, injections
from navi.run.decide import Loop, Step, decide
from navi.run.host import RunDeps, RunHost, active_profile, is_subagent
from navi.run.llm_step import LLMStep
from navi.run.planning import Planner
from navi.run.progress import THINKING_NOT_SUPPORTED, RunProgress, evolve
from navi.run.state import IllegalTransition, RunState, transition
from navi.run.tool_step import INTERRUPTED, SharedToolState, ToolStep

__all__ = ["INTERRUPTED", "STOPPED", "RunDeps", "RunDriver", "RunHost", "SharedToolState"]

log = structlog.get_logger(__name__)

STOPPED = "The user stopped the run before this call finished."
# While the model's server is away, it is probed after 5, 10, 20, 40 and then every 60
# back-offs (NAVI_LLM_RETRY_BACKOFF_S, 1 s by default).
PROBE_FIRST = 5.0
PROBE_MAX = 60.0
PROBE_TIMEOUT_S = 10.0
PROBE_MIN_S = 0.05  # never a busy loop, whatever the back-off


class RunDriver:
    def __init__(self, host: RunHost, deps: RunDeps, *, resumed: bool = False) -> None:
        self.host = host
        self.deps = deps
        self.state = host.state
        self.log = log.bind(session_id=host.session_id, run_id=self.state.progress.run_id)
        progress = self.state.progress
        # Calls a crash cut short: those that had started (a call still waiting for its
        # approval, or for its turn, never ran).
        in_doubt = {c.id for c in progress.open_calls if c.id in progress.started}
        in_doubt = in_doubt if resumed else set()
        self.resumed = resumed  # a restart: a run waiting for its server probes at once
        self.llm = LLMStep(host, deps)
        self.tools = ToolStep(host, deps, in_doubt=in_doubt)
        # What the driver holds, not yet recorded: the outcomes of the last effect (kept
        # whatever happens) and decisions taken on them (dropped if a stop comes first).
        self.outcomes: list[Event] = []
        self.decided: list[Event] = []
        self.planned = False  # planning (or the decision not to plan) is behind us
        self.checked = 0  # the iteration whose pre-call context check is done

    # ------------------------------------------------------------------ the loop

    async def drive(self) -> None:
        # The user's settings (thinking, approval defaults) as the run starts (or
        # resumes): a change on the settings page applies from the next run. Read once,
        # not per step: each read is a query of the settings stream.
        saved = await self.deps.user_settings(self.state.user_id)
        self.llm.saved = saved
        self.tools.user_policy = dict(saved.tool_policy)
        while True:
            state, progress = self.view()
            loop = Loop(
                stop_signal=self.host.stop_signal.is_set(),
                planned=self.planned,
                checked=self.checked,
                retries=self.deps.settings.llm_retries,
                must_ask=state is RunState.EXECUTING_TOOLS
                and len(progress.requested) == len(progress.calls)
                and self.tools.must_ask(progress.open_calls),
            )
            step = decide(state, progress, loop)
            if step is Step.END:
                await self.flush()
                return
            try:
                await _CARRY_OUT[step](self, progress)
            except Exception:
                if self.outcomes:  # what an effect produced is kept whatever fails next
                    await self.host.record(*self.outcomes)
                raise

    def view(self) -> tuple[RunState, RunProgress]:
        """The run's state and progress with what the driver holds folded in."""
        state = self.state
        if not self.outcomes and not self.decided:
            return state.run_state, state.progress
        try:
            return self._fold(self.ahead())
        except IllegalTransition:
            # A stop came in: the decisions taken before it can no longer be recorded.
            self.decided.clear()
            return self._fold(self.ahead())

    def _fold(self, records: Sequence[Recorded]) -> tuple[RunState, RunProgress]:
        run_state, progress = self.state.run_state, self.state.progress
        for record in records:
            run_state = transition(run_state, record.event)
            progress = evolve(progress, record)
        return run_state, progress

    def ahead(self) -> list[Recorded]:
        """What the driver holds, as the records it will be (seqs and time are guesses:
        only the folds of the run state, the progress and the context read these)."""
        state = self.state
        return [
            Recorded(
                stream_id=self.host.session_id,
                seq=state.last_seq + i,
                position=0,
                event_id="",
                timestamp=state.last_timestamp,
                event=event,
                run_id=state.progress.run_id,
            )
            for i, event in enumerate((*self.outcomes, *self.decided), 1)
        ]

    async def commit(self, start: Sequence[Event] = ()) -> bool:
        """Record what is held and then ``start`` (a step's own events) in one commit.

        False if a stop won the race for the commit (its ``stop.requested`` came first
        and made a decision illegal): then only the outcomes are recorded."""
        events = (*self.outcomes, *self.decided, *start)
        if not events:
            return True
        try:
            await self.host.record(*events)
        except IllegalTransition:
            if not self._stopping():
                raise
            outcomes = self.outcomes
            self.outcomes, self.decided = [], []
            if outcomes:
                await self.host.record(*outcomes)
            return False
        self.outcomes, self.decided = [], []
        return True

    def hold(self, outcomes: Sequence[Event]) -> None:
        """Hold an effect's outcomes (after the effect: its commit has replaced the list)."""
        self.outcomes.extend(outcomes)

    async def flush(self) -> None:
        await self.commit()

    def _stopping(self) -> bool:
        return self.state.run_state is RunState.STOPPING or self.host.stop_signal.is_set()

    # ------------------------------------------------------------------ the steps

    async def _abandon_compression(self, p: RunProgress) -> None:
        await self.flush()
        await compression.abandon_interrupted(self.host)

    async def _finish_stop(self, p: RunProgress) -> None:
        self.decided.clear()  # nothing new starts once stopping
        await self.flush()
        host = self.host
        if self.state.run_state is not RunState.STOPPING:
            # The signal came first (it ends a stream at once); the event follows it.
            await host.request_stop(host.stop_signal.reason or "user")
        reason = host.stop_signal.reason or "user"
        failed = [
            ToolFailed(call_id=call.id, name=call.name, reason="stopped", error=STOPPED)
            for call in self.state.progress.open_calls
        ]
        await host.record(*failed, RunStopped(reason=reason))

    async def _complete(self, p: RunProgress) -> None:
        await self.commit([RunCompleted(content=p.answer, iterations=p.iterations)])

    async def _request_tools(self, p: RunProgress) -> None:
        self.decided.extend(
            ToolRequested(call_id=c.id, name=c.name, arguments=c.arguments, step=p.iterations)
            for c in p.unrequested_calls
        )

    async def _run_tools(self, p: RunProgress) -> None:
        self.hold(await self.tools.run(self.commit, p.open_calls))

    async def _ask_approval(self, p: RunProgress) -> None:
        self.decided.append(self.tools.approval_request(p.open_calls[0]))

    async def _await_decision(self, p: RunProgress) -> None:
        """Wait for a person (the wait survives restarts: the log says it waits). With
        ``NAVI_APPROVAL_TIMEOUT``, counted from the request, a call no one decided on is
        denied (reason ``timeout``)."""
        await self.flush()
        timeout = self.deps.settings.approval_timeout_s
        waited = time.time() - p.awaiting_since
        remaining = math.inf if timeout is None else max(0.0, timeout - waited)
        await self.host.wait_for_decision(anyio.current_time() + remaining)
        awaiting = self.state.progress.awaiting
        if (
            timeout is None
            or awaiting is None
            or self.state.run_state is not RunState.AWAITING_APPROVAL
            or self.host.stop_signal.is_set()
        ):
            return  # decided, or stopping: the table goes on
        with contextlib.suppress(IllegalTransition):  # a decision or a stop came first
            await self.host.record(
                ToolApprovalDecided(
                    call_id=awaiting.call_id, approved=False, by="navi", reason="timeout"
                )
            )

    async def _retry(self, p: RunProgress) -> None:
        await self.flush()
        if p.last_kind != THINKING_NOT_SUPPORTED:  # asked again at once, without thinking
            delay = self.deps.settings.llm_retry_backoff_s * 2 ** (p.failures - 1)
            with anyio.move_on_after(delay):
                await self.host.stop_signal.wait()
            if self.host.stop_signal.is_set():
                return  # the table finishes the stop
        self.hold(
            await self.llm.call(self.commit, p.iterations, p.attempt + 1, think_off=p.think_off)
        )

    async def _give_up(self, p: RunProgress) -> None:
        await self.commit([RunFailed(error=p.last_error)])

    async def _wait_for_llm(self, p: RunProgress) -> None:
        """The retries are spent: a server that does not answer a light request is away
        and the run waits for it; one that answers but fails the call is broken, and the
        run fails as it always did (a loop of calls that fail is no wait)."""
        await self.flush()
        if await self._answers():
            await self.commit([RunFailed(error=p.last_error)])
        else:
            await self.commit([LLMWaiting(error=p.last_error, kind=p.last_kind)])

    async def _when_back(self, p: RunProgress) -> None:
        """Wait for the model's server (the wait survives restarts: the log says it
        waits), probing it with a light request on a back-off, then try the call again.
        "Try again" cuts the wait short; a stop ends it. After a restart the first probe
        is at once: the server may have come back long ago. The run's slot of the node
        is another run's meanwhile."""
        await self.flush()
        probes = 0 if self.resumed else 1
        async with self.host.slot_given_back():  # taken again, in line, to go on
            while True:
                deadline = anyio.current_time() + self._probe_delay(probes)
                asked = await self.host.wait_for_llm(deadline)
                if self.host.stop_signal.is_set():
                    return  # the table finishes the stop
                if asked or await self._answers():
                    break
                probes += 1
        if self.host.stop_signal.is_set():
            return  # stopped in line for a slot
        self.resumed = False
        self.log.info("llm.back", attempt=p.attempt + 1)
        self.hold(
            await self.llm.call(self.commit, p.iterations, p.attempt + 1, think_off=p.think_off)
        )

    def _probe_delay(self, probes: int) -> float:
        """Before the next probe: none for the first after a restart, then 5, 10, 20,
        40 and 60 back-offs."""
        if probes == 0:
            return 0.0
        delay: float = min(PROBE_MAX, PROBE_FIRST * 2.0 ** min(probes - 1, 8))
        return max(PROBE_MIN_S, delay * self.deps.settings.llm_retry_backoff_s)

    async def _answers(self) -> bool:
        """Whether the model's server answers a light request (its list of models)."""
        backend = await self.deps.backend_for(active_profile(self.state, self.deps))
        with self.host.stop_signal.scope(anyio.current_time() + PROBE_TIMEOUT_S):
            try:
                await backend.list_models()
            except (LLMError, OSError):
                return False
            return True
        return False  # the probe timed out, or a stop came

    async def _reissue(self, p: RunProgress) -> None:
        self.hold(
            await self.llm.call(self.commit, p.iterations, p.attempt + 1, think_off=p.think_off)
        )

    async def _out_of_steps(self, p: RunProgress) -> None:
        content = (
            f"I stopped after {p.max_iterations} steps, the limit for one turn, "
            "before finishing. Tell me to continue if you want me to go on."
        )
        await self.commit(
            [RunCompleted(content=content, completed_normally=False, iterations=p.iterations)]
        )

    async def _check_context(self, p: RunProgress) -> None:
        """The pre-call compression check. With outcomes held (a tool result), it looks
        at the context with them in it; only a compression commits them first."""
        self.checked = p.iterations + 1
        deps = self.deps
        if not deps.settings.compression_enabled:
            return
        if self.outcomes or self.decided:
            if not compression.would_compress(self.host, deps, self.ahead()):
                return
            await self.flush()
        await compression.compress_if_needed(self.host, deps)

    async def _plan(self, p: RunProgress) -> None:
        self.planned = True
        if not self._wants_plan(p):
            return
        await self.flush()
        subagent = is_subagent(self.state)
        profile = active_profile(self.state, self.deps)
        await Planner(self.host, self.deps, profile, goal=self._goal(), subagent=subagent).run()

    async def _call_llm(self, p: RunProgress) -> None:
        profile = active_profile(self.state, self.deps)
        todo = self.state.todo_items
        found = (
            injections.iteration_budget(p, profile),
            injections.goal_anchor(p, profile, self._goal),
            injections.anti_stall(p, profile, todo),
            injections.replan(p, profile, todo),
        )
        injected = [e for e in found if e is not None]
        call = self.llm.call(
            self.commit, p.iterations + 1, 1, think_off=p.think_off, injected=injected
        )
        self.hold(await call)

    # ------------------------------------------------------------------ helpers

    def _wants_plan(self, p: RunProgress) -> bool:
        """Planning runs before the first iteration of a streamed turn when the profile
        enables it; in a subagent when the profile enables subagent planning."""
        settings = self.deps.settings
        if settings.planning == "off":
            return False
        if settings.planning == "auto" and p.backend == "embedded":
            return False  # a tiny local model plans badly and slowly: NAVI_PLANNING=on forces it
        profile = active_profile(self.state, self.deps)
        if is_subagent(self.state):
            return profile.subagent_planning_enabled
        return p.mode == "stream" and profile.planning_enabled

    def _goal(self) -> str:
        """The user's message that started this run."""
        started = self.state.progress.started_seq
        for message in reversed(self.state.context.as_list()):
            if message.role == "user" and not message.is_summary and message.seq < started:
                return message.content
        return ""


# How each step is carried out (``Step.END`` is the loop's own).
_CARRY_OUT: dict[Step, Callable[[RunDriver, RunProgress], Awaitable[None]]] = {
    Step.ABANDON_COMPRESSION: RunDriver._abandon_compression,
    Step.FINISH_STOP: RunDriver._finish_stop,
    Step.COMPLETE: RunDriver._complete,
    Step.REQUEST_TOOLS: RunDriver._request_tools,
    Step.ASK_APPROVAL: RunDriver._ask_approval,
    Step.AWAIT_DECISION: RunDriver._await_decision,
    Step.RUN_TOOLS: RunDriver._run_tools,
    Step.RETRY: RunDriver._retry,
    Step.GIVE_UP: RunDriver._give_up,
    Step.WAIT_FOR_LLM: RunDriver._wait_for_llm,
    Step.WHEN_BACK: RunDriver._when_back,
    Step.REISSUE: RunDriver._reissue,
    Step.OUT_OF_STEPS: RunDriver._out_of_steps,
    Step.CHECK_CONTEXT: RunDriver._check_context,
    Step.PLAN: RunDriver._plan,
    Step.CALL_LLM: RunDriver._call_llm,
}
