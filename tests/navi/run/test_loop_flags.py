"""The loop flags of a profile, each seen where it matters: in what the LLM is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from events.types import TodoItem
from navi.run import injections
from navi.run.progress import RunProgress
from profiles import Profile
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, Reply
from tests.support.navi_app import navi_settings, open_navi

pytestmark = pytest.mark.anyio


def profile(**flags: Any) -> Profile:
    base = Profile(id="p", name="P", system_prompt="You help.")
    return msgspec.structs.replace(base, **flags)


def test_iteration_budget_speaks_only_near_the_end() -> None:
    p = profile(iteration_budget_enabled=True)
    assert injections.iteration_budget(RunProgress(iterations=2, max_iterations=20), p) is None
    near = injections.iteration_budget(RunProgress(iterations=17, max_iterations=20), p)
    assert near is not None and "3 steps left" in near.content
    last = injections.iteration_budget(RunProgress(iterations=19, max_iterations=20), p)
    assert last is not None and "last step" in last.content
    off = profile(iteration_budget_enabled=False)
    assert injections.iteration_budget(RunProgress(iterations=19, max_iterations=20), off) is None


def test_goal_anchor_every_interval() -> None:
    p = profile(goal_anchoring_enabled=True, goal_anchoring_interval=3)
    asked: list[int] = []

    def goal() -> str:
        asked.append(1)
        return "g"

    at = [n for n in range(1, 10) if injections.goal_anchor(RunProgress(iterations=n), p, goal)]
    assert at == [3, 6, 9]
    assert len(asked) == 3  # the goal is looked up only when an anchor is due
    done = RunProgress(iterations=3, last_anchor=3)
    assert injections.goal_anchor(done, p, goal) is None
    assert (
        injections.goal_anchor(
            RunProgress(iterations=3), profile(goal_anchoring_enabled=False), goal
        )
        is None
    )
    assert injections.goal_anchor(RunProgress(iterations=3), p, lambda: "") is None
    assert len(asked) == 3


def test_anti_stall_needs_open_steps_and_a_stall() -> None:
    p = profile(anti_stall_enabled=True, anti_stall_threshold=4)
    todo = (TodoItem(id=1, text="find it"), TodoItem(id=2, text="done one", status="done"))
    assert injections.anti_stall(RunProgress(stall=3), p, todo) is None
    warning = injections.anti_stall(RunProgress(stall=4), p, todo)
    assert (
        warning is not None and "find it" in warning.content and "done one" not in warning.content
    )
    assert injections.anti_stall(RunProgress(stall=4), p, ()) is None
    assert (
        injections.anti_stall(RunProgress(stall=4), profile(anti_stall_enabled=False), todo) is None
    )


def test_replan_once_per_new_failure() -> None:
    p = profile(adaptive_replan_enabled=True)
    todo = (TodoItem(id=1, text="fetch", status="failed", note="404"),)
    first = injections.replan(RunProgress(failed_steps=frozenset({1})), p, todo)
    assert first is not None and "fetch: 404" in first.content
    assert injections.replan(RunProgress(failed_steps=frozenset({1}), replanned=1), p, todo) is None


def system_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "system"]


async def run_with(
    tmp_path: Path, flags: dict[str, Any], replies: list[Reply], default: Reply
) -> list[Any]:
    async with FakeLLM(default=default) as fake:
        fake.script(*replies)
        async with open_navi(navi_settings(tmp_path, fake.url, planning="off"), llm=fake) as navi:
            base = navi.profiles.get("secretary")
            navi.profiles._profiles["secretary"] = msgspec.structs.replace(base, **flags)
            session = await navi.create_session("secretary")
            with anyio.fail_after(30):
                await navi.run(session, "Find the file named goal.txt")
        return list(fake.requests)


async def test_goal_anchoring_reaches_the_llm(tmp_path: Path) -> None:
    read = Reply(tool_calls=[FakeToolCall(name="todo", arguments={"action": "read"})])
    requests = await run_with(
        tmp_path,
        {"goal_anchoring_enabled": True, "goal_anchoring_interval": 2, "max_iterations": 5},
        [read, read, read, read],
        Reply(text="done"),
    )
    anchored = [
        i for i, body in enumerate(requests)
        if any("[Goal reminder]" in t and "goal.txt" in t for t in system_texts(body))
    ]  # fmt: skip
    assert anchored and anchored[0] == 2  # after the 2nd iteration, before the 3rd call


async def test_anti_stall_warning_reaches_the_llm(tmp_path: Path) -> None:
    set_todo = Reply(
        tool_calls=[
            FakeToolCall(
                name="todo", arguments={"action": "set", "items": [{"text": "find goal.txt"}]}
            )
        ]
    )
    read = Reply(tool_calls=[FakeToolCall(name="todo", arguments={"action": "read"})])
    requests = await run_with(
        tmp_path,
        {"anti_stall_enabled": True, "anti_stall_threshold": 3, "max_iterations": 6,
         "goal_anchoring_enabled": False},
        [set_todo, read, read, read, read],
        Reply(text="done"),
    )  # fmt: skip
    warned = [
        i
        for i, body in enumerate(requests)
        if any("[Progress check]" in t for t in system_texts(body))
    ]
    assert warned, "no anti-stall warning was sent"
    assert "find goal.txt" in next(
        t for t in system_texts(requests[warned[0]]) if "[Progress check]" in t
    )


async def test_think_follows_the_profile(tmp_path: Path) -> None:
    on = await run_with(tmp_path / "on", {"think_enabled": True}, [], Reply(text="hi"))
    off = await run_with(tmp_path / "off", {"think_enabled": False}, [], Reply(text="hi"))
    assert on[0]["think"] is True
    assert off[0].get("think") in (False, None)
