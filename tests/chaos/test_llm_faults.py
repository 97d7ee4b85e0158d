"""The LLM server failing under a real ``navi serve``: it dies mid-stream and comes
back (the call is retried with backoff and the run finishes), it stalls mid-stream
(given up after LLM_STREAM_CHUNK_TIMEOUT, retried), it stalls every call (the run fails
after LLM_RETRIES with a clear message), or it stays away (the run waits for it and goes
on when it is back). Nothing a client saw is lost either way."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.chaos.harness import ChaosLLM, LogProbe, read_logs, single_server, watched_run
from tests.chaos.llm import spec_line
from tests.chaos.scenario import wait_for_moment

FAST_RETRIES = {"LLM_RETRIES": "5", "LLM_RETRY_BACKOFF_S": "0.2"}


async def _events(server_db: str, session_id: str) -> list[object]:
    logs = await read_logs(server_db, [session_id])
    return [r.event for r in logs[session_id]]


async def test_the_llm_dies_mid_stream_and_comes_back(tmp_path: Path) -> None:
    with ChaosLLM() as llm:
        async with single_server(tmp_path, llm, **FAST_RETRIES) as server:
            text = spec_line("d1", steps=3, calls=1, sleep=0, delay=0.05)
            async with watched_run(server, text) as watcher:
                probe = LogProbe(server.config.database_url)
                assert await wait_for_moment(probe, [watcher.session_id], "mid-stream", 20)
                llm.kill()
                await anyio.sleep(0.8)
                llm.start()
                with anyio.fail_after(30):
                    await watcher.ended.wait()
            events = await _events(server.config.database_url, watcher.session_id)
    failures = [e for e in events if type(e).__name__ == "LLMFailed"]
    assert failures and all(f.retryable for f in failures)  # type: ignore[attr-defined]
    assert type(events[-1]).__name__ == "RunCompleted"
    assert "done d1" in events[-1].content  # type: ignore[attr-defined]
    assert any(f["type"] == "stream_retry" for f in watcher.frames)


async def test_a_stalled_stream_is_given_up_and_retried(tmp_path: Path) -> None:
    with ChaosLLM() as llm:
        async with single_server(
            tmp_path, llm, LLM_STREAM_CHUNK_TIMEOUT="1", **FAST_RETRIES
        ) as server:
            async with watched_run(server, spec_line("st1", steps=2, calls=1, stall=1)) as watcher:
                with anyio.fail_after(30):
                    await watcher.ended.wait()
            events = await _events(server.config.database_url, watcher.session_id)
    failures = [e for e in events if type(e).__name__ == "LLMFailed"]
    assert [f.kind for f in failures] == ["timeout"]  # type: ignore[attr-defined]
    assert "stopped sending" in failures[0].error  # type: ignore[attr-defined]
    assert type(events[-1]).__name__ == "RunCompleted"


async def test_an_llm_that_stalls_fails_the_run_and_one_away_is_waited_for(
    tmp_path: Path,
) -> None:
    with ChaosLLM() as llm:
        async with single_server(
            tmp_path,
            llm,
            LLM_RETRIES="2",
            LLM_RETRY_BACKOFF_S="0.1",
            LLM_STREAM_CHUNK_TIMEOUT="0.5",
        ) as server:
            async with watched_run(server, spec_line("dead1", steps=2, dead=1)) as watcher:
                with anyio.fail_after(30):
                    await watcher.ended.wait()
            llm.kill()  # and one that is not there at all
            async with watched_run(server, spec_line("gone1", steps=2)) as gone:
                with anyio.fail_after(30):
                    while not any(f["type"] == "llm_waiting" for f in gone.frames):
                        await anyio.sleep(0.05)
                llm.start()  # back: the run goes on by itself
                with anyio.fail_after(30):
                    await gone.ended.wait()
            stalled = await _events(server.config.database_url, watcher.session_id)
            unreachable = await _events(server.config.database_url, gone.session_id)
    # A server that answers but stalls every call is not away: the run fails.
    failures = [e for e in stalled if type(e).__name__ == "LLMFailed"]
    assert len(failures) == 3  # the call and its 2 retries
    end = stalled[-1]
    assert type(end).__name__ == "RunFailed" and "stopped sending" in end.error  # type: ignore[attr-defined]
    errors = [f for f in watcher.frames if f["type"] == "error"]
    assert errors and "stopped sending" in errors[-1]["message"]
    # One that does not answer at all is waited for, and the run completes once it is back.
    kinds = [type(e).__name__ for e in unreachable]
    assert kinds.count("LLMFailed") == 3 and kinds.count("LLMWaiting") == 1
    waiting = next(e for e in unreachable if type(e).__name__ == "LLMWaiting")
    assert "Cannot reach the LLM server" in waiting.error  # type: ignore[attr-defined]
    assert kinds[-1] == "RunCompleted" and "RunFailed" not in kinds
