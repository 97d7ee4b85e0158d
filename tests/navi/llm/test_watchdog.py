"""The stream watchdog (stop and timeouts without a cancel scope per read): on its own,
inside the guard with a raw stream that binds its waits to it, and on the lean HTTP
path of both backends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence
from typing import cast

import anyio
import httpx
import pytest

from navi.llm import lean_conn
from navi.llm.errors import IncompleteStream, LLMError, LLMServerError, LLMTimeout
from navi.llm.guard import guard_stream
from navi.llm.lean_http import LeanClient
from navi.llm.ollama import OllamaBackend
from navi.llm.settings import LLMSettings
from navi.llm.stop import StopSignal
from navi.llm.types import ChatMessage, FinalChunk, StreamChunk, TextPiece
from navi.llm.watchdog import StreamInterrupted, Watchdog
from tests.navi.llm.test_guard import WIRES, make_backend
from tests.navi.llm.test_lean_http import RawServer, _Transport, whole
from tests.support.fake_llm import FakeLLMServer, Reply
from tests.support.fake_llm_script import render_ollama

pytestmark = pytest.mark.anyio

HELLO = [ChatMessage(role="user", content="hello")]
FINAL = FinalChunk(finish_reason="stop", prompt_tokens=1, completion_tokens=2)
STOPPED = FinalChunk(finish_reason="stopped")
STOP_PROMPTLY = 0.5


def live_timers(loop: asyncio.AbstractEventLoop) -> list[asyncio.TimerHandle]:
    """The watchdogs' timers still scheduled on ``loop`` (asyncio's own loop)."""
    scheduled: list[asyncio.TimerHandle] = getattr(loop, "_scheduled", [])
    return [
        handle
        for handle in scheduled
        if not handle.cancelled()
        and isinstance(getattr(handle._callback, "__self__", None), Watchdog)
    ]


def assert_nothing_left(signal: StopSignal) -> None:
    assert not signal._hooks
    assert not live_timers(asyncio.get_running_loop())


class Target:
    """An abort target that records when it was called."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self) -> None:
        self.calls.append(time.monotonic())


def started(first: float = 5.0, gap: float = 5.0) -> tuple[Watchdog, StopSignal, Target]:
    watchdog = Watchdog(asyncio.get_running_loop())
    signal = StopSignal()
    target = Target()
    watchdog.watch(target)
    watchdog.start(signal, first, gap)
    return watchdog, signal, target


# ---------------------------------------------------------------- the watchdog alone


async def test_a_stop_aborts_the_bound_wait_at_once() -> None:
    watchdog, signal, target = started()
    watchdog.waiting = True
    signal.set()
    assert len(target.calls) == 1 and watchdog.fired
    with pytest.raises(StreamInterrupted):
        watchdog.check()
    watchdog.stop()
    assert_nothing_left(signal)


async def test_a_wait_bound_after_the_stop_is_aborted_when_bound() -> None:
    watchdog, signal, first_target = started()
    watchdog.watch(None)  # (between two waits)
    signal.set()
    assert not first_target.calls
    later = Target()
    watchdog.watch(later)
    assert len(later.calls) == 1
    watchdog.stop()


async def test_the_timeout_fires_at_the_deadline_of_the_wait() -> None:
    watchdog, signal, target = started(first=0.1)
    watchdog.waiting = True
    watchdog.since = time.monotonic()
    await anyio.sleep(0.3)
    assert len(target.calls) == 1 and watchdog.fired and watchdog.first
    assert target.calls[0] - watchdog.since >= 0.1
    watchdog.stop()
    assert_nothing_left(signal)


async def test_the_timer_rearms_after_activity() -> None:
    watchdog, signal, target = started(first=0.2, gap=0.2)
    watchdog.waiting = True
    watchdog.since = time.monotonic()
    await anyio.sleep(0.12)
    watchdog.since = time.monotonic()  # a batch came, the next wait began
    await anyio.sleep(0.13)  # past the first deadline, not the wait's own
    assert not target.calls
    await anyio.sleep(0.2)
    assert len(target.calls) == 1
    assert target.calls[0] - watchdog.since >= 0.2
    watchdog.stop()
    assert_nothing_left(signal)


async def test_no_timeout_while_the_consumer_holds_a_batch() -> None:
    watchdog, _signal, target = started(first=0.05, gap=0.05)
    watchdog.got_first_batch()
    watchdog.waiting = False  # the consumer is slow with the last batch
    await anyio.sleep(0.2)
    assert not target.calls and not watchdog.fired
    watchdog.waiting = True
    watchdog.since = time.monotonic()
    await anyio.sleep(0.2)
    assert len(target.calls) == 1 and not watchdog.first
    watchdog.stop()


async def test_a_shorter_gap_timeout_applies_from_the_first_batch() -> None:
    watchdog, _signal, target = started(first=30, gap=0.05)
    watchdog.waiting = True
    watchdog.since = time.monotonic()
    await anyio.sleep(0.1)
    assert not target.calls  # still the first-chunk timeout
    watchdog.got_first_batch()
    watchdog.since = time.monotonic()
    with anyio.fail_after(1):
        while not target.calls:
            await anyio.sleep(0.01)
    watchdog.stop()


async def test_stopping_leaves_no_timer_and_no_hook() -> None:
    watchdog, signal, target = started(first=0.05, gap=0.05)
    watchdog.waiting = True
    watchdog.stop()
    assert_nothing_left(signal)
    signal.set()
    await anyio.sleep(0.1)
    assert not target.calls and not watchdog.fired


# ---------------------------------------------------------------- inside the guard


class WatchedProbe:
    """A raw batch stream scripted by (delay, batch) steps whose waits are bound to the
    watchdog as the lean client's are: an abort wakes the wait, which then raises."""

    def __init__(self, steps: Sequence[tuple[float, Sequence[StreamChunk]]]) -> None:
        self.steps = steps
        self.watchdog = Watchdog(asyncio.get_running_loop())
        self.closed = False

    async def batches(self) -> AsyncGenerator[Sequence[StreamChunk], None]:
        loop = asyncio.get_running_loop()
        try:
            for delay, batch in self.steps:
                waiter = loop.create_future()

                def wake(waiter: asyncio.Future[None] = waiter) -> None:
                    if not waiter.done():
                        waiter.set_result(None)

                self.watchdog.watch(wake)
                timer = loop.call_later(delay, wake)
                try:
                    await waiter
                finally:
                    timer.cancel()
                self.watchdog.check()
                yield batch
        finally:
            self.watchdog.watch(None)
            self.closed = True


def watched(
    probe: WatchedProbe, *, stop: StopSignal, first: float = 5.0, gap: float = 5.0
) -> AsyncGenerator[StreamChunk, None]:
    return guard_stream(
        probe.batches(),
        stop=stop,
        first_chunk_timeout=first,
        chunk_timeout=gap,
        watchdog=probe.watchdog,
    )


async def drain(stream: AsyncGenerator[StreamChunk, None]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


async def test_guarded_chunks_pass_through() -> None:
    stop = StopSignal()
    probe = WatchedProbe([(0, [TextPiece("a")]), (0, []), (0, [FINAL])])
    assert await drain(watched(probe, stop=stop)) == [TextPiece("a"), FINAL]
    assert probe.closed
    assert_nothing_left(stop)


async def test_guarded_first_chunk_timeout() -> None:
    stop = StopSignal()
    probe = WatchedProbe([(30, [FINAL])])
    with pytest.raises(LLMTimeout) as caught:
        await drain(watched(probe, stop=stop, first=0.1))
    assert caught.value.first_chunk and caught.value.seconds == 0.1
    assert "LLM_STREAM_FIRST_CHUNK_TIMEOUT" in str(caught.value)
    assert probe.closed
    assert_nothing_left(stop)


async def test_guarded_gap_timeout() -> None:
    stop = StopSignal()
    probe = WatchedProbe([(0, [TextPiece("a")]), (30, [FINAL])])
    received: list[StreamChunk] = []
    with pytest.raises(LLMTimeout) as caught:
        async for chunk in watched(probe, stop=stop, gap=0.1):
            received.append(chunk)
    assert received == [TextPiece("a")]
    assert not caught.value.first_chunk and caught.value.seconds == 0.1
    assert "LLM_STREAM_CHUNK_TIMEOUT" in str(caught.value)
    assert_nothing_left(stop)


async def test_guarded_empty_batches_keep_the_stream_alive() -> None:
    # 0.45 s of batches 0.05 s apart under a 0.2 s gap timeout: the timer fires and
    # re-arms on the way.
    stop = StopSignal()
    steps: list[tuple[float, Sequence[StreamChunk]]] = [(0, [TextPiece("a")])]
    steps += [(0.05, [])] * 8 + [(0.05, [FINAL])]
    assert await drain(watched(WatchedProbe(steps), stop=stop, gap=0.2)) == [
        TextPiece("a"),
        FINAL,
    ]
    assert_nothing_left(stop)


async def test_guarded_slow_consumer_is_no_timeout() -> None:
    stop = StopSignal()
    probe = WatchedProbe([(0, [TextPiece("a")]), (0.02, [FINAL])])
    received = []
    async for chunk in watched(probe, stop=stop, first=0.1, gap=0.1):
        received.append(chunk)
        await anyio.sleep(0.3)
    assert received == [TextPiece("a"), FINAL]


async def test_guarded_stop_while_waiting_ends_the_wait_at_once() -> None:
    stop = StopSignal()
    probe = WatchedProbe([(30, [FINAL])])
    received: list[StreamChunk] = []
    ended = anyio.Event()

    async def consume() -> None:
        received.extend(await drain(watched(probe, stop=stop, first=60)))
        ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.sleep(0.05)
        with anyio.fail_after(STOP_PROMPTLY):
            stop.set()
            await ended.wait()
    assert received == [STOPPED]
    assert probe.closed
    assert_nothing_left(stop)


async def test_guarded_stop_while_the_consumer_holds_a_chunk() -> None:
    stop = StopSignal()
    probe = WatchedProbe([(0, [TextPiece("a")]), (0, [TextPiece("b")]), (0, [FINAL])])
    received = []
    async for chunk in watched(probe, stop=stop):
        received.append(chunk)
        stop.set()
    assert received == [TextPiece("a"), STOPPED]
    assert probe.closed
    assert_nothing_left(stop)


async def test_guarded_stream_without_final_chunk_is_incomplete() -> None:
    stop = StopSignal()
    with pytest.raises(IncompleteStream):
        await drain(watched(WatchedProbe([(0, [TextPiece("a")])]), stop=stop))
    assert_nothing_left(stop)


# ---------------------------------------------------------------- on the lean HTTP path


@pytest.fixture
def no_scopes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean path must not fall back on a cancel scope per read."""

    def refuse(*args: object) -> None:
        raise AssertionError("a cancel scope per read on the lean path")

    monkeypatch.setattr(StopSignal, "scope", refuse)


@WIRES
@pytest.mark.usefixtures("no_scopes")
async def test_the_lean_path_streams_and_stops_through_the_watchdog(
    wire: str, fake: FakeLLMServer
) -> None:
    backend = make_backend(wire, fake)
    fake.script(Reply(text=["one ", "two"], delay=0.01), Reply(text="x", delay_first=30))
    stop = StopSignal()
    chunks = await drain(backend.stream_complete(HELLO, stop=stop))
    assert "".join(c.text for c in chunks if isinstance(c, TextPiece)) == "one two"
    assert_nothing_left(stop)
    ended = anyio.Event()
    received: list[StreamChunk] = []

    async def consume() -> None:
        received.extend(await drain(backend.stream_complete(HELLO, stop=stop)))
        ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        with anyio.fail_after(5):
            await fake.wait_for_requests(2)
        with anyio.fail_after(STOP_PROMPTLY):
            stop.set()
            await ended.wait()
    assert received == [STOPPED]
    assert_nothing_left(stop)
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)
    await backend.aclose()


@WIRES
async def test_no_timer_or_hook_outlives_a_lean_stream(wire: str, fake: FakeLLMServer) -> None:
    backend = make_backend(wire, fake, first_chunk_timeout=0.2, chunk_timeout=0.2)
    fake.script(
        Reply(text="fine"),
        Reply(text="late", delay_first=30),
        Reply(text="a b c d", stall_after=2),
        Reply(error_before="boom", error_status=500),
    )
    stop = StopSignal()
    await drain(backend.stream_complete(HELLO, stop=stop))
    for expected in (LLMTimeout, LLMTimeout, LLMServerError):
        with pytest.raises(expected):
            await drain(backend.stream_complete(HELLO, stop=stop))
        assert_nothing_left(stop)
    await backend.aclose()


async def test_a_cancelled_consumer_closes_the_connection(fake: FakeLLMServer) -> None:
    backend = make_backend("ollama", fake)
    fake.script(Reply(text="x", delay_first=30), Reply(text="after"))
    stop = StopSignal()
    with anyio.move_on_after(0.2):
        await drain(backend.stream_complete(HELLO, stop=stop))
    assert_nothing_left(stop)
    with anyio.fail_after(5):
        await fake.wait_for_disconnects(1)
    chunks = await drain(backend.stream_complete(HELLO, stop=stop))
    assert "".join(c.text for c in chunks if isinstance(c, TextPiece)) == "after"
    await backend.aclose()


async def test_a_stop_on_the_last_batch_does_not_spoil_the_pooled_connection() -> None:
    # The whole answer arrives in one read: the stop comes while the consumer holds
    # its first chunk, the answer is complete, its connection goes back to the pool
    # marked interrupted; the next call on it must not inherit the interruption.
    rendered = render_ollama(Reply(text=["a", "b"]), model="m", request_number=1)
    body = b"".join([*rendered.chunks, *rendered.tail])
    async with RawServer(whole(body), whole(body)) as raw:
        backend = OllamaBackend(LLMSettings(), url=raw.url, model="m")
        stop = StopSignal()
        received = []
        async for chunk in backend.stream_complete(HELLO, stop=stop):
            received.append(chunk)
            stop.set()
        assert received == [TextPiece("a"), STOPPED]
        with anyio.fail_after(5):
            chunks = await drain(backend.stream_complete(HELLO, stop=StopSignal()))
        assert "".join(c.text for c in chunks if isinstance(c, TextPiece)) == "ab"
        assert [r.connection for r in raw.requests] == [0, 0]
        await backend.aclose()


async def test_a_stop_before_the_connect_never_connects(fake: FakeLLMServer) -> None:
    client = LeanClient(httpx.URL(fake.url), connect_timeout=5.0)
    watchdog = client.watchdog()
    stop = StopSignal()
    watchdog.start(stop, 5.0, 5.0)
    stop.set()

    def fail(status: int, body: bytes) -> LLMError:
        raise AssertionError

    with anyio.fail_after(STOP_PROMPTLY), pytest.raises(StreamInterrupted):
        async with client.stream(
            b"/api/chat", b"{}", url="t", on_error_status=fail, watchdog=watchdog
        ):
            pass
    watchdog.stop()
    assert not fake.requests
    await client.aclose()


async def test_a_connection_back_in_the_pool_is_no_longer_watched(fake: FakeLLMServer) -> None:
    # Another stream may take it while this one's consumer still holds its last batch.
    client = LeanClient(httpx.URL(fake.url), connect_timeout=5.0)
    fake.script(Reply(text="a"))
    watchdog = client.watchdog()

    def fail(status: int, body: bytes) -> LLMError:
        raise AssertionError

    async with client.stream(
        b"/api/chat", b"{}", url="t", on_error_status=fail, watchdog=watchdog
    ) as response:
        await response.aread()
    watchdog.start(StopSignal(), 5.0, 5.0)
    watchdog._fire()  # what a stop now would do
    [conn] = client._idle
    assert not conn._interrupted
    watchdog.stop()
    await client.aclose()


async def test_a_stop_during_the_connect_ends_it_at_once(
    fake: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()

    async def hang(*args: object, **kwargs: object) -> None:
        await asyncio.sleep(30)

    monkeypatch.setattr(loop, "create_connection", hang)
    backend = make_backend("ollama", fake, first_chunk_timeout=60, connect_timeout=30)
    stop = StopSignal()
    received: list[StreamChunk] = []
    ended = anyio.Event()

    async def consume() -> None:
        received.extend(await drain(backend.stream_complete(HELLO, stop=stop)))
        ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.sleep(0.05)
        with anyio.fail_after(STOP_PROMPTLY):
            stop.set()
            await ended.wait()
    assert received == [STOPPED]
    assert_nothing_left(stop)
    await backend.aclose()


async def test_an_interruption_wins_over_news_of_the_same_moment() -> None:
    conn = lean_conn.Connection()
    conn.connection_made(cast(asyncio.Transport, _Transport()))
    conn.expect_answer()
    waiting = asyncio.ensure_future(conn.wait("t"))
    await asyncio.sleep(0)
    conn.data_received(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{")
    conn.interrupt()
    with pytest.raises(StreamInterrupted):
        await waiting
