"""An MCP server's tool as a Navi :class:`~tools.base.Tool`, and its results as Navi's.

Navi validates the arguments against the tool's own JSON schema before the call (the
registry does that for every tool), so a wrong type never reaches the server.
What comes back becomes one :class:`~tools.base.ToolResult`:

- text → the output, blocks joined by a blank line;
- an image → shown to the LLM as ``image_view``'s are (``metadata``: ``is_image``,
  ``base64``, ``mime_type``); the output says it is attached. Only the first image is
  attached; the output names the others;
- a resource link → ``[resource: <name>] <uri>``; an embedded resource → its text,
  or its URI and type when it is binary; audio → a line saying it was left out;
- ``isError`` → a failed call with the server's message (``tool.failed``);
- what the server said while the call ran (progress, log lines: navi/mcp/notices.py)
  → after the output, under "Messages from the MCP server", and in ``metadata``
  (``server_messages``, a list of lines) for the tool's card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from navi.mcp.config import Approval
from navi.mcp.notices import CallMessages
from tools.base import CallDescription, Reach, SessionScope, Tool, ToolError, ToolResult, ok
from tools.context import ToolContext

if TYPE_CHECKING:
    from mcp_types import CallToolResult
    from mcp_types import Tool as McpToolInfo


MESSAGES_HEAD = "Messages from the MCP server during the call:"


class ToolCaller(Protocol):
    """What an adapter calls: the live connection to its server (navi/mcp/client.py)."""

    server: str

    async def call_tool(
        self, name: str, arguments: dict[str, Any], messages: CallMessages | None = None
    ) -> CallToolResult: ...


class McpTool(Tool):
    """One tool of one MCP server, named ``mcp__<server>__<tool>``."""

    uses_files = False

    def __init__(
        self,
        *,
        name: str,
        remote_name: str,
        description: str,
        parameters: dict[str, Any],
        caller: ToolCaller,
        idempotent: bool,
        approval: Approval,
        timeout_s: float,
        read_only: bool = False,
        open_world: bool = False,
    ) -> None:
        self.name = name
        self.remote_name = remote_name
        self.description = description
        self.parameters = parameters
        self.caller = caller
        self.idempotent = idempotent
        # Whether a person approves a call first (the approvals feature reads it).
        self.approval: Approval = approval
        self.timeout_s = timeout_s
        # The server's hints: it changes nothing (readOnlyHint), it reaches the world
        # outside (openWorldHint: the URLs among its arguments are asked about).
        self.read_only = read_only
        self.open_world = open_world

    @property
    def source(self) -> str:
        return f"mcp:{self.caller.server}"

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        server = self.caller.server
        urls = _urls_in(args) if self.open_world else []
        reach = tuple(Reach(url, "GET", self.read_only) for url in urls)
        where = f" (it reaches {', '.join(urls[:3])}{'…' if len(urls) > 3 else ''})" if urls else ""
        return CallDescription(
            summary=f"Call {self.remote_name} of the MCP server '{server}'{where}",
            target=f"{server}: {self.remote_name}",
            risk=(
                f"the MCP server '{server}' says this tool only reads"
                if self.read_only
                else f"the MCP server '{server}' does not say this tool only reads: "
                "it may change things"
            ),
            default_asker=f"Navi asks before tools of the MCP server '{server}' that may "
            "change things",
            scope=SessionScope(self.name, f"Allow every {self.remote_name} call of {server}"),
            reach=reach,
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        messages = CallMessages(forward=ctx.progress)
        result = await self.caller.call_tool(self.remote_name, args, messages)
        try:
            done = to_result(result, image_max_bytes=ctx.settings.image_max_bytes)
        except ToolError as exc:
            said = messages.text()
            if not said:
                raise
            raise ToolError(f"{exc}\n\n{MESSAGES_HEAD}\n{said}") from None
        return with_messages(done, messages)


def with_messages(result: ToolResult, messages: CallMessages) -> ToolResult:
    """``result`` with what the server said during the call after its output."""
    said = messages.text()
    if not said:
        return result
    import msgspec

    return msgspec.structs.replace(
        result,
        output=f"{result.output}\n\n{MESSAGES_HEAD}\n{said}",
        metadata={**result.metadata, "server_messages": list(messages.lines)},
    )


def adapt(
    info: McpToolInfo,
    *,
    name: str,
    caller: ToolCaller,
    approval: Approval | None,
    timeout_s: float,
) -> McpTool:
    """The adapter of a tool the server listed; the entry's ``approval`` wins over the
    tool's ``readOnlyHint`` (read-only → ``auto``, anything else → ``ask``)."""
    hints = info.annotations
    read_only = bool(hints is not None and hints.read_only_hint)
    idempotent = bool(hints is not None and hints.idempotent_hint)
    description = (info.description or "").strip() or (
        (hints.title if hints is not None and hints.title else None) or info.name
    )
    parameters = dict(info.input_schema) if info.input_schema else {}
    parameters.setdefault("type", "object")
    return McpTool(
        name=name,
        remote_name=info.name,
        description=f"{description}\n(From the MCP server '{caller.server}'.)",
        parameters=parameters,
        caller=caller,
        # A read-only tool changes nothing: running it again after a crash is safe too.
        idempotent=idempotent or read_only,
        approval=approval or ("auto" if read_only else "ask"),
        timeout_s=timeout_s,
        read_only=read_only,
        open_world=bool(hints is not None and hints.open_world_hint),
    )


def _urls_in(value: Any, depth: int = 0) -> list[str]:
    """The http(s) URLs among a call's argument values (nested a little), in order."""
    if isinstance(value, str):
        text = value.strip()
        return [text] if text.lower().startswith(("http://", "https://")) else []
    if depth > 3:
        return []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [url for item in items for url in _urls_in(item, depth + 1)]


def to_result(result: CallToolResult, *, image_max_bytes: int = 5 * 1024 * 1024) -> ToolResult:
    """Navi's result of an MCP ``tools/call`` (the module docstring says how). An image
    larger than ``image_max_bytes`` (``image_view``'s limit) is not attached."""
    from mcp_types import (
        AudioContent,
        BlobResourceContents,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
    )

    parts: list[str] = []
    image: ImageContent | None = None
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent):
            if len(block.data) * 3 // 4 > image_max_bytes:
                parts.append(
                    f"[image: {block.mime_type}, not attached: over {image_max_bytes} bytes]"
                )
            elif image is None:
                image = block
                parts.append(f"[image: {block.mime_type}, attached for you to see]")
            else:
                parts.append(f"[image: {block.mime_type}, not attached: one image per call]")
        elif isinstance(block, ResourceLink):
            label = block.title or block.name
            parts.append(f"[resource: {label}] {block.uri}")
        elif isinstance(block, EmbeddedResource):
            res = block.resource
            if isinstance(res, BlobResourceContents):
                kind = res.mime_type or "binary"
                parts.append(f"[resource: {res.uri} ({kind}, binary, not shown)]")
            else:
                parts.append(res.text)
        elif isinstance(block, AudioContent):
            parts.append(f"[audio: {block.mime_type}, not shown]")
    if not parts and result.structured_content is not None:
        import json

        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n\n".join(parts)
    if result.is_error:
        raise ToolError(text or "the MCP server reported an error without a message")
    if image is not None:
        return ok(text, is_image=True, base64=image.data, mime_type=image.mime_type)
    return ok(text)
