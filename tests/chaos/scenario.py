"""Chaos scenarios on real processes, shared by the tests and bench/chaos.py.

``crash_loop``: one ``navi serve``; runs in several sessions, each followed by a
client; the server is SIGKILLed (at a random moment, or when the log shows a chosen
moment: mid-stream, mid-tool, during a compression, with a subagent running) and
started again, over and over; then every run must end and the checks of
``harness.check`` must pass.

``takeover``: two nodes on one PostgreSQL; sessions created on A, messages sent to B
(through A's inbox), a client on each node; A is SIGKILLed mid-run and B must take
its sessions over and finish their runs while the clients watch.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from tests.chaos.harness import (
    Findings,
    LogProbe,
    NaviProcess,
    ServerConfig,
    Watcher,
    check,
    create_session,
    effect_files,
    read_logs,
    send_message,
)
from tests.chaos.llm import spec_line

# The moments a kill can aim at, as the log shows them: (the event that opens the
# moment, the events that close it); "mid-stream" and "mid-tool" look at the last event.
MOMENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "compression": ("context.compressing", ("context.compressed", "context.compression_failed")),
    "subagent": ("subagent.spawned", ("subagent.finished",)),
}
LAST_EVENT: dict[str, tuple[str, ...]] = {
    "mid-stream": ("llm.text", "llm.thinking", "llm.tool_calls"),
    "mid-tool": ("tool.started",),
}


@dataclass
class ChaosResult:
    kills: int = 0
    aimed: dict[str, int] = field(default_factory=dict)
    recoveries: list[float] = field(default_factory=list)
    takeovers: list[float] = field(default_factory=list)
    findings: Findings = field(default_factory=Findings)
    seconds: float = 0.0

    def figures(self) -> dict[str, Any]:
        f = self.findings
        return {
            "kills": self.kills,
            "runs": f.runs,
            "runs_finished": f.runs_finished,
            "events_lost": f.events_lost,
            "duplicate_effects": f.duplicate_effects,
            "missing_effects": f.missing_effects,
            "interrupted_calls": f.interrupted_calls,
            "calls": f.calls,
            "frames_checked": f.frames_checked,
        }


def script(
    index: int, *, steps: int = 6, sleep: float = 0.1, extras: bool = True, tag: str = ""
) -> str:
    """Session ``index``'s run: every third one spawns a subagent, every third one
    (another) compresses its context."""
    fields: dict[str, object] = {"steps": steps, "calls": 2, "sleep": sleep}
    if extras and index % 3 == 1:
        fields["sub"] = 1
    if extras and index % 3 == 2:
        fields["compress"] = 1
    return spec_line(tag or f"r{index}", **fields)


async def wait_for_moment(probe: LogProbe, sessions: list[str], moment: str, wait_s: float) -> bool:
    """Until one of the sessions is at ``moment`` (False: timed out)."""
    with anyio.move_on_after(wait_s):
        while True:
            if moment in LAST_EVENT:
                lasts = await probe.last_types(sessions)
                if any(t in LAST_EVENT[moment] for t in lasts.values()):
                    return True
            else:
                opens, closes = MOMENTS[moment]
                if await probe.inside(sessions, opens, closes):
                    return True
            await anyio.sleep(0.005)
    return False


async def time_to_first_event(
    probe: LogProbe, before: dict[str, int], since: float, wait_s: float = 60.0
) -> float | None:
    """Seconds from ``since`` (wall clock) to the first event after ``before``."""
    with anyio.move_on_after(wait_s):
        while True:
            first = await probe.first_after(before)
            if first is not None:
                return first - since
            await anyio.sleep(0.02)
    return None


async def recovery_times(
    probe: LogProbe, before: dict[str, int], since: float, wait_s: float = 60.0
) -> list[float]:
    """For each stream of ``before``: seconds from ``since`` to its first new event
    (streams that write nothing within ``wait_s`` are left out)."""
    found: dict[str, float] = {}
    with anyio.move_on_after(wait_s):
        while len(found) < len(before):
            pending = {s: q for s, q in before.items() if s not in found}
            found.update(await probe.first_after_each(pending))
            await anyio.sleep(0.02)
    return sorted(t - since for t in found.values())


async def wait_ended(watchers: list[Watcher], wait_s: float) -> None:
    with anyio.move_on_after(wait_s):
        for watcher in watchers:
            await watcher.ended.wait()
        await anyio.sleep(0.2)  # the last frames of the last events
        return
    waiting = [
        f"{w.session_id} (frames {len(w.frames)}, last seq {w.last_seq}, "
        f"connections {w.connections}, via {w.bases})"
        for w in watchers
        if not w.ended.is_set()
    ]
    raise TimeoutError(f"runs did not end within {wait_s} s; still waiting: {waiting}")


async def crash_loop(
    config: ServerConfig,
    *,
    sessions: int,
    kills: int,
    moments: list[str] | None = None,
    rng: random.Random | None = None,
    steps: int = 6,
    sleep: float = 0.1,
    gap: tuple[float, float] = (0.2, 1.0),
    keep_busy: bool = False,
    finish_timeout: float = 120.0,
    on_kill: Callable[[int, str, list[float]], None] | None = None,
    fault: Callable[[], None] | None = None,
) -> ChaosResult:
    """``keep_busy``: a session whose run ended gets another message before the next
    kill. ``fault``: instead of killing the server, call this (a database restart);
    the server lives on, and "recovery" counts from the fault's end."""
    rng = rng or random.Random(0)
    result = ChaosResult()
    started = time.monotonic()
    server = NaviProcess(config)
    probe = LogProbe(config.database_url)
    server.start()
    await server.wait_up()
    try:
        ids = [await create_session(server.url) for _ in range(sessions)]
        watchers = [Watcher(s, [server.ws_url]) for s in ids]
        async with anyio.create_task_group() as tg:
            for watcher in watchers:
                tg.start_soon(watcher.run)
            for i, session_id in enumerate(ids):
                await send_message(server.ws_url, session_id, script(i, steps=steps, sleep=sleep))
            plan = list(moments or [])

            async def more_work(k: int) -> None:
                for i, watcher in enumerate(watchers):
                    if keep_busy and watcher.ended.is_set():
                        watcher.expect_another_run()
                        text = script(i, steps=steps, sleep=sleep, tag=f"r{i}k{k}")
                        await send_message(server.ws_url, watcher.session_id, text)

            for k in range(kills):
                await more_work(k)
                if all(w.ended.is_set() for w in watchers):
                    break
                moment = plan[k] if k < len(plan) else "random"
                if moment == "random" or not await wait_for_moment(probe, ids, moment, 10):
                    await more_work(k)
                    await anyio.sleep(rng.uniform(*gap))
                    moment = "random"
                result.kills += 1
                result.aimed[moment] = result.aimed.get(moment, 0) + 1
                if fault is not None:
                    in_flight = await probe.open_runs(ids)
                    await anyio.to_thread.run_sync(fault)
                    since = time.time()
                    heads = await probe.heads()
                    still = set(await probe.open_runs(ids))
                    in_flight = [s for s in in_flight if s in still]
                else:
                    server.kill()
                    heads = await probe.heads()
                    in_flight = await probe.open_runs(ids)
                    server.start()
                    since = server.started_at
                before = {s: heads.get(s, 0) for s in in_flight}
                recoveries = await recovery_times(probe, before, since, 30)
                result.recoveries.extend(recoveries)
                if on_kill is not None:
                    on_kill(k + 1, moment, recoveries)
                await server.wait_up()
            await wait_ended(watchers, finish_timeout)
            tg.cancel_scope.cancel()
    finally:
        server.terminate()
    logs = await read_logs(config.database_url, ids)
    result.findings = check(logs, config.effects, watchers)
    result.seconds = time.monotonic() - started
    return result


async def recover_many(
    config: ServerConfig, *, runs: int = 100, steps: int = 6, sleep: float = 2.0
) -> ChaosResult:
    """``runs`` sessions with a run in flight each; one SIGKILL; every run's time from
    the restart to its first resumed event; then every run must end, checked."""
    result = ChaosResult()
    started = time.monotonic()
    server = NaviProcess(config)
    probe = LogProbe(config.database_url)
    server.start()
    await server.wait_up()
    try:
        ids = [await create_session(server.url) for _ in range(runs)]
        watchers = [Watcher(s, [server.ws_url]) for s in ids]
        async with anyio.create_task_group() as tg:
            for watcher in watchers:
                tg.start_soon(watcher.run)
            limiter = anyio.CapacityLimiter(20)

            async def send(i: int, session_id: str) -> None:
                async with limiter:
                    text = script(i, steps=steps, sleep=sleep, extras=False)
                    await send_message(server.ws_url, session_id, text)

            async with anyio.create_task_group() as senders:
                for i, session_id in enumerate(ids):
                    senders.start_soon(send, i, session_id)
            server.kill()  # every run has started (its message is in the log)
            result.kills = 1
            heads = await probe.heads()
            in_flight = await probe.open_runs(ids)
            server.start()
            before = {s: heads.get(s, 0) for s in in_flight}
            result.recoveries = await recovery_times(probe, before, server.started_at)
            result.aimed["in_flight"] = len(in_flight)
            await server.wait_up()
            await wait_ended(watchers, 180)
            tg.cancel_scope.cancel()
    finally:
        server.terminate()
    logs = await read_logs(config.database_url, ids)
    result.findings = check(logs, config.effects, watchers)
    result.seconds = time.monotonic() - started
    return result


@dataclass
class TakeoverResult(ChaosResult):
    # Effects written before node A was killed (A ran every session's tools then) and
    # after (only B was left). A user tool's sandbox has a PID namespace of its own, so
    # its pid no longer says which node started it.
    pids_a: int = 0
    pids_b: int = 0
    b_watched_live: bool = False


async def takeover(
    config: ServerConfig,
    *,
    sessions: int,
    steps: int = 6,
    sleep: float = 0.2,
    queued: bool = True,
    finish_timeout: float = 120.0,
    freeze: bool = False,
) -> TakeoverResult:
    """Two nodes; sessions made on A, messages sent to B, A killed mid-run (with
    ``freeze``: stopped by SIGSTOP instead, and woken once the runs ended on B)."""
    result = TakeoverResult()
    started = time.monotonic()
    a, b = NaviProcess(config, "a"), NaviProcess(config, "b")
    probe = LogProbe(config.database_url)
    a.start()
    b.start()
    await a.wait_up()
    await b.wait_up()
    try:
        ids = [await create_session(a.url) for _ in range(sessions)]
        runs = 2 if queued else 1
        on_a = [Watcher(s, [a.ws_url, b.ws_url], runs=runs) for s in ids]
        on_b = [Watcher(s, [b.ws_url], runs=runs) for s in ids]
        async with anyio.create_task_group() as tg:
            for watcher in [*on_a, *on_b]:
                tg.start_soon(watcher.run)
            await anyio.sleep(0.3)  # the clients are connected
            for i, session_id in enumerate(ids):
                await send_message(b.ws_url, session_id, script(i, steps=steps, sleep=sleep))
                if queued:
                    text = spec_line(f"q{i}", steps=2, calls=2, sleep=sleep)
                    await send_message(b.ws_url, session_id, text, queue=True)
            if not await wait_for_moment(probe, ids, "mid-tool", 20):
                raise AssertionError("no run got to a tool call on node A")
            result.b_watched_live = any(w.frames for w in on_b)
            if freeze:
                a.freeze()
            else:
                a.kill()
            killed_at = time.time()
            heads = await probe.heads()
            in_flight = await probe.open_runs(ids)
            result.kills = 1
            before = {s: heads.get(s, 0) for s in in_flight}
            takeover_s = await time_to_first_event(probe, before, killed_at)
            if takeover_s is not None:
                result.takeovers.append(takeover_s)
            await wait_ended([*on_a, *on_b], finish_timeout)
            if freeze:
                await a.thaw_until_it_lets_go()
            tg.cancel_scope.cancel()
    finally:
        a.kill()
        b.terminate()
    logs = await read_logs(config.database_url, ids)
    result.findings = check(logs, config.effects, [*on_a, *on_b])
    written = [p.stat().st_mtime for p in effect_files(config.effects)]
    result.pids_a = sum(1 for at in written if at < killed_at)
    result.pids_b = len(written) - result.pids_a
    result.seconds = time.monotonic() - started
    return result
