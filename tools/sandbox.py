"""The bubblewrap sandbox that ``code_exec`` and ``terminal`` run in.

What a sandboxed process sees (each line is a ``bwrap`` option, see :func:`bwrap_command`):

- new PID, IPC, UTS and cgroup namespaces and a private ``/proc``: the server's
  processes do not exist there, so ``/proc/<server pid>/environ`` cannot be read;
  ``/proc/sys`` and the kernel's other knobs there (``sysrq-trigger``, ``irq``, ``bus``,
  ``fs``, ``mtrr``) are read-only, ``kcore``, ``kmsg`` and the like hidden;
- never the host's root (``tools.sandbox_user``): run by an ordinary user, the code is
  that user in the user namespace bubblewrap makes; run by root, bubblewrap sets the
  sandbox up as root and the code then starts as an unprivileged host user (``setpriv``)
  in a user namespace of its own (``unshare``), with no capability and ``no_new_privs``;
- a network namespace of its own (``--unshare-net``): no network at all, or, where the
  profile grants ``tool_network``, the user-mode network of ``tools.sandbox_net``
  (slirp4netns), which never reaches the host's loopback; without slirp4netns such a
  call runs without network and its result says so;
- a root made of read-only system folders only (``/usr``, ``/bin``, ``/lib*``, the
  ``/etc`` files programs need) plus what the call adds (the Python install for
  ``code_exec``): the server's data folder, database, users file, other sessions,
  user tools and the home folder are not mounted at all; ``/tmp`` and ``/dev/shm`` are
  private tmpfs of a bounded size;
- writable: the call's working directory and the session's files folder only, which may
  grow by the call's write limit at most (``tools.sandbox_files``: watched, the call is
  ended past it);
- no capabilities (``--cap-drop ALL``), a fresh session (``--new-session``), and an
  environment of PATH, HOME (the working directory), LANG and what the caller adds;
- the whole tree ends with the call: ``--die-with-parent`` kills the namespace's init
  when bwrap goes, and the kernel kills everything in a PID namespace with its init,
  ``setsid`` children included;
- memory and process count limited for the whole tree by a cgroup (``tools.cgroups``),
  else by ``prlimit`` per process; all sandboxes together under a memory ceiling and a
  bound on how many run at once (``tools.sandbox_slots``).

Where bwrap is missing or cannot make the namespaces (a user namespace included) the
tools refuse to run, unless the operator set ``NAVI_UNSANDBOXED_TOOLS=1``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from tools.cgroups import create_call_cgroup, join_command, machine_memory_bytes
from tools.context import StopSignal
from tools.processes import ProcessOutcome, run_process_tree
from tools.sandbox_command import (
    DEFAULT_WRITE_LIMIT_BYTES,
    SANDBOX_PATH,
    SandboxSpec,
    SandboxUnavailable,
    build_command,
)
from tools.sandbox_files import WriteWatch
from tools.sandbox_net import NO_NETWORK_NOTE, NetworkNotStarted, UserNetwork, find_slirp4netns
from tools.sandbox_slots import SlotBounds, server_slots
from tools.sandbox_status import (
    INSTALL_HINT,
    SandboxStatus,
    require_sandbox,
    sandbox_report,
    sandbox_status,
    use_sandbox_user,
)
from tools.settings import ToolSettings

__all__ = [
    "DEFAULT_WRITE_LIMIT_BYTES",
    "INSTALL_HINT",
    "SANDBOX_PATH",
    "SandboxLimits",
    "SandboxSpec",
    "SandboxStatus",
    "SandboxUnavailable",
    "bwrap_command",
    "passed_env",
    "python_install",
    "require_sandbox",
    "run_sandboxed",
    "sandbox_env",
    "sandbox_report",
    "sandbox_status",
    "use_sandbox_user",
]


@dataclass(frozen=True)
class SandboxLimits:
    memory_bytes: int
    max_processes: int
    # All sandboxes of this server: how many run at once (in all, of one user) and the
    # memory of all together (None: half the machine's).
    max_sandboxes: int = 8
    user_max_sandboxes: int = 2
    total_memory_bytes: int | None = None

    @classmethod
    def from_settings(cls, settings: ToolSettings, memory_mb: int) -> SandboxLimits:
        total = settings.sandboxes_memory_mb * 1024 * 1024 or None
        return cls(
            memory_bytes=memory_mb * 1024 * 1024,
            max_processes=settings.sandbox_max_processes,
            max_sandboxes=settings.max_sandboxes,
            user_max_sandboxes=settings.user_max_sandboxes,
            total_memory_bytes=total,
        )

    @property
    def ceiling_bytes(self) -> int:
        return self.total_memory_bytes or machine_memory_bytes() // 2


def sandbox_env(extra: Mapping[str, str] | None = None, *, home: Path) -> dict[str, str]:
    """The whole environment inside: nothing of the server's unless passed in ``extra``."""
    env = {"PATH": SANDBOX_PATH, "HOME": str(home), "TMPDIR": "/tmp", "TERM": "dumb"}
    env["LANG"] = os.environ.get("LANG") or "C.UTF-8"
    env.update(extra or {})
    return env


def passed_env(names: Iterable[str]) -> dict[str, str]:
    """The server's values of the variables the operator named in ``CODE_EXEC_ENV``."""
    return {name: os.environ[name] for name in names if name in os.environ}


def bwrap_command(
    bwrap: str,
    argv: Sequence[str],
    spec: SandboxSpec,
    *,
    user_network: Sequence[str] = (),
    tmp_bytes: int | None = None,
) -> list[str]:
    """The whole command line that runs ``argv`` as described in the module docstring,
    the switch to the sandbox user included when Navi runs as root. Then, before it
    returns, the folders the call uses are made reachable for that user: a writable
    working directory and ``spec.owned`` are handed to it, ``spec.writable`` and what it
    reads get an ACL entry where their mode does not let it (``tools.sandbox_files``).

    ``user_network``: the options of a :class:`~tools.sandbox_net.UserNetwork`, the
    network of a ``tool_network`` call. A spec with ``network`` and without them shares
    the host's network (only an MCP server the operator configured so). Raises
    :class:`SandboxUnavailable` as root when no sandbox user could be found."""
    status = sandbox_status()
    if os.geteuid() == 0 and status.drop is None:
        raise SandboxUnavailable(
            f"this tool runs only in a sandbox: {status.reason}. {INSTALL_HINT}"
        )
    return build_command(
        bwrap, argv, spec, user_network=user_network, drop=status.drop, tmp_bytes=tmp_bytes
    )


def python_install(python: str) -> tuple[Path, ...]:
    """The folders a Python interpreter needs: its install and, for a venv, the venv.

    Refuses a folder that holds the home folder or the server's working folder (where
    data lives by default): a sandbox never mounts those, even to find Python."""
    found: list[Path] = []
    given = Path(python).absolute()
    real = Path(os.path.realpath(given))
    for exe in (given, real):
        prefix = exe.parent.parent
        if exe is real or (prefix / "pyvenv.cfg").exists():
            found.append(prefix)
    protected = [Path(p).absolute() for p in (os.path.expanduser("~"), os.getcwd())]
    for prefix in found:
        for guarded in protected:
            if prefix == guarded or prefix in guarded.parents:
                raise SandboxUnavailable(
                    f"the Python at {python} lives in {prefix}, which holds {guarded}; the "
                    "sandbox will not mount that. Set CODE_EXEC_PYTHON to a Python installed "
                    "elsewhere (e.g. /usr/bin/python3)."
                )
    # The executable itself too, at the path it is called by (a symlink elsewhere).
    return tuple(dict.fromkeys((*found, given)))


class _EitherStop:
    """The run's stop, or the write watch's: whichever fires first ends the call (the
    process runner waits on it while the process runs, which is when the watch polls)."""

    def __init__(self, stop: StopSignal, watch: WriteWatch) -> None:
        self.stop, self.watch = stop, watch

    def is_set(self) -> bool:
        return self.stop.is_set() or self.watch.is_set()

    async def wait(self) -> None:
        async with anyio.create_task_group() as tg:

            async def first(waiter: StopSignal) -> None:
                await waiter.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(first, self.stop)
            tg.start_soon(first, self.watch)


async def run_sandboxed(
    argv: Sequence[str],
    *,
    spec: SandboxSpec,
    limits: SandboxLimits,
    timeout_s: float,
    stop: StopSignal,
    output_limit_bytes: int,
    kill_grace_s: float,
    user_id: str = "",
) -> ProcessOutcome:
    """Run ``argv`` in the sandbox; the tree is killed and its cgroup removed at the end.

    The call first takes a slot (``tools.sandbox_slots``: at most
    ``limits.max_sandboxes`` at once, ``limits.user_max_sandboxes`` of ``user_id``),
    waiting for one within ``timeout_s``, which the wait uses up. With ``spec.network``,
    the sandbox gets a user-mode network (``tools.sandbox_net``) or, where slirp4netns
    is missing, none, and the output starts with a note saying so. Past its write limit
    the call ends with ``ended_by == "write_limit"``."""
    bwrap = await require_sandbox()
    bounds = SlotBounds(total=limits.max_sandboxes, per_user=limits.user_max_sandboxes)
    async with server_slots().slot(user_id, bounds, timeout_s) as waited:
        run = functools.partial(
            _run,
            bwrap,
            argv,
            spec=spec,
            limits=limits,
            timeout_s=max(timeout_s - waited, 1.0),
            stop=stop,
            output_limit_bytes=output_limit_bytes,
            kill_grace_s=kill_grace_s,
        )
        for _ in range(LOOPBACK_ATTEMPTS - 1):
            try:
                outcome = await run()
            except NetworkNotStarted:  # its command never ran: again
                continue
            if not _loopback_failed(outcome):
                return outcome
            await anyio.sleep(0.05)  # a moment for the kernel's netlink, then again
        return await run()


# bubblewrap 0.8 now and then fails to bring up loopback in the sandbox's new network
# namespace, before it runs the command (an exit code of 1 and this one line): the call is
# started again. (Code that prints the line itself gains nothing by it: it could as
# well do its work twice in one run.)
LOOPBACK_ATTEMPTS = 4  # one failure in a few hundred, more under load: seen twice in a row
_LOOPBACK_FAILED = re.compile(r"bwrap: loopback: Failed [A-Z_]+: [^\n]*\n?")


def loopback_failed(output: str) -> bool:
    """``output`` is all bubblewrap said when it failed to bring up loopback."""
    return _LOOPBACK_FAILED.fullmatch(output) is not None


def _loopback_failed(outcome: ProcessOutcome) -> bool:
    return outcome.exit_code == 1 and loopback_failed(outcome.output)


async def _run(
    bwrap: str,
    argv: Sequence[str],
    *,
    spec: SandboxSpec,
    limits: SandboxLimits,
    timeout_s: float,
    stop: StopSignal,
    output_limit_bytes: int,
    kill_grace_s: float,
) -> ProcessOutcome:
    slirp4netns = find_slirp4netns() if spec.network else None
    note = ""
    if spec.network and slirp4netns is None:
        # Safe by default: never the host's network, loopback included.
        spec = dataclasses.replace(spec, network=False)
        note = NO_NETWORK_NOTE + "\n"
    cgroup = await anyio.to_thread.run_sync(
        create_call_cgroup, limits.memory_bytes, limits.max_processes, limits.ceiling_bytes
    )
    inner = list(argv)
    if cgroup is None:
        # No cgroup: per-process limits (RLIMIT_NPROC counts the sandbox user's
        # processes, and binds only when Navi is not root; the PID namespace and the
        # time limit still end every process with the call).
        inner = [
            "prlimit",
            f"--as={limits.memory_bytes}",
            f"--nproc={limits.max_processes}",
            "--",
            *inner,
        ]
    network = UserNetwork(slirp4netns) if slirp4netns is not None else None
    watch = WriteWatch(spec.written_folders, spec.write_limit)
    try:
        options = network.bwrap_options() if network is not None else []
        command = await anyio.to_thread.run_sync(
            functools.partial(
                bwrap_command,
                bwrap,
                inner,
                spec,
                user_network=options,
                tmp_bytes=limits.memory_bytes,
            )
        )
        if cgroup is not None:
            # Its /bin/sh passes the network's fds on to bwrap: it closes none it inherits.
            command = join_command(cgroup, command)
        await watch.baseline()
        outcome = await run_process_tree(
            command,
            cwd=spec.workdir,
            env={"PATH": SANDBOX_PATH},
            timeout_s=timeout_s,
            stop=_EitherStop(stop, watch),
            output_limit_bytes=output_limit_bytes,
            kill_grace_s=kill_grace_s,
            pass_fds=network.pass_fds if network is not None else (),
            started=network.start if network is not None else None,
        )
        if watch.is_set() and not stop.is_set():
            outcome = dataclasses.replace(outcome, ended_by="write_limit", detail=watch.message())
        return dataclasses.replace(outcome, output=note + outcome.output) if note else outcome
    finally:
        if network is not None:
            network.close()
        if cgroup is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(OSError):
                await anyio.to_thread.run_sync(cgroup.remove)
