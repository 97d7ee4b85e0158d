"""Stop latency: from the stop request to ``run.stopped`` in the log, per phase.

Phases: mid-stream (the LLM is sending text), silent prefill (the LLM has sent
nothing yet), and during a tool call (a long ``code_exec``). SQLite store, the fake
LLM server over real HTTP.

    .venv/bin/python bench/stop.py [--samples N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio

from _common import percentile, report
from navi.app import Navi
from navi.logs import configure_logging
from tests.support.fake_llm import FakeLLMServer, FakeToolCall, Reply
from tests.support.navi_app import navi_settings, open_navi

PHASES = {
    "mid_stream": (Reply(text="word " * 2000, delay=0.005), "llm.text"),
    "silent_prefill": (Reply(text="late", delay_first=30.0), "llm.requested"),
    "tool_call": (
        Reply(
            tool_calls=[
                FakeToolCall(name="code_exec", arguments={"code": "import time\ntime.sleep(60)"})
            ]
        ),
        "tool.started",
    ),
}


async def one(navi: Navi, fake: FakeLLMServer, reply: Reply, trigger: str) -> float:
    fake.script(reply)
    session = await navi.create_session("server_admin")
    started = await navi.send(session, "go")
    async for record in navi.store.subscribe(session, after_seq=started.after_seq):
        if record.type == trigger:
            break
    await anyio.sleep(0.05)  # well inside the phase
    t0 = time.perf_counter()
    await navi.stop(session)
    end = await navi.wait_for_end(session, started)
    assert end.type == "run.stopped", end.type
    return (time.perf_counter() - t0) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    configure_logging("WARNING")
    figures: dict[str, float] = {}
    async with FakeLLMServer() as fake:
        with tempfile.TemporaryDirectory() as tmp:
            async with open_navi(navi_settings(Path(tmp), fake.url, planning="off")) as navi:
                for phase, (reply, trigger) in PHASES.items():
                    samples = [await one(navi, fake, reply, trigger) for _ in range(args.samples)]
                    p50, p99 = percentile(samples, 50), percentile(samples, 99)
                    print(f"{phase:15} stop -> run.stopped: p50 {p50:6.2f} ms, p99 {p99:6.2f} ms")
                    figures[f"{phase}_p50_ms"] = p50
                    figures[f"{phase}_p99_ms"] = p99
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
