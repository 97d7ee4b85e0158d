from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import anyio
import msgspec
import pytest

from tools import ToolContext, ToolRegistry, ToolResult, ToolSettings
from tools.sandbox import sandbox_status

pytestmark = pytest.mark.anyio


def is_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (dead, not yet reaped) counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_dead(pid: int, within_s: float = 5.0) -> bool:
    for _ in range(int(within_s / 0.05)):
        if not is_alive(pid):
            return True
        await anyio.sleep(0.05)
    return not is_alive(pid)


def running_with(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker``, seen from the host.

    The code runs in a PID namespace, so a pid it reports is not the host's: it names
    its processes by a marker (its unique working directory) instead."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and is_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def wait_gone(marker: str, within_s: float = 5.0) -> bool:
    for _ in range(int(within_s / 0.05)):
        if not running_with(marker):
            return True
        await anyio.sleep(0.05)
    return not running_with(marker)


def read_if_ready(path: Path) -> str:
    return path.read_text().strip() if path.exists() else ""


async def wait_for_file(path: Path, within_s: float = 10.0) -> str:
    for _ in range(int(within_s / 0.02)):
        if content := read_if_ready(path):
            return content
        await anyio.sleep(0.02)
    raise TimeoutError(f"{path} did not appear")


async def run_code(
    registry: ToolRegistry, ctx: ToolContext, code: str, timeout_s: float | None = None
) -> ToolResult:
    args: dict[str, object] = {"code": textwrap.dedent(code)}
    if timeout_s is not None:
        args["timeout_s"] = timeout_s
    return await registry.execute("code_exec", args, ctx)


# Starts a grandchild, writes its marker (the unique working directory, in the command
# lines of both) to NAVI_FILES_DIR, then sleeps.
SPAWNS_GRANDCHILD = """
    import os, subprocess, sys, time
    files = os.environ["NAVI_FILES_DIR"]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", os.getcwd()])
    with open(os.path.join(files, "pids.tmp"), "w") as f:
        f.write(os.getcwd())
    os.rename(os.path.join(files, "pids.tmp"), os.path.join(files, "pids"))
    time.sleep(60)
"""

IGNORES_SIGTERM = """
    import os, signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    files = os.environ["NAVI_FILES_DIR"]
    with open(os.path.join(files, "pids.tmp"), "w") as f:
        f.write(os.getcwd())
    os.rename(os.path.join(files, "pids.tmp"), os.path.join(files, "pids"))
    while True:
        time.sleep(0.1)
"""


async def test_runs_python_and_reports_output(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run_code(
        registry, ctx, "import sys\nprint('out')\nprint('err', file=sys.stderr)"
    )
    assert result.success
    assert result.output == "exit code: 0\nout\nerr\n"


async def test_an_exception_is_a_failed_call_with_the_traceback(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await run_code(registry, ctx, "raise ValueError('bad value')")
    assert not result.success
    assert result.error == "exit code 1"
    assert "ValueError: bad value" in result.output


async def test_its_own_working_directory_and_the_files_dir(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "data.csv").write_text("a,b\n1,2\n")
    code = """
        import os
        print(os.getcwd() != os.environ["NAVI_FILES_DIR"])
        print(sorted(os.listdir(".")))
        print(open(os.path.join(os.environ["NAVI_FILES_DIR"], "data.csv")).read().strip())
        open("scratch.txt", "w").write("x")
    """
    result = await run_code(registry, ctx, code)
    assert result.output == "exit code: 0\nTrue\n['main.py']\na,b\n1,2\n"
    assert not (files_dir / "scratch.txt").exists()


async def test_memory_limit(registry: ToolRegistry, ctx: ToolContext) -> None:
    small = ToolContext.standalone(
        "s1", ctx.files_dir, settings=msgspec.structs.replace(ctx.settings, code_exec_memory_mb=200)
    )
    result = await run_code(registry, small, "x = bytearray(400 * 1024 * 1024)\nprint('allocated')")
    assert not result.success
    assert "MemoryError" in result.output
    assert "allocated" not in result.output


async def test_output_is_capped(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run_code(registry, ctx, "print('x' * 100_000)")
    assert result.success
    assert "[... output truncated: 80001 more bytes]" in result.output
    assert len(result.output) < 20_200


async def test_the_server_process_is_untouched(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run_code(
        registry, ctx, "import sys\nsys.modules.clear()\nimport os\nos._exit(3)"
    )
    assert result.error == "exit code 3"
    assert "tools" in sys.modules


async def test_timeout_kills_the_child_and_its_grandchild(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    result = await run_code(registry, ctx, SPAWNS_GRANDCHILD, timeout_s=1)
    assert result.failure_reason == "timeout"
    assert "timed out after 1s; the process tree was killed" in result.output
    marker = (files_dir / "pids").read_text()
    assert await wait_gone(marker)


async def test_a_child_that_ignores_sigterm_is_killed(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    result = await run_code(registry, ctx, IGNORES_SIGTERM, timeout_s=1)
    assert result.failure_reason == "timeout"
    assert await wait_gone((files_dir / "pids").read_text())


async def test_stop_kills_the_tree(
    registry: ToolRegistry, files_dir: Path, settings: ToolSettings
) -> None:
    stop = anyio.Event()
    ctx = ToolContext.standalone("s1", files_dir, settings=settings, stop=stop)
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await run_code(registry, ctx, SPAWNS_GRANDCHILD, timeout_s=60))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        pids = await wait_for_file(files_dir / "pids")
        assert len(running_with(pids)) >= 2  # the code and its child (and bwrap), from the host
        stop.set()
    assert results[0].failure_reason == "stopped"
    assert await wait_gone(pids)


async def test_cancellation_kills_the_tree(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_code, registry, ctx, SPAWNS_GRANDCHILD, 60)
        pids = await wait_for_file(files_dir / "pids")
        tg.cancel_scope.cancel()
    assert await wait_gone(pids)


async def test_background_leftovers_die_when_the_child_exits(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    code = """
        import os, subprocess, sys
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)", os.getcwd()]
        )
        open(os.path.join(os.environ["NAVI_FILES_DIR"], "pid"), "w").write(os.getcwd())
        print("parent done")
    """
    result = await run_code(registry, ctx, code)
    assert result.success and "parent done" in result.output
    assert await wait_gone((files_dir / "pid").read_text())


async def test_terminal_tree_is_killed_too(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    settings = msgspec.structs.replace(ctx.settings, terminal_allowed_commands=("sh",))
    shell_ok = ToolContext.standalone("s1", files_dir, settings=settings)
    # sh is the allowed program here; the quoted script is its argument, not our shell.
    # A unique duration marks the background sleep (its pid is the sandbox's, not ours).
    duration = f"60.{uuid.uuid4().int % 10**9:09d}"
    command = f"sh -c 'sleep {duration} & wait'"
    result = await registry.execute("terminal", {"command": command, "timeout_s": 1}, shell_ok)
    assert result.failure_reason == "timeout"
    assert await wait_gone(f"sleep\x00{duration}")


async def test_without_bubblewrap_code_exec_refuses_unless_the_operator_opts_out(
    registry: ToolRegistry, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no bwrap on it
    sandbox_status.cache_clear()
    try:
        refused = await run_code(registry, ctx, "print('ran')")
        settings = msgspec.structs.replace(ctx.settings, unsandboxed_tools=True)
        opted_out = ToolContext.standalone("s1", ctx.files_dir, settings=settings)
        unsandboxed = await run_code(registry, opted_out, "print('ran')")
    finally:
        monkeypatch.undo()
        sandbox_status.cache_clear()
    assert not refused.success
    assert "bubblewrap (bwrap) is not installed" in (refused.error or "")
    assert "apt-get install bubblewrap" in (refused.error or "")
    assert unsandboxed.output == "exit code: 0\nran\n"


async def test_only_the_variables_named_in_code_exec_env_pass(
    registry: ToolRegistry, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NAVI_TEST_PASSED_ON", "passed-value")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    settings = msgspec.structs.replace(ctx.settings, code_exec_env=("NAVI_TEST_PASSED_ON",))
    named = ToolContext.standalone("s1", ctx.files_dir, settings=settings)
    result = await run_code(registry, named, "import os\nprint(sorted(os.environ.items()))")
    assert "passed-value" in result.output
    assert "sk-secret-value" not in result.output
