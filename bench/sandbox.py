"""What the bubblewrap sandbox costs a tool call: ``code_exec`` of ``print(1)`` and
``terminal`` of ``echo 1``, sandboxed and with ``NAVI_UNSANDBOXED_TOOLS`` (wall time of
the whole call, from the registry's ``execute`` to its result).

    .venv/bin/python bench/sandbox.py [--samples N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

from _common import median, percentile, report
from navi.logs import configure_logging
from tools import ToolContext, ToolSettings, create_registry
from tools.cgroups import cgroup_support
from tools.sandbox import sandbox_status

CALLS = {
    "code_exec": {"code": "print(1)"},
    "terminal": {"command": "echo 1"},
}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    configure_logging("WARNING")
    if not sandbox_status().available:
        raise SystemExit(f"no sandbox here: {sandbox_status().reason}")
    print(f"limits: cgroup {cgroup_support().kind}")
    figures: dict[str, float] = {}
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
            samples: dict[str, list[float]] = {mode: [] for mode in contexts}
            for ctx in contexts.values():
                await registry.execute(tool, arguments, ctx)  # warm: the probe, page cache
            # Interleaved, so that both modes see the same load on a shared machine.
            for _ in range(args.samples):
                for mode, ctx in contexts.items():
                    t0 = time.perf_counter()
                    result = await registry.execute(tool, arguments, ctx)
                    samples[mode].append((time.perf_counter() - t0) * 1000)
                    assert result.success, result.output
            for mode, values in samples.items():
                p50, p90 = median(values), percentile(values, 90)
                print(f"{tool:9} {mode:11}: median {p50:6.1f} ms, p90 {p90:6.1f} ms")
                figures[f"{tool}_{mode}_median_ms"] = p50
        await registry.aclose()
    for tool in CALLS:
        extra = figures[f"{tool}_sandboxed_median_ms"] - figures[f"{tool}_unsandboxed_median_ms"]
        figures[f"{tool}_sandbox_cost_ms"] = extra
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
