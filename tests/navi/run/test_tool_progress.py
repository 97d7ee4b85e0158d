"""A call's progress callback (navi/run/tool_progress.py): about one event a second, the
last one held back kept when the call returns, nothing after it, bounded and redacted
values, and a refusal to record that never fails the call."""

from __future__ import annotations

import math

import anyio
import pytest

from events.types import TOOL_PROGRESS_MESSAGE_MAX, Event, ToolProgress
from navi.run.tool_progress import ProgressReporter

pytestmark = pytest.mark.anyio


class Sink:
    def __init__(self, fail: bool = False) -> None:
        self.events: list[ToolProgress] = []
        self.fail = fail

    async def __call__(self, event: Event) -> None:
        if self.fail:
            raise RuntimeError("the log refused it")
        assert isinstance(event, ToolProgress)
        self.events.append(event)


async def test_a_burst_records_the_first_and_the_last() -> None:
    sink = Sink()
    reporter = ProgressReporter("c1", sink)
    for n in range(1, 1001):
        await reporter(n, 1000, f"step {n}")
    assert [e.progress for e in sink.events] == [1]
    await reporter.close()
    assert [e.progress for e in sink.events] == [1, 1000]
    assert reporter.dropped == 998
    await reporter(1001, 1000, "late")  # after the call returned: nothing
    assert len(sink.events) == 2


async def test_one_a_gap_goes_through_at_once() -> None:
    sink = Sink()
    reporter = ProgressReporter("c1", sink, gap_s=0.05)
    for n in range(3):
        await reporter(n, None, None)
        await anyio.sleep(0.06)
    assert [e.progress for e in sink.events] == [0, 1, 2]
    assert all(e.total is None and e.message == "" for e in sink.events)


async def test_values_are_bounded_and_redacted() -> None:
    sink = Sink()
    reporter = ProgressReporter("c1", sink, gap_s=0)
    await reporter(math.nan, 3, "no")
    await reporter(1, math.inf, "x" * 100_000)
    await reporter(2, -5, "see https://u:pw-123@host.test/a?token=abc")
    assert [e.progress for e in sink.events] == [1, 2]
    assert sink.events[0].total is None
    assert len(sink.events[0].message) == TOOL_PROGRESS_MESSAGE_MAX
    assert sink.events[1].message == "see https://u:[redacted]@host.test/a?token=[redacted]"


async def test_a_call_not_running_records_nothing_and_a_refusal_fails_nothing() -> None:
    sink = Sink()
    reporter = ProgressReporter("c1", sink, running=lambda call_id: False)
    await reporter(1, 2, "x")
    assert sink.events == []
    failing = ProgressReporter("c1", Sink(fail=True))
    await failing(1, 2, "x")  # logged and dropped, never raised
    assert failing.dropped == 1
    stopped = ProgressReporter("c1", sink, gap_s=10)
    await stopped(1, 2, "first")
    await stopped(2, 2, "held")
    stopped.shut()
    await stopped.close()
    assert [e.message for e in sink.events] == ["first"]
