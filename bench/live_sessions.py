"""Live sessions at scale: N sessions streaming at once, each at a real model's pace.

A real ``navi serve`` (SQLite in a temp dir, or PostgreSQL with ``--postgres``), a paced
fake Ollama in its own process (``bench/_paced_fake.py``: one chunk per write, 50
chunks/s per session, each chunk carrying its send time), and one WebSocket client per
session in this process. Everything shares the machine's cores, as the budgets say.

Per run it prints: the chunk rate each session got and its run time against the ideal
(chunks x delay), the largest gap between two frames of one session, commit -> frame
latency (the event's recorded timestamp -> the client has the frame) and LLM -> frame
latency (the fake wrote the chunk -> the client has it), per chunk; sockets the server
closed; ``/health`` latency while loaded (p50/p99); the server's RSS per idle session (a
connected client, no run) and per live one; the CPU each process used; and the count
check: every chunk in each session's log, every logged chunk at its client.

Issue 34's budgets (2 cores, fake and client included): 200 live sessions at their full
50 chunks/s with commit -> frame p99 < 100 ms; 500 with every session progressing and
p99 < 1 s; 1,000 with ``NAVI_MAX_LIVE_RUNS`` at its default (``--max-live-runs
default``): no socket dropped, every run completes (the waiting ones are told
``run_queued``), nothing lost.

    .venv/bin/python bench/live_sessions.py [--sessions 200] [--chunks 200] [--idle 200]
        [--max-live-runs all|default|N] [--postgres [URL]] [--nodes N]

``--nodes N`` (with ``--postgres``) starts N nodes on the one database: session i is
created, run and followed on node i % N, and a second client follows it on node
(i + 1) % N, which learns of the commits by NOTIFY (its commit -> frame is reported apart).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx

import _profile
from _common import ROOT, median, percentile, report
from _live_clients import (
    Countdown,
    Session,
    check_logs,
    cpu_seconds,
    follow,
    poll_health,
    rss_mib,
    sample_rss,
)
from tests.support.navi_server import free_port

PG_DEFAULT = "postgresql://postgres@127.0.0.1:5432/test"


def server_env(tmp: Path, llm_url: str, database: str, max_live: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(ROOT))
    env.update(
        NAVI_LLM_BACKEND="ollama",
        OLLAMA_HOST=llm_url,
        OLLAMA_DEFAULT_MODEL="fake-model:latest",
        NAVI_DATABASE_URL=database,
        NAVI_DATA_DIR=str(tmp / "data"),
        SESSION_FILES_DIR=str(tmp / "files"),
        TOOLS_DIR=str(tmp / "tools"),
        LOG_LEVEL="WARNING",
        NAVI_RESUME_ON_START="false",
        NAVI_PLANNING="off",
        LLM_RETRIES="0",
        MEMORY_IDLE_MINUTES="600",
    )
    env.pop("NAVI_MAX_LIVE_RUNS", None)
    if max_live != "default":
        env["NAVI_MAX_LIVE_RUNS"] = max_live
    return env


def start(args: list[str], log: Path | None = None, **kw: Any) -> subprocess.Popen[str]:
    """A process; its output to ``log`` (appended) if given."""
    if log is None:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, text=True, **kw)
    with open(log, "a") as out:
        return subprocess.Popen(
            args, stdin=subprocess.DEVNULL, text=True, stdout=out, stderr=subprocess.STDOUT, **kw
        )


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


async def wait_up(base: str, server: subprocess.Popen[str], log: Path) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            if server.poll() is not None:
                raise RuntimeError(log.read_text()[-4000:])
            try:
                if (await http.get(f"{base}/health")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await anyio.sleep(0.1)
    raise RuntimeError("navi serve did not start")


def start_fake(args: argparse.Namespace) -> tuple[subprocess.Popen[str], str]:
    script = str(ROOT / "bench" / "_paced_fake.py")
    fake = start(
        [sys.executable, script, "--chunks", str(args.chunks), "--delay", str(args.delay)],
        stdout=subprocess.PIPE,
    )
    assert fake.stdout is not None
    return fake, fake.stdout.readline().rsplit(" ", 1)[1].strip()


def start_nodes(
    args: argparse.Namespace, tmp: Path, llm_url: str, database: str
) -> list[tuple[subprocess.Popen[str], str, Path]]:
    """``--nodes`` ``navi serve`` processes on the one database: (process, URL, log)."""
    max_live = str(args.sessions) if args.max_live_runs == "all" else args.max_live_runs
    nodes = []
    for i in range(args.nodes):
        root = tmp / f"node{i}"
        (root / "cwd").mkdir(parents=True)
        port = free_port()
        server = start(
            [sys.executable, "-m", "navi.cli", "serve", "--port", str(port)],
            log=root / "serve.log",
            cwd=root / "cwd",
            env=server_env(root, llm_url, database, max_live),
        )
        nodes.append((server, f"127.0.0.1:{port}", root / "serve.log"))
    return nodes


async def measure(args: argparse.Namespace, tmp: Path, database: str) -> dict[str, Any]:
    fake, llm_url = start_fake(args)
    nodes = start_nodes(args, tmp, llm_url, database)
    servers = [n[0] for n in nodes]
    base = f"http://{nodes[0][1]}"
    figures: dict[str, Any] = {"sessions": args.sessions, "chunks": args.chunks}
    try:
        for proc, host, log in nodes:
            await wait_up(f"http://{host}", proc, log)
        # Session i is created on, runs on and is followed on node i % nodes; with several
        # nodes a second client follows it on node (i + 1) % nodes (it learns by NOTIFY).
        sessions: list[Session] = []
        for i in range(args.sessions + args.idle):
            host = nodes[i % len(nodes)][1]
            async with httpx.AsyncClient(base_url=f"http://{host}", timeout=120) as http:
                sid = (await http.post("/sessions", json={})).json()["session_id"]
            sessions.append(Session(sid, host=host))
        await anyio.sleep(1)
        rss0 = sum(rss_mib(p.pid) for p in servers)
        live, idle = sessions[: args.sessions], sessions[args.sessions :]
        followers = [
            Session(s.sid, host=nodes[(i + 1) % len(nodes)][1], follower=True)
            for i, s in enumerate(live)
            if len(nodes) > 1
        ]
        go = anyio.Event()
        health: list[float] = []
        rss: list[float] = []
        stop = anyio.Event()
        countdown = Countdown(len(live) + len(followers))
        async with anyio.create_task_group() as tg:
            # Idle clients first: the RSS they add is the idle figure.
            for group in (idle, followers, live):
                events = []
                for s in group:
                    connected = anyio.Event()
                    events.append(connected)
                    if group is idle:
                        tg.start_soon(follow, s, connected, anyio.Event())
                    else:
                        tg.start_soon(follow, s, connected, go, countdown)
                for connected in events:
                    await connected.wait()
                if group is idle:
                    await anyio.sleep(1)
                    rss_idle = sum(rss_mib(p.pid) for p in servers)
            await anyio.sleep(0.5)
            rss_connected = sum(rss_mib(p.pid) for p in servers)
            procs = {
                "server": [p.pid for p in servers],
                "fake": [fake.pid],
                "clients": [os.getpid()],
            }
            cpu0 = {k: sum(cpu_seconds(p) for p in ps) for k, ps in procs.items()}
            t0 = time.perf_counter()
            tg.start_soon(poll_health, base, health, stop)
            tg.start_soon(sample_rss, [p.pid for p in servers], rss, stop)
            spy = _profile.start(servers[0].pid, args.py_spy) if args.py_spy else None
            go.set()
            with anyio.move_on_after(args.timeout) as scope:
                await countdown.done.wait()
            wall = time.perf_counter() - t0
            cpu = {
                k: (sum(cpu_seconds(p) for p in ps) - cpu0[k]) / wall * 100
                for k, ps in procs.items()
            }
            stop.set()
            _profile.stop(spy)
            figures["timed_out"] = scope.cancelled_caught
            tg.cancel_scope.cancel()
        commit_ms, missing_log, missing_client, logged = await check_logs(base, live, args.chunks)
        if followers:
            follower_ms, _, follower_missing, _ = await check_logs(base, followers, args.chunks)
            figures.update(
                follower_commit_frame_p50_ms=percentile(follower_ms, 50),
                follower_commit_frame_p99_ms=percentile(follower_ms, 99),
                follower_commit_frame_max_ms=max(follower_ms, default=float("nan")),
                follower_chunks_missing=follower_missing,
                follower_runs_completed=sum(s.ended for s in followers),
            )
    finally:
        for proc in [*servers, fake]:
            proc.terminate()
        for proc in [*servers, fake]:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    ideal = (args.chunks - 1) * args.delay  # first chunk to last (+ the first's latency)
    rates = [(s.chunks - 1) / (s.last - s.first) for s in live if s.chunks > 1 and s.last > s.first]
    # A run's time: message sent -> last chunk at the client (queueing included); its
    # start: message sent -> first chunk.
    run_times = [s.last - s.sent for s in live if s.chunks > 1]
    starts = [s.first - s.sent for s in live if s.chunks]
    llm_ms = [x for s in live for x in s.llm_ms]
    figures.update(
        wall_s=wall,
        ideal_run_s=ideal,
        nodes=args.nodes,
        committed_chunks_per_s=logged / wall,
        session_rate_min=min(rates, default=0.0),
        session_rate_p50=median(rates),
        run_time_p50_s=median(run_times),
        run_time_max_s=max(run_times, default=float("nan")),
        first_chunk_p50_s=median(starts),
        first_chunk_p99_s=percentile(starts, 99),
        first_chunk_max_s=max(starts, default=float("nan")),
        max_gap_s=max((s.max_gap for s in live), default=float("nan")),
        commit_frame_p50_ms=percentile(commit_ms, 50),
        commit_frame_p99_ms=percentile(commit_ms, 99),
        commit_frame_max_ms=max(commit_ms, default=float("nan")),
        llm_frame_p50_ms=percentile(llm_ms, 50),
        llm_frame_p99_ms=percentile(llm_ms, 99),
        llm_frame_max_ms=max(llm_ms, default=float("nan")),
        health_p50_ms=percentile(health, 50),
        health_p99_ms=percentile(health, 99),
        health_max_ms=max(health, default=float("nan")),
        dropped_sockets=sum(s.close_code is not None for s in sessions),
        close_codes=sorted({s.close_code for s in sessions if s.close_code is not None}),
        close_reasons=sorted({s.close_reason for s in sessions if s.close_code is not None}),
        # When the dropped sockets were closed: seconds after the messages were sent.
        closed_after_s=sorted(
            round(s.closed_at - s.sent, 1) for s in sessions if s.close_code and s.sent
        )[:: max(1, len(sessions) // 20)],
        # Of the dropped: told "queued", and sent any frame at all before the drop.
        dropped_were_queued=sum(s.queued for s in sessions if s.close_code is not None),
        dropped_had_frames=sum(s.frames_seen > 0 for s in sessions if s.close_code is not None),
        runs_completed=sum(s.ended for s in live),
        runs_queued=sum(s.queued for s in live),
        runs_with_error=sum(bool(s.errors) for s in live),
        chunks_missing_in_log=missing_log,
        chunks_missing_at_client=missing_client,
        rss_base_mib=rss0,
        rss_per_idle_kib=(rss_idle - rss0) * 1024 / len(idle) if idle else float("nan"),
        rss_per_live_kib=(max(rss, default=rss_connected) - rss_connected) * 1024 / len(live),
        rss_peak_mib=max(rss, default=float("nan")),
        cpu_server_pct=cpu["server"],
        # The server's CPU per chunk (less disturbed by a busy machine than wall-clock
        # figures), and the sessions at 50 chunks/s one core could carry at that cost.
        server_cpu_us_per_chunk=cpu["server"] / 100 * wall / max(logged, 1) * 1e6,
        sessions_per_core_at_50=logged / (cpu["server"] / 100 * wall) / 50 if logged else 0.0,
        cpu_fake_pct=cpu["fake"],
        cpu_clients_pct=cpu["clients"],
        load=os.getloadavg()[0],
    )
    errors = [e for s in live for e in s.errors][:3]
    if errors:
        figures["first_errors"] = errors
    return figures


def print_figures(f: dict[str, Any], args: argparse.Namespace, uptime: str) -> None:
    print(
        f"{args.sessions} live sessions x {args.chunks} chunks at {1 / args.delay:.0f}/s, "
        f"{args.idle} idle, NAVI_MAX_LIVE_RUNS={args.max_live_runs}, "
        f"{'PostgreSQL' if args.postgres else 'SQLite'}, {args.nodes} node(s); before: {uptime}"
    )
    print(
        f"  per-session rate: min {f['session_rate_min']:.1f}, p50 {f['session_rate_p50']:.1f} "
        f"chunks/s; run time p50 {f['run_time_p50_s']:.2f} s, max {f['run_time_max_s']:.2f} s "
        f"(ideal {f['ideal_run_s']:.2f} s); first chunk p50 {f['first_chunk_p50_s']:.2f} s, "
        f"p99 {f['first_chunk_p99_s']:.2f} s after the message; largest gap {f['max_gap_s'] * 1000:.0f} ms; "
        f"{f['committed_chunks_per_s']:.0f} chunks/s committed in all over {f['wall_s']:.1f} s"
    )
    print(
        f"  commit -> frame: p50 {f['commit_frame_p50_ms']:.1f} ms, p99 "
        f"{f['commit_frame_p99_ms']:.1f} ms, max {f['commit_frame_max_ms']:.1f} ms"
    )
    print(
        f"  LLM -> frame:    p50 {f['llm_frame_p50_ms']:.1f} ms, p99 "
        f"{f['llm_frame_p99_ms']:.1f} ms, max {f['llm_frame_max_ms']:.1f} ms"
    )
    if "follower_commit_frame_p99_ms" in f:
        print(
            f"  follower on another node: commit -> frame p50 "
            f"{f['follower_commit_frame_p50_ms']:.1f} ms, p99 "
            f"{f['follower_commit_frame_p99_ms']:.1f} ms, max "
            f"{f['follower_commit_frame_max_ms']:.1f} ms; {f['follower_runs_completed']}/"
            f"{args.sessions} stream_end, {f['follower_chunks_missing']} chunks missing"
        )
    print(f"  /health under load: p50 {f['health_p50_ms']:.1f} ms, p99 {f['health_p99_ms']:.1f} ms")
    print(
        f"  sockets dropped by the server: {f['dropped_sockets']} {f['close_codes']} "
        f"{f['close_reasons']}; runs "
        f"completed {f['runs_completed']}/{args.sessions} ({f['runs_queued']} were queued, "
        f"{f['runs_with_error']} with an error); chunks lost: {f['chunks_missing_in_log']} "
        f"not in the log, {f['chunks_missing_at_client']} logged but not received"
    )
    print(
        f"  RSS (all nodes): {f['rss_base_mib']:.0f} MiB base, {f['rss_per_idle_kib']:.0f} KiB per idle "
        f"session, {f['rss_per_live_kib']:.0f} KiB per live session (peak "
        f"{f['rss_peak_mib']:.0f} MiB)"
    )
    print(
        f"  CPU (% of one core): server(s) {f['cpu_server_pct']:.0f}, fake LLM "
        f"{f['cpu_fake_pct']:.0f}, clients {f['cpu_clients_pct']:.0f}; server "
        f"{f['server_cpu_us_per_chunk']:.0f} us per chunk (one core: "
        f"{f['sessions_per_core_at_50']:.0f} sessions at 50 chunks/s); load after "
        f"{f['load']:.2f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=200, help="chunks per session's answer")
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between chunks")
    parser.add_argument("--idle", type=int, default=0, help="idle sessions with a client")
    parser.add_argument(
        "--max-live-runs", default="all", help="all (= --sessions), default (unset), or N"
    )
    parser.add_argument("--postgres", nargs="?", const=PG_DEFAULT, default=None)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--py-spy", type=Path, help="profile node 1 under load to this file")
    parser.add_argument(
        "--nodes", type=int, default=1, help="navi serve processes on one PostgreSQL"
    )
    args = parser.parse_args()
    if args.nodes > 1 and not args.postgres:
        parser.error("--nodes > 1 needs --postgres")
    before = uptime()
    async with AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.postgres:
            from tests.chaos.pg import fresh_database

            database = await stack.enter_async_context(fresh_database(args.postgres, "navi_live"))
        else:
            database = f"sqlite:///{tmp / 'navi.db'}"
        figures = await measure(args, tmp, database)
    figures["uptime_before"] = before
    figures["backend"] = "postgresql" if args.postgres else "sqlite"
    print_figures(figures, args, before)
    if args.py_spy:
        print("\n".join(_profile.top(args.py_spy)))
    report(figures)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    anyio.run(main)
