"""The network of a sandbox whose profile grants ``tool_network``: slirp4netns.

Sharing the host's network namespace would give sandboxed code the machine's loopback:
Navi's own API (which, in open access, takes a request without an Origin header for the
admin's), Ollama, databases. So a networked sandbox still gets a network namespace of its
own (``--unshare-net``), and slirp4netns, a user-mode network stack running beside it on
the host, gives it ``tap0`` (10.0.2.100/24, gateway 10.0.2.2, DNS 10.0.2.3). With
``--disable-host-loopback`` the gateway does not lead to the host's 127.0.0.1: the
sandbox reaches what another machine on the LAN would (the internet, the LAN, services
of this machine bound to its interface addresses), never what listens on loopback only.

One call, in order (see :class:`UserNetwork`):

1. bwrap starts with ``--info-fd`` (it writes its child's pid there) and ``--block-fd``
   (the command waits until a byte arrives there), and a resolv.conf naming 10.0.2.3:
   the host's may name 127.0.0.53 (systemd-resolved), out of reach from the sandbox;
2. slirp4netns attaches to that child's namespaces and says on ``--ready-fd`` that tap0
   is up;
3. a byte on the block fd: the command runs, with the network;
4. when the call ends, however it ends, slirp4netns is told to go (``--exit-fd``: our end
   closing is the signal, so it also goes if the server dies) and killed. A thread of its
   own reaps it: its exit takes the kernel 15-25 ms (the tap device's teardown waits for
   a network-wide grace period), which the call's end, and so a stop, must not wait for.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from typing import IO

import anyio

from tools.base import ToolError

READY_TIMEOUT_S = 10.0
NO_NETWORK_NOTE = (
    "(no network in the sandbox: tool_network needs slirp4netns — apt-get install slirp4netns)"
)
MISSING_NOTE = (
    "slirp4netns is not installed: profiles with tool_network get no network in the "
    "sandbox (apt-get install slirp4netns)"
)
_RESOLV_CONF = b"nameserver 10.0.2.3\n"


class NetworkNotStarted(ToolError):
    """The sandbox's network did not come up, so its command never ran (bwrap holds it
    until the block fd's byte): the call may be started again. bubblewrap 0.8 now and
    then fails to bring up loopback in the new namespace (``loopback: Failed
    RTM_NEWADDR``) and ends."""


def find_slirp4netns() -> str | None:
    return shutil.which("slirp4netns")


async def _read_fd(fd: int, size: int) -> bytes:
    """One read of a non-blocking pipe end, waiting without a thread; b"" at EOF."""
    while True:
        try:
            return os.read(fd, size)
        except BlockingIOError:
            await anyio.wait_readable(fd)


class UserNetwork:
    """slirp4netns for one sandboxed call: :meth:`bwrap_options` and :attr:`pass_fds`
    go to bwrap, :meth:`start` once bwrap runs, :meth:`close` when the call ends."""

    def __init__(self, slirp4netns: str) -> None:
        self._slirp4netns = slirp4netns
        self._info_r, self._info_w = os.pipe()
        self._block_r, self._block_w = os.pipe()
        self._resolv_r, resolv_w = os.pipe()
        os.write(resolv_w, _RESOLV_CONF)  # a few bytes: the pipe holds them
        os.close(resolv_w)
        os.set_blocking(self._info_r, False)
        self._open = {self._info_r, self._info_w, self._block_r, self._block_w, self._resolv_r}
        self._slirp: subprocess.Popen[bytes] | None = None
        self._errors: IO[bytes] | None = None

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self._info_w, self._block_r, self._resolv_r)

    def bwrap_options(self, fds: tuple[int, int, int] | None = None) -> list[str]:
        """After the other binds: the resolv.conf goes over the host's. ``fds``: the
        numbers bwrap knows our three pipe ends by, when not ours (:meth:`reopened`)."""
        info, block, resolv = fds or self.pass_fds
        return [
            "--info-fd", str(info),
            "--block-fd", str(block),
            # Readable by all: as root, the code runs as the sandbox user (bwrap's own
            # default, 0600 root, would leave it without DNS).
            "--perms", "0444", "--ro-bind-data", str(resolv), "/etc/resolv.conf",
        ]  # fmt: skip

    def reopened(self) -> tuple[list[str], list[str]]:
        """For bwrap started by code that passes no file descriptor on (the MCP SDK's
        stdio transport): a ``/bin/sh`` prefix that opens our pipe ends again through
        ``/proc/<our pid>/fd`` as its 3, 4 and 5 (a pipe opened there is the same pipe)
        and execs the rest, and the bwrap options that name those. Start the network
        with ``start(reopened=True)``: our ends stay open until bwrap has its own."""
        pid, (info, block, resolv) = os.getpid(), self.pass_fds
        script = (
            f'exec "$@" 3>/proc/{pid}/fd/{info} 4</proc/{pid}/fd/{block} 5</proc/{pid}/fd/{resolv}'
        )
        return ["/bin/sh", "-c", script, "sh"], self.bwrap_options((3, 4, 5))

    def _close(self, *fds: int) -> None:
        for fd in fds:
            if fd in self._open:
                self._open.discard(fd)
                os.close(fd)

    async def start(self, *, reopened: bool = False) -> None:
        """With bwrap running: tap0 up in its namespace, then its command released.

        Raises :class:`NetworkNotStarted` if the network does not come up; the caller then
        ends the sandbox's tree (and :meth:`close` slirp4netns). ``reopened``: bwrap
        opens our pipe ends itself (:meth:`reopened`), so they stay open until it has
        (its child's pid arrives): a bwrap that dies first is then not seen here, its
        caller sees it end."""
        if not reopened:
            # bwrap has its copies; ours closed, a bwrap that dies gives EOF, not a hang.
            self._close(self._info_w, self._block_r, self._resolv_r)
        try:
            with anyio.fail_after(READY_TIMEOUT_S):
                pid = await self._child_pid()
                self._close(self._info_w, self._block_r, self._resolv_r)
                await self._start_slirp(pid)
        except TimeoutError:
            raise NetworkNotStarted(
                self._failure(f"not ready within {READY_TIMEOUT_S:g}s")
            ) from None
        try:
            os.write(self._block_w, b"1")
        except BrokenPipeError:  # bwrap ended after it made the sandbox (see NetworkNotStarted)
            raise NetworkNotStarted(self._failure("bubblewrap ended before its command")) from None
        self._close(self._block_w)

    async def _child_pid(self) -> int:
        data = b""
        while True:  # the JSON may come in pieces
            chunk = await _read_fd(self._info_r, 4096)
            data += chunk
            with contextlib.suppress(ValueError, KeyError, TypeError):
                return int(json.loads(data)["child-pid"])
            if not chunk:
                raise NetworkNotStarted(
                    self._failure("bubblewrap ended before its sandbox started")
                )

    async def _start_slirp(self, pid: int) -> None:
        ready_r, ready_w = os.pipe()
        exit_r, exit_w = os.pipe()  # ours stays open until close()
        self._open |= {ready_r, ready_w, exit_r, exit_w}
        os.set_blocking(ready_r, False)
        argv = [
            self._slirp4netns, "--configure", "--mtu=65520", "--disable-host-loopback",
            "--ready-fd", str(ready_w), "--exit-fd", str(exit_r),
        ]  # fmt: skip
        # Unprivileged, bwrap made a user namespace: slirp4netns must join it to open
        # tap0 (as root there is none, and joining one's own namespace is refused).
        userns = f"/proc/{pid}/ns/user"
        if os.stat(userns).st_ino != os.stat("/proc/self/ns/user").st_ino:
            argv.append(f"--userns-path={userns}")
        argv += [str(pid), "tap0"]
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close)
        try:
            # A Popen, not an anyio process: close() leaves its reaping to a thread. (The
            # fork and exec are as quick as anyio's own, which makes a Popen too.)
            self._slirp = subprocess.Popen(  # noqa: ASYNC220
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._errors,
                pass_fds=(ready_w, exit_r),
            )
        finally:
            self._close(ready_w, exit_r)
        try:
            if not await _read_fd(ready_r, 1):
                raise NetworkNotStarted(self._failure("slirp4netns ended before it was ready"))
        finally:
            self._close(ready_r)

    def _failure(self, what: str) -> str:
        detail = ""
        if self._errors is not None:
            self._errors.seek(0)
            detail = self._errors.read(2000).decode(errors="replace").strip()
        detail = f" ({detail})" if detail else ""
        return f"the sandbox's network did not start: {what}{detail}"

    def close(self) -> None:
        """slirp4netns killed and left to a reaper thread, every pipe closed; safe to call
        at any point (see the module doc, 4.)."""
        self._close(*list(self._open))  # the exit fd among them: slirp4netns leaves
        if self._slirp is not None:
            self._slirp.kill()  # a no-op once it is reaped
            threading.Thread(
                target=self._slirp.wait, name="slirp4netns-reaper", daemon=True
            ).start()
            self._slirp = None
        if self._errors is not None:
            self._errors.close()
            self._errors = None
