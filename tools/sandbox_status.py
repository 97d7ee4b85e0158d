"""Whether the sandbox can run here, and what ``navi doctor`` and the start-up log say
of it: probed once per process, as calls will run (bwrap, and as root the sandbox user,
``setpriv``, ``unshare`` and a user namespace), so that a sandbox that cannot be made is
refused with the reason and the fix, never replaced by a weaker one."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from tools.sandbox_command import SANDBOX_PATH, SandboxSpec, SandboxUnavailable, build_command
from tools.sandbox_net import MISSING_NOTE, find_slirp4netns
from tools.sandbox_user import PrivilegeDrop, SandboxUserError, resolve_sandbox_user

INSTALL_HINT = (
    "Install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: "
    "`dnf install bubblewrap`) and make sure it may create namespaces; or, knowing that "
    "the tool then runs with the server's own rights, set NAVI_UNSANDBOXED_TOOLS=1."
)
USERNS_HINT = (
    "user namespaces must be allowed: `sysctl user.max_user_namespaces` above 0; on "
    "Ubuntu 23.10+ `sysctl kernel.apparmor_restrict_unprivileged_userns=0` (or an "
    "AppArmor profile that lets bwrap and unshare make them); in a container, a seccomp "
    "profile that allows unshare/clone of user namespaces"
)


@dataclass(frozen=True)
class SandboxStatus:
    available: bool
    bwrap: str | None
    reason: str = ""
    # Navi as root: how the sandboxed code becomes an unprivileged user (None otherwise).
    drop: PrivilegeDrop | None = None


def _failure(done: subprocess.CompletedProcess[bytes]) -> str:
    detail = done.stderr.decode(errors="replace").strip() or f"exit code {done.returncode}"
    if "unshare" in detail or "namespace" in detail:
        return f"the kernel refuses the sandbox's namespaces ({detail}); {USERNS_HINT}"
    return f"bubblewrap cannot make the sandbox here: {detail}"


def _probe(bwrap: str, drop: PrivilegeDrop | None) -> str:
    """ "" when a sandbox, as calls get it, runs ``true``; else why not."""
    with tempfile.TemporaryDirectory(prefix="navi-sandbox-probe-") as workdir:
        spec = SandboxSpec(workdir=Path(workdir), env={"PATH": SANDBOX_PATH, "HOME": workdir})
        argv = build_command(bwrap, ["true"], spec, drop=drop)
        try:
            done = subprocess.run(
                argv,
                cwd=workdir,
                env={"PATH": SANDBOX_PATH},
                capture_output=True,
                timeout=15,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap does not run: {exc}"
    return _failure(done) if done.returncode != 0 else ""


def _util_linux(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=SANDBOX_PATH)


_user_setting: str | None = None


def use_sandbox_user(setting: str) -> None:
    """Navi's ``NAVI_SANDBOX_USER`` (from its settings, ``.env`` included) for the next
    probe; without it the process's environment is read."""
    global _user_setting
    if setting != _user_setting:
        _user_setting = setting
        sandbox_status.cache_clear()


@functools.cache
def sandbox_status() -> SandboxStatus:
    """Whether the sandbox works on this machine (probed once per process). As root,
    this finds (or makes) the sandbox user first."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return SandboxStatus(False, None, "bubblewrap (bwrap) is not installed")
    drop = None
    if os.geteuid() == 0:
        setpriv, unshare = _util_linux("setpriv"), _util_linux("unshare")
        if setpriv is None or unshare is None:
            return SandboxStatus(
                False,
                bwrap,
                "Navi runs as root, and runs tool code as another user with setpriv and "
                "unshare, which are missing: install util-linux",
            )
        env = None if _user_setting is None else {"NAVI_SANDBOX_USER": _user_setting}
        try:
            user = resolve_sandbox_user(env)
        except SandboxUserError as exc:
            return SandboxStatus(False, bwrap, str(exc))
        assert user is not None  # root
        drop = PrivilegeDrop(user=user, setpriv=setpriv, unshare=unshare)
    reason = _probe(bwrap, drop)
    return SandboxStatus(not reason, bwrap, reason, drop)


async def require_sandbox() -> str:
    """The bwrap executable, or :class:`SandboxUnavailable` saying how to get one."""
    status = await anyio.to_thread.run_sync(sandbox_status)
    if not status.available or status.bwrap is None:
        raise SandboxUnavailable(
            f"this tool runs only in a sandbox: {status.reason}. {INSTALL_HINT}"
        )
    return status.bwrap


def _who(status: SandboxStatus) -> str:
    if status.drop is None:
        return f"tool code runs as this user (uid {os.geteuid()}) in a user namespace"
    user = status.drop.user
    made = ", made now" if user.created else ""
    return (
        f"Navi runs as root: tool code runs as {user.describe()}{made}, in a user "
        "namespace, without capabilities"
    )


def sandbox_report(unsandboxed: bool, sandbox_user: str | None = None) -> tuple[str, str]:
    """For ``navi doctor`` and the start-up log: ("ok" | "warning" | "error", what).

    ``sandbox_user``: the ``NAVI_SANDBOX_USER`` setting (see :func:`use_sandbox_user`)."""
    from tools.cgroups import cgroup_support

    if sandbox_user is not None:
        use_sandbox_user(sandbox_user)
    if unsandboxed:
        return (
            "warning",
            "NAVI_UNSANDBOXED_TOOLS=1: code_exec and terminal run WITHOUT the sandbox, as "
            "the server's own user (they can read its secrets, database and home folder)",
        )
    status = sandbox_status()
    if not status.available:
        return (
            "error",
            f"sandbox: {status.reason}; code_exec and terminal refuse to run. {INSTALL_HINT}",
        )
    limits = cgroup_support()
    how = (
        f"memory and process limits per call by cgroup {limits.kind}, and for all "
        "sandboxes together by their parent cgroup"
        if limits.available
        else f"no cgroup ({limits.reason}): prlimit per process instead"
    )
    text = f"sandbox: bubblewrap at {status.bwrap}; {_who(status)}; {how}"
    if find_slirp4netns() is None:
        return "warning", f"{text}; {MISSING_NOTE}"
    return "ok", text
