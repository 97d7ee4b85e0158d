"""What an MCP ``tools/call`` result becomes for the LLM."""

from __future__ import annotations

import pytest

from navi.mcp.tools import to_result
from tools import ToolError

types = pytest.importorskip("mcp_types")


def test_content_blocks_become_one_result() -> None:
    result = to_result(
        types.CallToolResult(
            content=[
                types.TextContent(text="first"),
                types.ImageContent(data="aGVsbG8=", mime_type="image/png"),
                types.ImageContent(data="aGVsbG8=", mime_type="image/jpeg"),
                types.AudioContent(data="aGVsbG8=", mime_type="audio/wav"),
                types.ResourceLink(name="doc", uri="https://example.org/doc"),
                types.EmbeddedResource(
                    resource=types.TextResourceContents(uri="file:///a.txt", text="inside")
                ),
                types.EmbeddedResource(
                    resource=types.BlobResourceContents(
                        uri="file:///b.bin", blob="AAAA", mime_type="application/zip"
                    )
                ),
            ]
        )
    )
    assert result.success
    assert result.metadata == {"is_image": True, "base64": "aGVsbG8=", "mime_type": "image/png"}
    lines = result.output.split("\n\n")
    assert lines[0] == "first"
    assert "attached for you to see" in lines[1] and "not attached" in lines[2]
    assert "[audio: audio/wav, not shown]" in lines[3]
    assert lines[4] == "[resource: doc] https://example.org/doc"
    assert lines[5] == "inside"
    assert "file:///b.bin (application/zip, binary, not shown)" in lines[6]


def test_an_image_over_the_limit_is_not_attached() -> None:
    big = types.ImageContent(data="A" * 4000, mime_type="image/png")
    result = to_result(types.CallToolResult(content=[big]), image_max_bytes=1000)
    assert result.metadata == {} and "over 1000 bytes" in result.output


def test_is_error_is_a_failure_with_the_servers_message() -> None:
    with pytest.raises(ToolError, match="no such city"):
        to_result(
            types.CallToolResult(content=[types.TextContent(text="no such city")], is_error=True)
        )


def test_structured_content_alone_is_shown_as_json() -> None:
    result = to_result(types.CallToolResult(content=[], structured_content={"t": 21}))
    assert result.output == '{"t": 21}'
