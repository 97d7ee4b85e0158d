"""User tools in ``TOOLS_DIR``: what the server knows of them, and ``enabled.json``.

The server never imports a user tool's file. A sandboxed process imports each file and
says what tools it defines, as data (tools/user_tool_check.py); the server checks that
data like any input from outside (name, description, JSON schema, approval) and keeps a
:class:`UserTool` per tool, whose calls each run in a sandboxed process of their own
(tools/user_tool_call.py). One broken file is reported (path + error) and the others
still load.

``enabled.json`` is the admin's word on the folder, either a list of names or

    {"enabled": ["weather"], "approval": {"weather": "auto"}}

``enabled``: the tools offered in every profile. ``approval``: the admin's confirmation
of a tool's approval policy. A user tool asks before each call unless this confirms
otherwise; its own ``approval`` attribute can only make it stricter
(:func:`effective_approval`), never looser: it is code from outside, maybe written by
the agent.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from tools.base import APPROVALS, Approval, Tool, ToolResult
from tools.context import ToolContext
from tools.settings import ToolSettings
from tools.user_tool_call import call_user_tool
from tools.user_tool_check import check_files
from tools.user_tool_protocol import ToolSpec
from tools.validation import check_schema

ENABLED_FILE = "enabled.json"
TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
_STRICTNESS: dict[str, int] = {"auto": 0, "ask": 1, "deny": 2}


@dataclass(frozen=True)
class LoadError:
    path: str
    error: str


@dataclass(frozen=True)
class Enabled:
    """What ``enabled.json`` says: names offered everywhere, confirmed approvals."""

    names: tuple[str, ...] = ()
    approvals: Mapping[str, Approval] = field(default_factory=dict)


@dataclass
class UserToolSet:
    tools: dict[str, Tool] = field(default_factory=dict)
    errors: list[LoadError] = field(default_factory=list)
    # Names in enabled.json: offered in every profile.
    enabled: tuple[str, ...] = ()


class UserTool(Tool):
    """A user tool as the server holds it: data from the sandboxed loader. Each call runs
    the tool's code in a sandboxed process of its own."""

    # The run makes the session's files folder before a call: the sandbox mounts it.
    uses_files = True

    def __init__(
        self, spec: ToolSpec, *, path: Path, sha256: str, approval: Approval, timeout_s: float
    ) -> None:
        self.name = spec.name
        self.description = spec.description
        self.parameters = spec.parameters
        self.idempotent = spec.idempotent
        self.timeout_s = timeout_s
        self.approval = approval
        self.declared_approval = spec.approval
        self.path = path
        self.sha256 = sha256

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await call_user_tool(
            path=self.path,
            sha256=self.sha256,
            name=self.name,
            timeout_s=self.timeout_s,
            args=args,
            ctx=ctx,
        )


def effective_approval(declared: str | None, confirmed: str | None) -> Approval:
    """A user tool's policy: the admin's confirmation in enabled.json ("ask" without one),
    made stricter by the tool's own ``approval`` if it asks for more."""
    admin = confirmed if confirmed in _STRICTNESS else "ask"
    own = declared if declared in _STRICTNESS else "auto"
    return cast(Approval, max(admin, own, key=_STRICTNESS.__getitem__))


def spec_problem(spec: ToolSpec) -> str | None:
    """Why the loader's description of a tool is not a usable tool (it came from the
    tool's own process: untrusted), or None."""
    name = spec.name
    if not TOOL_NAME.match(name):
        return f"tool name must match {TOOL_NAME.pattern} (letters, digits, _ and -), got {name!r}"
    if not spec.description.strip():
        return f"tool '{name}': description must be a non-empty string"
    problems = check_schema(spec.parameters)
    if problems:
        return f"tool '{name}': " + "; ".join(problems)
    if spec.approval is not None and spec.approval not in APPROVALS:
        return (
            f"tool '{name}': approval must be one of {', '.join(APPROVALS)}, got {spec.approval!r}"
        )
    if spec.timeout_s is not None and not (math.isfinite(spec.timeout_s) and spec.timeout_s > 0):
        return f"tool '{name}': timeout_s must be a positive number of seconds"
    return None


def tool_files(tools_dir: Path) -> list[Path]:
    if not tools_dir.is_dir():
        return []
    return sorted(p for p in tools_dir.glob("*.py") if not p.name.startswith("_") and p.is_file())


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def read_enabled(tools_dir: Path) -> tuple[Enabled, LoadError | None]:
    """``enabled.json``; a bad file (or a bad part of it) is a reported error, not a crash."""
    path = tools_dir / ENABLED_FILE
    if not path.exists():
        return Enabled(), None
    try:
        data = _read_json(path)
    except (OSError, ValueError) as exc:
        return Enabled(), LoadError(str(path), f"cannot read enabled.json: {exc}")
    approvals: Any = {}
    if isinstance(data, dict):
        data, approvals = data.get("enabled", []), data.get("approval", {})
    if not isinstance(data, list) or not all(isinstance(n, str) for n in data):
        return Enabled(), LoadError(str(path), "enabled.json must be a JSON list of tool names")
    names = tuple(dict.fromkeys(data))
    if not isinstance(approvals, dict) or not all(
        isinstance(k, str) and v in APPROVALS for k, v in approvals.items()
    ):
        problem = (
            "enabled.json: 'approval' must map tool names to one of "
            f"{', '.join(APPROVALS)}; no approval is confirmed (user tools ask)"
        )
        return Enabled(names), LoadError(str(path), problem)
    return Enabled(names, dict(approvals)), None


def add_enabled(tools_dir: Path, name: str) -> None:
    """Offer ``name`` in every profile, and drop any approval confirmed for that name: a
    tool written anew asks until an admin confirms again (written atomically; a broken
    file is replaced). The file keeps its form (a list, or an object with its keys)."""
    path = tools_dir / ENABLED_FILE
    try:
        data = _read_json(path) if path.exists() else []
    except (OSError, ValueError):
        data = []
    if isinstance(data, dict):
        names, _ = read_enabled(tools_dir)
        data["enabled"] = list(dict.fromkeys([*names.names, name]))
        approvals = data.get("approval")
        if isinstance(approvals, dict):
            approvals.pop(name, None)
    else:
        names, _ = read_enabled(tools_dir)
        data = list(dict.fromkeys([*names.names, name]))
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def load_user_tools(
    tools_dir: Path, reserved: Iterable[str] = (), settings: ToolSettings | None = None
) -> UserToolSet:
    """Every tool file in ``tools_dir``, described in the sandbox; names in ``reserved``
    (built-ins) are refused. ``settings.default_timeout_s`` applies to tools that set
    no ``timeout_s``; ``settings.unsandboxed_tools`` runs the loader unsandboxed."""
    settings = settings or ToolSettings()
    builtin = frozenset(reserved)
    taken = set(builtin)
    result = UserToolSet()
    enabled, error = read_enabled(tools_dir)
    files = tool_files(tools_dir)
    verdicts = check_files(files, settings) if files else {}
    for path in files:
        verdict = verdicts[path]
        if verdict.error is not None:
            result.errors.append(LoadError(str(path), verdict.error))
            continue
        problems = [p for p in map(spec_problem, verdict.tools) if p is not None]
        if problems:
            # The file's tools load together or not at all, as when it was imported here.
            result.errors.append(LoadError(str(path), problems[0]))
            continue
        for spec in verdict.tools:
            if spec.name in taken:
                owner = "a built-in tool" if spec.name in builtin else "another user tool"
                result.errors.append(
                    LoadError(str(path), f"tool name '{spec.name}' is already used by {owner}")
                )
                continue
            taken.add(spec.name)
            result.tools[spec.name] = UserTool(
                spec,
                path=path.absolute(),
                sha256=verdict.sha256,
                approval=effective_approval(spec.approval, enabled.approvals.get(spec.name)),
                timeout_s=spec.timeout_s or settings.default_timeout_s,
            )
    if error is not None:
        result.errors.append(error)
    result.enabled = enabled.names
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
