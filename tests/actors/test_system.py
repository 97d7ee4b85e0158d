from __future__ import annotations

from typing import Any

import anyio
import pytest

from actors import (
    Actor,
    ActorError,
    ActorNameTaken,
    ActorSystem,
    ActorSystemClosed,
    InvalidActorName,
    UnknownActor,
)
from tests.actors.support import Inbox, Recorder

pytestmark = pytest.mark.anyio


class Parent(Actor[Any]):
    def __init__(self, box: Inbox, label: str, children: tuple[str, ...] = ()) -> None:
        self.box = box
        self.label = label
        self.child_labels = children

    async def on_start(self) -> None:
        for label in self.child_labels:
            await self.spawn_child(Recorder(self.box, label), label)

    async def on_stop(self) -> None:
        self.box.put(("stopped", self.label))

    async def receive(self, message: Any) -> Any:
        return sorted(self.children)


async def test_spawn_and_lookup_by_path(box: Inbox) -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(Parent(box, "p", ("a", "b")), name="p")
        assert await ref.ask("children?", timeout=5) == ["a", "b"]
        assert system.lookup("p") == ref
        assert system.get("p/a").path == "p/a"
        assert system.get("p/a").name == "a"
        assert system.lookup("p/zzz") is None
        with pytest.raises(UnknownActor, match="no running actor named 'nope'"):
            system.get("nope")
        assert system.paths == ["p", "p/a", "p/b"]


async def test_names_are_unique_and_valid(box: Inbox) -> None:
    async with ActorSystem() as system:
        await system.spawn(Recorder(box), name="one")
        with pytest.raises(ActorNameTaken, match="'one' is already running"):
            await system.spawn(Recorder(box), name="one")
        for bad in ("", "a/b"):
            with pytest.raises(InvalidActorName, match="invalid actor name"):
                await system.spawn(Recorder(box), name=bad)
        assert system.paths == ["one"]


async def test_an_instance_runs_once_at_a_time(box: Inbox) -> None:
    async with ActorSystem() as system:
        actor = Recorder(box)
        ref = await system.spawn(actor, name="one")
        with pytest.raises(ActorError, match="already running as 'one'"):
            await system.spawn(actor, name="two")
        await ref.stop()
        # Stopped: its name and the instance are free again.
        again = await system.spawn(actor, name="one")
        assert await again.ask("hi", timeout=5) == "hi"


async def test_shutdown_stops_children_before_parents(box: Inbox) -> None:
    async with ActorSystem() as system:
        await system.spawn(Parent(box, "p", ("a", "b")), name="p")
        assert await box.take(2) == [("started", "a"), ("started", "b")]
    events = box.drain()
    assert events[-1] == ("stopped", "p")
    assert sorted(events[:-1]) == [("stopped", "a"), ("stopped", "b")]
    assert system.paths == []


async def test_stopping_a_parent_stops_its_children_first(box: Inbox) -> None:
    async with ActorSystem() as system:
        parent = await system.spawn(Parent(box, "p", ("a",)), name="p")
        child = system.get("p/a")
        await box.next()
        await parent.stop()
        assert child.is_stopped
        assert box.drain() == [("stopped", "a"), ("stopped", "p")]
        assert system.paths == []


async def test_spawning_outside_the_block_is_refused(box: Inbox) -> None:
    system = ActorSystem()
    with pytest.raises(ActorSystemClosed):
        await system.spawn(Recorder(box), name="x")
    async with system:
        pass
    with pytest.raises(ActorSystemClosed, match="not running"):
        await system.spawn(Recorder(box), name="x")


async def test_an_actor_that_ignores_stop_is_cancelled_after_the_timeout(box: Inbox) -> None:
    class Stubborn(Actor[Any]):
        async def receive(self, message: Any) -> Any:
            box.put("busy")
            await anyio.sleep_forever()  # never returns by itself

        async def on_stop(self) -> None:
            box.put("on_stop")  # not reached: it is cancelled, not stopped

    async with ActorSystem(shutdown_timeout=0.05) as system:
        ref = await system.spawn(Stubborn(), name="stubborn")
        await ref.tell("work")
        assert await box.next() == "busy"
    assert ref.is_stopped
    assert box.drain() == []
    assert system.paths == []


async def test_an_error_in_the_block_cancels_the_actors(box: Inbox) -> None:
    with pytest.raises(RuntimeError, match="body failed"):
        async with ActorSystem() as system:
            ref = await system.spawn(Recorder(box), name="r")
            raise RuntimeError("body failed")
    assert ref.is_stopped
