"""Navi as an MCP client: the tools of the MCP servers of ``mcp.json`` as Navi tools."""

from __future__ import annotations

from navi.mcp.client import ServerConnection, ServerStatus
from navi.mcp.config import McpConfig, ServerEntry, load_config, parse_config, tool_name
from navi.mcp.manager import McpManager, probe

__all__ = [
    "McpConfig",
    "McpManager",
    "ServerConnection",
    "ServerEntry",
    "ServerStatus",
    "load_config",
    "parse_config",
    "probe",
    "tool_name",
]
