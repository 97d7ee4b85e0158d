"""An MCP server's resources as one tool, ``mcp__<server>__read_resource``.

A server that has resources gets this tool beside its own: its description lists the
resources and resource templates the server listed (the first ``LISTED_IN_DESCRIPTION``
of each); its one argument is a URI. Navi reads only a URI the server offered: one it
listed, one a listed template matches (a ``{var}`` stands for one path segment, a
``{+var}`` for any text; the URI as sent and percent-decoded must both match, and a
``..`` segment never does), or one a resource link of its tool results named (the last
``LINKS_KEPT``). Anything else is refused before it reaches the server: a model told by
a web page to read ``file:///etc/passwd`` through a server that serves a folder asks
Navi, not the server.

Its approval is the server's entry's ``approval``; absent, it is a read-only tool
(``auto``), as a tool with ``readOnlyHint`` is. What it reads becomes a result as a
tool call's does: text, the first image attached, other binary contents named.
"""

from __future__ import annotations

import collections
import re
import urllib.parse
from typing import TYPE_CHECKING, Any, Protocol

from navi.mcp.config import Approval, tool_name
from tools.base import CallDescription, SessionScope, Tool, ToolError, ToolResult, ok, shorten
from tools.context import ToolContext

if TYPE_CHECKING:
    from mcp_types import ReadResourceResult

LISTED_IN_DESCRIPTION = 30
LINKS_KEPT = 500
URI_MAX = 2048
_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")


class ResourceReader(Protocol):
    server: str

    async def read_resource(self, uri: str) -> ReadResourceResult: ...


def template_pattern(template: str) -> re.Pattern[str]:
    """The URIs an RFC 6570 template can expand to, as a regular expression."""
    parts: list[str] = []
    at = 0
    for found in _EXPRESSION.finditer(template):
        parts.append(re.escape(template[at : found.start()]))
        operator = found.group(1)
        if operator in ("+", "#"):
            parts.append(".+")
        elif operator in ("?", "&"):
            parts.append(r"(?:[?&][^#]*)?")
        elif operator == "/":
            parts.append(r"(?:/[^/?#]+)*")
        else:
            parts.append(r"[^/?#]+")
        at = found.end()
    parts.append(re.escape(template[at:]))
    return re.compile("".join(parts))


class ResourceIndex:
    """What a server offers to read: its listed resources, templates, and links."""

    def __init__(self) -> None:
        self.resources: dict[str, str] = {}
        self.templates: dict[str, tuple[str, re.Pattern[str]]] = {}
        self._links: collections.OrderedDict[str, None] = collections.OrderedDict()

    def update(self, resources: list[Any], templates: list[Any]) -> None:
        self.resources = {str(r.uri): r.title or r.name for r in resources}
        self.templates = {
            t.uri_template: (t.title or t.name, template_pattern(t.uri_template)) for t in templates
        }

    def saw_link(self, uri: str) -> None:
        self._links[uri] = None
        self._links.move_to_end(uri)
        while len(self._links) > LINKS_KEPT:
            self._links.popitem(last=False)

    @property
    def empty(self) -> bool:
        return not self.resources and not self.templates

    def refusal(self, uri: str) -> str | None:
        """Why ``uri`` is not read (None: it is one the server offered)."""
        if len(uri) > URI_MAX or any(ord(c) < 32 for c in uri):
            return "it is not a URI the server could have given"
        if uri in self.resources or uri in self._links:
            return None
        decoded = urllib.parse.unquote(uri)
        if ".." in decoded.replace("\\", "/").split("/"):
            return "it has a '..' segment"
        for _title, pattern in self.templates.values():
            if pattern.fullmatch(uri) and pattern.fullmatch(decoded):
                return None
        return "the server did not list it, nor a template that matches it"


class ReadResourceTool(Tool):
    """``mcp__<server>__read_resource``: one resource of the server, by its URI."""

    uses_files = False
    idempotent = True

    def __init__(
        self, reader: ResourceReader, index: ResourceIndex, approval: Approval | None
    ) -> None:
        self.reader = reader
        self.index = index
        self.name = tool_name(reader.server, "read_resource")
        self.approval: Approval = approval or "auto"
        self.description = self._describe_index()
        self.parameters = {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
            "required": ["uri"],
            "additionalProperties": False,
        }

    @property
    def source(self) -> str:
        return f"mcp:{self.reader.server}"

    def _describe_index(self) -> str:
        lines = [f"Read a resource of the MCP server '{self.reader.server}' by its URI."]
        listed = list(self.index.resources.items())
        if listed:
            lines.append("Resources:")
            lines += [f"- {uri} ({shorten(t, 80)})" for uri, t in listed[:LISTED_IN_DESCRIPTION]]
            if len(listed) > LISTED_IN_DESCRIPTION:
                lines.append(f"- and {len(listed) - LISTED_IN_DESCRIPTION} more")
        templates = list(self.index.templates.items())
        if templates:
            lines.append("URI templates (fill in the {…} parts):")
            lines += [
                f"- {t} ({shorten(n, 80)})" for t, (n, _) in templates[:LISTED_IN_DESCRIPTION]
            ]
        lines.append("Links to resources in this server's tool results can be read too.")
        return "\n".join(lines)

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        server, uri = self.reader.server, str(args.get("uri", ""))
        return CallDescription(
            summary=f"Read the resource {shorten(uri, 120)} of the MCP server '{server}'",
            target=f"{server}: {shorten(uri, 200)}",
            risk=f"the MCP server '{server}' sends what the resource holds",
            default_asker=f"Navi asks before reading resources of the MCP server '{server}'",
            scope=SessionScope(self.name, f"Allow reading resources of {server}"),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        uri = str(args["uri"]).strip()
        why = self.index.refusal(uri)
        if why is not None:
            raise ToolError(
                f"Navi does not read {shorten(uri, 200)} from the MCP server "
                f"'{self.reader.server}': {why}"
            )
        result = await self.reader.read_resource(uri)
        return contents_result(result, ctx.settings.image_max_bytes)


def contents_result(result: ReadResourceResult, image_max_bytes: int) -> ToolResult:
    """Text contents joined; the first image attached (at most ``image_max_bytes``);
    other binary contents named."""
    from mcp_types import BlobResourceContents

    parts: list[str] = []
    image: BlobResourceContents | None = None
    for item in result.contents:
        if not isinstance(item, BlobResourceContents):
            parts.append(item.text)
            continue
        kind = item.mime_type or "binary"
        size = len(item.blob) * 3 // 4
        if image is None and kind.startswith("image/") and size <= image_max_bytes:
            image = item
            parts.append(f"[image: {kind}, attached for you to see]")
        else:
            parts.append(f"[resource: {item.uri} ({kind}, {size} bytes, binary, not shown)]")
    text = "\n\n".join(parts) or "(the resource is empty)"
    if image is not None:
        return ok(text, is_image=True, base64=image.blob, mime_type=image.mime_type)
    return ok(text)
