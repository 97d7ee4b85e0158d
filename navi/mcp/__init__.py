"""Navi as an MCP client: the tools of the MCP servers of ``mcp.json`` as Navi tools."""

from __future__ import annotations

from navi.mcp.config import load_config
from navi.mcp.manager import McpManager, probe

__all__ = [
    "McpManager",
    "load_config",
    "probe",
]
