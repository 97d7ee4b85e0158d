"""The sandboxed side of user tools: the only process that imports a user tool's file.

The server never imports one (tools/user_tool_check.py describes files with this module,
tools/user_tool_call.py calls a tool with it, each in a sandboxed process of its own):

    python -I -c <bootstrap> MEMORY PROJECT_ROOT describe FILE…
    python -I -c <bootstrap> MEMORY PROJECT_ROOT call REQUEST_FILE

Formats of a tool file: module-level ``name``, ``description``, ``parameters`` and
``execute(params)`` or ``execute(params, ctx)`` (async, or sync: run in a worker
thread); a :class:`tools.Tool` subclass; or any class with ``name`` and an
``execute(self, params)`` method. The answers are in ``tools.user_tool_protocol``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from events.types import Event, NoteSaved, ScratchpadUpdated, TodoUpdated
from tools.base import Tool, ToolError, ToolResult, cap_result, fail, ok
from tools.context import ToolContext
from tools.settings import ToolSettings
from tools.state import InMemoryToolState
from tools.user_tool_protocol import (
    ANSWER_PREFIX,
    STATE_EVENTS,
    CallAnswer,
    CallRequest,
    FileAnswer,
    ToolSpec,
)


class ToolLoadError(Exception):
    """A user tool file that cannot become a tool; the message says why."""


class CallableTool(Tool):
    """A tool around a plain ``execute(params)`` or ``execute(params, ctx)`` function.

    It may be async (preferred) or sync (run in a worker thread). It returns a string,
    a :class:`ToolResult`, or anything JSON-serialisable; raising means failure.
    """

    def __init__(self, *, obj: Any, fn: Callable[..., Any]) -> None:
        name = getattr(obj, "name", None)
        self.name = name if isinstance(name, str) else ""
        self.description = getattr(obj, "description", "")
        self.parameters = getattr(obj, "parameters", {"type": "object", "properties": {}})
        self.idempotent = getattr(obj, "idempotent", False)
        self.declared_timeout_s = getattr(obj, "timeout_s", None)
        self.declared_approval = getattr(obj, "approval", None)
        self._fn = fn
        self._wants_ctx = _arity(fn, self.name) == 2

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        call_args: tuple[Any, ...] = (dict(args), ctx) if self._wants_ctx else (dict(args),)
        if inspect.iscoroutinefunction(self._fn):
            value = await self._fn(*call_args)
        else:
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


def tools_in_module(module: ModuleType) -> list[Tool]:
    """The tools a loaded module defines, in module format or class format."""
    execute = getattr(module, "execute", None)
    if callable(execute) and hasattr(module, "name"):
        if not isinstance(getattr(module, "name", None), str):
            raise ToolLoadError("module-level 'name' must be a string")
        return [CallableTool(obj=module, fn=execute)]
    found: list[Tool] = []
    for obj in vars(module).values():
        if not isinstance(obj, type) or obj.__module__ != module.__name__:
            continue
        if issubclass(obj, Tool):
            if not inspect.isabstract(obj):
                found.append(obj())
        elif callable(getattr(obj, "execute", None)) and isinstance(
            getattr(obj, "name", None), str
        ):
            instance: Any = obj()
            found.append(CallableTool(obj=instance, fn=instance.execute))
    if not found:
        raise ToolLoadError(
            "defines no tool: expected module-level name, description, parameters and "
            "async def execute(params), or a Tool subclass"
        )
    return found


def describe(tool: Tool) -> ToolSpec:
    """A loaded tool as data (what JSON cannot carry is an error here, not in the server)."""
    name = getattr(tool, "name", None)
    if not isinstance(name, str):
        raise ToolLoadError(f"tool name must be a string, got {name!r}")
    description = getattr(tool, "description", None)
    if not isinstance(description, str):
        raise ToolLoadError(f"tool '{name}': description must be a non-empty string")
    if isinstance(tool, CallableTool):
        timeout, approval = tool.declared_timeout_s, tool.declared_approval
    else:
        timeout = tool.timeout_s
        # Declared by the tool's own class (or instance), not inherited from Tool's "auto".
        own = [k for k in type(tool).__mro__ if k not in (Tool, object)]
        declared = any("approval" in vars(k) for k in own) or "approval" in vars(tool)
        approval = tool.approval if declared else None
    try:
        parameters = json.loads(json.dumps(getattr(tool, "parameters", None)))
        return msgspec.convert(
            {
                "name": name,
                "description": description,
                "parameters": parameters,
                "idempotent": bool(getattr(tool, "idempotent", False)),
                "timeout_s": timeout,
                "approval": approval,
            },
            ToolSpec,
        )
    except (TypeError, ValueError, msgspec.ValidationError) as exc:
        raise ToolLoadError(f"tool '{name}': {exc}") from None


def import_source(path: Path, source: bytes) -> ModuleType:
    """``source`` run as the module of ``path`` (the bytes given, not the file read again)."""
    module_name = f"_navi_user_tool_{path.stem}"
    spec = importlib.util.spec_from_loader(module_name, loader=None, origin=str(path))
    if spec is None:
        raise ToolLoadError("not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    # Registered while it runs: dataclasses and typing look their module up by name.
    sys.modules[module_name] = module
    exec(compile(source, str(path), "exec"), module.__dict__)  # the tool's code, in the sandbox
    return module


def describe_exception(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"SyntaxError: {exc.msg}{where}"
    if isinstance(exc, ToolLoadError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _describe_file(path: Path) -> FileAnswer:
    source = path.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    tools = [describe(tool) for tool in tools_in_module(import_source(path, source))]
    return FileAnswer(path=str(path), sha256=digest, tools=tuple(tools))


def _answer(out: Any, value: object) -> None:
    # After what the tool printed, on a line of its own.
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    out.write(f"\n{ANSWER_PREFIX}{msgspec.json.encode(value).decode()}\n")
    out.flush()


def describe_command(out: Any, paths: Sequence[str]) -> int:
    for path in paths:
        out.write(f"\n{ANSWER_PREFIX}start {path}\n")
        out.flush()
        try:
            answer = _describe_file(Path(path))
        except BaseException as exc:  # SystemExit and KeyboardInterrupt in module code too
            answer = FileAnswer(path=path, error=describe_exception(exc))
        _answer(out, answer)
    return 0


def _state(request: CallRequest) -> InMemoryToolState:
    """The session's tool state as the server sees it now, to read and to add to."""
    given = request.context
    events: list[Event] = [TodoUpdated(items=given.todo)] if given.todo else []
    events += [ScratchpadUpdated(section=k, content=v) for k, v in given.scratchpad.items()]
    events += [NoteSaved(note_id=k, text=v) for k, v in given.notes.items()]
    return InMemoryToolState.from_events(events)


def _load(request: CallRequest) -> Tool:
    """The tool the request names, from the very bytes the server loaded."""
    source = Path(request.path).read_bytes()
    if hashlib.sha256(source).hexdigest() != request.sha256:
        raise ToolError(f"{request.path} changed since the tools were loaded: reload them")
    found = {t.name: t for t in tools_in_module(import_source(Path(request.path), source))}
    tool = found.get(request.name)
    if tool is None:
        raise ToolError(f"{request.path} no longer defines '{request.name}'")
    return tool


async def _run(tool: Tool, request: CallRequest) -> CallAnswer:
    state = _state(request)
    seen = len(state.events)

    async def emit(event: Event) -> None:
        if not isinstance(event, STATE_EVENTS):
            raise ToolError(
                "a user tool may record only todo, scratchpad and note events, "
                f"not {type(event).__name__}"
            )
        state.apply(event)

    given = request.context
    ctx = ToolContext(
        session_id=given.session_id,
        files_dir=Path(given.files_dir),
        emit=emit,
        state=state,
        user_id=given.user_id,
        settings=ToolSettings(output_max_chars=given.output_max_chars),
        profile=given.profile,
        call_id=given.call_id,
    )
    try:
        result = as_result(await tool.call(dict(request.arguments), ctx))
    except ToolError as exc:
        result = fail(str(exc))
    except Exception as exc:
        result = fail(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    recorded = tuple(e for e in state.events[seen:] if isinstance(e, STATE_EVENTS))
    return CallAnswer(result=cap_result(result, given.output_max_chars), events=recorded)


def call_command(out: Any, request_file: str) -> int:
    request = msgspec.json.decode(Path(request_file).read_bytes(), type=CallRequest)
    try:
        answer = anyio.run(_run, _load(request), request)
    except ToolError as exc:
        answer = CallAnswer(result=fail(str(exc)))
    except BaseException as exc:  # module code that raised or exited while importing
        answer = CallAnswer(result=fail(describe_exception(exc)))
    try:
        _answer(out, answer)
    except (TypeError, ValueError) as exc:  # metadata that JSON cannot carry
        _answer(out, CallAnswer(result=fail(f"the tool's result cannot be sent: {exc}")))
    return 0


def main(argv: Sequence[str]) -> int:
    """The process's entry point (see the module docstring)."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    command, *rest = argv
    if command == "describe":
        return describe_command(out, rest)
    if command == "call":
        return call_command(out, rest[0])
    raise SystemExit(f"unknown command {command!r}")
