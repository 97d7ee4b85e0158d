"""Chaos on real processes: a ``navi serve`` SIGKILLed again and again while long
multi-tool runs go on (mid-stream, mid-tool, during compression, with subagents
running, and at random), restarted each time; then the survivors are checked.

1. crash loop (SQLite): kills survived, runs finished, events lost (frames clients got
   that the log does not hold, or a client's frames not ending up equal to the log),
   duplicate effects (a non-idempotent call run twice), and per in-flight run the
   recovery time (restart → its first resumed event), median and max;
2. recovery of ``--recover`` runs in flight at once (default 100) after one SIGKILL;
3. with PostgreSQL (NAVI_BENCH_POSTGRES_URL or NAVI_TEST_POSTGRES_URL): two nodes, the
   owner SIGKILLed mid-run, ``--takeovers`` times: the time from the kill to the first
   event the survivor writes, and the same checks;
4. ``--pg-restart``: the database server restarted under load (``pg_ctlcluster``; it
   restarts the server named by ``--pg-cluster``, so never point it at a shared one).

Targets: 0 lost, 0 duplicated, recovery of 100 in-flight runs < 3 s, takeover < 5 s.

    .venv/bin/python bench/chaos.py [--kills 20] [--sessions 6] [--recover 100] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from _common import ROOT, median, postgres_url, report
from tests.chaos.harness import ChaosLLM, ServerConfig, install_tools
from tests.chaos.pg import fresh_database
from tests.chaos.scenario import ChaosResult, crash_loop, recover_many, takeover

AIMED = ["mid-stream", "mid-tool", "compression", "subagent", "random"]


def config_for(root: Path, url: str, llm: ChaosLLM) -> ServerConfig:
    tools, effects = install_tools(root)
    return ServerConfig(
        root=root,
        database_url=url,
        llm_url=llm.url,
        effects=effects,
        tools=tools,
        # The default sweep, not the tests' quicker one: takeover as deployed.
        extra_env={"NAVI_CLUSTER_SWEEP_S": "1.0"},
    )


def seconds(values: list[float]) -> tuple[float | None, float | None]:
    """Median and max, or None when nothing was measured."""
    if not values:
        return None, None
    return median(values), max(values)


def shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f} s"


def checks(name: str, result: ChaosResult, figures: dict[str, Any]) -> None:
    f = result.findings
    print(
        f"{name}: {result.kills} kills survived, {f.runs_finished}/{f.runs} runs finished, "
        f"{f.events_lost} events lost, {f.duplicate_effects} duplicate effects, "
        f"{f.missing_effects} missing effects, {f.interrupted_calls} calls in doubt "
        f"of {f.calls}, {f.frames_checked} frames checked ({result.seconds:.0f} s)"
    )
    for problem in f.problems[:10]:
        print(f"  PROBLEM {problem}")
    figures["kills"] = figures.get("kills", 0) + result.kills
    figures["runs"] = figures.get("runs", 0) + f.runs
    figures["runs_finished"] = figures.get("runs_finished", 0) + f.runs_finished
    figures["events_lost"] = figures.get("events_lost", 0) + f.events_lost
    figures["duplicate_effects"] = figures.get("duplicate_effects", 0) + f.duplicate_effects
    figures["missing_effects"] = figures.get("missing_effects", 0) + f.missing_effects
    figures["problems"] = figures.get("problems", 0) + len(f.problems)


async def crash_bench(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp, ChaosLLM() as llm:
        config = config_for(Path(tmp), f"sqlite:///{Path(tmp) / 'navi.db'}", llm)
        moments = [AIMED[k % len(AIMED)] for k in range(args.kills)]

        def on_kill(k: int, moment: str, recoveries: list[float]) -> None:
            first = f"{min(recoveries):.2f} s" if recoveries else "no run in flight"
            print(
                f"  kill {k:>3} ({moment:<11}): {len(recoveries)} runs resumed, first after {first}"
            )

        result = await crash_loop(
            config,
            sessions=args.sessions,
            kills=args.kills,
            moments=moments,
            rng=random.Random(args.seed),
            steps=10,
            sleep=0.15,
            keep_busy=True,
            on_kill=on_kill,
            finish_timeout=300,
        )
    checks("crash loop (SQLite)", result, figures)
    mid, top = seconds(result.recoveries)
    figures["recovery_median_s"], figures["recovery_max_s"] = mid, top
    print(
        f"recovery (restart → first resumed event, per run): median {shown(mid)}, max {shown(top)}"
    )


async def recover_bench(args: argparse.Namespace, figures: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp, ChaosLLM() as llm:
        config = config_for(Path(tmp), f"sqlite:///{Path(tmp) / 'navi.db'}", llm)
        result = await recover_many(config, runs=args.recover)
    checks(f"{args.recover} runs in flight (SQLite)", result, figures)
    figures["recovery_in_flight"] = result.aimed.get("in_flight", 0)
    figures["recovery_resumed"] = len(result.recoveries)
    mid, top = seconds(result.recoveries)
    figures["recovery_100_median_s"], figures["recovery_100_max_s"] = mid, top
    print(
        f"{result.aimed.get('in_flight', 0)} runs in flight at the kill, "
        f"{len(result.recoveries)} resumed: restart → first resumed event median {shown(mid)}, "
        f"max {shown(top)}"
    )


async def takeover_bench(args: argparse.Namespace, url: str, figures: dict[str, Any]) -> None:
    times: list[float] = []
    for round_ in range(args.takeovers):
        async with fresh_database(url, "navi_bench_chaos") as db:
            with tempfile.TemporaryDirectory() as tmp, ChaosLLM() as llm:
                result = await takeover(config_for(Path(tmp), db, llm), sessions=args.sessions)
        checks(f"takeover round {round_ + 1} (two nodes, PostgreSQL)", result, figures)
        times.extend(result.takeovers)
        print(
            f"  node A's effects {result.pids_a}, node B's {result.pids_b}; "
            f"takeover {shown(result.takeovers[0] if result.takeovers else None)}"
        )
    mid, top = seconds(times)
    figures["takeover_median_s"], figures["takeover_max_s"] = mid, top
    print(
        f"takeover (SIGKILL of the owner → the survivor's first event): median {shown(mid)}, "
        f"max {shown(top)}"
    )


async def pg_restart_bench(args: argparse.Namespace, url: str, figures: dict[str, Any]) -> None:
    version, cluster = args.pg_cluster.split("/")

    def restart() -> None:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, "restart"],
            check=True,
            capture_output=True,
        )

    async with fresh_database(url, "navi_bench_chaos") as db:
        with tempfile.TemporaryDirectory() as tmp, ChaosLLM() as llm:
            result = await crash_loop(
                config_for(Path(tmp), db, llm),
                sessions=args.sessions,
                kills=args.pg_restarts,
                steps=12,
                fault=restart,
            )
    checks(f"PostgreSQL restarted {result.kills} times under load", result, figures)
    figures["pg_restarts"] = result.kills
    mid, top = seconds(result.recoveries)
    figures["pg_restart_recovery_max_s"] = top
    print(
        f"  after each restart, the runs' next events came after: median {shown(mid)}, max {shown(top)}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--recover", type=int, default=100)
    parser.add_argument("--takeovers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--postgres", default=postgres_url(), help="server for the two-node part")
    parser.add_argument("--pg-restart", action="store_true", help="restart PostgreSQL under load")
    parser.add_argument("--pg-restarts", type=int, default=3)
    parser.add_argument("--pg-cluster", default="15/main", help="VERSION/NAME for pg_ctlcluster")
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    await crash_bench(args, figures)
    if args.recover:
        await recover_bench(args, figures)
    if args.postgres and args.takeovers:
        await takeover_bench(args, args.postgres, figures)
    elif not args.postgres:
        print("takeover skipped: set NAVI_BENCH_POSTGRES_URL (or --postgres) to measure it")
    if args.pg_restart and args.postgres:
        await pg_restart_bench(args, args.postgres, figures)
    ok = figures.get("events_lost") == 0 and figures.get("duplicate_effects") == 0
    print("verdict:", "0 lost, 0 duplicated" if ok else "FAILED: see the problems above")
    report(figures)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    anyio.run(main)
