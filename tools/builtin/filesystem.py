"""``filesystem``: read / write / list / mkdir / delete inside the allowed paths."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tools.base import Tool, ToolError, ToolResult, cap_output, ok, truncation_marker
from tools.context import ToolContext
from tools.paths import PathGuard, PathRefused

_LIST_LIMIT = 500


class FilesystemTool(Tool):
    name = "filesystem"
    description = (
        "Work with files: read a text file, write (or append to) a file, list a directory, "
        "make a directory, delete a file or directory. Relative paths are in the session's "
        "files directory (where uploaded files are); access outside the allowed paths is "
        "refused."
    )
    parameters = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["read", "write", "list", "mkdir", "delete"]},
            "path": {
                "type": "string",
                "description": "File or directory path; default '.' for list.",
            },
            "content": {"type": "string", "description": "Text to write (action write)."},
            "append": {
                "type": "boolean",
                "description": "write: add to the end instead of replacing (default false).",
            },
            "recursive": {
                "type": "boolean",
                "description": "delete: also delete a non-empty directory (default false).",
            },
        },
        "required": ["action"],
        "additionalProperties": False,
    }
    timeout_s = 30.0

    def is_idempotent(self, args: dict[str, Any]) -> bool:
        return args.get("action") in ("read", "list")

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        guard = PathGuard.for_context(ctx)
        action = args["action"]
        raw = args.get("path")
        if raw is None:
            if action != "list":
                raise ToolError(f"action '{action}' needs a 'path'")
            raw = "."
        path = guard.resolve(raw)
        shown = guard.display(path)
        limit = ctx.settings.output_max_chars
        if action == "read":
            return ok(cap_output(_read_text(path, shown, limit * 4), limit))
        if action == "list":
            if path == guard.base and not path.exists():
                return ok(f"{shown}: empty directory")  # nothing uploaded or written yet
            return ok(_list_dir(path, shown))
        if action == "mkdir":
            if path.exists() and not path.is_dir():
                raise ToolError(f"{shown} exists and is not a directory")
            path.mkdir(parents=True, exist_ok=True)
            return ok(f"Directory ready: {shown}")
        if action == "write":
            return ok(_write(path, shown, args))
        return ok(_delete(guard, path, shown, bool(args.get("recursive"))))


def _read_text(path: Path, shown: str, max_bytes: int) -> str:
    if not path.exists():
        raise ToolError(f"no such file: {shown}")
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; use action 'list'")
    size = path.stat().st_size
    with path.open("rb") as handle:
        data = handle.read(max_bytes)
    if b"\x00" in data[:8192]:
        raise ToolError(
            f"{shown} is a binary file ({size} bytes); images can be viewed with image_view"
        )
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text += truncation_marker(size - len(data), "bytes")
    return text


def _list_dir(path: Path, shown: str) -> str:
    if not path.exists():
        raise ToolError(f"no such directory: {shown}")
    if not path.is_dir():
        raise ToolError(f"{shown} is a file; use action 'read'")
    entries = sorted(path.iterdir(), key=lambda p: (not p.is_dir(), p.name))
    if not entries:
        return f"{shown}: empty directory"
    lines = [f"{shown}:"]
    for entry in entries[:_LIST_LIMIT]:
        if entry.is_symlink():
            lines.append(f"  {entry.name} -> (symlink)")
        elif entry.is_dir():
            lines.append(f"  {entry.name}/")
        else:
            lines.append(f"  {entry.name}  ({entry.stat().st_size} bytes)")
    if len(entries) > _LIST_LIMIT:
        lines.append(f"  [... {len(entries) - _LIST_LIMIT} more entries]")
    return "\n".join(lines)


def _write(path: Path, shown: str, args: dict[str, Any]) -> str:
    content = args.get("content")
    if content is None:
        raise ToolError("action 'write' needs 'content'")
    if path.is_dir():
        raise ToolError(f"{shown} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "a" if args.get("append") else "w"
    with path.open(mode, encoding="utf-8") as handle:
        handle.write(content)
    verb = "Appended" if mode == "a" else "Wrote"
    return f"{verb} {len(content)} characters to {shown}"


def _delete(guard: PathGuard, path: Path, shown: str, recursive: bool) -> str:
    if guard.is_root(path) or path == guard.base:
        raise PathRefused(f"refusing to delete {shown}: it is an allowed root directory")
    if not path.exists() and not path.is_symlink():
        raise ToolError(f"no such file or directory: {shown}")
    if path.is_dir():
        if any(path.iterdir()):
            if not recursive:
                raise ToolError(f"{shown} is not empty; pass recursive=true to delete it all")
            shutil.rmtree(path)
        else:
            path.rmdir()
        return f"Deleted directory {shown}"
    path.unlink()
    return f"Deleted {shown}"
