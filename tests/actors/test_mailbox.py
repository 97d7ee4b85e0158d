from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from actors import ActorStopped, MailboxFull, Stop
from actors.mailbox import Mailbox

pytestmark = pytest.mark.anyio


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    box = Mailbox("test", capacity=3, priority_capacity=2)
    yield box
    box.close()


async def test_messages_come_out_in_order(mailbox: Mailbox) -> None:
    for i in range(3):
        await mailbox.put(i)
    assert [await mailbox.get() for _ in range(3)] == [0, 1, 2]


async def test_put_nowait_on_a_full_mailbox_raises_and_enqueues_nothing(mailbox: Mailbox) -> None:
    for i in range(3):
        mailbox.put_nowait(i)
    with pytest.raises(MailboxFull, match="mailbox is full \\(3 messages\\)"):
        mailbox.put_nowait(3)
    assert len(mailbox) == 3
    assert [mailbox.get_nowait() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(anyio.WouldBlock):
        mailbox.get_nowait()


async def test_put_waits_for_room_when_full(mailbox: Mailbox) -> None:
    for i in range(3):
        mailbox.put_nowait(i)
    sent = anyio.Event()

    async def sender() -> None:
        await mailbox.put(3)
        sent.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        await anyio.wait_all_tasks_blocked()
        assert not sent.is_set()  # back pressure: the sender waits
        assert await mailbox.get() == 0
        await sent.wait()
    assert [await mailbox.get() for _ in range(3)] == [1, 2, 3]


async def test_priority_messages_overtake_the_backlog(mailbox: Mailbox) -> None:
    mailbox.put_nowait("a")
    mailbox.put_nowait("b")
    mailbox.put_nowait("urgent", priority=True)
    assert [mailbox.get_nowait() for _ in range(3)] == ["urgent", "a", "b"]


async def test_a_priority_stop_comes_first_even_when_every_lane_is_full(mailbox: Mailbox) -> None:
    for i in range(3):
        mailbox.put_nowait(i)
    mailbox.put_nowait("p1", priority=True)
    mailbox.put_nowait("p2", priority=True)
    with pytest.raises(MailboxFull, match="priority mailbox is full"):
        mailbox.put_nowait("p3", priority=True)
    mailbox.put_nowait(Stop("now"), priority=True)  # never refused
    assert mailbox.get_nowait() == Stop("now")


async def test_a_normal_stop_waits_its_turn(mailbox: Mailbox) -> None:
    mailbox.put_nowait("a")
    mailbox.put_nowait(Stop())
    assert mailbox.get_nowait() == "a"
    assert mailbox.get_nowait() == Stop()


async def test_get_waits_for_a_message(mailbox: Mailbox) -> None:
    got: list[object] = []

    async def reader() -> None:
        got.append(await mailbox.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        await anyio.wait_all_tasks_blocked()
        assert got == []
        await mailbox.put("hello")
    assert got == ["hello"]


async def test_close_returns_dead_letters_and_refuses_more(mailbox: Mailbox) -> None:
    mailbox.put_nowait("a")
    mailbox.put_nowait("p", priority=True)
    assert mailbox.close() == ["p", "a"]
    with pytest.raises(ActorStopped):
        mailbox.put_nowait("b")
    with pytest.raises(ActorStopped):
        await mailbox.put("b")


async def test_close_releases_a_blocked_sender(mailbox: Mailbox) -> None:
    for i in range(3):
        mailbox.put_nowait(i)
    outcome: list[object] = []

    async def sender() -> None:
        try:
            await mailbox.put(3)
        except ActorStopped as error:
            outcome.append(error)
        else:
            outcome.append("sent")

    async with anyio.create_task_group() as tg:
        tg.start_soon(sender)
        await anyio.wait_all_tasks_blocked()
        dead = mailbox.close()
    # The waiting sender's message is taken like any queued one: it is a dead letter
    # (an ask among them gets ActorStopped from the runtime).
    assert dead == [0, 1, 2, 3]
    assert outcome == ["sent"]


def test_capacities_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Mailbox("x", capacity=0, priority_capacity=1)
