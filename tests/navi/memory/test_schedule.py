"""When extraction runs: a few moments after a run ends (``idle_seconds`` after the
session's last event, via the ``after_run`` post-turn hook), not at the next periodic
sweep; and the setting that says how long (NAVI_MEMORY_EXTRACT_AFTER_S)."""

from __future__ import annotations

import time

import anyio
import pytest

from events.in_memory import InMemoryEventStore
from navi.config import Settings
from navi.llm.ollama import OllamaBackend
from navi.memory.service import MemoryService
from navi.memory.worker import MemoryWorker
from tests.navi.memory.conftest import answer, new_session, summary
from tests.support.fake_backend import FakeLLM

pytestmark = pytest.mark.anyio


async def test_a_run_that_ended_is_read_soon_not_at_the_next_sweep(
    backend: OllamaBackend, fake: FakeLLM
) -> None:
    async with InMemoryEventStore() as store:  # real time: run_periodic really waits
        service = MemoryService(store)
        worker = MemoryWorker(service, backend, idle_seconds=0.5)
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run_periodic, 3600.0)  # the periodic sweep never comes
            await anyio.sleep(0.2)  # the start-up sweep: nothing yet
            [ask, _reply] = await new_session(
                store, "s1", [("user", "I use vim."), ("assistant", "Noted!")]
            )
            fake.script(answer(("preference", "editor", "Uses vim", [ask])), summary("Vim."))
            started = time.monotonic()
            await worker.after_run(None)
            await anyio.sleep(0.3)
            assert await service.facts() == []  # not before the session was quiet
            with anyio.fail_after(10):
                while not await service.facts():
                    await anyio.sleep(0.05)
            assert time.monotonic() - started < 5
            tg.cancel_scope.cancel()
    assert [f.value for f in await service.facts()] == ["Uses vim"]


def test_the_setting_and_the_older_one() -> None:
    assert Settings.from_env({}).memory_extract_after_s == 120.0
    assert Settings.from_env({"NAVI_MEMORY_EXTRACT_AFTER_S": "30"}).memory_extract_after_s == 30
    assert Settings.from_env({"MEMORY_IDLE_MINUTES": "600"}).memory_extract_after_s == 36000
    both = {"MEMORY_IDLE_MINUTES": "600", "NAVI_MEMORY_EXTRACT_AFTER_S": "5"}
    assert Settings.from_env(both).memory_extract_after_s == 5
