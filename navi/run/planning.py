"""Planning: before the tool loop of a streamed turn, the model decides whether the
request needs a plan and, if so, writes one (seeds: agent-loop-v2, ``_run_planning``).

- Phase 1 classifies the request: ``DIRECT`` (no plan) or an analysis ending with
  ``REFLECT: yes|no``.
- Phase 2 (only with ``planning_phase2_enabled`` and ``REFLECT: yes``) reviews the
  analysis; the review goes into the phase 3 prompt.
- Phase 3 writes milestones and numbered steps, each with an executor: ``TOOL: name``,
  ``AGENT: profile_id`` or ``SELF``. An answer without numbered steps is no plan.

Every call is recorded like any LLM call: ``plan.status`` (for the UI's
``planning_status``), ``llm.requested(purpose="plan")``, then ``llm.completed`` or
``llm.failed``. A real plan becomes ``plan.ready`` (an assistant message the loop
continues from, ``is_plan`` in ``messages``) and, in a top-level session, a
``todo.updated`` filling the todo list, recorded together in one append.

Resume: the planner decides from the run's progress (a fold of the log), so a phase
whose answer is recorded is never asked again; a call that a crash left open is asked
again; a DIRECT or malformed answer recorded before the crash means "no plan" again.
Planning calls are never retried: a failed call means the turn goes on without a plan.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from events.types import (
    Event,
    LLMCompleted,
    LLMFailed,
    LLMRequested,
    PlanReady,
    PlanStatus,
    TodoItem,
    TodoUpdated,
)
from navi.llm.errors import LLMError
from navi.llm.types import ChatMessage, LLMOptions
from navi.run import permissions
from profiles import Profile
from projections.types import Message

if TYPE_CHECKING:
    from navi.run.driver import RunDeps, RunHost

log = structlog.get_logger(__name__)

PLANNING_TEMPERATURE = 0.3
MAX_STEPS = 50  # the todo list's limit
HISTORY_MESSAGES = 8  # earlier messages the planner sees, besides the request
HISTORY_CHARS = 400

LABELS = {
    1: "Analysing the request",
    2: "Reviewing the analysis",
    3: "Writing the plan",
}

# A numbered step: "1. ..." or "2) ...".
STEP_LINE = re.compile(r"^\s*(\d+)[\.\)]\s*(.*\S)?\s*$")
HAS_STEPS = re.compile(r"^\s*\d+[\.\)]", re.M)
DASHES = "\u2013\u2014"  # en and em dash, as models write "step — TOOL: x"
EXECUTOR = re.compile(
    rf"[\s\-{DASHES}|:(\[]*\b(?:(TOOL|AGENT)\s*:\s*`?([A-Za-z0-9_\-]+)`?|(SELF))\b[\s)\]]*$",
    re.I,
)
REFLECT = re.compile(r"REFLECT\s*:\s*\**\s*(yes|no)", re.I)

PHASE1_SYSTEM = """\
You are the planning module of an AI assistant. Before the assistant starts working with
its tools, you decide whether the user's latest request needs a plan.

If the request is simple (a greeting, small talk, a question answerable from knowledge,
or a task that needs at most two tool calls), reply with exactly one word:
DIRECT

Otherwise reply in this format and nothing else:
ANALYSIS: <2 to 5 sentences: what the user wants, what has to be found out or done,
what is unclear or risky>
REFLECT: yes|no

Say REFLECT: yes when the task is complex, ambiguous or risky enough that the analysis
should be reviewed before a plan is written; otherwise REFLECT: no."""

PHASE2_SYSTEM = """\
You are the review module of an AI assistant's planner. Review the analysis of the
user's request below. Reply with exactly these four sections, each a few short bullet
points:
MISSING: what the analysis overlooks
RISKS: what could go wrong or do harm, and how to avoid it
ORDER: dependencies between the pieces of work, what must come first
CHECKS: how to verify that the task is really done"""

PHASE3_SYSTEM = """\
You are the planning module of an AI assistant. Write the plan the assistant will
follow to fulfil the user's request.

Reply in this format:
MILESTONES:
- <an intermediate result that shows progress>
STEPS:
1. <one concrete action> — TOOL: <tool name>
2. <one concrete action> — AGENT: <profile id>
3. <one concrete action> — SELF

Executors:
- TOOL: <name> for a step that is a single call of one tool.
- AGENT: <profile id> for a bounded subtask of three or more tool calls, delegated to a
  subagent (only when the spawn_agent tool is available).
- SELF for synthesis, answering, or anything that depends on the conversation.

Depth: match the plan to the task. A small task gets 2 or 3 steps, a large one up to
about 12; never pad the plan.
The comma test: if a step lists several things joined by "and" or commas, each of them
must be its own step.
End with a step that gives the user the answer or the result.

{tools}"""


@dataclass(frozen=True)
class PlanStep:
    text: str
    executor: str = "SELF"


def is_direct(answer: str) -> bool:
    """Phase 1 said DIRECT: no plan."""
    return answer.strip().lstrip("*#` ").upper().startswith("DIRECT")


def wants_reflection(answer: str) -> bool:
    match = REFLECT.search(answer)
    return match is not None and match.group(1).lower() == "yes"


def has_steps(answer: str) -> bool:
    return HAS_STEPS.search(answer) is not None


def parse_steps(answer: str) -> list[PlanStep]:
    """The numbered steps of a plan, with their executors (``SELF`` when none is named)."""
    steps: list[PlanStep] = []
    for line in answer.splitlines():
        match = STEP_LINE.match(line)
        if match is None or not match.group(2):
            continue
        text = match.group(2).strip()
        executor = "SELF"
        found = EXECUTOR.search(text)
        if found is not None:
            kind, name, self_ = found.groups()
            executor = "SELF" if self_ else f"{kind.upper()}: {name}"
            text = text[: found.start()].rstrip(f" -{DASHES}|:([*")
        text = text.strip().strip("*").strip()
        if text:
            steps.append(PlanStep(text=text, executor=executor))
        if len(steps) >= MAX_STEPS:
            break
    return steps


def todo_items(steps: Sequence[PlanStep]) -> tuple[TodoItem, ...]:
    return tuple(
        TodoItem(id=index, text=step.text, executor=step.executor)
        for index, step in enumerate(steps, 1)
    )


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def request_block(history: Sequence[Message], goal: str) -> str:
    """What the planner is told: a few earlier messages, then the request itself."""
    earlier = [m for m in history if m.content and m.role in ("user", "assistant")]
    lines = [f"{m.role}: {_clip(m.content, HISTORY_CHARS)}" for m in earlier[-HISTORY_MESSAGES:]]
    parts = []
    if lines:
        parts.append("Conversation so far (oldest first):\n" + "\n".join(lines))
    parts.append(f"The user's request:\n{goal}")
    return "\n\n".join(parts)


class Planner:
    """Runs the planning phases of one run; see the module docstring."""

    def __init__(
        self,
        host: RunHost,
        deps: RunDeps,
        profile: Profile,
        *,
        goal: str,
        subagent: bool,
    ) -> None:
        self.host = host
        self.deps = deps
        self.profile = profile
        self.goal = goal
        self.subagent = subagent
        self.log = log.bind(session_id=host.session_id)

    async def run(self) -> bool:
        """Plan (or find that no plan is needed); True if ``plan.ready`` was recorded."""
        phase1 = await self._answer(1, PHASE1_SYSTEM, self._request())
        if phase1 is None:
            return False
        if is_direct(phase1):
            self.log.info("planning.direct")
            return False
        review = ""
        if self.profile.planning_phase2_enabled and wants_reflection(phase1):
            answer = await self._answer(2, PHASE2_SYSTEM, self._request(analysis=phase1))
            if answer is None and self.host.stop_signal.is_set():
                return False
            review = answer or ""
        plan = await self._answer(
            3,
            PHASE3_SYSTEM.format(tools=self._executors()),
            self._request(analysis=phase1, review=review),
        )
        if plan is None:
            return False
        steps = parse_steps(plan) if has_steps(plan) else []
        if not steps:
            self.log.info("planning.no_steps")
            return False
        if self.host.stop_signal.is_set():
            return False
        ready = PlanReady(plan=plan.strip(), steps=tuple(step.text for step in steps))
        if self.subagent:
            # A subagent's todo tool works on its parent's list: its plan must not replace it.
            await self.host.record(ready)
        else:
            await self.host.record(ready, TodoUpdated(items=todo_items(steps)))
        self.log.info("planning.ready", steps=len(steps))
        return True

    # ------------------------------------------------------------------ prompts

    def _request(self, *, analysis: str = "", review: str = "") -> str:
        history = self.host.state.context.as_list()
        # The request itself is the last user message; the planner gets it separately.
        if history and history[-1].role == "user" and history[-1].content.startswith(self.goal):
            history = history[:-1]
        text = request_block(history, self.goal)
        if analysis:
            text += f"\n\nAnalysis:\n{analysis.strip()}"
        if review:
            text += f"\n\nReview of the analysis:\n{review.strip()}"
        return text

    def _executors(self) -> str:
        names = permissions.allowed_tools(
            self.deps.builder,
            self.deps.users,
            self.profile,
            subagent=self.subagent,
            user_id=self.host.state.user_id,
        )
        lines = []
        for name in names:
            tool = self.deps.tools.get(name)
            if tool is not None:
                first = tool.description.split(". ")[0].strip().rstrip(".")
                lines.append(f"- {name}: {_clip(first, 160)}")
        text = "Available tools:\n" + ("\n".join(lines) if lines else "- none")
        if "spawn_agent" in names:
            agents = [
                f"- {p.id}: {_clip(p.description or p.name, 160)}" for p in self.deps.profiles
            ]
            text += "\n\nProfiles for AGENT steps:\n" + "\n".join(agents)
        else:
            text += "\n\nNo subagents are available: do not use AGENT steps."
        return text

    # ------------------------------------------------------------------ calls

    async def _answer(self, phase: int, system: str, user: str) -> str | None:
        """The recorded answer of ``phase``, asking the model if there is none yet.

        None when the call failed or a stop ended it."""
        progress = self.host.state.progress
        recorded = progress.plan_result(phase)
        if recorded is not None:
            return None if recorded.failed else recorded.content
        backend = await self.deps.backend_for(self.profile)
        if self.host.stop_signal.is_set():  # checked last: nothing may start once stopping
            return None
        options = LLMOptions(
            model=self.profile.model,
            temperature=PLANNING_TEMPERATURE,
            num_ctx=self.profile.num_ctx or self.deps.settings.llm.num_ctx,
            think=False,
        )
        events: list[Event] = []
        if progress.plan_phase != phase:
            events.append(PlanStatus(phase=phase, label=LABELS[phase]))
        events.append(
            LLMRequested(
                purpose="plan",
                model=options.model or backend.model,
                options={
                    "temperature": options.temperature,
                    "num_ctx": options.num_ctx,
                    "think": False,
                    "backend": backend.name,
                    "phase": phase,
                },
            )
        )
        await self.host.record(*events)
        messages = [
            ChatMessage(role="system", content=system),
            ChatMessage(role="user", content=user),
        ]
        try:
            completion = await backend.complete(messages, (), options, stop=self.host.stop_signal)
        except LLMError as exc:
            self.log.warning("planning.failed", phase=phase, error=exc.message)
            await self.host.record(LLMFailed(error=exc.message, kind=exc.kind, retryable=False))
            return None
        if completion.finish_reason == "stopped" or self.host.stop_signal.is_set():
            return None
        await self.host.record(
            LLMCompleted(
                content=completion.content,
                thinking=completion.thinking,
                finish_reason=completion.finish_reason,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
            )
        )
        return completion.content
