"""Messages Navi puts in front of the LLM during a run, from the profile's loop flags.

Each is recorded as a ``context.injected`` event before the LLM call, so a replay shows
exactly what the LLM saw. The functions here are pure: progress and profile in,
events out.
"""

from __future__ import annotations

from collections.abc import Callable

from events.types import ContextInjected, TodoItem
from navi.run.progress import RunProgress
from profiles import Profile

BUDGET_WINDOW = 5  # the last iterations in which the remaining budget is announced


def iteration_budget(progress: RunProgress, profile: Profile) -> ContextInjected | None:
    """From ``BUDGET_WINDOW`` iterations before the limit, tell the model what is left."""
    if not profile.iteration_budget_enabled or progress.iterations == 0:
        return None
    remaining = progress.max_iterations - progress.iterations
    window = min(BUDGET_WINDOW, max(1, progress.max_iterations // 4))
    if remaining > window:
        return None
    if remaining <= 1:
        text = (
            "[Iteration budget] This is your last step: do not call any more tools. "
            "Give the user your final answer now, saying what is done and what is not."
        )
    else:
        text = (
            f"[Iteration budget] You have {remaining} steps left in this turn. "
            "Start wrapping up: finish the essential work and then answer the user."
        )
    return ContextInjected(kind="iteration_budget", role="system", content=text)


def goal_anchor(
    progress: RunProgress, profile: Profile, goal: Callable[[], str]
) -> ContextInjected | None:
    """Every ``goal_anchoring_interval`` iterations, restate what the user asked for.
    ``goal`` finds it in the context, only when an anchor is due (a search per call)."""
    if not profile.goal_anchoring_enabled:
        return None
    n = progress.iterations
    if n == 0 or n % profile.goal_anchoring_interval != 0 or progress.last_anchor == n:
        return None
    text = goal()
    if not text:
        return None
    return ContextInjected(
        kind="goal_anchor",
        role="system",
        content=(
            "[Goal reminder] The user's request for this turn was:\n"
            f"{text}\nKeep every next step in service of it."
        ),
    )


def anti_stall(
    progress: RunProgress, profile: Profile, todo: tuple[TodoItem, ...]
) -> ContextInjected | None:
    """No todo step finished for ``anti_stall_threshold`` iterations: say so."""
    if not profile.anti_stall_enabled or not todo:
        return None
    open_steps = [item for item in todo if item.status in ("pending", "in_progress")]
    threshold = profile.anti_stall_threshold
    if not open_steps or progress.stall == 0 or progress.stall % threshold != 0:
        return None
    steps = "\n".join(f"- {item.id}. {item.text} ({item.status})" for item in open_steps[:8])
    return ContextInjected(
        kind="anti_stall",
        role="system",
        content=(
            f"[Progress check] {progress.stall} steps have passed without completing a todo "
            "item. You may be going in circles. Stop repeating the same calls: either finish "
            "the current step another way, mark it failed or skipped with a reason, or tell "
            f"the user what blocks you.\nOpen steps:\n{steps}"
        ),
    )


def replan(
    progress: RunProgress, profile: Profile, todo: tuple[TodoItem, ...]
) -> ContextInjected | None:
    """A todo step was marked failed since the last re-plan: ask for a new plan."""
    if not profile.adaptive_replan_enabled or len(progress.failed_steps) <= progress.replanned:
        return None
    failed = [item for item in todo if item.id in progress.failed_steps]
    lines = "\n".join(f"- {item.id}. {item.text}: {item.note or 'failed'}" for item in failed)
    return ContextInjected(
        kind="replan",
        role="system",
        content=(
            "[Re-plan] These steps failed:\n"
            f"{lines}\nRevise the remaining plan: update the todo list with new steps that "
            "work around the failure, then continue."
        ),
    )
