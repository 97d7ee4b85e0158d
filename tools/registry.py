"""The live set of tools (built-ins, user tools, external tools) and the one safe way
to call them.

External tools come from a *source* outside Navi (``mcp:<server>``: an MCP server's
tools, navi/mcp). A source says which profiles may use its tools; a profile's
``enabled_tools`` cannot add them (:meth:`ToolRegistry.names_for_profile`)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import structlog

from tools.base import (
    APPROVALS,
    Approval,
    CallDescription,
    Tool,
    ToolError,
    ToolResult,
    cap_result,
    default_description,
    fail,
)
from tools.context import ToolContext
from tools.settings import ToolSettings
from tools.user_tool_child import as_result
from tools.user_tools import LoadError, UserToolSet, load_user_tools, snapshot
from tools.validation import check_schema, ensure_valid_schema, type_name, validate

log = structlog.get_logger()


@dataclass(frozen=True)
class ExternalSource:
    """Tools from outside Navi, and the profiles whose runs may call them."""

    tools: dict[str, Tool]
    # None: every profile.
    profiles: frozenset[str] | None = None

    def allows(self, profile_id: str | None) -> bool:
        return self.profiles is None or (profile_id is not None and profile_id in self.profiles)


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
        # Built-ins whose libraries cannot be imported here: name -> why (navi doctor).
        self.unavailable: dict[str, str] = {}
        self._user = UserToolSet()
        self._external: dict[str, ExternalSource] = {}
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
        are not a usable JSON schema (the message says why). A tool whose libraries
        (``Tool.requires``) cannot be imported is left out, with the reason kept in
        :attr:`unavailable`: one tool's broken dependency never stops the server."""
        ensure_valid_schema(tool.name, tool.parameters)
        reason = _missing_requirement(tool.requires)
        if reason:
            self.unavailable[tool.name] = reason
            log.warning("tools.unavailable", tool=tool.name, reason=reason)
            return
        self._builtins[tool.name] = tool
        self.generation += 1

    def get(self, name: str) -> Tool | None:
        found = self._builtins.get(name) or self._user.tools.get(name)
        if found is None:
            for source in self._external.values():
                found = source.tools.get(name)
                if found is not None:
                    break
        return found

    def is_builtin(self, name: str) -> bool:
        return name in self._builtins

    def names(self) -> list[str]:
        return [*self._builtins, *self._user.tools, *self.external_names]

    def tools(self) -> list[Tool]:
        external = [t for s in self._external.values() for t in s.tools.values()]
        return [*self._builtins.values(), *self._user.tools.values(), *external]

    def is_user_tool(self, name: str) -> bool:
        """A tool of the tools folder: code from outside, run in the sandbox. Accounts
        of role ``user`` may call it only when granted (navi/accounts.py)."""
        return name in self._user.tools

    def source_of(self, name: str) -> str:
        """``builtin``, ``user``, or the external source (``mcp:<server>``); "" if unknown."""
        if name in self._builtins:
            return "builtin"
        if name in self._user.tools:
            return "user"
        for source_name, source in self._external.items():
            if name in source.tools:
                return source_name
        return ""

    # ------------------------------------------------------------ external tools

    def set_external(
        self, source: str, tools: Iterable[Tool], *, profiles: Iterable[str] | None = None
    ) -> None:
        """Replace the tools of ``source`` (all at once). A tool whose name a built-in or
        user tool has, or whose parameters are unusable, is left out and logged."""
        kept: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._builtins or tool.name in self._user.tools:
                log.warning("tools.external_shadowed", source=source, tool=tool.name)
                continue
            problems = check_schema(tool.parameters, strict=False)
            if problems:
                log.warning(
                    "tools.external_schema", source=source, tool=tool.name, problems=problems
                )
                continue
            kept[tool.name] = tool
        allowed = None if profiles is None else frozenset(profiles)
        self._external = {**self._external, source: ExternalSource(kept, allowed)}
        self.generation += 1

    def remove_external(self, source: str) -> None:
        if source in self._external:
            self._external = {k: v for k, v in self._external.items() if k != source}
            self.generation += 1

    @property
    def external_names(self) -> tuple[str, ...]:
        return tuple(n for s in self._external.values() for n in s.tools)

    def external_tools(self, source: str) -> tuple[Tool, ...]:
        found = self._external.get(source)
        return tuple(found.tools.values()) if found is not None else ()

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

    def names_for_profile(
        self,
        enabled_tools: Iterable[str],
        *,
        profile_id: str | None = None,
        only_named: bool = False,
    ) -> list[str]:
        """A profile's tools that exist, then enabled.json's, then the external tools
        whose source allows ``profile_id``, without duplicates.

        An external tool is enabled by its source, never by ``enabled_tools`` (naming
        it there does not add it to a profile its source leaves out). ``only_named``:
        of the external tools, only those ``enabled_tools`` names (a profile's explicit
        ``subagent_tools`` list)."""
        named = list(enabled_tools)
        allowed: dict[str, None] = {}
        for source in self._external.values():
            if source.allows(profile_id):
                allowed.update(dict.fromkeys(source.tools))
        external = set(self.external_names)
        own = [n for n in [*named, *self.enabled_everywhere] if n not in external]
        extra = [n for n in named if n in allowed] if only_named else list(allowed)
        return [n for n in dict.fromkeys([*own, *extra]) if self.get(n) is not None]

    def approval_for(self, name: str, args: dict[str, Any]) -> Approval:
        """The tool's own default for this call; "ask" if it cannot tell (a broken
        override must not let a call through). An unknown tool fails anyway."""
        tool = self.get(name)
        if tool is None:
            return "auto"
        try:
            approval = tool.approval_for(args)
        except Exception:
            return "ask"
        return approval if approval in APPROVALS else "ask"

    def describe(self, name: str, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        """The call in plain words (``Tool.describe``); a tool whose description fails
        (its arguments are not what its schema says: the call will fail its check) is
        described by its name."""
        tool = self.get(name)
        if tool is not None:
            try:
                described = tool.describe(args, ctx)
            except Exception as exc:
                log.warning("tool.describe_failed", tool=name, error=repr(exc))
            else:
                if isinstance(described, CallDescription):
                    return described
        return default_description(name)

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
        """Load user tools afresh (described by a sandboxed process: this blocks until it
        answered); built-ins stay. The new set replaces the old at once."""
        fingerprint = snapshot(self.tools_dir)
        fresh = load_user_tools(self.tools_dir, reserved=self._builtins, settings=self.settings)
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
        """Poll the tools folder forever and reload on change; run it in a task group.
        A reload waits for a sandboxed process: a worker thread waits, not the loop."""
        while True:
            await anyio.sleep(interval_s)
            await anyio.to_thread.run_sync(self.reload_if_changed)

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
            if name in self.unavailable:
                return fail(f"tool '{name}' is unavailable here: {self.unavailable[name]}")
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
        try:
            timeout = float(tool.timeout_for(args))
        except Exception:
            timeout = tool.timeout_s
        result = await _run_guarded(tool, args, ctx, timeout)
        return cap_result(result, self.settings.output_max_chars)


def _missing_requirement(modules: Iterable[str]) -> str:
    """Empty when every module imports, else why the first one does not (any error: a
    library can be installed and still fail to import, e.g. lxml without lxml_html_clean)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:
            detail = str(exc).strip().splitlines()
            return (
                f"{module} cannot be imported ({type(exc).__name__}: {detail[0] if detail else ''})"
            )
    return ""


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
    # A tool that returns a bare string (or JSON value): it still reaches the LLM as one.
    return outcome if isinstance(outcome, ToolResult) else as_result(outcome)


def _timed_out(tool: Tool, limit_s: float) -> ToolResult:
    return fail(f"'{tool.name}' timed out after {limit_s:g}s", reason="timeout")
