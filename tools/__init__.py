"""Navi's tools: the contract, the registry, the built-ins and the user-tool loader.

The registry (and with it structlog, jsonschema and the loader) is imported on first
use: a user tool's sandboxed process imports ``tools`` for ``Tool``, ``ok`` and
``ToolContext``, and starts once per call (bench/user_tools.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tools.base import Tool, ToolError, ToolResult, fail, ok
from tools.context import ProfileInfo, ToolContext
from tools.settings import ToolSettings
from tools.state import InMemoryToolState

if TYPE_CHECKING:
    from tools.registry import ToolRegistry

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


def __getattr__(name: str) -> Any:
    if name == "ToolRegistry":
        from tools.registry import ToolRegistry

        return ToolRegistry
    raise AttributeError(f"module 'tools' has no attribute {name!r}")


def create_registry(
    settings: ToolSettings | None = None, **builtin_options: object
) -> ToolRegistry:
    """A registry with every built-in registered and the user tools of TOOLS_DIR loaded."""
    from tools.builtin import builtin_tools
    from tools.registry import ToolRegistry

    registry = ToolRegistry(settings or ToolSettings.from_env())
    for tool in builtin_tools(registry, **builtin_options):  # type: ignore[arg-type]
        registry.register_builtin(tool)
    registry.reload()
    return registry
