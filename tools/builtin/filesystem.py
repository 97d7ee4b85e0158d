"""``filesystem``: read / write / list / mkdir / delete inside the allowed paths.

Every step is taken from the allowed root's descriptor without following links
(``tools.paths``, ``tools.beneath``): a folder swapped for a symlink mid-call leads
nowhere, and a file with another name (a hard link) is neither read nor written.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from tools.base import (
    Approval,
    CallDescription,
    SessionScope,
    Tool,
    ToolError,
    ToolResult,
    cap_output,
    ok,
    truncation_marker,
)
from tools.beneath import make_dirs_beneath, open_beneath
from tools.context import ToolContext
from tools.paths import Located, PathGuard, PathRefused, open_regular_file
from tools.pdf_text import PAGES_PATTERN, looks_like_pdf, parse_pages, read_pdf

_LIST_LIMIT = 500

# action → (the summary's verb, the risk, what "for this session" allows)
_ACTIONS = {
    "read": ("Read the file", "reads the file; changes nothing", "Allow reading files"),
    "list": ("List the folder", "lists the folder; changes nothing", "Allow listing folders"),
    "write": (
        "Write the file",
        "creates the file or replaces what it holds",
        "Allow file writes",
    ),
    "mkdir": ("Make the folder", "creates folders", "Allow making folders"),
    "delete": ("Delete", "deletes a file (or an empty folder)", "Allow deleting files"),
}


class FilesystemTool(Tool):
    name = "filesystem"
    description = (
        "Work with files: read a text file or a PDF's text (page by page), write (or append "
        "to) a file, list a directory, make a directory, delete a file or directory. "
        "Relative paths are in the session's files directory (where uploaded files are); "
        "access outside the allowed paths is refused."
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
            "pages": {
                "type": "string",
                "pattern": PAGES_PATTERN,
                "description": "read a PDF: the pages, e.g. '3', '3-10' or '3-' (default: "
                "all, as many as the output holds; the output says how to read on).",
            },
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

    def approval_for(self, args: dict[str, Any]) -> Approval:
        # Reading and listing change nothing; writing, mkdir and delete do.
        return "auto" if self.is_idempotent(args) else "ask"

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        """The action and the absolute path it resolves to. "For this session" covers one
        kind of action (read, list, write, mkdir, delete) in one allowed folder: writes do
        not cover deletes, and the chat's own folder does not cover another allowed one
        (docs/approvals.md says why not one path)."""
        action = str(args.get("action", ""))
        raw = args.get("path")
        raw = "." if raw is None else str(raw)
        guard = PathGuard.for_context(ctx)
        try:
            located = guard.resolve(raw)
        except PathRefused:
            where, path = None, f"{raw} (outside the allowed folders: the call will fail)"
        else:
            where, path = located.root, str(located.path)
        kind = _ACTIONS.get(action)
        if kind is None:
            return CallDescription(
                summary=f"Use the filesystem with the unknown action {action!r} on {path}",
                target=path,
                risk="the call will fail: the action is not one the tool knows",
                default_asker="Navi asks before file changes",
            )
        verb, risk, allows = kind
        if action == "write" and args.get("append"):
            verb, risk = "Add to the end of the file", "adds text to the end of the file"
        if action == "delete" and args.get("recursive"):
            risk = "deletes the file, or the folder with everything in it"
        scope = None
        if where is not None:
            in_chat = Path(where) == Path(guard.base)
            scope = SessionScope(
                f"filesystem:{action}:{where}",
                allows if in_chat else f"{allows} under {where}",
            )
        return CallDescription(
            summary=f"{verb} {path}",
            target=path,
            risk=risk,
            default_asker="Navi asks before file changes",
            scope=scope,
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        guard = PathGuard.for_context(ctx)
        action = args["action"]
        raw = args.get("path")
        if raw is None:
            if action != "list":
                raise ToolError(f"action '{action}' needs a 'path'")
            raw = "."
        target = guard.resolve(raw)
        shown = guard.display(target)
        if action == "read":
            return ok(await _read(guard, target, shown, args.get("pages"), ctx))
        if action == "list":
            return ok(_list_dir(guard, target, shown))
        if action == "mkdir":
            return ok(_mkdir(guard, target, shown))
        if action == "write":
            return ok(_write(guard, target, shown, args))
        return ok(_delete(guard, target, shown, bool(args.get("recursive"))))


async def _read(
    guard: PathGuard, target: Located, shown: str, pages: str | None, ctx: ToolContext
) -> str:
    """A text file, or a PDF's text (``tools.pdf_text``), within the output limit."""
    limit = ctx.settings.output_max_chars
    with open_regular_file(guard, target) as (handle, size):
        data = handle.read(limit * 4)
        if looks_like_pdf(target.name, data):
            return await read_pdf(
                handle.fileno(), shown, parse_pages(pages), limit=limit, stop=ctx.stop
            )
    if pages is not None:
        raise ToolError(f"'pages' picks pages of a PDF; {shown} is not one")
    return cap_output(_as_text(data, size, shown), limit)


def _as_text(data: bytes, size: int, shown: str) -> str:
    if b"\x00" in data[:8192]:
        raise ToolError(
            f"{shown} is a binary file ({size} bytes); images can be viewed with image_view"
        )
    text = data.decode("utf-8", errors="replace")
    if size > len(data):
        text += truncation_marker(size - len(data), "bytes")
    return text


def _list_dir(guard: PathGuard, target: Located, shown: str) -> str:
    if not target.parts and not os.path.isdir(target.root):
        return f"{shown}: empty directory"  # nothing uploaded or written yet
    with guard.root_fd(target) as root:
        try:
            fd = open_beneath(root, target.parts, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            explained = guard.explain(exc, target, "no such directory")
            if exc.errno == errno.ENOTDIR and not isinstance(explained, PathRefused):
                raise ToolError(f"{shown} is a file; use action 'read'") from None
            raise explained from None
    try:
        with os.scandir(fd) as listing:
            entries = [_entry(entry) for entry in listing]
    finally:
        os.close(fd)
    if not entries:
        return f"{shown}: empty directory"
    entries.sort(key=lambda item: (not item[0].endswith("/"), item[0]))
    lines = [f"{shown}:"]
    lines += [f"  {name}{detail}" for name, detail in entries[:_LIST_LIMIT]]
    if len(entries) > _LIST_LIMIT:
        lines.append(f"  [... {len(entries) - _LIST_LIMIT} more entries]")
    return "\n".join(lines)


def _entry(entry: os.DirEntry[str]) -> tuple[str, str]:
    """An entry's name and what the listing says of it, links never followed."""
    if entry.is_symlink():
        return entry.name, " -> (symlink)"
    if entry.is_dir(follow_symlinks=False):
        return entry.name + "/", ""
    return entry.name, f"  ({entry.stat(follow_symlinks=False).st_size} bytes)"


def _mkdir(guard: PathGuard, target: Located, shown: str) -> str:
    with guard.root_fd(target) as root:
        try:
            os.close(make_dirs_beneath(root, target.parts))
        except OSError as exc:
            explained = guard.explain(exc, target)
            if exc.errno == errno.ENOTDIR and not isinstance(explained, PathRefused):
                raise ToolError(f"{shown} exists and is not a directory") from None
            raise explained from None
    return f"Directory ready: {shown}"


def _write(guard: PathGuard, target: Located, shown: str, args: dict[str, Any]) -> str:
    content = args.get("content")
    if content is None:
        raise ToolError("action 'write' needs 'content'")
    if not target.parts:
        raise ToolError(f"{shown} is a directory")
    append = bool(args.get("append"))
    # Never O_TRUNC at the open: a file with other names must be refused before it
    # is changed at all. O_NONBLOCK: a planted FIFO must not hang the call.
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | (os.O_APPEND if append else 0)
    with guard.root_fd(target) as root:
        try:
            parent = make_dirs_beneath(root, target.parts[:-1])
            try:
                fd = open_beneath(parent, target.parts[-1:], flags)
            finally:
                os.close(parent)
        except OSError as exc:
            raise guard.explain(exc, target) from None
    with os.fdopen(fd, "wb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise ToolError(f"{shown} is not a regular file")
        guard.refuse_hard_links(status, target)
        if not append:
            os.ftruncate(fd, 0)
        handle.write(content.encode("utf-8"))
    verb = "Appended" if append else "Wrote"
    return f"{verb} {len(content)} characters to {shown}"


def _delete(guard: PathGuard, target: Located, shown: str, recursive: bool) -> str:
    if guard.is_root(target):
        raise PathRefused(f"refusing to delete {shown}: it is an allowed root directory")
    name = target.name
    with guard.root_fd(target) as root:
        try:
            parent = open_beneath(root, target.parts[:-1], os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise guard.explain(exc, target) from None
        try:
            return _delete_in(guard, parent, name, target, shown, recursive)
        except OSError as exc:
            raise guard.explain(exc, target) from None
        finally:
            os.close(parent)


def _delete_in(
    guard: PathGuard, parent: int, name: str, target: Located, shown: str, recursive: bool
) -> str:
    """Delete ``name`` in the folder ``parent`` (held open): the link itself is never
    followed, and a tree is removed by descriptors (``shutil.rmtree`` with ``dir_fd``)."""
    status = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if stat.S_ISLNK(status.st_mode):
        raise PathRefused(
            f"access denied: {shown} is a symbolic link; the filesystem tool does not follow links"
        )
    if not stat.S_ISDIR(status.st_mode):
        os.unlink(name, dir_fd=parent)
        return f"Deleted {shown}"
    folder = open_beneath(parent, [name], os.O_RDONLY | os.O_DIRECTORY)
    try:
        with os.scandir(folder) as listing:
            empty = next(iter(listing), None) is None
    finally:
        os.close(folder)
    if empty:
        os.rmdir(name, dir_fd=parent)
    elif not recursive:
        raise ToolError(f"{shown} is not empty; pass recursive=true to delete it all")
    else:
        shutil.rmtree(name, dir_fd=parent)
    return f"Deleted directory {shown}"
