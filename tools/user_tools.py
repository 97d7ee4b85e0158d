"""Loading user tools from ``TOOLS_DIR``: module format, class format, ``enabled.json``.

Every load imports each file under a fresh module name, so a reload picks up edits.
One broken file is reported (path + error) and the others still load. A file is
imported here only after it passed the check in a sandboxed subprocess
(``tools.user_tool_check``): a broken file's module-level code never runs in the server.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio.to_thread

from tools.base import APPROVALS, Tool, ToolResult, ok
from tools.context import ToolContext
from tools.user_tool_check import check_files
from tools.validation import check_schema

ENABLED_FILE = "enabled.json"
TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_generation = itertools.count(1)


class ToolLoadError(Exception):
    """A user tool file that cannot become a tool; the message says why."""


@dataclass(frozen=True)
class LoadError:
    path: str
    error: str


@dataclass
class UserToolSet:
    tools: dict[str, Tool] = field(default_factory=dict)
    errors: list[LoadError] = field(default_factory=list)
    # Names in enabled.json: offered in every profile.
    enabled: tuple[str, ...] = ()
    module_names: list[str] = field(default_factory=list)


class CallableTool(Tool):
    """A tool around a plain ``execute(params)`` or ``execute(params, ctx)`` function.

    It may be async (preferred) or sync (run in a worker thread). It returns a string,
    a :class:`ToolResult`, or anything JSON-serialisable; raising means failure.
    """

    def __init__(
        self,
        *,
        name: str,
        description: str,
        parameters: dict[str, Any],
        fn: Callable[..., Any],
        idempotent: bool = False,
        timeout_s: float = 60.0,
        source: str = "",
        approval: Any = "ask",
    ) -> None:
        self.name = name
        self.description = description
        self.parameters = parameters
        self.idempotent = idempotent
        self.timeout_s = timeout_s
        self.source = source
        self.approval = approval
        self._fn = fn
        self._wants_ctx = _arity(fn, name) == 2

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        call_args: tuple[Any, ...] = (dict(args), ctx) if self._wants_ctx else (dict(args),)
        if inspect.iscoroutinefunction(self._fn):
            value = await self._fn(*call_args)
        else:
            # Abandoned on timeout: a sync tool cannot be interrupted, but the run goes on.
            value = await anyio.to_thread.run_sync(
                partial(self._fn, *call_args), abandon_on_cancel=True
            )
            if inspect.isawaitable(value):
                value = await value
        return as_result(value)


def as_result(value: object) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ok("")
    if isinstance(value, str):
        return ok(value)
    try:
        return ok(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return ok(str(value))


def _arity(fn: Callable[..., Any], name: str) -> int:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise ToolLoadError(f"tool '{name}': cannot inspect execute: {exc}") from None
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    if len(positional) not in (1, 2):
        raise ToolLoadError(
            f"tool '{name}': execute must take (params) or (params, ctx), "
            f"it takes {len(positional)} required argument(s)"
        )
    return len(positional)


def _check_tool(tool: Tool) -> Tool:
    """A loaded tool checked; a user tool asks before each call unless it declares
    ``approval`` itself (it is code from outside, maybe written by the agent)."""
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        raise ToolLoadError(
            f"tool name must match {TOOL_NAME.pattern} (letters, digits, _ and -), got {name!r}"
        )
    description = getattr(tool, "description", None)
    if not isinstance(description, str) or not description.strip():
        raise ToolLoadError(f"tool '{name}': description must be a non-empty string")
    problems = check_schema(getattr(tool, "parameters", None))
    if problems:
        raise ToolLoadError(f"tool '{name}': " + "; ".join(problems))
    declared = any("approval" in vars(k) for k in type(tool).__mro__ if k not in (Tool, object))
    if not declared and "approval" not in vars(tool):
        tool.approval = "ask"
    if tool.approval not in APPROVALS:
        raise ToolLoadError(
            f"tool '{name}': approval must be one of {', '.join(APPROVALS)}, got {tool.approval!r}"
        )
    return tool


def _from_namespace(
    obj: Any, fn: Callable[..., Any], source: str, default_timeout_s: float
) -> Tool:
    name = getattr(obj, "name", None)
    return CallableTool(
        name=name if isinstance(name, str) else "",
        description=getattr(obj, "description", ""),
        parameters=getattr(obj, "parameters", {"type": "object", "properties": {}}),
        fn=fn,
        idempotent=bool(getattr(obj, "idempotent", False)),
        timeout_s=float(getattr(obj, "timeout_s", default_timeout_s)),
        source=source,
        approval=getattr(obj, "approval", "ask"),
    )


def tools_in_module(module: ModuleType, source: str, default_timeout_s: float = 60.0) -> list[Tool]:
    """The tools a loaded module defines, in module format or class format."""
    execute = getattr(module, "execute", None)
    if callable(execute) and hasattr(module, "name"):
        _check_name_attr(module)
        return [_check_tool(_from_namespace(module, execute, source, default_timeout_s))]

    found: list[Tool] = []
    for obj in vars(module).values():
        if not isinstance(obj, type) or obj.__module__ != module.__name__:
            continue
        if issubclass(obj, Tool):
            if inspect.isabstract(obj):
                continue
            found.append(_check_tool(obj()))
        elif callable(getattr(obj, "execute", None)) and isinstance(
            getattr(obj, "name", None), str
        ):
            instance: Any = obj()
            tool = _from_namespace(instance, instance.execute, source, default_timeout_s)
            found.append(_check_tool(tool))
    if not found:
        raise ToolLoadError(
            "defines no tool: expected module-level name, description, parameters and "
            "async def execute(params), or a Tool subclass"
        )
    return found


def _check_name_attr(module: ModuleType) -> None:
    if not isinstance(getattr(module, "name", None), str):
        raise ToolLoadError("module-level 'name' must be a string")


def import_file(path: Path) -> ModuleType:
    """Import ``path`` as a new module every time (a unique name per load)."""
    module_name = f"_navi_user_tool_{path.stem}_{next(_generation)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ToolLoadError("not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    # Registered while it runs: dataclasses and typing look their module up by name.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def describe_exception(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"SyntaxError: {exc.msg}{where}"
    if isinstance(exc, ToolLoadError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def load_file(path: Path, default_timeout_s: float = 60.0) -> tuple[list[Tool], str]:
    """Tools from one file and the module name it was loaded under; raises on any problem."""
    try:
        module = import_file(path)
    except Exception as exc:
        raise ToolLoadError(describe_exception(exc)) from exc
    try:
        return tools_in_module(module, str(path), default_timeout_s), module.__name__
    except Exception as exc:
        sys.modules.pop(module.__name__, None)
        raise ToolLoadError(describe_exception(exc)) from exc


def child_main(paths: Sequence[str]) -> int:
    """The child of :mod:`tools.user_tool_check`, in the sandbox: import and check each
    file, answering on a private descriptor."""
    # The tool's own prints go to stderr; only the checker writes the answers.
    answers = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    for path in paths:
        answers.write(f"start {path}\n")
        try:
            tools, _ = load_file(Path(path))
            answer = {"path": path, "names": [tool.name for tool in tools]}
        except BaseException as exc:  # SystemExit and KeyboardInterrupt in module code too
            answer = {"path": path, "error": describe_exception(exc)}
        answers.write(json.dumps(answer) + "\n")
    answers.flush()
    return 0


def tool_files(tools_dir: Path) -> list[Path]:
    if not tools_dir.is_dir():
        return []
    return sorted(p for p in tools_dir.glob("*.py") if not p.name.startswith("_") and p.is_file())


def read_enabled(tools_dir: Path) -> tuple[tuple[str, ...], LoadError | None]:
    """Names in ``enabled.json`` (a JSON list); a bad file is a reported error, not a crash."""
    path = tools_dir / ENABLED_FILE
    if not path.exists():
        return (), None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return (), LoadError(str(path), f"cannot read enabled.json: {exc}")
    if isinstance(data, dict):
        data = data.get("enabled", [])
    if not isinstance(data, list) or not all(isinstance(n, str) for n in data):
        return (), LoadError(str(path), "enabled.json must be a JSON list of tool names")
    return tuple(dict.fromkeys(data)), None


def add_enabled(tools_dir: Path, name: str) -> None:
    """Add ``name`` to ``enabled.json`` (written atomically; a broken file is replaced)."""
    names, _ = read_enabled(tools_dir)
    if name in names:
        return
    write_atomic(tools_dir / ENABLED_FILE, json.dumps([*names, name], indent=2) + "\n")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def load_user_tools(
    tools_dir: Path, reserved: Iterable[str] = (), default_timeout_s: float = 60.0
) -> UserToolSet:
    """Load every tool file in ``tools_dir``; names in ``reserved`` (built-ins) are refused.

    ``default_timeout_s`` applies to module-format tools that set no ``timeout_s``.
    """
    builtin = frozenset(reserved)
    taken = set(builtin)
    result = UserToolSet()
    files = tool_files(tools_dir)
    verdicts = check_files(files) if files else {}
    for path in files:
        verdict = verdicts[path]
        if verdict.error is not None:
            result.errors.append(LoadError(str(path), verdict.error))
            continue
        try:
            tools, module_name = load_file(path, default_timeout_s)
        except ToolLoadError as exc:
            result.errors.append(LoadError(str(path), str(exc)))
            continue
        result.module_names.append(module_name)
        for tool in tools:
            if tool.name in taken:
                owner = "a built-in tool" if tool.name in builtin else "another user tool"
                result.errors.append(
                    LoadError(str(path), f"tool name '{tool.name}' is already used by {owner}")
                )
                continue
            taken.add(tool.name)
            result.tools[tool.name] = tool
    enabled, error = read_enabled(tools_dir)
    if error is not None:
        result.errors.append(error)
    result.enabled = enabled
    return result


def snapshot(tools_dir: Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when a tool file or enabled.json changes: a cheap poll fingerprint."""
    entries: list[tuple[str, int, int]] = []
    for path in [*tool_files(tools_dir), tools_dir / ENABLED_FILE]:
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((path.name, stat.st_mtime_ns, stat.st_size))
    return tuple(entries)
