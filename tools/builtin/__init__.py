"""Navi's built-in tools, one module each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.base import Tool
from tools.builtin.code_exec import CodeExecTool
from tools.builtin.filesystem import FilesystemTool
from tools.builtin.http_request import HttpRequestTool
from tools.builtin.image_view import ImageViewTool
from tools.builtin.meta import ListToolsTool, ReloadToolsTool, ToolManualTool, WriteToolTool
from tools.builtin.scratchpad import ScratchpadTool
from tools.builtin.ssh_exec import SshExecTool, SshPool
from tools.builtin.terminal import TerminalTool
from tools.builtin.todo import TodoTool
from tools.builtin.web_search import SearchBackend, WebSearchTool
from tools.builtin.web_view import WebViewTool

if TYPE_CHECKING:
    from tools.registry import ToolRegistry

__all__ = ["builtin_tools"]


def builtin_tools(
    registry: ToolRegistry,
    *,
    ssh_pool: SshPool | None = None,
    search_backend: SearchBackend | None = None,
) -> list[Tool]:
    """Every built-in of this package (memory, spawn_agent, switch_profile live in navi)."""
    return [
        WebSearchTool(search_backend),
        WebViewTool(),
        FilesystemTool(),
        HttpRequestTool(),
        CodeExecTool(),
        TerminalTool(),
        SshExecTool(ssh_pool),
        ImageViewTool(),
        TodoTool(),
        ScratchpadTool(),
        ReloadToolsTool(registry),
        WriteToolTool(registry),
        ListToolsTool(registry),
        ToolManualTool(registry),
    ]
