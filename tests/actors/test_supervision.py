from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from actors import (
    Actor,
    ActorSystem,
    Backoff,
    ChildFailed,
    ChildStopped,
    EscalatedFailure,
    Supervision,
)
from actors.supervision import RestartWindow
from tests.actors.support import Inbox, Recorder

pytestmark = pytest.mark.anyio

FAST = Backoff(initial=0.01, factor=2.0, maximum=0.04)


class Crashy(Actor[Any]):
    """Fails on "crash"; fails in on_start while ``start_failures`` remain."""

    def __init__(self, box: Inbox, start_failures: int = 0) -> None:
        self.box = box
        self.start_failures = start_failures
        self.starts = 0

    async def on_start(self) -> None:
        self.starts += 1
        self.box.put(("start", self.starts, anyio.current_time()))
        if self.start_failures:
            self.start_failures -= 1
            raise RuntimeError("cannot start")

    async def receive(self, message: Any) -> Any:
        if message == "crash":
            raise ValueError("crashed")
        self.box.put(("got", message))
        return message


class Supervisor(Actor[Any]):
    """Spawns children on request and forwards their lifecycle messages to the inbox."""

    def __init__(self, box: Inbox) -> None:
        self.box = box

    async def receive(self, message: Any) -> Any:
        match message:
            case ("spawn", actor, name, policy):
                await self.spawn_child(actor, name, supervision=policy)
            case ChildFailed() | ChildStopped():
                self.box.put(message)
        return None


def lifecycle(items: list[Any]) -> list[Any]:
    return [i for i in items if isinstance(i, ChildFailed | ChildStopped)]


async def test_a_child_crash_reaches_its_parent_and_the_child_restarts(box: Inbox) -> None:
    async with ActorSystem() as system:
        parent = await system.spawn(Supervisor(box), name="sup")
        child_actor = Crashy(box)
        await parent.ask(("spawn", child_actor, "c", Supervision.restart(backoff=FAST)), 5)
        child = system.get("sup/c")
        assert (await box.next())[0] == "start"
        await child.tell("crash")
        failed = await box.next()
        assert isinstance(failed, ChildFailed)
        assert failed.name == "c"
        assert isinstance(failed.error, ValueError)
        assert (failed.action, failed.restarts) == ("restart", 1)
        # on_start runs again, then the next message is handled (the failed one is not).
        assert (await box.next())[:2] == ("start", 2)
        assert await child.ask("after", timeout=5) == "after"
        assert await box.next() == ("got", "after")
        assert system.get("sup/c") == child  # same ref, same name


async def test_restarts_back_off_then_stop_after_max_restarts(box: Inbox) -> None:
    policy = Supervision.restart(max_restarts=3, within=60, backoff=FAST)
    async with ActorSystem() as system:
        parent = await system.spawn(Supervisor(box), name="sup")
        await parent.ask(("spawn", Crashy(box, start_failures=10), "c", policy), 5)
        items = await box.take(4 + 4 + 1)  # 4 starts, 4 failures, 1 stop
    starts = [item for item in items if isinstance(item, tuple)]
    assert [s[1] for s in starts] == [1, 2, 3, 4]
    events = lifecycle(items)
    assert [(e.action, e.restarts) for e in events[:-1]] == [
        ("restart", 1),
        ("restart", 2),
        ("restart", 3),
        ("stop", 3),
    ]
    assert events[-1] == ChildStopped("c", "failed")
    # Each restart waited at least its backoff (0.01, 0.02, 0.04).
    gaps = [b[2] - a[2] for a, b in itertools.pairwise(starts)]
    for gap, delay in zip(gaps, (0.01, 0.02, 0.04), strict=True):
        assert gap >= delay * 0.9


async def test_the_stop_policy_stops_the_child_and_frees_its_name(box: Inbox) -> None:
    async with ActorSystem() as system:
        parent = await system.spawn(Supervisor(box), name="sup")
        await parent.ask(("spawn", Crashy(box), "c", Supervision.stop()), 5)
        await system.get("sup/c").tell("crash")
        items = await box.take(3)
        assert lifecycle(items) == [
            ChildFailed("c", items[1].error, "stop", 0),
            ChildStopped("c", "failed"),
        ]
        assert system.lookup("sup/c") is None
        await parent.ask(("spawn", Crashy(box), "c", Supervision.stop()), 5)
        assert system.lookup("sup/c") is not None


async def test_escalation_fails_the_parent_under_its_own_policy(box: Inbox) -> None:
    class Middle(Supervisor):
        async def on_start(self) -> None:
            box.put("middle started")
            if not self.children:
                await self.spawn_child(Crashy(box), "leaf", supervision=Supervision.escalate())

    async with ActorSystem() as system:
        top = await system.spawn(Supervisor(box), name="top")
        await top.ask(("spawn", Middle(box), "mid", Supervision.restart(backoff=FAST)), 5)
        assert await box.next() == "middle started"
        assert (await box.next())[:2] == ("start", 1)
        await system.get("top/mid/leaf").tell("crash")
        failed = await box.next()
        # The top sees its child "mid" fail with the leaf's escalated error...
        assert isinstance(failed, ChildFailed)
        assert failed.name == "mid"
        assert isinstance(failed.error, EscalatedFailure)
        assert failed.error.child_path == "top/mid/leaf"
        assert isinstance(failed.error.error, ValueError)
        # ...and "mid" restarts (re-spawning its leaf in on_start).
        assert await box.next() == "middle started"
        assert (await box.next())[:2] == ("start", 1)
        assert system.lookup("top/mid/leaf") is not None


async def test_a_stop_during_backoff_stops_without_restarting(box: Inbox) -> None:
    slow = Supervision.restart(backoff=Backoff(initial=60))
    async with ActorSystem() as system:
        ref = await system.spawn(Crashy(box), name="c", supervision=slow)
        await box.next()
        await ref.tell("crash")
        await anyio.wait_all_tasks_blocked()
        with anyio.fail_after(5):
            await ref.stop("enough")
    assert box.drain() == []  # no second start


async def test_a_restart_stops_the_children_first(box: Inbox) -> None:
    class Owner(Actor[Any]):
        async def on_start(self) -> None:
            box.put("owner started")
            await self.spawn_child(Recorder(box, "kid"), "kid")

        async def receive(self, message: Any) -> Any:
            if message == "crash":
                raise RuntimeError("owner crashed")
            return None

    async with ActorSystem() as system:
        ref = await system.spawn(Owner(), name="o", supervision=Supervision.restart(backoff=FAST))
        assert await box.take(2) == ["owner started", ("started", "kid")]
        await ref.tell("crash")
        assert await box.take(3) == [("stopped", "kid"), "owner started", ("started", "kid")]


async def test_failures_outside_the_window_are_forgotten() -> None:
    window = RestartWindow(Supervision.restart(max_restarts=1, within=0.02, backoff=FAST))
    assert window.decide().action == "restart"
    assert window.decide().action == "stop"
    await anyio.sleep(0.03)
    assert window.decide().action == "restart"


def test_backoff_grows_exponentially_up_to_its_maximum() -> None:
    backoff = Backoff(initial=0.1, factor=2, maximum=0.5)
    assert [backoff.delay(n) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.5, 0.5]


def test_bad_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown supervision action 'ignore'"):
        Supervision("ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_restarts must be >= 0"):
        Supervision.restart(max_restarts=-1)
    with pytest.raises(ValueError, match="factor >= 1"):
        Backoff(factor=0.5)
