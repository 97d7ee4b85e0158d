"""Path allowlisting: a user-given path becomes an allowed root plus plain names below it,
and files are opened from the root's descriptor without following any link
(``tools.beneath``), so what was checked is what is opened.

``..`` is resolved by the names alone (``a/../b`` is ``b``); a path whose names leave
every allowed root is refused before anything is opened. Symbolic links are refused
wherever they are on the way (the kernel checks, at the open); so are files with more
than one hard link, whose other names may be outside the allowed folders.
With ``FS_ALLOWED_PATHS=*`` (anywhere) links are followed: there is nothing to leave.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from tools.base import ToolError
from tools.beneath import open_beneath
from tools.context import ToolContext

# Percent-encoded dots, slashes and backslashes are never decoded here; a name that holds
# them is almost surely a traversal attempt, so it is refused rather than taken literally.
_ENCODED_TRAVERSAL = re.compile(r"%(2e|2f|5c|25|00)", re.IGNORECASE)


class PathRefused(ToolError):
    """A path outside the allowed roots, or one that cannot be a path at all."""


@dataclass(frozen=True)
class Located:
    """An allowed root (a real path) and the plain names below it; ``()`` is the root."""

    root: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        return self.root.joinpath(*self.parts)

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""

    @property
    def parent(self) -> Located:
        return Located(self.root, self.parts[:-1])


class PathGuard:
    """Resolves user-given paths against ``base`` and keeps them inside ``roots``.

    ``roots`` None means no limit (``FS_ALLOWED_PATHS=*``).
    """

    def __init__(self, base: Path, roots: Sequence[Path] | None) -> None:
        self.base = Path(os.path.realpath(base))
        self.roots = None if roots is None else tuple(Path(os.path.realpath(r)) for r in roots)
        # A root as configured and as it really is (/tmp/x and /private/tmp/x): a path
        # may name it either way. Longest first, so the closest root is taken.
        aliases: list[tuple[Path, Path]] = []
        for given, real in zip(
            [base, *(roots or ())], [self.base, *(self.roots or ())], strict=True
        ):
            aliases += [(Path(os.path.abspath(given)), real), (real, real)]
        self._aliases = sorted(set(aliases), key=lambda pair: len(pair[0].parts), reverse=True)

    @classmethod
    def for_context(cls, ctx: ToolContext) -> PathGuard:
        allowed = ctx.settings.fs_allowed_paths
        if allowed is not None and "*" in allowed:
            return cls(ctx.files_dir, None)
        roots = [ctx.files_dir, *(Path(p).expanduser() for p in allowed or ())]
        return cls(ctx.files_dir, roots)

    def describe_roots(self) -> str:
        if self.roots is None:
            return "anywhere"
        return ", ".join(str(r) for r in self.roots)

    def resolve(self, raw: str) -> Located:
        """Where ``raw`` is, as a root and names, or :class:`PathRefused` saying why it is
        not allowed. Nothing is opened or followed here."""
        if not raw or not raw.strip():
            raise PathRefused("path is empty")
        if "\x00" in raw:
            raise PathRefused("path contains a NUL byte")
        if _ENCODED_TRAVERSAL.search(raw):
            raise PathRefused(
                f"path {raw!r} contains percent-encoded characters; paths are not URL-decoded, "
                "use the plain path"
            )
        candidate = Path(raw).expanduser()
        if not candidate.is_absolute():
            candidate = self.base / candidate
        normal = Path(os.path.normpath(candidate))
        if self.roots is None:
            # Anywhere: links may be followed, so the real path is opened (from "/").
            real = Path(os.path.realpath(normal))
            return Located(Path("/"), real.parts[1:])
        for alias, root in self._aliases:
            if normal.is_relative_to(alias):
                return Located(root, normal.relative_to(alias).parts)
        raise PathRefused(
            f"access denied: {raw!r} resolves to {normal}, outside the allowed "
            f"paths ({self.describe_roots()})"
        )

    def is_root(self, located: Located) -> bool:
        return not located.parts or (self.roots is not None and located.path in self.roots)

    def display(self, located: Located) -> str:
        """A path as the LLM should see it: relative to the session's files when inside."""
        path = located.path
        try:
            relative = path.relative_to(self.base)
        except ValueError:
            return str(path)
        return str(relative) if str(relative) != "." else "."

    @contextlib.contextmanager
    def root_fd(self, located: Located) -> Iterator[int]:
        """The root's directory, held open for the walk below it."""
        try:
            fd = os.open(located.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise self.explain(exc, located) from None
        try:
            yield fd
        finally:
            os.close(fd)

    def explain(
        self, exc: OSError, located: Located, missing: str = "no such file or directory"
    ) -> ToolError:
        """What an ``OSError`` of an open below a root means, for the LLM."""
        shown = self.display(located)
        if exc.errno == errno.ELOOP or (
            exc.errno == errno.ENOTDIR and self._link_on_the_way(located)
        ):
            return PathRefused(
                f"access denied: {shown} is or goes through a symbolic link; the "
                "filesystem tool does not follow links"
            )
        if exc.errno == errno.ENOENT:
            return ToolError(f"{missing}: {shown}")
        if exc.errno == errno.ENOTDIR:
            return ToolError(f"{shown}: a folder on the way is a file")
        if exc.errno == errno.EISDIR:
            return ToolError(f"{shown} is a directory")
        if exc.errno in (errno.EACCES, errno.EPERM):
            return ToolError(f"permission denied: {shown}")
        return ToolError(f"{shown}: {exc.strerror or exc}")

    def refuse_hard_links(self, status: os.stat_result, located: Located) -> None:
        """A file with other names may have one outside the allowed paths: writing to it
        would change that file too (with no limit, there is no outside)."""
        if self.roots is not None and status.st_nlink > 1:
            raise PathRefused(
                f"access denied: {self.display(located)} has {status.st_nlink} hard links; "
                "its other names may be outside the allowed paths, so the filesystem tool "
                "does not use it"
            )

    def _link_on_the_way(self, located: Located) -> bool:
        """Whether a name of ``located`` is a symlink now (for a message only)."""
        path = located.root
        for name in located.parts:
            path = path / name
            if path.is_symlink():
                return True
        return False


@contextlib.contextmanager
def open_regular_file(guard: PathGuard, located: Located) -> Iterator[tuple[BinaryIO, int]]:
    """A regular file below a root, open for reading, and its size; refused if it is a
    link, a directory, a device or pipe, or has more than one hard link."""
    shown = guard.display(located)
    with guard.root_fd(located) as root:
        try:
            fd = open_beneath(root, located.parts, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise guard.explain(exc, located, "no such file") from None
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise ToolError(f"{shown} is a directory; use action 'list'")
        if not stat.S_ISREG(status.st_mode):
            raise ToolError(f"{shown} is not a regular file")
        guard.refuse_hard_links(status, located)
        yield handle, status.st_size


def read_regular_file(guard: PathGuard, located: Located, max_bytes: int) -> tuple[bytes, int]:
    """Up to ``max_bytes`` of a regular file below a root (:func:`open_regular_file`),
    and its size."""
    with open_regular_file(guard, located) as (handle, size):
        return handle.read(max_bytes), size
