"""A stream that arrives faster than Navi handles it: every chunk is durable, in order,
and the stream never runs further ahead of a follower of the log than the writer's
queue and the batch being committed."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path

import pytest

from events.in_memory import InMemoryEventStore
from events.tuning import WRITER_MAX_BATCH, WRITER_QUEUE
from events.types import LLMText
from navi.app import Navi
from navi.llm.stop import StopSignal
from navi.llm.types import (
    ChatMessage,
    Completion,
    FinalChunk,
    LLMOptions,
    ModelInfo,
    StreamChunk,
    TextPiece,
    ToolSpec,
)
from tests.support.navi_app import navi_settings, run_stream

pytestmark = pytest.mark.anyio


class FloodLLM:
    """An LLM whose stream never waits: it answers as fast as it is read."""

    name = "flood"
    model = "flood-model"
    url = "flood:"

    def __init__(self, chunks: int, *, stall_every: int = 0) -> None:
        self.chunks = chunks
        self.stall_every = stall_every
        self.sent = 0

    async def stream_complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> AsyncGenerator[StreamChunk, None]:
        for _ in range(self.chunks):
            self.sent += 1
            if self.stall_every and self.sent % self.stall_every == 0:
                # The process stalls without yielding (a garbage collection, say) for
                # longer than the writer's delay: it sends a batch that is not full.
                time.sleep(0.006)
            yield TextPiece(text="tok ")
        yield FinalChunk(finish_reason="stop", completion_tokens=self.chunks)

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        options: LLMOptions | None = None,
        *,
        stop: StopSignal | None = None,
    ) -> Completion:
        raise NotImplementedError

    async def list_models(self) -> list[ModelInfo]:
        return []

    async def context_window(self, model: str | None = None, num_ctx: int | None = None) -> int:
        return 8192

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("stall_every", [0, 100], ids=["steady", "stalling"])
async def test_a_flat_out_stream_reaches_a_follower_batch_by_batch(
    tmp_path: Path, stall_every: int
) -> None:
    llm = FloodLLM(chunks=8 * WRITER_MAX_BATCH + 5, stall_every=stall_every)
    settings = navi_settings(tmp_path, "http://127.0.0.1:9", planning="off")
    async with Navi.open(
        settings, backend=llm, store=InMemoryEventStore(), background=False
    ) as navi:
        session = await navi.create_session()
        texts = 0
        ahead: list[int] = []  # chunks the LLM had produced beyond each one received
        async for record in run_stream(navi, session, "go"):
            if record.type == "llm.text":
                texts += 1
                ahead.append(llm.sent - texts)
        assert texts == llm.chunks
        records = await navi.store.read(session)
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        text = "".join(r.event.text for r in records if isinstance(r.event, LLMText))
        assert text == "tok " * llm.chunks
    # The stager waits while the writer's queue is full (backpressure), so the LLM is
    # never further ahead of the follower than the queue and the batch being committed.
    assert max(ahead) <= WRITER_QUEUE + WRITER_MAX_BATCH
