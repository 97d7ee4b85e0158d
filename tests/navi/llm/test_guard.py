"""The stream guard: first-chunk and between-chunk timeouts, and a stop that is honoured
at once, even during a silent prefill; on both wires the HTTP stream is closed."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

import anyio
import pytest

from navi.llm.base import LLMBackend
from navi.llm.errors import IncompleteStream, LLMTimeout
from navi.llm.guard import guard_stream
from navi.llm.ollama import OllamaBackend
from navi.llm.openai_compat import OpenAICompatibleBackend
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, FinalChunk, StreamChunk, TextPiece
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.helpers import drain

# Module-level marker: the anyio plugin must see it at collection, or it rebuilds
# async test items and drops their other parameters.
pytestmark = pytest.mark.anyio

HELLO = [ChatMessage(role="user", content="hello")]
# A stop must not wait for a poll or a timeout: it ends the wait well within this.
STOP_PROMPTLY = 0.5


class RawProbe:
    """A raw batch stream scripted by (delay, batch) steps, recording that it was closed."""

    def __init__(self, steps: Sequence[tuple[float, Sequence[StreamChunk]]]) -> None:
        self.steps = steps
        self.started = False
        self.closed = False

    async def batches(self) -> AsyncGenerator[Sequence[StreamChunk], None]:
        self.started = True
        try:
            for delay, batch in self.steps:
                await anyio.sleep(delay)
                yield batch
        finally:
            self.closed = True


def guarded(
    probe: RawProbe, *, stop: StopSignal | None = None, first: float = 5.0, gap: float = 5.0
) -> AsyncGenerator[StreamChunk, None]:
    return guard_stream(probe.batches(), stop=stop, first_chunk_timeout=first, chunk_timeout=gap)


FINAL = FinalChunk(finish_reason="stop", prompt_tokens=1, completion_tokens=2)


async def test_passes_chunks_through_and_ends_with_the_final_chunk() -> None:
    probe = RawProbe([(0, [TextPiece("a"), TextPiece("b")]), (0, []), (0, [FINAL])])
    assert await drain(guarded(probe)) == [TextPiece("a"), TextPiece("b"), FINAL]
    assert probe.closed


async def test_first_chunk_timeout() -> None:
    probe = RawProbe([(30, [FINAL])])
    with pytest.raises(LLMTimeout) as caught:
        await drain(guarded(probe, first=0.1))
    assert caught.value.first_chunk and caught.value.retryable
    assert "LLM_STREAM_FIRST_CHUNK_TIMEOUT" in str(caught.value)
    assert probe.closed


async def test_gap_timeout_after_the_first_chunk() -> None:
    probe = RawProbe([(0, [TextPiece("a")]), (30, [FINAL])])
    received: list[StreamChunk] = []
    with pytest.raises(LLMTimeout) as caught:
        async for chunk in guarded(probe, gap=0.1):
            received.append(chunk)
    assert received == [TextPiece("a")]
    assert not caught.value.first_chunk
    assert "LLM_STREAM_CHUNK_TIMEOUT" in str(caught.value)


async def test_empty_batches_prove_the_server_is_alive() -> None:
    # Fragments of a long tool call produce no chunk for a while, but keep arriving.
    steps: list[tuple[float, Sequence[StreamChunk]]] = [(0, [TextPiece("a")])]
    steps += [(0.05, [])] * 8 + [(0.05, [FINAL])]
    assert await drain(guarded(RawProbe(steps), gap=0.2)) == [TextPiece("a"), FINAL]


async def test_a_stream_without_final_chunk_is_incomplete() -> None:
    probe = RawProbe([(0, [TextPiece("a")])])
    with pytest.raises(IncompleteStream) as caught:
        await drain(guarded(probe))
    assert caught.value.retryable


async def test_stop_before_the_call_never_starts_it() -> None:
    stop = StopSignal()
    stop.set()
    probe = RawProbe([(0, [FINAL])])
    assert await drain(guarded(probe, stop=stop)) == [FinalChunk(finish_reason="stopped")]
    assert not probe.started


async def test_stop_while_waiting_ends_the_wait_at_once() -> None:
    stop = StopSignal()
    probe = RawProbe([(30, [FINAL])])
    received: list[StreamChunk] = []
    ended = anyio.Event()

    async def consume() -> None:
        received.extend(await drain(guarded(probe, stop=stop, first=60)))
        ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.sleep(0.05)
        with anyio.fail_after(STOP_PROMPTLY):
            stop.set()
            await ended.wait()
    assert received == [FinalChunk(finish_reason="stopped")]
    assert probe.closed


async def test_stop_between_chunks_of_one_batch() -> None:
    stop = StopSignal()
    probe = RawProbe([(0, [TextPiece("a"), TextPiece("b"), FINAL])])
    received = []
    async for chunk in guarded(probe, stop=stop):
        received.append(chunk)
        stop.set()
    assert received == [TextPiece("a"), FinalChunk(finish_reason="stopped")]
    assert probe.closed


# ---------------------------------------------------------------- over real HTTP, both wires


def make_backend(wire: str, fake: FakeLLMServer, **timeouts: float) -> LLMBackend:
    settings = LLMSettings(**timeouts)  # type: ignore[arg-type]
    if wire == "ollama":
        return OllamaBackend(settings, url=fake.url, model="m")
    return OpenAICompatibleBackend(settings, url=fake.url + "/v1", model="m")


WIRES = pytest.mark.parametrize("wire", ["ollama", "openai"])


@WIRES
async def test_stop_during_silent_prefill_closes_the_http_stream(
    wire: str, fake: FakeLLMServer
) -> None:
    fake.script(Reply(text="never sent", delay_first=30))
    backend = make_backend(wire, fake, first_chunk_timeout=120)
    stop = StopSignal()
    received: list[StreamChunk] = []
    ended = anyio.Event()

    async def consume() -> None:
        received.extend(await drain(backend.stream_complete(HELLO, stop=stop)))
        ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        with anyio.fail_after(5):
            await fake.wait_for_requests(1)
        with anyio.fail_after(STOP_PROMPTLY):
            stop.set()
            await ended.wait()
    assert received == [FinalChunk(finish_reason="stopped")]
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)  # the server saw the connection close
    await backend.aclose()


@WIRES
async def test_stop_mid_stream_closes_the_http_stream(wire: str, fake: FakeLLMServer) -> None:
    fake.script(Reply(text=["one ", "two ", "three ", "four ", "five"], delay=0.2))
    backend = make_backend(wire, fake)
    stop = StopSignal()
    received: list[StreamChunk] = []
    async for chunk in backend.stream_complete(HELLO, stop=stop):
        received.append(chunk)
        if chunk == TextPiece("one "):
            stop.set()
    assert received == [TextPiece("one "), FinalChunk(finish_reason="stopped")]
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)
    await backend.aclose()


@WIRES
async def test_slow_first_chunk_times_out_and_closes(wire: str, fake: FakeLLMServer) -> None:
    fake.script(Reply(text="late", delay_first=30))
    backend = make_backend(wire, fake, first_chunk_timeout=0.3)
    with pytest.raises(LLMTimeout) as caught:
        await drain(backend.stream_complete(HELLO))
    assert caught.value.first_chunk
    assert fake.url in str(caught.value)
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)
    await backend.aclose()


@WIRES
async def test_a_slow_first_chunk_within_the_limit_is_fine(wire: str, fake: FakeLLMServer) -> None:
    fake.script(Reply(text="worth the wait", delay_first=0.3))
    backend = make_backend(wire, fake, first_chunk_timeout=10, chunk_timeout=0.1)
    chunks = await drain(backend.stream_complete(HELLO))
    assert "".join(c.text for c in chunks if isinstance(c, TextPiece)) == "worth the wait"
    await backend.aclose()


@WIRES
async def test_stall_mid_stream_times_out_and_closes(wire: str, fake: FakeLLMServer) -> None:
    fake.script(Reply(text="a b c d", stall_after=3))
    backend = make_backend(wire, fake, chunk_timeout=0.3)
    received: list[StreamChunk] = []
    with pytest.raises(LLMTimeout) as caught:
        async for chunk in backend.stream_complete(HELLO):
            received.append(chunk)
    assert not caught.value.first_chunk
    assert received  # what came before the stall was delivered
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)
    await backend.aclose()


@WIRES
async def test_leaving_the_stream_early_closes_the_http_stream(
    wire: str, fake: FakeLLMServer
) -> None:
    fake.script(Reply(text="a b c d e f", delay=0.2))
    backend = make_backend(wire, fake)
    stream = backend.stream_complete(HELLO)
    async for _chunk in stream:
        break
    await stream.aclose()
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)
    await backend.aclose()
