"""Path allowlisting: a path is resolved (``..`` and symlinks) before it is checked."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from tools.base import ToolError
from tools.context import ToolContext

# Percent-encoded dots, slashes and backslashes are never decoded here; a name that holds
# them is almost surely a traversal attempt, so it is refused rather than taken literally.
_ENCODED_TRAVERSAL = re.compile(r"%(2e|2f|5c|25|00)", re.IGNORECASE)


class PathRefused(ToolError):
    """A path outside the allowed roots, or one that cannot be a path at all."""


class PathGuard:
    """Resolves user-given paths against ``base`` and keeps them inside ``roots``.

    ``roots`` None means no limit (``FS_ALLOWED_PATHS=*``).
    """

    def __init__(self, base: Path, roots: Sequence[Path] | None) -> None:
        self.base = Path(os.path.realpath(base))
        self.roots = None if roots is None else tuple(Path(os.path.realpath(r)) for r in roots)

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

    def resolve(self, raw: str) -> Path:
        """The real path ``raw`` names, or :class:`PathRefused` saying why it is not allowed."""
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
        # realpath follows every symlink (dangling ones too) and removes "..".
        resolved = Path(os.path.realpath(candidate))
        if self.roots is not None and not any(resolved.is_relative_to(r) for r in self.roots):
            raise PathRefused(
                f"access denied: {raw!r} resolves to {resolved}, outside the allowed "
                f"paths ({self.describe_roots()})"
            )
        return resolved

    def is_root(self, path: Path) -> bool:
        return self.roots is not None and path in self.roots

    def display(self, path: Path) -> str:
        """A path as the LLM should see it: relative to the session's files when inside."""
        try:
            relative = path.relative_to(self.base)
        except ValueError:
            return str(path)
        return str(relative) if str(relative) != "." else "."
