"""``MemoryService``: the one write path (decide on a fresh state, retry a lost race) and
what the context gets."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from events.envelope import NewEvent, Recorded
from events.in_memory import InMemoryEventStore
from events.types import Event, MemoryFactForgotten, MemorySummaryUpdated
from navi.memory import decisions
from navi.memory.facts import fact_id, memory_stream_id
from navi.memory.service import MemoryService
from navi.memory.summary import MEMORY_HEADER
from tests.navi.memory.conftest import learned

pytestmark = pytest.mark.anyio

EDITOR = fact_id("preference", "editor")
STREAM = memory_stream_id("local")


class RacingStore(InMemoryEventStore):
    """Another node forgets the editor fact just before this node's next append."""

    raced = False

    async def append(
        self,
        stream_id: str,
        events: Sequence[Event | NewEvent],
        *,
        expected_seq: int,
        idempotency_key: str | None = None,
    ) -> list[Recorded]:
        if not self.raced and stream_id == STREAM:
            self.raced = True
            await super().append(
                STREAM, [MemoryFactForgotten(fact_id=EDITOR)], expected_seq=expected_seq
            )
        return await super().append(
            stream_id, events, expected_seq=expected_seq, idempotency_key=idempotency_key
        )


async def test_a_lost_race_is_decided_again_on_what_the_other_node_wrote() -> None:
    async with RacingStore() as store:
        await InMemoryEventStore.append(
            store, STREAM, [learned("preference", "editor", "vim")], expected_seq=0
        )
        service = MemoryService(store)
        decided: list[int] = []

        def edit(state: object) -> list[Event]:
            decided.append(1)
            return decisions.edit(state, EDITOR, "emacs")  # type: ignore[arg-type]

        with pytest.raises(decisions.FactNotFound, match="was forgotten"):
            await service.append("local", edit)
        assert len(decided) == 2  # decided, lost the race, decided again and refused
        assert [r.type for r in await store.read(STREAM)] == [
            "memory.fact_learned",
            "memory.fact_forgotten",
        ]


async def test_what_the_context_gets() -> None:
    async with InMemoryEventStore() as store:
        service = MemoryService(store)
        assert await service.summary_message() is None
        await store.append(
            STREAM,
            [learned("preference", "editor", "Uses vim"), learned("environment", "os", "Arch")],
            expected_seq=0,
        )
        assert await service.summary_message() == (
            f"{MEMORY_HEADER}\n\nKnown facts about the user:\n"
            "- environment / os: Arch\n- preference / editor: Uses vim"
        )
        await store.append(
            STREAM,
            [MemorySummaryUpdated(text="Vim on Arch.", fact_ids=(EDITOR,), based_on_seq=2)],
            expected_seq=2,
        )
        assert await service.summary_message() == f"{MEMORY_HEADER}\n\nVim on Arch."
        await service.forget("local", EDITOR)
        assert await service.summary_message() == (
            f"{MEMORY_HEADER}\n\nKnown facts about the user:\n- environment / os: Arch"
        )
        await service.forget("local", fact_id("environment", "os"))
        assert await service.summary_message() is None
        assert await service.users() == ["local"]


async def test_changes_by_hand_are_announced() -> None:
    async with InMemoryEventStore() as store:
        await store.append(STREAM, [learned("preference", "editor", "vim")], expected_seq=0)
        service = MemoryService(store)
        changed: list[str] = []
        service.on_change = changed.append
        await service.edit("local", EDITOR, "emacs")
        await service.edit("local", EDITOR, "emacs")  # no change: nothing appended
        await service.forget("local", EDITOR)
        assert changed == ["local", "local"]
        assert [r.type for r in await store.read(STREAM)] == [
            "memory.fact_learned",
            "memory.fact_edited",
            "memory.fact_forgotten",
        ]
