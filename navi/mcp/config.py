"""``mcp.json``: the MCP servers Navi connects to, in Claude Desktop's format.

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"],
                  "env": {"TOKEN": "..."}, "sandbox": true, "profiles": ["coder"]},
        "search": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "..."},
                   "approval": "auto"}}}

An entry with ``command`` is a stdio server (a child process), one with ``url`` a
Streamable HTTP server. Navi's own keys: ``profiles`` (the profiles whose runs may call
the server's tools; absent: every profile), ``approval`` (``auto`` | ``ask`` | ``deny``; absent:
each tool's ``readOnlyHint`` decides), ``sandbox`` (run the stdio child in the tool
sandbox, navi/mcp/sandbox.py), ``network`` (the sandboxed child may use the network) and
``rw`` (absolute paths the sandboxed child may write). Other keys Claude Desktop or
Cursor write (``type``, ``disabled``...) are accepted.

A file that does not parse is reported and starts no server (when it changes into one
that does not parse, say half-saved, the servers running go on as they were); an entry
that does not parse is reported and the others are started.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import msgspec

Approval = Literal["auto", "ask", "deny"]
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
TOOL_NAME_MAX = 64


class _Keys(msgspec.Struct, frozen=True, kw_only=True):
    """The keys of one server of ``mcpServers`` that Navi reads."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    url: str = ""
    headers: dict[str, str] = {}
    # None: every profile.
    profiles: tuple[str, ...] | None = None
    # None: per tool, from its readOnlyHint.
    approval: Approval | None = None
    sandbox: bool = False
    network: bool = False
    # With sandbox: paths the child may write (absolute, no ".."; navi/mcp/sandbox.py
    # refuses Navi's own places when it starts).
    rw: tuple[str, ...] = ()
    disabled: bool = False


class ServerEntry(_Keys, frozen=True, kw_only=True):
    """One server of ``mcpServers``: either ``command`` (stdio) or ``url`` (HTTP)."""

    name: str

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    def allows(self, profile_id: str) -> bool:
        return self.profiles is None or profile_id in self.profiles


class _RawEntry(_Keys, frozen=True, kw_only=True):
    # Written by other clients; accepted, not used (the transport follows from the keys).
    # Not kept in ServerEntry: the running servers restart only when what Navi reads changes.
    type: str = ""


class McpConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What a config file gave: the usable servers, and what was wrong with the rest."""

    path: str = ""
    servers: dict[str, ServerEntry] = {}
    errors: tuple[str, ...] = ()
    # The file as a whole could not be used (not JSON, not an object, unreadable).
    unusable: bool = False


def parse_config(text: str, path: str = "mcp.json") -> McpConfig:
    """The servers of a config file's text; every problem is reported, none raised."""
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        return McpConfig(path=path, errors=(f"{path} is not valid JSON: {exc}",), unusable=True)
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        problem = f'{path} must be {{"mcpServers": {{...}}}}'
        return McpConfig(path=path, errors=(problem,), unusable=True)
    servers: dict[str, ServerEntry] = {}
    errors: list[str] = []
    for name, raw in data.get("mcpServers", {}).items():
        problem, entry = _entry(name, raw)
        if entry is not None:
            servers[name] = entry
        elif problem:
            errors.append(f"server {name!r}: {problem}")
    return McpConfig(path=path, servers=servers, errors=tuple(errors))


def _entry(name: str, raw: Any) -> tuple[str, ServerEntry | None]:
    if not SERVER_NAME.match(name):
        return "a server's name is 1 to 32 letters, digits, _ or -", None
    try:
        entry = msgspec.convert(raw, _RawEntry)
    except msgspec.ValidationError as exc:
        return str(exc), None
    if entry.disabled:
        return "", None
    if bool(entry.command) == bool(entry.url):
        return 'give either "command" (a stdio server) or "url" (an HTTP server)', None
    if entry.url and not re.match(r"^https?://", entry.url):
        return '"url" must be an http:// or https:// URL', None
    if entry.rw and not (entry.sandbox and entry.command):
        return '"rw" names what a sandboxed stdio server may write: add "sandbox": true', None
    for path in entry.rw:
        if problem := rw_problem(path):
            return f'"rw" path {path!r}: {problem}', None
    fields = {f: getattr(entry, f) for f in _Keys.__struct_fields__}
    fields["rw"] = tuple(dict.fromkeys(os.path.normpath(p) for p in entry.rw))
    return "", ServerEntry(name=name, **fields)


def rw_problem(path: str) -> str:
    """Why ``path`` cannot be an ``rw`` path ("" if it can, as far as its text says)."""
    if "\0" in path:
        return "contains a NUL character"
    if not os.path.isabs(path):
        return "must be absolute"
    if ".." in PurePosixPath(path).parts:
        return 'must not contain ".."'
    if os.path.normpath(path) == "/":
        return "must not be /"
    return ""


def load_config(path: Path) -> McpConfig:
    """The config at ``path``; a missing file is no servers, not an error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return McpConfig(path=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        problem = f"{path} cannot be read: {exc}"
        return McpConfig(path=str(path), errors=(problem,), unusable=True)
    return parse_config(text, str(path))


def config_stamp(path: Path) -> tuple[int, int] | None:
    """What changes when the file does (mtime, size); None when there is no file."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size)


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, only ``[A-Za-z0-9_-]``, at most 64 characters (what
    the OpenAI and Ollama function-calling formats accept)."""
    name = f"mcp__{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
    return name[:TOOL_NAME_MAX]
