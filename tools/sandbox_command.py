"""The bubblewrap command line of one sandboxed call (what it shows is listed in
``tools.sandbox``'s docstring); :func:`tools.sandbox.bwrap_command` is the public door.

Run by root, bwrap makes every parent folder of a mount point private to root (mode
0700): the sandbox user could not reach its own working directory. So every such parent
is made first, with mode 0755, by ``--dir``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.base import ToolError
from tools.sandbox_files import grant_read, grant_write, hand_over
from tools.sandbox_user import ROOT_BWRAP_CAPS, PrivilegeDrop

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
DEFAULT_WRITE_LIMIT_BYTES = 1024 * 1024 * 1024

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
# The kernel's knobs in /proc, read-only: bound over themselves from the host's /proc
# (what /proc/sys shows depends on the reader's namespaces, not on the mount).
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "mtrr")
# Hidden: /dev/null over them, on a nodev mount (it opens neither).
_PROC_HIDDEN = ("kcore", "kmsg", "kallsyms", "keys", "timer_list", "sched_debug")


class SandboxUnavailable(ToolError):
    """The sandbox cannot run here; the message says how to fix that."""


@dataclass(frozen=True, kw_only=True)
class SandboxSpec:
    """One sandboxed call: where it works, what else it sees, whether it has a network."""

    workdir: Path
    # Folders the call may write. As root, ``writable`` ones (an operator's) get an ACL
    # entry letting the sandbox user write in them, their content untouched; ``owned``
    # ones (Navi's own: the session's files) are handed to that user with what the
    # server put in them, as a writable working directory is (tools.sandbox_files).
    writable: tuple[Path, ...] = ()
    readonly: tuple[Path, ...] = ()
    network: bool = False
    env: Mapping[str, str]
    # False: nothing at all is writable, the working directory and /tmp included.
    writable_workdir: bool = True
    # How much the writable folders (the working directory too) may grow during the call
    # (``run_sandboxed`` ends it past that; a caller passes the user's remaining quota);
    # also the size of /tmp and /dev/shm. None: DEFAULT_WRITE_LIMIT_BYTES.
    write_limit_bytes: int | None = None
    owned: tuple[Path, ...] = ()

    @property
    def write_limit(self) -> int:
        limit = self.write_limit_bytes
        return DEFAULT_WRITE_LIMIT_BYTES if limit is None else max(limit, 0)

    @property
    def written_folders(self) -> tuple[Path, ...]:
        """The folders the call may write: the watched ones."""
        mine = (self.workdir,) if self.writable_workdir else ()
        return tuple(dict.fromkeys((*mine, *self.owned, *self.writable)))


def _covered(path: Path, by: Iterable[Path | str] = _SYSTEM_DIRS) -> bool:
    """True if one of the folders ``by`` (by default the system folders) shows ``path``."""
    return any(path == Path(d) or Path(d) in path.parents for d in by)


def _system_binds() -> list[str]:
    args: list[str] = []
    for folder in _SYSTEM_DIRS:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            args += ["--ro-bind", folder, folder]
    args += ["--dir", "/etc"]
    for entry in _ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
    args += ["--symlink", "../proc/self/mounts", "/etc/mtab"]
    return args


@functools.cache
def _proc_knobs() -> tuple[str, ...]:
    args: list[str] = []
    for name in _PROC_READ_ONLY:
        args += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    for name in _PROC_HIDDEN:
        if os.path.exists(f"/proc/{name}"):
            args += ["--ro-bind", "/dev/null", f"/proc/{name}"]
    return tuple(args)


def _parents(paths: Iterable[Path]) -> list[str]:
    """``--dir`` for every parent of a mount point that the system folders do not show,
    shallowest first (see the module docstring)."""
    found: set[Path] = set()
    for path in paths:
        found.update(p for p in path.parents if p != Path("/") and not _covered(p))
    args: list[str] = []
    for parent in sorted(found, key=lambda p: (len(p.parts), str(p))):
        args += ["--dir", str(parent)]
    return args


def _open_to(drop: PrivilegeDrop, spec: SandboxSpec) -> None:
    """As root: what the call writes and reads, made reachable for the sandbox user."""
    mine = (spec.workdir,) if spec.writable_workdir else ()
    hand_over((*mine, *spec.owned), drop.user)
    shown = spec.readonly if spec.writable_workdir else (*spec.readonly, spec.workdir)
    try:
        grant_write(spec.writable, drop.user)
        grant_read(shown, drop.user)
    except OSError as exc:
        raise SandboxUnavailable(
            f"the sandbox runs as {drop.user.describe()}, which may not use "
            f"{exc.filename or 'a folder it is shown'}, and no ACL could let it "
            f"({exc.strerror}): make that readable (or writable) by it (chmod, setfacl)"
        ) from None


def build_command(
    bwrap: str,
    argv: Sequence[str],
    spec: SandboxSpec,
    *,
    user_network: Sequence[str] = (),
    drop: PrivilegeDrop | None = None,
    tmp_bytes: int | None = None,
) -> list[str]:
    """The whole command line. With ``drop`` (Navi as root) Navi's own folders the call
    writes are handed to the sandbox user first, and the others it writes or reads are
    opened to it by an ACL entry where their mode does not (``tools.sandbox_files``).

    ``tmp_bytes``: the size of /tmp and /dev/shm (memory), by default the write limit."""
    if drop is not None:
        _open_to(drop, spec)
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
    # As root bwrap makes no user namespace: the sandbox user's unshare makes it.
    cmd += ROOT_BWRAP_CAPS if drop is not None else ["--unshare-user"]
    if not spec.network or user_network:
        cmd.append("--unshare-net")
    cmd += _system_binds()
    cmd += ["--proc", "/proc", *_proc_knobs(), "--dev", "/dev"]
    size = str(max(min(spec.write_limit, tmp_bytes or spec.write_limit), 1024 * 1024))
    cmd += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp"]
    cmd += ["--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
    cmd += user_network  # after the binds: its resolv.conf covers the host's
    readonly = list(dict.fromkeys(spec.readonly))
    shown = [path for path in readonly if not _covered(path)]
    if drop is not None:
        shown += [Path(drop.setpriv), Path(drop.unshare)]  # shown where they live
    cmd += _parents([*shown, *spec.owned, *spec.writable, spec.workdir])
    for path in dict.fromkeys(shown):
        others = [other for other in shown if other != path]
        # Within a folder already shown, read-only: there is nothing to add (nor room to).
        if not _covered(path) and not _covered(path, others):
            cmd += ["--ro-bind", str(path), str(path)]
    for path in dict.fromkeys((*spec.owned, *spec.writable)):
        cmd += ["--bind", str(path), str(path)]
    if spec.writable_workdir:
        cmd += ["--bind", str(spec.workdir), str(spec.workdir)]
    else:
        cmd += ["--ro-bind", str(spec.workdir), str(spec.workdir)]
        cmd += ["--remount-ro", "/tmp", "--remount-ro", "/dev/shm", "--remount-ro", "/"]
    # As root, the sandbox user enters the folder itself (PrivilegeDrop.argv).
    cmd += ["--chdir", "/" if drop is not None else str(spec.workdir), "--clearenv"]
    for key, value in spec.env.items():
        cmd += ["--setenv", key, value]
    prefix = drop.argv(spec.workdir) if drop is not None else []
    return [*cmd, "--", *prefix, *argv]
