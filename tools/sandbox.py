"""The bubblewrap sandbox that ``code_exec`` and ``terminal`` run in.

What a sandboxed process sees (each line is a ``bwrap`` option, see :func:`bwrap_command`):

- new PID, IPC, UTS and cgroup namespaces and a private ``/proc``: the server's
  processes do not exist there, so ``/proc/<server pid>/environ`` cannot be read;
- a network namespace of its own (``--unshare-net``): no network at all, or, where the
  profile grants ``tool_network``, the user-mode network of ``tools.sandbox_net``
  (slirp4netns), which never reaches the host's loopback; without slirp4netns such a
  call runs without network and its result says so;
- a root made of read-only system folders only (``/usr``, ``/bin``, ``/lib*``, the
  ``/etc`` files programs need) plus what the call adds (the Python install for
  ``code_exec``): the server's data folder, database, users file, other sessions,
  user tools and the home folder are not mounted at all; ``/tmp`` is a private tmpfs;
- writable: the call's working directory and the session's files folder only;
- no capabilities (``--cap-drop ALL``), a fresh session (``--new-session``), and an
  environment of PATH, HOME (the working directory), LANG and what the caller adds;
- the whole tree ends with the call: ``--die-with-parent`` kills the namespace's init
  when bwrap goes, and the kernel kills everything in a PID namespace with its init,
  ``setsid`` children included;
- memory and process count limited for the whole tree by a cgroup (``tools.cgroups``),
  else by ``prlimit`` per process.

Where bwrap is missing or cannot make namespaces the tools refuse to run, unless the
operator set ``NAVI_UNSANDBOXED_TOOLS=1``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from tools.base import ToolError
from tools.cgroups import create_call_cgroup, join_command
from tools.context import StopSignal
from tools.processes import ProcessOutcome, run_process_tree
from tools.sandbox_net import MISSING_NOTE, NO_NETWORK_NOTE, UserNetwork, find_slirp4netns

INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: "
    "`dnf install bubblewrap`) and make sure it may create namespaces; or, knowing that "
    "the tool then runs with the server's own rights, set NAVI_UNSANDBOXED_TOOLS=1."
)
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs need from /etc: libraries, names, time, TLS roots, alternatives.
# Not /etc as a whole: it holds host keys, shadow passwords and service credentials.
_ETC_ENTRIES = (
    "alternatives", "ca-certificates", "ca-certificates.conf", "debian_version",
    "fonts", "gai.conf", "group", "host.conf", "hostname", "hosts", "ld.so.cache",
    "ld.so.conf", "ld.so.conf.d", "locale.alias", "localtime", "magic", "magic.mime",
    "mime.types", "nsswitch.conf", "os-release", "passwd", "pki", "protocols",
    "resolv.conf", "services", "ssl", "timezone",
)  # fmt: skip


class SandboxUnavailable(ToolError):
    """The sandbox cannot run here; the message says how to fix that."""


@dataclass(frozen=True)
class SandboxStatus:
    available: bool
    bwrap: str | None
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class SandboxSpec:
    """One sandboxed call: where it works, what else it sees, whether it has a network."""

    workdir: Path
    writable: tuple[Path, ...] = ()
    readonly: tuple[Path, ...] = ()
    network: bool = False
    env: Mapping[str, str]
    # False: nothing at all is writable, the working directory and /tmp included.
    writable_workdir: bool = True


@dataclass(frozen=True)
class SandboxLimits:
    memory_bytes: int
    max_processes: int


def _probe(bwrap: str) -> str:
    """ "" when bwrap can make the namespaces the sandbox uses, else why not."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not run: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
        return f"bubblewrap cannot create namespaces here: {detail}"
    return ""


@functools.cache
def sandbox_status() -> SandboxStatus:
    """Whether the sandbox works on this machine (probed once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxStatus(False, None, "bubblewrap (bwrap) is not installed")
    reason = _probe(bwrap)
    return SandboxStatus(not reason, bwrap, reason)


async def require_sandbox() -> str:
    """The bwrap executable, or :class:`SandboxUnavailable` saying how to get one."""
    status = await anyio.to_thread.run_sync(sandbox_status)
    if not status.available or status.bwrap is None:
        raise SandboxUnavailable(
            f"this tool runs only in a sandbox: {status.reason}. {INSTALL_HINT}"
        )
    return status.bwrap


def sandbox_env(extra: Mapping[str, str] | None = None, *, home: Path) -> dict[str, str]:
    """The whole environment inside: nothing of the server's unless passed in ``extra``."""
    env = {"PATH": SANDBOX_PATH, "HOME": str(home), "TMPDIR": "/tmp", "TERM": "dumb"}
    env["LANG"] = os.environ.get("LANG") or "C.UTF-8"
    env.update(extra or {})
    return env


def passed_env(names: Iterable[str]) -> dict[str, str]:
    """The server's values of the variables the operator named in ``CODE_EXEC_ENV``."""
    return {name: os.environ[name] for name in names if name in os.environ}


def _system_binds() -> list[str]:
    args: list[str] = []
    for folder in _SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    for entry in _ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    args += ["--symlink", "../proc/self/mounts", "/etc/mtab"]
    return args


def _covered(path: Path, by: Iterable[Path | str] = _SYSTEM_DIRS) -> bool:
    """True if one of the folders ``by`` (by default the system folders) shows ``path``."""
    return any(path == Path(d) or Path(d) in path.parents for d in by)


def bwrap_command(
    bwrap: str, argv: Sequence[str], spec: SandboxSpec, *, user_network: Sequence[str] = ()
) -> list[str]:
    """The bwrap command line that runs ``argv`` as described in the module docstring.

    ``user_network``: the options of a :class:`~tools.sandbox_net.UserNetwork`, the
    network of a ``tool_network`` call. A spec with ``network`` and without them shares
    the host's network (only an MCP server the operator configured so)."""
    cmd = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
    ]
    if not spec.network or user_network:
        cmd.append("--unshare-net")
    cmd += _system_binds()
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    cmd += user_network  # after the binds: its resolv.conf covers the host's
    readonly = list(dict.fromkeys(spec.readonly))
    for path in readonly:
        others = [other for other in readonly if other != path]
        # Within a folder already shown, read-only: there is nothing to add (nor room to).
        if not _covered(path) and not _covered(path, others):
            cmd += ["--ro-bind", str(path), str(path)]
    for path in dict.fromkeys(spec.writable):
        cmd += ["--bind", str(path), str(path)]
    if spec.writable_workdir:
        cmd += ["--bind", str(spec.workdir), str(spec.workdir)]
    else:
        cmd += ["--ro-bind", str(spec.workdir), str(spec.workdir)]
        cmd += ["--remount-ro", "/tmp", "--remount-ro", "/"]
    cmd += ["--chdir", str(spec.workdir), "--clearenv"]
    for key, value in spec.env.items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", *argv]


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


async def run_sandboxed(
    argv: Sequence[str],
    *,
    spec: SandboxSpec,
    limits: SandboxLimits,
    timeout_s: float,
    stop: StopSignal,
    output_limit_bytes: int,
    kill_grace_s: float,
) -> ProcessOutcome:
    """Run ``argv`` in the sandbox; the tree is killed and its cgroup removed at the end.

    With ``spec.network``, the sandbox gets a user-mode network (``tools.sandbox_net``)
    or, where slirp4netns is missing, none, and the output starts with a note saying so."""
    bwrap = await require_sandbox()
    slirp4netns = find_slirp4netns() if spec.network else None
    note = ""
    if spec.network and slirp4netns is None:
        # Safe by default: never the host's network, loopback included.
        spec = dataclasses.replace(spec, network=False)
        note = NO_NETWORK_NOTE + "\n"
    cgroup = await anyio.to_thread.run_sync(
        create_call_cgroup, limits.memory_bytes, limits.max_processes
    )
    inner = list(argv)
    if cgroup is None:
        # No cgroup: per-process limits (RLIMIT_NPROC does not bind root; the PID
        # namespace and the time limit still end every process with the call).
        inner = [
            "prlimit",
            f"--as={limits.memory_bytes}",
            f"--nproc={limits.max_processes}",
            "--",
            *inner,
        ]
    network = UserNetwork(slirp4netns) if slirp4netns is not None else None
    try:
        options = network.bwrap_options() if network is not None else []
        command = bwrap_command(bwrap, inner, spec, user_network=options)
        if cgroup is not None:
            # Its /bin/sh passes the network's fds on to bwrap: it closes none it inherits.
            command = join_command(cgroup, command)
        outcome = await run_process_tree(
            command,
            cwd=spec.workdir,
            env={"PATH": SANDBOX_PATH},
            timeout_s=timeout_s,
            stop=stop,
            output_limit_bytes=output_limit_bytes,
            kill_grace_s=kill_grace_s,
            pass_fds=network.pass_fds if network is not None else (),
            started=network.start if network is not None else None,
        )
        return dataclasses.replace(outcome, output=note + outcome.output) if note else outcome
    finally:
        if network is not None:
            network.close()
        if cgroup is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(OSError):
                await anyio.to_thread.run_sync(cgroup.remove)


def sandbox_report(unsandboxed: bool) -> tuple[str, str]:
    """For ``navi doctor`` and the start-up log: ("ok" | "warning" | "error", what)."""
    from tools.cgroups import cgroup_support

    status = sandbox_status()
    if unsandboxed:
        return (
            "warning",
            "NAVI_UNSANDBOXED_TOOLS=1: code_exec and terminal run WITHOUT the sandbox, as "
            "the server's own user (they can read its secrets, database and home folder)",
        )
    if not status.available:
        return (
            "error",
            f"sandbox: {status.reason}; code_exec and terminal refuse to run. {INSTALL_HINT}",
        )
    limits = cgroup_support()
    how = (
        f"memory and process limits per call by cgroup {limits.kind}"
        if limits.available
        else f"no cgroup ({limits.reason}): prlimit per process instead"
    )
    if find_slirp4netns() is None:
        return "warning", f"sandbox: bubblewrap at {status.bwrap}; {how}; {MISSING_NOTE}"
    return "ok", f"sandbox: bubblewrap at {status.bwrap}; {how}"
