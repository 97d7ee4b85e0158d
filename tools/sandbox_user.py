"""Who sandboxed code runs as when Navi runs as root: an unprivileged user of the host.

As an ordinary user, bubblewrap makes a user namespace and the sandboxed code is that
user, without capabilities: it cannot write the kernel's knobs (``/proc/sys``). As root
it is not enough to ask bubblewrap for a user namespace: the uid inside maps to uid 0
outside, and uid 0 may still open ``/proc/sys/kernel/core_pattern`` for writing (with it,
code the kernel runs as root on the host). So, as root, the sandbox's own setup (mounts,
namespaces) still runs as root, and the sandboxed program starts as another user of the
host, in a user namespace of its own (see :func:`privilege_drop`):

- ``NAVI_SANDBOX_USER`` names that user: a user name, a uid, or ``uid:gid``;
- unset, it is the system user ``navi-sandbox``, which Navi creates (``useradd
  --system``, no home, no shell, a group of its own) the first time it needs it.

One user for every call, not one per Navi user: what keeps two calls apart is their
namespaces (each sees only its own folders, processes and network); the uid keeps every
call away from the host's root and from the server's files. uid or gid 0 is refused.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SANDBOX_USER = "navi-sandbox"
USER_VARIABLE = "NAVI_SANDBOX_USER"


class SandboxUserError(Exception):
    """The sandbox user cannot be found or made; the message says how to fix that."""


@dataclass(frozen=True)
class SandboxUser:
    uid: int
    gid: int
    name: str = ""
    # True when this process made the system user.
    created: bool = False

    def describe(self) -> str:
        who = f"{self.name} " if self.name else ""
        return f"{who}(uid {self.uid}, gid {self.gid})"


def _checked(user: SandboxUser) -> SandboxUser:
    if user.uid == 0 or user.gid == 0:
        raise SandboxUserError(
            f"{USER_VARIABLE} names {user.describe()}: sandboxed code never runs as root or "
            "with root's group; name an unprivileged user of its own"
        )
    return user


def _numeric(value: str) -> SandboxUser | None:
    uid, _, gid = value.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        return None
    if not gid:
        try:
            entry = pwd.getpwuid(int(uid))
        except KeyError:
            return SandboxUser(uid=int(uid), gid=int(uid))
        return SandboxUser(uid=entry.pw_uid, gid=entry.pw_gid, name=entry.pw_name)
    return SandboxUser(uid=int(uid), gid=int(gid))


def _by_name(name: str) -> SandboxUser | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return SandboxUser(uid=entry.pw_uid, gid=entry.pw_gid, name=entry.pw_name)


def _creation_commands(name: str) -> list[list[str]]:
    nologin = next((p for p in ("/usr/sbin/nologin", "/sbin/nologin") if Path(p).exists()), "")
    shell = nologin or "/bin/false"
    commands = []
    if useradd := shutil.which("useradd", path="/usr/sbin:/sbin:/usr/bin:/bin"):
        commands.append(
            [
                useradd, "--system", "--user-group", "--no-create-home",
                "--home-dir", "/nonexistent", "--shell", shell,
                "--comment", "Navi tool sandbox", name,
            ]
        )  # fmt: skip
    if adduser := shutil.which("adduser", path="/usr/sbin:/sbin:/usr/bin:/bin"):
        # BusyBox (Alpine): -S system user, -D no password, -H no home.
        commands.append([adduser, "-S", "-D", "-H", "-s", shell, name])
    return commands


def create_system_user(name: str) -> SandboxUser:
    """The system user ``name``, made now if missing (several servers starting at once
    may race: the loser finds the winner's user)."""
    problems: list[str] = []
    for attempt in range(5):
        if (found := _by_name(name)) is not None:
            return found
        commands = _creation_commands(name)
        if not commands:
            problems.append("neither useradd nor adduser is installed")
            break
        for argv in commands:
            try:
                done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                problems.append(f"{argv[0]}: {exc}")
                continue
            if done.returncode == 0 and (made := _by_name(name)) is not None:
                return SandboxUser(uid=made.uid, gid=made.gid, name=name, created=True)
            said = done.stderr.decode(errors="replace").strip()
            problems.append(f"{Path(argv[0]).name}: {said or f'exit code {done.returncode}'}")
        time.sleep(0.2 * (attempt + 1))  # /etc/passwd may be locked by another one
    raise SandboxUserError(
        f"the system user {name} for sandboxed code does not exist and could not be made "
        f"({'; '.join(problems[-2:])}); create it (useradd --system --user-group "
        f"--no-create-home --shell /usr/sbin/nologin {name}) or name another unprivileged "
        f"user in {USER_VARIABLE}"
    )


def resolve_sandbox_user(env: Mapping[str, str] | None = None) -> SandboxUser | None:
    """The user sandboxed code runs as; None when Navi does not run as root (the code
    then runs as Navi's own user, in the user namespace bubblewrap makes)."""
    if os.geteuid() != 0:
        return None
    env = os.environ if env is None else env
    wanted = env.get(USER_VARIABLE, "").strip()
    if not wanted:
        return _checked(create_system_user(DEFAULT_SANDBOX_USER))
    found = _numeric(wanted) or _by_name(wanted)
    if found is None:
        raise SandboxUserError(
            f"{USER_VARIABLE}={wanted!r}: no such user; create it (useradd --system "
            f"--user-group --no-create-home {wanted}) or give a uid:gid"
        )
    return _checked(found)


@dataclass(frozen=True)
class PrivilegeDrop:
    """How a sandbox started by root becomes ``user``: ``setpriv`` and ``unshare`` of
    util-linux, run inside the sandbox once bubblewrap has set it up."""

    user: SandboxUser
    setpriv: str
    unshare: str

    def argv(self, workdir: Path) -> list[str]:
        """The argv prefix that turns the process into the user without any capability
        and makes a user namespace owned by that user (the uid inside is the uid
        outside). ``no_new_privs``: no set-uid program or file capability gives anything
        back. It enters ``workdir`` as that user: root without capabilities may not
        enter a folder that only its owner may."""
        return [
            self.setpriv, f"--reuid={self.user.uid}", f"--regid={self.user.gid}",
            "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--nnp", "--",
            self.unshare, "--user", "--map-current-user", f"--wd={workdir}", "--",
        ]  # fmt: skip


# bwrap, as root, keeps only what setpriv needs to switch to the sandbox user; the
# switch itself clears every capability.
ROOT_BWRAP_CAPS: Sequence[str] = ("--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")
