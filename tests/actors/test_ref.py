from __future__ import annotations

from typing import Any

import anyio
import pytest

from actors import Actor, ActorStopped, ActorSystem, AskTimeout, MailboxFull, Reply, Stop
from tests.actors.support import Gate, Inbox, Recorder

pytestmark = pytest.mark.anyio


class Calculator(Actor[Any]):
    async def receive(self, message: Any) -> Any:
        match message:
            case ("add", a, b):
                return a + b
            case "boom":
                raise ValueError("bad input")
            case "timeout":
                raise TimeoutError("the actor's own timeout")
            case "never":
                await anyio.sleep_forever()
        return None


async def test_tell_delivers_in_order(box: Inbox) -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(Recorder(box), name="rec")
        for i in range(20):
            await ref.tell(i)
        assert await box.take(21) == [("started", ""), *range(20)]


async def test_ask_returns_what_receive_returns() -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(Calculator(), name="calc")
        assert await ref.ask(("add", 2, 3), timeout=5) == 5


async def test_ask_raises_what_receive_raises() -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(Calculator(), name="calc")
        with pytest.raises(ValueError, match="bad input"):
            await ref.ask("boom", timeout=5)
        # A TimeoutError raised by the actor is its answer, not an ask timeout.
        with pytest.raises(TimeoutError, match="the actor's own timeout") as info:
            await ref.ask("timeout", timeout=5)
        assert not isinstance(info.value, AskTimeout)
        # The actor was restarted by its supervisor and answers again.
        assert await ref.ask(("add", 1, 1), timeout=5) == 2


async def test_ask_times_out() -> None:
    # The actor never returns from "never", so leaving the block waits out the system's
    # shutdown timeout before cancelling it: a short one, not the default 10 s.
    async with ActorSystem(shutdown_timeout=0.2) as system:
        ref = await system.spawn(Calculator(), name="calc")
        with pytest.raises(AskTimeout, match=r"'calc' did not reply to str within 0\.05s"):
            await ref.ask("never", timeout=0.05)


async def test_asking_a_stopped_actor_raises_at_once() -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(Calculator(), name="calc")
        await ref.stop()
        assert ref.is_stopped
        with anyio.fail_after(1):
            with pytest.raises(ActorStopped, match="'calc' is stopped"):
                await ref.ask(("add", 1, 2), timeout=None)
        with pytest.raises(ActorStopped):
            await ref.tell("x")
        with pytest.raises(ActorStopped):
            ref.tell_nowait("x")


async def test_a_queued_ask_fails_when_the_actor_stops(box: Inbox) -> None:
    async with ActorSystem() as system:
        gate = Gate(box)
        ref = await system.spawn(gate, name="gate")
        await ref.tell("block")
        assert await box.next() == "blocked"
        outcome: list[BaseException] = []

        async def asker() -> None:
            try:
                await ref.ask("queued", timeout=None)
            except ActorStopped as error:
                outcome.append(error)

        async with anyio.create_task_group() as tg:
            tg.start_soon(asker)
            await anyio.wait_all_tasks_blocked()
            ref.tell_nowait(Stop(), priority=True)
            gate.gate.set()
        assert len(outcome) == 1
        await ref.wait_stopped()


async def test_tell_waits_when_the_mailbox_is_full(box: Inbox) -> None:
    class Small(Gate):
        mailbox_size = 2

    async with ActorSystem() as system:
        gate = Small(box)
        ref = await system.spawn(gate, name="small")
        await ref.tell("block")
        assert await box.next() == "blocked"
        await ref.tell(1)
        await ref.tell(2)
        with pytest.raises(MailboxFull):
            ref.tell_nowait(3)
        sent = anyio.Event()

        async def sender() -> None:
            await ref.tell(3)
            sent.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(sender)
            await anyio.wait_all_tasks_blocked()
            assert not sent.is_set()
            gate.gate.set()
        assert await box.take(4) == ["block", 1, 2, 3]


async def test_a_reply_can_be_deferred_to_a_later_message() -> None:
    class Waiter(Actor[Any]):
        def __init__(self) -> None:
            self.waiting: list[Reply] = []

        async def receive(self, message: Any) -> Any:
            if message == "wait":
                self.waiting.append(self.defer_reply())
            elif message == "release":
                for reply in self.waiting:
                    reply.set("released")
            return "ignored"

    async with ActorSystem() as system:
        ref = await system.spawn(Waiter(), name="waiter")
        results: list[Any] = []

        async def ask_and_keep() -> None:
            results.append(await ref.ask("wait", timeout=5))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_and_keep)
            tg.start_soon(ask_and_keep)
            await anyio.wait_all_tasks_blocked()
            await ref.tell("release")
        assert results == ["released", "released"]


async def test_a_deferred_reply_fails_when_the_actor_stops() -> None:
    class Keeper(Actor[Any]):
        async def receive(self, message: Any) -> Any:
            self.defer_reply()

    async with ActorSystem() as system:
        ref = await system.spawn(Keeper(), name="keeper")
        outcome: list[BaseException] = []

        async def asker() -> None:
            try:
                await ref.ask("hold", timeout=5)
            except ActorStopped as error:
                outcome.append(error)

        async with anyio.create_task_group() as tg:
            tg.start_soon(asker)
            await anyio.wait_all_tasks_blocked()  # the ask is handled and deferred
            await ref.stop()
        assert len(outcome) == 1


async def test_ask_refuses_stop() -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(Calculator(), name="calc")
        with pytest.raises(TypeError, match="Stop is not a question"):
            await ref.ask(Stop(), timeout=1)


async def test_refs_compare_by_actor() -> None:
    async with ActorSystem() as system:
        ref = await system.spawn(Calculator(), name="calc")
        assert system.get("calc") == ref
        assert len({ref, system.get("calc")}) == 1
        assert repr(ref) == "<ActorRef 'calc' running>"
