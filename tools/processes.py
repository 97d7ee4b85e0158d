"""Running a subprocess tree that cannot outlive its timeout or the run's stop.

The child starts its own session (so its own process group); whatever happens,
timeout, stop, cancellation or a normal exit, the whole group is signalled at the end:
SIGTERM first, SIGKILL after a grace period, and SIGKILL again for leftovers (a
background grandchild of a child that exited). Output is captured with a cap while
the process runs, so a chatty process cannot fill memory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
from anyio.abc import ByteReceiveStream, Process

from tools.base import truncation_marker
from tools.context import StopSignal

# "write_limit": ended by the sandbox for writing past its limit (tools.sandbox).
EndedBy = Literal["exit", "timeout", "stop", "write_limit"]


@dataclass(frozen=True)
class ProcessOutcome:
    exit_code: int | None
    output: str
    ended_by: EndedBy
    # Why a limit ended it, in words for the user (empty otherwise).
    detail: str = ""


class _CappedOutput:
    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.kept = bytearray()
        self.dropped = 0
        self.done = anyio.Event()

    async def drain(self, stream: ByteReceiveStream) -> None:
        try:
            async for chunk in stream:
                room = self.limit - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self.done.set()

    def text(self) -> str:
        text = self.kept.decode("utf-8", errors="replace")
        if self.dropped:
            text += truncation_marker(self.dropped, "bytes")
        return text


def minimal_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a tool's subprocess gets: never the server's secrets."""
    env = {
        key: os.environ[key]
        for key in ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "TMPDIR")
        if key in os.environ
    }
    env.setdefault("PATH", os.defpath)
    env["TERM"] = "dumb"
    env.update(extra or {})
    return env


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _terminate_group(process: Process, grace_s: float) -> None:
    pgid = process.pid  # start_new_session: the child leads its own group
    if process.returncode is None:
        _signal_group(pgid, signal.SIGTERM)
        with anyio.move_on_after(grace_s):
            await process.wait()
    # The leader if it ignored SIGTERM, and any grandchild still in the group.
    _signal_group(pgid, signal.SIGKILL)
    await process.wait()


async def _wait_exit_or_stop(process: Process, stop: StopSignal) -> bool:
    """Wait for the process to exit; True if the stop signal came first."""
    stopped = False
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            nonlocal stopped
            await stop.wait()
            stopped = True
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await process.wait()
        tg.cancel_scope.cancel()
    return stopped


async def run_process_tree(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    stop: StopSignal,
    output_limit_bytes: int,
    kill_grace_s: float = 1.0,
    pass_fds: Sequence[int] = (),
    started: Callable[[], Awaitable[None]] | None = None,
) -> ProcessOutcome:
    """Run ``argv`` (never through a shell) and collect stdout+stderr, interleaved.

    ``started``, if given, runs once the process exists and before the time limit
    starts (the sandbox's network set-up); if it raises, the tree is ended and the
    error goes to the caller."""
    process = await anyio.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
        pass_fds=pass_fds,
    )
    assert process.stdout is not None
    if started is not None:
        try:
            await started()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _terminate_group(process, kill_grace_s)
                await process.stdout.aclose()
            raise
    output = _CappedOutput(output_limit_bytes)
    ended_by: EndedBy = "exit"
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(output.drain, process.stdout)
            try:
                with anyio.move_on_after(timeout_s) as deadline:
                    if await _wait_exit_or_stop(process, stop):
                        ended_by = "stop"
                if deadline.cancelled_caught:
                    ended_by = "timeout"
            finally:
                with anyio.CancelScope(shield=True):
                    await _terminate_group(process, kill_grace_s)
                    # A process that left the group (setsid) may hold the pipe; do not wait on it.
                    with anyio.move_on_after(1.0):
                        await output.done.wait()
                    tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            # The pipes' transports too (stdout.aclose() leaves them open): one still
            # open when its event loop closes warns in __del__ (a loader's own loop).
            await process.aclose()
    return ProcessOutcome(exit_code=process.returncode, output=output.text(), ended_by=ended_by)
