"""``mcp.json``: the MCP servers Navi connects to, in Claude Desktop's format.

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem"],
                  "env": {"TOKEN": "..."}, "sandbox": true, "profiles": ["coder"]},
        "search": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "..."},
                   "approval": "auto"}}}

An entry with ``command`` is a stdio server (a child process), one with ``url`` a
Streamable HTTP server, or a legacy SSE server with ``"type": "sse"`` (``type`` may also
say ``stdio``, ``http`` or ``streamable-http``; it must agree with the keys). VS Code's
top-level ``servers`` is read as ``mcpServers`` is; a file may have both (their servers
are merged; a name in both is an error and neither is started). ``${VAR}`` and
``${VAR:-default}`` in ``command``, ``args``, ``env``, ``url`` and ``headers`` are
expanded from Navi's environment (navi/mcp/variables.py). Navi's own keys: ``profiles`` (the profiles whose runs may call
the server's tools; absent: every profile), ``approval`` (``auto`` | ``ask`` | ``deny``; absent:
each tool's ``readOnlyHint`` decides), ``sandbox`` (run the stdio child in the tool
sandbox, navi/mcp/sandbox.py), ``network`` (the sandboxed child may use the network) and
``rw`` (absolute paths the sandboxed child may write), ``tools`` (``{"allow": [...],
"deny": [...]}``: the server's tools offered to the LLM; a tool not allowed, or denied,
is neither offered nor callable) and ``timeout`` (seconds, for its start and each call,
instead of Navi's default). Other keys Claude Desktop or Cursor write (``disabled``...)
are accepted.

A file that does not parse is reported and starts no server (when it changes into one
that does not parse, say half-saved, the servers running go on as they were); an entry
that does not parse is reported and the others are started.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import msgspec

from navi.mcp.variables import Expanded, VariableError

Approval = Literal["auto", "ask", "deny"]
Transport = Literal["stdio", "http", "sse"]
_TYPES: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
    "sse": "sse",
}
SERVER_KEYS = ("mcpServers", "servers")
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
    tools: ToolFilter | None = None
    # Seconds; None: Navi's default (NAVI_TOOL_TIMEOUT_S).
    timeout: float | None = None


class ToolFilter(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``"tools": {"allow": [...], "deny": [...]}``, by the server's own tool names."""

    # None: every tool but the denied ones.
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()

    def offers(self, tool: str) -> bool:
        return tool not in self.deny and (self.allow is None or tool in self.allow)


class ServerEntry(_Keys, frozen=True, kw_only=True):
    """One server of ``mcpServers``: either ``command`` (stdio) or ``url`` (HTTP)."""

    name: str
    transport: Transport = "stdio"
    # The values ${VAR}s took from the environment → "${VAR}": error messages show the
    # latter (navi/mcp/variables.py). Never logged.
    hidden: dict[str, str] = {}

    def allows(self, profile_id: str) -> bool:
        return self.profiles is None or profile_id in self.profiles

    def offers(self, tool: str) -> bool:
        """Whether the server's tool ``tool`` passes the entry's ``tools`` filter."""
        return self.tools is None or self.tools.offers(tool)


class _RawEntry(_Keys, frozen=True, kw_only=True):
    # Written by other clients: it must agree with the keys (navi reads sse from it).
    type: str = ""


class McpConfig(msgspec.Struct, frozen=True, kw_only=True):
    """What a config file gave: the usable servers, and what was wrong with the rest."""

    path: str = ""
    servers: dict[str, ServerEntry] = {}
    errors: tuple[str, ...] = ()
    # The file as a whole could not be used (not JSON, not an object, unreadable).
    unusable: bool = False


def parse_config(
    text: str, path: str = "mcp.json", environ: Mapping[str, str] | None = None
) -> McpConfig:
    """The servers of a config file's text, ``${VAR}``s taken from ``environ`` (default:
    Navi's environment); every problem is reported, none raised."""
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        return McpConfig(path=path, errors=(f"{path} is not valid JSON: {exc}",), unusable=True)
    if not isinstance(data, dict) or not all(
        isinstance(data.get(key, {}), dict) for key in SERVER_KEYS
    ):
        problem = f'{path} must be {{"mcpServers": {{...}}}} (or VS Code\'s {{"servers": {{...}}}})'
        return McpConfig(path=path, errors=(problem,), unusable=True)
    servers: dict[str, ServerEntry] = {}
    errors: list[str] = []
    both = set(data.get("mcpServers", {})) & set(data.get("servers", {}))
    for key in SERVER_KEYS:
        for name, raw in data.get(key, {}).items():
            if name in both:
                if key == "mcpServers":
                    errors.append(f'server {name!r}: named in both "mcpServers" and "servers"')
                continue
            problem, entry = _entry(name, raw, os.environ if environ is None else environ)
            if entry is not None:
                servers[name] = entry
            elif problem:
                errors.append(f"server {name!r}: {problem}")
    return McpConfig(path=path, servers=servers, errors=tuple(errors))


def _entry(name: str, raw: Any, environ: Mapping[str, str]) -> tuple[str, ServerEntry | None]:
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
    transport: Transport = "stdio" if entry.command else "http"
    if entry.type:
        if entry.type not in _TYPES:
            return f'"type" {entry.type!r} is not one of stdio, http, sse', None
        transport = _TYPES[entry.type]
        if (transport == "stdio") != bool(entry.command):
            return (
                f'"type": {entry.type!r} does not go with "{"url" if entry.url else "command"}"',
                None,
            )
    if entry.timeout is not None and not 0 < entry.timeout <= 3600:
        return '"timeout" is in seconds, more than 0 and at most 3600', None
    try:
        entry, hidden = _expand(entry, environ)
    except VariableError as exc:
        return str(exc), None
    if entry.url and not re.match(r"^https?://", entry.url):
        return '"url" must be an http:// or https:// URL', None
    if entry.rw and not (entry.sandbox and entry.command):
        return '"rw" names what a sandboxed stdio server may write: add "sandbox": true', None
    for path in entry.rw:
        if problem := rw_problem(path):
            return f'"rw" path {path!r}: {problem}', None
    fields = {f: getattr(entry, f) for f in _Keys.__struct_fields__}
    fields["rw"] = tuple(dict.fromkeys(os.path.normpath(p) for p in entry.rw))
    return "", ServerEntry(name=name, transport=transport, hidden=hidden, **fields)


def _expand(entry: _RawEntry, environ: Mapping[str, str]) -> tuple[_RawEntry, dict[str, str]]:
    """``entry`` with its ``${VAR}``s expanded; raises :class:`VariableError`."""
    ex = Expanded(environ)
    changed = msgspec.structs.replace(
        entry,
        command=ex.text(entry.command, '"command"'),
        args=tuple(ex.text(a, '"args"') for a in entry.args),
        env={k: ex.text(v, f'"env" {k}') for k, v in entry.env.items()},
        url=ex.text(entry.url, '"url"'),
        headers={k: ex.text(v, f'"headers" {k}') for k, v in entry.headers.items()},
    )
    return changed, ex.hidden


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
