"""The live set of tools (built-ins + user tools) and the one safe way to call them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import structlog

from tools.base import Tool, ToolError, ToolResult, cap_result, fail
from tools.context import ToolContext
from tools.settings import ToolSettings
from tools.user_tools import LoadError, UserToolSet, as_result, load_user_tools, snapshot
from tools.validation import ensure_valid_schema, type_name, validate

log = structlog.get_logger()


@dataclass(frozen=True)
class ReloadReport:
    loaded: tuple[str, ...]
    errors: tuple[LoadError, ...]
    enabled: tuple[str, ...]

    def describe(self) -> str:
        lines = [f"Loaded {len(self.loaded)} user tool(s): {', '.join(self.loaded) or 'none'}."]
        if self.enabled:
            lines.append(f"Enabled in every profile: {', '.join(self.enabled)}.")
        for error in self.errors:
            lines.append(f"Failed to load {error.path}: {error.error}")
        return "\n".join(lines)


class ToolRegistry:
    def __init__(self, settings: ToolSettings | None = None) -> None:
        self.settings = settings or ToolSettings()
        self._builtins: dict[str, Tool] = {}
        self._user = UserToolSet()
        self._fingerprint: tuple[tuple[str, int, int], ...] = ()
        # Bumped whenever the set of tools changes: what callers derived from it (the
        # schemas offered to the LLM) is stale then.
        self.generation = 0

    # ------------------------------------------------------------ contents

    @property
    def tools_dir(self) -> Path:
        return self.settings.tools_path

    def register_builtin(self, tool: Tool) -> None:
        """Add a tool; :class:`~tools.validation.ToolSchemaError` if its parameters
        are not a usable JSON schema (the message says why)."""
        ensure_valid_schema(tool.name, tool.parameters)
        self._builtins[tool.name] = tool
        self.generation += 1

    def get(self, name: str) -> Tool | None:
        return self._builtins.get(name) or self._user.tools.get(name)

    def is_builtin(self, name: str) -> bool:
        return name in self._builtins

    def names(self) -> list[str]:
        return [*self._builtins, *self._user.tools]

    def tools(self) -> list[Tool]:
        return [*self._builtins.values(), *self._user.tools.values()]

    @property
    def builtin_names(self) -> tuple[str, ...]:
        return tuple(self._builtins)

    @property
    def user_names(self) -> tuple[str, ...]:
        return tuple(self._user.tools)

    @property
    def load_errors(self) -> tuple[LoadError, ...]:
        return tuple(self._user.errors)

    @property
    def enabled_everywhere(self) -> tuple[str, ...]:
        """Tools named in enabled.json that are loaded: offered in every profile."""
        return tuple(n for n in self._user.enabled if self.get(n) is not None)

    def names_for_profile(self, enabled_tools: Iterable[str]) -> list[str]:
        """A profile's tools that exist, then enabled.json's, without duplicates."""
        wanted = [*enabled_tools, *self.enabled_everywhere]
        return [n for n in dict.fromkeys(wanted) if self.get(n) is not None]

    def schemas_for(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Tools in the OpenAI / Ollama function format; unknown names are skipped."""
        selected = self.names() if names is None else names
        schemas = []
        for name in dict.fromkeys(selected):
            tool = self.get(name)
            if tool is None:
                log.warning("tools.schema_unknown", tool=name)
                continue
            schemas.append(tool.schema())
        return schemas

    def is_idempotent(self, name: str, args: dict[str, Any]) -> bool:
        tool = self.get(name)
        if tool is None:
            return False
        try:
            return tool.is_idempotent(args)
        except Exception:
            return False

    # ------------------------------------------------------------ user tools

    def reload(self) -> ReloadReport:
        """Load user tools afresh; built-ins stay. The new set replaces the old at once."""
        fingerprint = snapshot(self.tools_dir)
        fresh = load_user_tools(
            self.tools_dir,
            reserved=self._builtins,
            default_timeout_s=self.settings.default_timeout_s,
        )
        for module_name in self._user.module_names:
            sys.modules.pop(module_name, None)
        self._user = fresh
        self._fingerprint = fingerprint
        self.generation += 1
        for error in fresh.errors:
            log.warning("tools.load_failed", path=error.path, error=error.error)
        log.info("tools.reloaded", user_tools=list(fresh.tools), errors=len(fresh.errors))
        return ReloadReport(
            loaded=tuple(fresh.tools), errors=tuple(fresh.errors), enabled=fresh.enabled
        )

    def reload_if_changed(self) -> ReloadReport | None:
        """Reload when a tool file or enabled.json changed since the last load (for polling)."""
        if snapshot(self.tools_dir) == self._fingerprint:
            return None
        return self.reload()

    async def watch(self, interval_s: float = 2.0) -> None:
        """Poll the tools folder forever and reload on change; run it in a task group."""
        while True:
            await anyio.sleep(interval_s)
            self.reload_if_changed()

    # ------------------------------------------------------------ lifecycle

    async def close_session(self, session_id: str) -> None:
        """Release what tools hold for a session (ssh_exec's pooled connections)."""
        for tool in self.tools():
            closer = getattr(tool, "close_session", None)
            if closer is not None:
                await closer(session_id)

    async def aclose(self) -> None:
        """Release everything tools hold (at server shutdown)."""
        for tool in self.tools():
            closer = getattr(tool, "aclose", None)
            if closer is not None:
                await closer()

    # ------------------------------------------------------------ calling

    async def execute(self, name: str, args: object, ctx: ToolContext) -> ToolResult:
        """Run one call. Every failure is a failed result; only cancellation propagates."""
        tool = self.get(name)
        if tool is None:
            available = ", ".join(sorted(self.names())) or "none"
            return fail(f"unknown tool '{name}'. Available tools: {available}")
        if not isinstance(args, dict):
            return fail(
                f"arguments for '{name}' must be a JSON object, got {type_name(args)}",
            )
        problems = validate(args, tool.parameters)
        if problems:
            schema = json.dumps(tool.parameters, ensure_ascii=False)
            return fail(
                f"invalid arguments for '{name}': " + "; ".join(problems),
                f"Error: invalid arguments for '{name}': "
                + "; ".join(problems)
                + f"\nExpected parameters: {schema}",
            )
        if ctx.stop.is_set():
            return fail("stopped before it ran", reason="stopped")
        if getattr(tool, "instant", False):
            return cap_result(await _call(tool, args, ctx), self.settings.output_max_chars)
        try:
            timeout = float(tool.timeout_for(args))
        except Exception:
            timeout = tool.timeout_s
        result = await _run_guarded(tool, args, ctx, timeout)
        return cap_result(result, self.settings.output_max_chars)


async def _run_guarded(
    tool: Tool, args: dict[str, Any], ctx: ToolContext, limit_s: float
) -> ToolResult:
    outcome: ToolResult | None = None
    scoped = getattr(ctx.stop, "scope", None)
    if scoped is not None:
        # The stop signal cancels this scope itself (Navi's does): no watcher task.
        with scoped(anyio.current_time() + limit_s) as scope:
            outcome = await _call(tool, args, ctx)
        if scope.cancelled_caught and not ctx.stop.is_set():
            outcome = _timed_out(tool, limit_s)
    else:
        outcome = await _watching_stop(tool, args, ctx, limit_s)
    if outcome is None:
        return fail(f"'{tool.name}' was stopped", reason="stopped")
    return outcome


async def _watching_stop(
    tool: Tool, args: dict[str, Any], ctx: ToolContext, limit_s: float
) -> ToolResult | None:
    """For a stop signal that can only be waited on: a task waits and cancels the call."""
    outcome: ToolResult | None = None

    async def watch_stop(scope: anyio.CancelScope) -> None:
        await ctx.stop.wait()
        scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch_stop, tg.cancel_scope)
        with anyio.move_on_after(limit_s) as deadline:
            outcome = await _call(tool, args, ctx)
        if deadline.cancelled_caught:
            outcome = _timed_out(tool, limit_s)
        tg.cancel_scope.cancel()
    return outcome


async def _call(tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """The call itself; a tool's exception is a failed result (cancellation passes)."""
    try:
        outcome = await tool.call(args, ctx)
    except ToolError as exc:
        return fail(str(exc))
    except Exception as exc:
        log.warning("tools.call_raised", tool=tool.name, error=repr(exc))
        return fail(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    # A class-format user tool may return a bare string; it still reaches the LLM as one.
    return outcome if isinstance(outcome, ToolResult) else as_result(outcome)


def _timed_out(tool: Tool, limit_s: float) -> ToolResult:
    return fail(f"'{tool.name}' timed out after {limit_s:g}s", reason="timeout")
