"""``image_view``: load an image (file or URL) for a multimodal model to see.

The base64 goes in ``metadata`` only (``is_image``, ``base64``, ``mime_type``); the
text output merely says what was loaded. Navi puts the image in the LLM's context,
never in what the user's message history shows.
"""

from __future__ import annotations

import base64
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from tools.base import (
    CallDescription,
    Reach,
    SessionScope,
    Tool,
    ToolError,
    ToolResult,
    ok,
    shorten,
)
from tools.context import ToolContext
from tools.fetch import fetch, policy_for, shown_host
from tools.image_types import sniff_image_type
from tools.paths import PathGuard, PathRefused, read_regular_file


class ImageViewTool(Tool):
    name = "image_view"
    description = (
        "Look at an image: give a file path (in the session's files) or an http(s) URL. The "
        "image (PNG, JPEG, GIF, WEBP, BMP) is shown to you in the next step."
    )
    parameters = {
        "type": "object",
        "properties": {
            "source": {
                "type": "string",
                "minLength": 1,
                "description": "A file path or an http(s) URL of the image.",
            },
        },
        "required": ["source"],
        "additionalProperties": False,
    }
    idempotent = True
    timeout_s = 60.0

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        source = str(args.get("source", "")).strip()
        if urlsplit(source).scheme in ("http", "https"):
            host = shown_host(source)
            return CallDescription(
                summary=f"Fetch the image {shorten(source, 300)}",
                target=f"GET {host}",
                risk=f"fetches an image from {host}: whatever the URL holds reaches that host",
                default_asker="Navi asks before image_view runs",
                reach=(Reach(source),),
            )
        try:
            path = str(PathGuard.for_context(ctx).resolve(source).path)
        except PathRefused:
            path = f"{source} (outside the allowed folders: the call will fail)"
        return CallDescription(
            summary=f"Look at the image file {path}",
            target=path,
            risk="reads an image file; changes nothing",
            default_asker="Navi asks before image_view runs",
            scope=SessionScope("image_view:file", "Allow looking at image files"),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        source: str = args["source"].strip()
        limit = ctx.settings.image_max_bytes
        if urlsplit(source).scheme in ("http", "https"):
            response = await fetch(
                source,
                policy=policy_for(ctx),
                consent=ctx.outbound,
                timeout_s=ctx.settings.http_timeout_s,
                max_bytes=limit,
            )
            if response.status >= 400:
                raise ToolError(f"HTTP {response.status} {response.reason} for {source}")
            if response.truncated:
                raise ToolError(f"image at {source} is larger than {limit} bytes")
            data, label = response.body, PurePosixPath(urlsplit(response.url).path).name or source
        else:
            guard = PathGuard.for_context(ctx)
            located = guard.resolve(source)
            label = guard.display(located)
            # Opened as the filesystem tool opens files: no link followed, one name only.
            data, size = read_regular_file(guard, located, limit + 1)
            if size > limit:
                raise ToolError(f"{label} is {size} bytes, over the {limit}-byte limit")
        mime = sniff_image_type(data)
        if mime is None:
            raise ToolError(f"{label} is not a supported image (PNG, JPEG, GIF, WEBP or BMP)")
        return ok(
            f"Image loaded: {label} ({mime}, {len(data)} bytes). It is attached for you to see.",
            is_image=True,
            base64=base64.b64encode(data).decode("ascii"),
            mime_type=mime,
        )
