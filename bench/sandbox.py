"""What the bubblewrap sandbox costs a tool call.

1. The start-up of a sandboxed call (``tools.sandbox.run_sandboxed``, cgroup included):
   ``true``, and a tiny Python (``python -c pass``).
2. As root, what running the code as the sandbox user costs (``setpriv`` + ``unshare``,
   issue 29): the same bwrap command line with and without that prefix, run directly
   (no cgroup), alternated.
3. ``code_exec`` of ``print(1)`` and ``terminal`` of ``echo 1`` through the registry,
   sandboxed and with ``NAVI_UNSANDBOXED_TOOLS`` (wall time of the whole call).

(A user tool's call in the sandbox against in-process is measured where user tools
run sandboxed: that is their branch's figure, not this script's.)

The script runs against any checkout (``PYTHONPATH=<tree>``): run it on the commit
before a change and after it, alternated, to compare.

    .venv/bin/python bench/sandbox.py [--samples N]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import msgspec

from _common import median, percentile, report
from navi.logs import configure_logging
from tools import ToolContext, ToolSettings, create_registry
from tools.cgroups import cgroup_support
from tools.sandbox import (
    SandboxLimits,
    SandboxSpec,
    bwrap_command,
    python_install,
    run_sandboxed,
    sandbox_env,
    sandbox_status,
)

CALLS = {
    "code_exec": {"code": "print(1)"},
    "terminal": {"command": "echo 1"},
}


def _line(name: str, values: list[float], figures: dict[str, float]) -> None:
    p50, p90 = median(values), percentile(values, 90)
    print(f"{name:34}: median {p50:6.1f} ms, p90 {p90:6.1f} ms")
    figures[f"{name.replace(' ', '_')}_median_ms"] = p50


async def _timed(run: Callable[[], Awaitable[object]], samples: int) -> list[float]:
    values = []
    for _ in range(samples):
        t0 = time.perf_counter()
        await run()
        values.append((time.perf_counter() - t0) * 1000)
    return values


async def start_up(samples: int, figures: dict[str, float]) -> None:
    """run_sandboxed of ``true`` and of a tiny Python, as code_exec and terminal start."""
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = SandboxSpec(
            workdir=work, readonly=python_install(python), env=sandbox_env(home=work)
        )
        limits = SandboxLimits(512 * 1024 * 1024, 128)

        async def call(argv: list[str]) -> None:
            outcome = await run_sandboxed(
                argv,
                spec=spec,
                limits=limits,
                timeout_s=60,
                stop=anyio.Event(),
                output_limit_bytes=10_000,
                kill_grace_s=0.5,
            )
            assert outcome.exit_code == 0, outcome.output

        for name, argv in (("true", ["true"]), ("python", [python, "-I", "-c", "pass"])):
            await call(argv)  # warm
            _line(f"run_sandboxed {name}", await _timed(lambda a=argv: call(a), samples), figures)


def user_switch(samples: int, figures: dict[str, float]) -> None:
    """As root: bwrap + setpriv + unshare against bwrap alone, same mounts, alternated."""
    status = sandbox_status()
    drop = getattr(status, "drop", None)
    if os.geteuid() != 0 or drop is None or status.bwrap is None:
        print("user switch: not measured (only as root, with this tree's sandbox user)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        spec = SandboxSpec(workdir=work, env=sandbox_env(home=work))
        switched = bwrap_command(status.bwrap, ["true"], spec)
        cut = switched.index(drop.setpriv)
        caps = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        plain = [a for i, a in enumerate(switched[:cut]) if not _is_cap(switched, i, caps)]
        plain = [*plain, "true"]
        names = ("bwrap as root", "bwrap + user switch")
        wall: dict[str, list[float]] = {name: [] for name in names}
        for _ in range(samples):
            for name, argv in zip(names, (plain, switched), strict=True):
                t0 = time.perf_counter()
                subprocess.run(argv, cwd=work, env={"PATH": "/usr/bin:/bin"}, check=True)
                wall[name].append((time.perf_counter() - t0) * 1000)
        # The CPU time of the switch's own programs (run bare: bwrap's init does not
        # hand its children's times up), which no busy scheduler inflates.
        cpu: dict[str, list[float]] = {"true": [], "switch + true": []}
        for _ in range(samples):
            for name, argv in (("true", ["true"]), ("switch + true", [*drop.argv(work), "true"])):
                used = _children_cpu_ms()
                subprocess.run(argv, cwd=work, env={"PATH": "/usr/bin:/bin"}, check=True)
                cpu[name].append(_children_cpu_ms() - used)
    for name in names:
        _line(name, wall[name], figures)
    for name, values in cpu.items():
        _line(f"CPU of {name}", values, figures)
    figures["user_switch_cost_ms"] = (
        figures["bwrap_+_user_switch_median_ms"] - figures["bwrap_as_root_median_ms"]
    )
    figures["user_switch_cpu_ms"] = (
        figures["CPU_of_switch_+_true_median_ms"] - figures["CPU_of_true_median_ms"]
    )


def _children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def _is_cap(argv: list[str], i: int, caps: list[str]) -> bool:
    """True for the ``--cap-add CAP_SET*`` pair only root's switch needs."""
    return (argv[i] == "--cap-add" and argv[i + 1] in caps) or (
        i > 0 and argv[i - 1] == "--cap-add" and argv[i] in caps
    )


async def tool_calls(samples: int, figures: dict[str, float]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = ToolSettings(tools_dir=str(Path(tmp) / "tools"), terminal_allowed_commands=("echo",))
        registry = create_registry(base)
        files = Path(tmp) / "files"
        files.mkdir()
        contexts = {
            mode: ToolContext.standalone(
                "bench", files, settings=msgspec.structs.replace(base, unsandboxed_tools=off)
            )
            for mode, off in (("sandboxed", False), ("unsandboxed", True))
        }
        for tool, arguments in CALLS.items():
            samples_of: dict[str, list[float]] = {mode: [] for mode in contexts}
            for ctx in contexts.values():
                await registry.execute(tool, arguments, ctx)  # warm: the probe, page cache
            # Interleaved, so that both modes see the same load on a shared machine.
            for _ in range(samples):
                for mode, ctx in contexts.items():
                    t0 = time.perf_counter()
                    result = await registry.execute(tool, arguments, ctx)
                    samples_of[mode].append((time.perf_counter() - t0) * 1000)
                    assert result.success, result.output
            for mode, values in samples_of.items():
                _line(f"{tool} {mode}", values, figures)
        await registry.aclose()
    for tool in CALLS:
        sandboxed = figures[f"{tool}_sandboxed_median_ms"]
        figures[f"{tool}_sandbox_cost_ms"] = sandboxed - figures[f"{tool}_unsandboxed_median_ms"]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    configure_logging("WARNING")
    if not sandbox_status().available:
        raise SystemExit(f"no sandbox here: {sandbox_status().reason}")
    print(f"limits: cgroup {cgroup_support().kind}; uid {os.geteuid()}")
    figures: dict[str, float] = {}
    await start_up(args.samples, figures)
    user_switch(args.samples, figures)
    await tool_calls(args.samples, figures)
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
