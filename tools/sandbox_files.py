"""The folders a sandboxed call writes: handed to the sandbox user, and measured.

**Handing over** (Navi as root only, see ``tools.sandbox_user``): the sandboxed code runs
as an unprivileged user, so Navi's own folders it may write (its working directory, the
session's files: ``SandboxSpec.owned``) and what the server put in them (uploads, files
the ``filesystem`` tool wrote) are given to that user before each call: without it, the
code could not write there, nor read an upload made private by the server's umask.
Anyone else's folder (an operator's, ``SandboxSpec.writable``) is never given away: one
ACL entry lets that user write in it (:func:`grant_write`), and what is in it stays as
it is. What a hostile call could do with files it owns, and why it stays harmless:

- the walk never follows a symbolic link (``fwalk`` without following, ``lchown``), and
  gives away only folders and regular files of the server's own uid: a link the code
  left behind is not a way to another file;
- a regular file with more than one name (``st_nlink > 1``) is left alone: another name
  could be outside the folder (the code itself cannot make such a link: nothing outside
  its folders is mounted, and links never cross mounts);
- set-uid and set-gid bits it sets are worth nothing: they would give the sandbox user,
  every mount of the sandbox is ``nosuid`` and its processes run with ``no_new_privs``;
- the server, as root, reads, replaces and deletes the user's files whatever their mode.

**Measuring** (:func:`folder_usage`): the bytes on disk of what lies in the folders,
each inode once, every entry at least one block (4 KiB): a flood of empty files costs
too. ``tools.sandbox`` polls it while a call runs and ends the call once it grew by more
than the call's write limit (see ``WriteWatch`` there).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
from collections.abc import Iterable
from pathlib import Path

import anyio
import anyio.to_thread

from tools.sandbox_user import SandboxUser

MIN_ENTRY_BYTES = 4096
POLL_INTERVAL_S = 0.05


def hand_over(folders: Iterable[Path], user: SandboxUser) -> None:
    """Give ``folders`` and the server-owned folders and single-named regular files in
    them to ``user`` (see the module docstring), never through a link."""
    server_uid = os.geteuid()
    for folder in dict.fromkeys(folders):
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # a file, or missing: bwrap says so when it mounts it
        try:
            if os.fstat(fd).st_uid == server_uid:
                os.fchown(fd, user.uid, user.gid)
        finally:
            os.close(fd)
        for _, dirs, files, dir_fd in os.fwalk(folder, follow_symlinks=False):
            for name in (*dirs, *files):
                _give(name, dir_fd, server_uid, user)


def _give(name: str, dir_fd: int, server_uid: int, user: SandboxUser) -> None:
    with contextlib.suppress(OSError):  # gone meanwhile: nothing to give
        info = os.lstat(name, dir_fd=dir_fd)
        if info.st_uid != server_uid:
            return
        if stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode) and info.st_nlink == 1):
            os.chown(name, user.uid, user.gid, dir_fd=dir_fd, follow_symlinks=False)


def _unlock(path: str) -> bool:
    """Give the owner (the server: a non-root server's sandbox is its own user) read and
    search rights on the folder ``path``, through an ``O_PATH`` descriptor that did not
    follow a link."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        os.chmod(f"/proc/self/fd/{fd}", mode | stat.S_IRWXU)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


_ACL = "system.posix_acl_access"
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NO_ID = 0xFFFFFFFF


def _acl(path: str, mode: int) -> list[tuple[int, int, int]]:
    """The entries (tag, permissions, id) of ``path``'s access ACL, or of its mode."""
    try:
        raw = os.getxattr(path, _ACL)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
            raise
        raw = b""
    if len(raw) > 4:
        return [(tag, perm, uid) for tag, perm, uid in struct.iter_unpack("<HHI", raw[4:])]
    return [
        (_USER_OBJ, (mode >> 6) & 7, _NO_ID),
        (_GROUP_OBJ, (mode >> 3) & 7, _NO_ID),
        (_OTHER, mode & 7, _NO_ID),
    ]


def _may_read(info: os.stat_result, entries: list[tuple[int, int, int]], user: SandboxUser) -> int:
    """The permission bits ``user`` has, as far as the sandbox needs to know."""
    if info.st_uid == user.uid:
        return (info.st_mode >> 6) & 7
    named = [perm for tag, perm, uid in entries if tag == _USER and uid == user.uid]
    mask = next((perm for tag, perm, _ in entries if tag == _MASK), 7)
    if named:
        return named[0] & mask
    if info.st_gid == user.gid:
        return (info.st_mode >> 3) & 7
    return info.st_mode & 7


def grant_read(paths: Iterable[Path], user: SandboxUser) -> None:
    """Let ``user`` read each of ``paths`` (a folder: list and enter it) where its mode
    does not (a private temporary folder the server shows read-only, e.g. the one
    ``write_tool`` checks a new tool in): see :func:`_grant`."""
    for path in dict.fromkeys(os.path.realpath(p) for p in paths):
        _grant(path, user, write=False)


def grant_write(paths: Iterable[Path], user: SandboxUser) -> None:
    """Let ``user`` write in each of ``paths`` (a folder: make, rename and delete what is
    in it) where its mode does not: an operator's folder a sandbox writes, whose content
    stays as it is (see :func:`_grant`)."""
    for path in dict.fromkeys(os.path.realpath(p) for p in paths):
        _grant(path, user, write=True)


def _grant(path: str, user: SandboxUser, *, write: bool) -> None:
    """An ACL entry for ``user`` on ``path`` itself, never on what it holds, nothing
    else changed. Raises ``OSError`` where the file system takes no ACL."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return  # bwrap says so when it mounts it
    needed = (5 if stat.S_ISDIR(info.st_mode) else 4) | (2 if write else 0)
    entries = _acl(path, info.st_mode)
    if _may_read(info, entries, user) & needed == needed:
        return
    # The mask bounds every named entry: widened by the new one only, never more for
    # the others than they had (without an ACL, the group's bits stand in).
    old_mask = next((perm for tag, perm, _ in entries if tag == _MASK), None)
    mask = needed | ((info.st_mode >> 3) & 7 if old_mask is None else old_mask)
    kept = [e for e in entries if e[0] != _MASK and not (e[0] == _USER and e[2] == user.uid)]
    kept += [(_USER, needed, user.uid), (_MASK, mask, _NO_ID)]
    kept.sort(key=lambda e: (e[0], e[2]))
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in kept)
    os.setxattr(path, _ACL, raw)


def folder_usage(folders: Iterable[Path]) -> int:
    """Bytes on disk under ``folders`` (each inode once, each entry at least 4 KiB);
    links are counted as entries, never followed."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [os.fspath(folder) for folder in dict.fromkeys(folders)]
    while stack:
        path = stack.pop()
        try:
            entries = os.scandir(path)
        except PermissionError:
            # A folder the code made unreadable (chmod 000) would hide what is in it from
            # a server that is not root: read it once the owner's rights are back.
            if not _unlock(path):
                continue
            try:
                entries = os.scandir(path)
            except OSError:
                continue
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                key = (info.st_dev, info.st_ino)
                if key in seen:
                    continue
                seen.add(key)
                total += max(info.st_blocks * 512, MIN_ENTRY_BYTES)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
    return total


class WriteWatch:
    """Polls what the call's folders hold while it runs, as a stop signal: it fires
    once they grew by more than ``limit_bytes`` since :meth:`baseline`. A poll costs a
    walk of the folders: the next one waits at least ten times as long as the last
    walk took. :meth:`wait` polls only while someone waits (the process runs)."""

    def __init__(self, folders: Iterable[Path], limit_bytes: int) -> None:
        self.folders = tuple(folders)
        self.limit_bytes = limit_bytes
        self.start_bytes = 0
        self.grown_bytes = 0
        self._exceeded = False

    async def baseline(self) -> None:
        self.start_bytes = await anyio.to_thread.run_sync(folder_usage, self.folders)

    def is_set(self) -> bool:
        return self._exceeded

    async def wait(self) -> None:
        while not self._exceeded:
            began = anyio.current_time()
            # Abandoned when the call ends: its end (and a Stop) never waits for a walk.
            used = await anyio.to_thread.run_sync(
                folder_usage, self.folders, abandon_on_cancel=True
            )
            self.grown_bytes = used - self.start_bytes
            if self.grown_bytes > self.limit_bytes:
                self._exceeded = True
                return
            took = anyio.current_time() - began
            await anyio.sleep(max(POLL_INTERVAL_S, 10 * took))

    def message(self) -> str:
        mb = 1024 * 1024
        return (
            f"the call wrote more than its limit of {self.limit_bytes / mb:.0f} MB into "
            f"its folders (the session's files and its working directory grew by "
            f"{self.grown_bytes / mb:.0f} MB) and was stopped; what it wrote is still "
            "there: delete what is not needed before writing more"
        )
