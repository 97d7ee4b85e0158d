"""The write limit of a sandboxed call (``SandboxSpec.write_limit_bytes``): what watching
costs and how far past the limit a fast writer gets before it is ended.

1. One poll of the watched folders (``folder_usage``) with 100, 1,000 and 10,000 files:
   the watch polls every 50 ms, or ten times as long as the last poll took.
2. A call writing as fast as it can (4 processes, 1 MB writes to page cache, each into
   files of 8 MB) under limits of 64 and 256 MB: the bytes on disk when it has ended,
   past the limit (the overshoot), and how long it ran.

    .venv/bin/python bench/sandbox_write_limit.py [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio

from _common import median, report
from navi.logs import configure_logging
from tools.sandbox import (
    SandboxLimits,
    SandboxSpec,
    python_install,
    run_sandboxed,
    sandbox_env,
    sandbox_status,
)
from tools.sandbox_files import folder_usage

MB = 1024 * 1024
WRITER = """
import os, multiprocessing
def write(n):
    chunk = b"x" * (1 << 20)
    for f in range(10_000):
        with open(os.path.join(os.environ["NAVI_FILES_DIR"], f"w{n}-{f}"), "wb") as out:
            for _ in range(8):
                out.write(chunk)
if __name__ == "__main__":
    procs = [multiprocessing.Process(target=write, args=(n,)) for n in range(4)]
    [p.start() for p in procs]
    [p.join() for p in procs]
"""


def poll_cost(figures: dict[str, float]) -> None:
    for count in (100, 1_000, 10_000):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for n in range(count):
                sub = folder / f"d{n % 50}"
                sub.mkdir(exist_ok=True)
                (sub / f"f{n}").write_bytes(b"x" * 100)
            values = []
            for _ in range(20):
                t0 = time.perf_counter()
                folder_usage([folder])
                values.append((time.perf_counter() - t0) * 1000)
        print(f"one poll of {count:6} files: median {median(values):7.2f} ms")
        figures[f"poll_{count}_files_ms"] = median(values)


async def overshoot(rounds: int, figures: dict[str, float]) -> None:
    python = sys.executable
    for limit_mb in (64, 256):
        over, took = [], []
        for _ in range(rounds):
            with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as files:
                spec = SandboxSpec(
                    workdir=Path(work),
                    writable=(Path(files),),
                    readonly=python_install(python),
                    env=sandbox_env({"NAVI_FILES_DIR": files}, home=Path(work)),
                    write_limit_bytes=limit_mb * MB,
                )
                t0 = time.perf_counter()
                outcome = await run_sandboxed(
                    [python, "-I", "-c", WRITER],
                    spec=spec,
                    limits=SandboxLimits(512 * MB, 128),
                    timeout_s=120,
                    stop=anyio.Event(),
                    output_limit_bytes=10_000,
                    kill_grace_s=0.5,
                )
                took.append(time.perf_counter() - t0)
                assert outcome.ended_by == "write_limit", outcome
                over.append((folder_usage([Path(files), Path(work)]) - limit_mb * MB) / MB)
        print(
            f"limit {limit_mb:3} MB: ended {max(over):6.1f} MB past it at most "
            f"(median {median(over):6.1f} MB), after {median(took):5.2f} s"
        )
        figures[f"overshoot_{limit_mb}mb_max_mb"] = max(over)
        figures[f"overshoot_{limit_mb}mb_median_mb"] = median(over)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    configure_logging("WARNING")
    if not sandbox_status().available:
        raise SystemExit(f"no sandbox here: {sandbox_status().reason}")
    figures: dict[str, float] = {}
    poll_cost(figures)
    await overshoot(args.rounds, figures)
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
