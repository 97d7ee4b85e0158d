"""Stop is a message; priority messages overtake."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from actors import Actor, ActorStopped, ActorSystem, ChildStopped, Stop
from tests.actors.support import Gate, Inbox

pytestmark = pytest.mark.anyio


async def test_a_normal_stop_is_handled_after_what_is_queued(box: Inbox) -> None:
    async with ActorSystem() as system:
        gate = Gate(box)
        ref = await system.spawn(gate, name="g")
        await ref.tell("block")
        assert await box.next() == "blocked"
        for message in (1, 2, Stop("done"), 3):
            await ref.tell(message)
        gate.gate.set()
        await ref.wait_stopped()
        with pytest.raises(ActorStopped):
            await ref.tell(4)
    # 3 came after the stop: a dead letter.
    assert box.drain() == ["block", 1, 2]


async def test_a_priority_stop_overtakes_the_backlog(box: Inbox) -> None:
    async with ActorSystem() as system:
        gate = Gate(box)
        ref = await system.spawn(gate, name="g")
        await ref.tell("block")
        assert await box.next() == "blocked"
        for message in (1, 2, 3):
            await ref.tell(message)
        await ref.tell(Stop("now"), priority=True)
        gate.gate.set()  # the message in hand finishes
        await ref.wait_stopped()
    assert box.drain() == ["block"]


async def test_a_priority_message_overtakes_queued_normal_ones(box: Inbox) -> None:
    async with ActorSystem() as system:
        gate = Gate(box)
        ref = await system.spawn(gate, name="g")
        await ref.tell("block")
        assert await box.next() == "blocked"
        await ref.tell("first")
        await ref.tell("second")
        await ref.tell("urgent", priority=True)
        gate.gate.set()
        assert await box.take(4) == ["block", "urgent", "first", "second"]


async def test_an_actor_can_stop_itself_and_its_parent_is_told(box: Inbox) -> None:
    class Quitter(Actor[Any]):
        async def receive(self, message: Any) -> Any:
            box.put(message)
            if message == "quit":
                self.stop("asked to")
            return None

    class Parent(Actor[Any]):
        async def on_start(self) -> None:
            await self.spawn_child(Quitter(), "q")

        async def receive(self, message: Any) -> Any:
            box.put(message)
            return None

    async with ActorSystem() as system:
        await system.spawn(Parent(), name="p")
        child = system.get("p/q")
        await child.tell("quit")
        with pytest.raises(ActorStopped):
            while True:  # messages after the quit are refused once it has stopped
                await child.tell("more")
                await anyio.sleep(0.001)
        assert await box.take(2) == ["quit", ChildStopped("q", "asked to")]
