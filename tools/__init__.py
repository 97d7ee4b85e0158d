"""Navi's tools: the contract, the registry, the built-ins and the user-tool loader."""

from __future__ import annotations

from tools.base import Tool, ToolError, ToolResult, fail, ok
from tools.context import ProfileInfo, ToolContext
from tools.registry import ToolRegistry
from tools.settings import ToolSettings
from tools.state import InMemoryToolState

__all__ = [
    "InMemoryToolState",
    "ProfileInfo",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "ToolSettings",
    "create_registry",
    "fail",
    "ok",
]


def create_registry(
    settings: ToolSettings | None = None, **builtin_options: object
) -> ToolRegistry:
    """A registry with every built-in registered and the user tools of TOOLS_DIR loaded."""
    from tools.builtin import builtin_tools

    registry = ToolRegistry(settings or ToolSettings.from_env())
    for tool in builtin_tools(registry, **builtin_options):  # type: ignore[arg-type]
        registry.register_builtin(tool)
    registry.reload()
    return registry
