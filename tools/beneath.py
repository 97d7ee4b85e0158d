"""Opening a path below a directory without following a symbolic link anywhere on the way.

Checking a path and then opening it leaves a gap: between the two, a folder can be
swapped for a symlink that leads out. Here the check *is* the open. Where the kernel has
``openat2`` (Linux 5.6+), one call resolves the whole path from the root's descriptor
with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``: the kernel refuses any symlink and any
step above the root, atomically. Elsewhere, the path is walked one component at a time
from the root's descriptor, each opened with ``O_NOFOLLOW`` relative to the previous
one, so every step is taken on a directory already held open, never by name from the top.

Paths given here are lists of plain names (no ``..``, no ``.``, no ``/``):
``tools.paths`` makes them.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Sequence
from typing import Any

# <linux/openat2.h>
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every Linux architecture (added after 5.1)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_RETRIES = 100
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _load_openat2() -> Any:
    if not hasattr(os, "O_NOFOLLOW") or os.uname().sysname != "Linux":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    how = _OpenHow(_DIR_FLAGS, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)
    # A probe: seccomp filters (containers) may answer ENOSYS or EPERM to a new syscall.
    fd = _call(syscall, -100, b".", how)  # -100: AT_FDCWD
    if fd < 0:
        return None
    os.close(fd)
    return syscall


def _call(syscall: Any, dir_fd: int, path: bytes, how: _OpenHow) -> int:
    # A variadic C function: every argument passed at its full width (a bare Python int
    # would go as a 32-bit int, leaving the register's upper half undefined).
    result: int = syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_long(dir_fd),
        ctypes.c_char_p(path),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    return result


_openat2 = _load_openat2()


def has_openat2() -> bool:
    return _openat2 is not None


def open_beneath(
    root_fd: int, parts: Sequence[str], flags: int, mode: int = 0o644, *, walk: bool = False
) -> int:
    """A descriptor for ``parts`` below the directory ``root_fd``, opened with ``flags``;
    ``OSError`` (``ELOOP`` for a symlink on the way) if it cannot be reached without
    following a link. ``walk`` forces the component walk (tests use it)."""
    if any(name in ("", ".", "..") or "/" in name for name in parts):
        raise ValueError(f"not plain names: {list(parts)!r}")  # tools.paths never makes them
    flags |= os.O_CLOEXEC | os.O_NOFOLLOW
    if not parts:
        return os.open(".", flags & ~(os.O_CREAT | os.O_TRUNC), dir_fd=root_fd)
    if _openat2 is not None and not walk:
        return _open_with_openat2(root_fd, "/".join(parts), flags, mode)
    fd = os.dup(root_fd)
    try:
        for name in parts[:-1]:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        return os.open(parts[-1], flags, mode, dir_fd=fd)
    finally:
        os.close(fd)


def _open_with_openat2(root_fd: int, path: str, flags: int, mode: int) -> int:
    # The kernel refuses a mode unless a file may be made (O_TMPFILE holds O_DIRECTORY's bit).
    tmpfile = getattr(os, "O_TMPFILE", 0)
    created = flags & os.O_CREAT or (tmpfile and flags & tmpfile == tmpfile)
    how = _OpenHow(
        flags,
        mode if created else 0,
        _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
    )
    for _ in range(_RETRIES):
        fd = _call(_openat2, root_fd, os.fsencode(path), how)
        if fd >= 0:
            return fd
        code = ctypes.get_errno()
        if code == errno.EAGAIN:
            continue  # a rename elsewhere raced the lookup; the kernel asks to try again
        if code == errno.EXDEV:
            code = errno.ELOOP  # "beneath" broken: only a link could have led out
        raise OSError(code, os.strerror(code), path)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)


def open_dir_beneath(root_fd: int, parts: Sequence[str], *, walk: bool = False) -> int:
    return open_beneath(root_fd, parts, os.O_RDONLY | os.O_DIRECTORY, walk=walk)


def make_dirs_beneath(root_fd: int, parts: Sequence[str], *, walk: bool = False) -> int:
    """Make the folders ``parts`` below ``root_fd`` where missing (each made relative to
    its parent's descriptor) and give the last one's descriptor."""
    fd = os.dup(root_fd)
    try:
        for name in parts:
            # An existing folder is fine (a link or file there: the open below refuses it).
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o755, dir_fd=fd)
            child = open_dir_beneath(fd, [name], walk=walk)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd
