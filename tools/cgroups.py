"""Limits on a whole sandboxed process tree: a cgroup per call when Navi may make one.

A per-process ``RLIMIT_AS`` lets three children of 300 MB each live under a 512 MB
limit, and ``RLIMIT_NPROC`` does nothing for root; a cgroup counts the whole tree.
Navi tries, once per process, in this order:

- **cgroup v2** (``/sys/fs/cgroup`` is the unified hierarchy with the ``memory`` and
  ``pids`` controllers): calls get ``<own cgroup>/navi-tools/call-<id>``. A non-root
  cgroup that holds processes cannot hand controllers down, so the server first moves
  itself into ``<own cgroup>/navi-server`` (what systemd's ``Delegate=yes`` expects);
- **cgroup v1** (separate ``memory`` and ``pids`` hierarchies, as in many containers):
  ``<own cgroup>/navi-tools/call-<id>`` in each;
- otherwise none: the caller falls back to ``prlimit`` per process plus the PID
  namespace (see docs/tools.md).

``navi-tools`` is the parent of every call's cgroup: its memory limit is the ceiling of
all sandboxes together (``NAVI_SANDBOXES_MEMORY_MB``, :func:`set_ceiling`).

A call's process joins its cgroup before it runs anything (see :func:`join_command`),
so no child can be forked outside it. At the end every process left in it is killed
and the cgroup is removed.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class CgroupSupport:
    """How per-call cgroups are made here: ``kind`` is "v2", "v1" or "none"."""

    kind: str
    # v2: the parent of the call cgroups; v1: {"memory": dir, "pids": dir}.
    parents: tuple[tuple[str, Path], ...] = ()
    reason: str = ""

    @property
    def available(self) -> bool:
        return self.kind != "none"

    @property
    def ceiling_file(self) -> Path | None:
        """The memory limit of the parent of every call's cgroup: all sandboxes together."""
        for controller, parent in self.parents:
            if self.kind == "v2":
                return parent / "memory.max"
            if controller == "memory":
                return parent / "memory.limit_in_bytes"
        return None


@dataclass
class CallCgroup:
    """The cgroup(s) of one call: their ``cgroup.procs`` files and how to end them."""

    kind: str
    dirs: tuple[Path, ...]

    @property
    def procs_files(self) -> tuple[Path, ...]:
        return tuple(d / "cgroup.procs" for d in self.dirs)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.procs_files:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in path.read_text().split())
        return found

    def kill_all(self) -> None:
        """SIGKILL every process still in the cgroup, until none is left (or 2 s pass)."""
        if self.kind == "v2":
            with contextlib.suppress(OSError):
                (self.dirs[0] / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + 2.0
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for directory in self.dirs:
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # the last killed process is still being reaped


def _own_paths() -> dict[str, str]:
    """The server's own cgroup path per hierarchy: "" for v2, controller names for v1."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _inside(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _controllers(directory: Path, file: str) -> set[str]:
    try:
        return set((directory / file).read_text().split())
    except OSError:
        return set()


def _enable(directory: Path, needed: set[str]) -> None:
    missing = needed - _controllers(directory, "cgroup.subtree_control")
    if missing:
        (directory / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))


def _detect_v2(own: dict[str, str]) -> CgroupSupport:
    needed = {"memory", "pids"}
    if "" not in own or not needed <= _controllers(CGROUP_ROOT, "cgroup.controllers"):
        raise OSError("no cgroup v2 hierarchy with the memory and pids controllers")
    base = _inside(CGROUP_ROOT, own[""])
    if not needed <= _controllers(base, "cgroup.controllers"):
        raise OSError(f"the memory and pids controllers are not delegated to {base}")
    try:
        _enable(base, needed)
    except OSError:
        # "No internal processes": the server leaves for a leaf of its own first.
        server = base / "navi-server"
        server.mkdir(exist_ok=True)
        (server / "cgroup.procs").write_text(str(os.getpid()))
        _enable(base, needed)
    tools = base / "navi-tools"
    tools.mkdir(exist_ok=True)
    _enable(tools, needed)
    return CgroupSupport(kind="v2", parents=(("", tools),))


def _detect_v1(own: dict[str, str]) -> CgroupSupport:
    parents = []
    for controller in ("memory", "pids"):
        root = CGROUP_ROOT / controller
        if controller not in own or not (root / "cgroup.procs").exists():
            raise OSError(f"no cgroup v1 {controller} hierarchy")
        tools = _inside(root, own[controller]) / "navi-tools"
        tools.mkdir(exist_ok=True)
        if controller == "memory":
            # Children count in the parent's limit (always so since Linux 5.16).
            with contextlib.suppress(OSError):
                (tools / "memory.use_hierarchy").write_text("1")
        parents.append((controller, tools))
    return CgroupSupport(kind="v1", parents=tuple(parents))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_leftovers(support: CgroupSupport) -> None:
    """Empty call cgroups of servers that died mid-call (``call-<server pid>-<id>``)."""
    for _, parent in support.parents:
        for directory in parent.glob("call-*-*"):
            owner = directory.name.split("-")[1]
            if owner.isdigit() and not _alive(int(owner)):
                with contextlib.suppress(OSError):  # not empty: left alone
                    directory.rmdir()


@functools.cache
def cgroup_support() -> CgroupSupport:
    """Checked once per process: whether (and how) per-call cgroups can be made."""
    own = _own_paths()
    reasons = []
    for detect in (_detect_v2, _detect_v1):
        try:
            support = detect(own)
        except OSError as exc:
            reasons.append(str(exc))
            continue
        log.info("tool_limits_cgroup", kind=support.kind)
        _remove_leftovers(support)
        return support
    return CgroupSupport(kind="none", reason="; ".join(reasons))


def machine_memory_bytes() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


_ceilings: dict[Path, int] = {}


def set_ceiling(support: CgroupSupport, total_bytes: int) -> None:
    """The memory limit of all sandboxes together, on their parent cgroup (written when
    it changes; a limit below what they use now is refused by the kernel and logged)."""
    target = support.ceiling_file
    if target is None or _ceilings.get(target) == total_bytes:
        return
    # No swap beyond it where swap is accounted: v1 counts memory+swap against the same
    # figure (never below the memory limit: written before a raise and after a cut),
    # v2 gives none.
    memsw = target.parent / "memory.memsw.limit_in_bytes"
    if support.kind == "v1":
        with contextlib.suppress(OSError):
            memsw.write_text(str(total_bytes))
    try:
        target.write_text(str(total_bytes))
    except OSError as exc:
        log.warning("tool_limits_ceiling_failed", error=str(exc), bytes=total_bytes)
        return
    with contextlib.suppress(OSError):
        if support.kind == "v2":
            (target.parent / "memory.swap.max").write_text("0")
        else:
            memsw.write_text(str(total_bytes))
    _ceilings[target] = total_bytes


def create_call_cgroup(
    memory_bytes: int, max_processes: int, total_memory_bytes: int | None = None
) -> CallCgroup | None:
    """A fresh cgroup (v2) or pair (v1) with the limits set; None where none can be made.

    ``total_memory_bytes``: the ceiling of all calls together, set on their parent."""
    support = cgroup_support()
    if not support.available:
        return None
    if total_memory_bytes is not None:
        set_ceiling(support, total_memory_bytes)
    name = f"call-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    made: list[Path] = []
    try:
        for controller, parent in support.parents:
            directory = parent / name
            directory.mkdir()
            made.append(directory)
            if support.kind == "v2":
                (directory / "memory.max").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):  # no swap accounting: nothing to limit
                    (directory / "memory.swap.max").write_text("0")
                (directory / "pids.max").write_text(str(max_processes))
            elif controller == "memory":
                (directory / "memory.limit_in_bytes").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):  # memory+swap, where swap is accounted
                    (directory / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
                with contextlib.suppress(OSError):  # where it is not: 0 forbids swapping
                    (directory / "memory.swappiness").write_text("0")  # at the limit
            else:
                (directory / "pids.max").write_text(str(max_processes))
    except OSError as exc:
        log.warning("tool_limits_cgroup_failed", error=str(exc))
        CallCgroup(kind=support.kind, dirs=tuple(made)).remove()
        return None
    return CallCgroup(kind=support.kind, dirs=tuple(made))


# Joins the cgroups named by the first N arguments, then becomes the command.
_JOIN_SCRIPT = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; '
    'n=$((n - 1)); done; exec "$@"'
)


def join_command(cgroup: CallCgroup, argv: list[str]) -> list[str]:
    """``argv`` prefixed so that its process enters ``cgroup`` before it starts."""
    files = [str(path) for path in cgroup.procs_files]
    return ["/bin/sh", "-c", _JOIN_SCRIPT, "navi-cgroup", str(len(files)), *files, *argv]
