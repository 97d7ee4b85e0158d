"""What running user tools in the sandbox costs: one call of a trivial user tool (upper-case
a word), from the registry's ``execute`` to its result, three ways, interleaved:

- ``in_process``: the tool imported into this process and called as the server did
  before user tools moved to the sandbox (the same ``execute``, registered as a tool);
- ``subprocess``: a process of its own per call without the sandbox
  (``NAVI_UNSANDBOXED_TOOLS=1``): the Python start-up and the imports;
- ``sandboxed``: what the server does now, a sandboxed process per call.

And the load of a tools folder of ``--files`` such tools (``reload``), in the sandbox.
Besides the wall time, the CPU time a call costs without the sandbox (this process and
its child: Python's start-up and imports), which a loaded machine inflates less. (A
sandboxed tree's processes are reaped inside its PID namespace: the kernel does not
count them here.)

    .venv/bin/python bench/user_tools.py [--samples N] [--files N]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

from _common import median, percentile, report
from navi.logs import configure_logging
from tools import ToolContext, ToolSettings, create_registry
from tools.sandbox import sandbox_status
from tools.user_tool_child import import_source, tools_in_module

SHOUT = """
name = "{name}"
description = "Upper-cases text."
parameters = {{"type": "object", "properties": {{"text": {{"type": "string"}}}}, "required": ["text"]}}

async def execute(params: dict) -> str:
    return params["text"].upper()
"""


def cpu_ms() -> float:
    """CPU time so far of this process and of its children that ended, in ms."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return 1000 * (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--files", type=int, default=10)
    args = parser.parse_args()
    configure_logging("WARNING")
    if not sandbox_status().available:
        raise SystemExit(f"no sandbox here: {sandbox_status().reason}")
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tools"
        folder.mkdir()
        source = folder / "shout.py"
        source.write_text(SHOUT.format(name="shout"))
        settings = ToolSettings(tools_dir=str(folder))
        registry = create_registry(settings)
        # Today's way, for comparison: the file imported here, its tool called in-process.
        [old] = tools_in_module(import_source(source, source.read_bytes()))
        old.name = "shout_in_process"
        registry.register_builtin(old)
        files = Path(tmp) / "files"
        contexts = {
            mode: ToolContext.standalone(
                "bench", files, settings=msgspec.structs.replace(settings, unsandboxed_tools=off)
            )
            for mode, off in (("sandboxed", False), ("subprocess", True))
        }
        ways = {
            "in_process": ("shout_in_process", contexts["sandboxed"]),
            "subprocess": ("shout", contexts["subprocess"]),
            "sandboxed": ("shout", contexts["sandboxed"]),
        }
        samples: dict[str, list[float]] = {way: [] for way in ways}
        cpu: dict[str, list[float]] = {way: [] for way in ways}
        for name, ctx in ways.values():
            await registry.execute(name, {"text": "warm"}, ctx)  # the probe, page cache
        # Interleaved, so that every way sees the same load on a shared machine.
        for _ in range(args.samples):
            for way, (name, ctx) in ways.items():
                c0, t0 = cpu_ms(), time.perf_counter()
                result = await registry.execute(name, {"text": "hi"}, ctx)
                samples[way].append((time.perf_counter() - t0) * 1000)
                cpu[way].append(cpu_ms() - c0)
                assert result.success and result.output == "HI", result
        for way, values in samples.items():
            p50, p90 = median(values), percentile(values, 90)
            line = f"call {way:10}: median {p50:8.2f} ms, p90 {p90:8.2f} ms"
            figures[f"call_{way}_median_ms"] = p50
            figures[f"call_{way}_p90_ms"] = p90
            if way != "sandboxed":
                figures[f"call_{way}_cpu_ms"] = median(cpu[way])
                line += f", CPU {median(cpu[way]):7.2f} ms"
            print(line)
        for i in range(args.files - 1):
            (folder / f"shout_{i}.py").write_text(SHOUT.format(name=f"shout_{i}"))
        loads: list[float] = []
        for _ in range(max(3, args.samples // 5)):
            t0 = time.perf_counter()
            loaded = await anyio.to_thread.run_sync(registry.reload)
            loads.append((time.perf_counter() - t0) * 1000)
            assert len(loaded.loaded) == args.files and not loaded.errors, loaded.describe()
        print(f"reload of {args.files} files (sandboxed): median {median(loads):8.2f} ms")
        figures[f"reload_{args.files}_files_median_ms"] = median(loads)
        await registry.aclose()
    figures["sandbox_cost_per_call_ms"] = (
        figures["call_sandboxed_median_ms"] - figures["call_in_process_median_ms"]
    )
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
