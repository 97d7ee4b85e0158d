"""A tool process that ignores SIGTERM under a real ``navi serve``: a stop ends the run
at once and the process is killed (SIGKILL after the grace period). (A server shut down
with SIGTERM does the same, after its actors' shutdown timeout of 10 s.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
from websockets.asyncio.client import connect

from tests.chaos.harness import ChaosLLM, read_logs, single_server, watched_run
from tests.chaos.llm import spec_line


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead: only its parent has not collected it
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def _host_pid(inner: int) -> int:
    """The host's pid of the process that is ``inner`` in its own PID namespace (the
    tool sandbox): the last field of ``NSpid`` is the innermost pid. Without a sandbox
    both are the same."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        nspid = next(
            (line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:")), []
        )
        pid = int(entry.name)
        nested = len(nspid) > 1 or pid == inner
        if nspid and int(nspid[-1]) == inner and nested and b"python" in cmdline and _alive(pid):
            return pid
    raise AssertionError(f"no process is {inner} in its namespace")


async def _pid_file(root: Path) -> int:
    with anyio.fail_after(20):
        while True:
            found = list((root / "files").glob("*/hang.pid"))
            if found and found[0].read_text():
                return _host_pid(int(found[0].read_text()))
            await anyio.sleep(0.05)


async def test_a_stop_kills_a_tool_process_that_ignores_sigterm(tmp_path: Path) -> None:
    with ChaosLLM() as llm:
        async with single_server(tmp_path, llm) as server:
            async with watched_run(server, spec_line("h1", steps=1, hang=1)) as watcher:
                pid = await _pid_file(tmp_path)
                assert _alive(pid)
                async with connect(f"{server.ws_url}/ws/sessions/{watcher.session_id}") as ws:
                    await ws.send(json.dumps({"type": "stop"}))
                    with anyio.fail_after(10):
                        await watcher.ended.wait()
            logs = await read_logs(server.config.database_url, [watcher.session_id])
    types = [r.type for r in logs[watcher.session_id]]
    assert types[-1] == "run.stopped"
    # SIGKILLed: on a loaded machine the kernel may take a moment to finish it off.
    with anyio.move_on_after(3):
        while _alive(pid):
            await anyio.sleep(0.05)
    assert not _alive(pid)
    assert watcher.frames[-1]["type"] == "stream_stopped"
