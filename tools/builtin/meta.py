"""Tools about tools: ``list_tools``, ``tool_manual``, ``reload_tools``, ``write_tool``."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from tools.base import CallDescription, Tool, ToolError, ToolResult, ok
from tools.context import ToolContext
from tools.sandbox import require_sandbox
from tools.user_tool_check import describe_files
from tools.user_tools import add_enabled, spec_problem, write_atomic

if TYPE_CHECKING:
    from tools.registry import ToolRegistry

USER_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class _RegistryTool(Tool):
    uses_files = False

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry


class ListToolsTool(_RegistryTool):
    name = "list_tools"
    description = "List every tool available on this server (built-in, user and MCP server tools)."
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    idempotent = True
    timeout_s = 10.0

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        registry = self.registry
        lines = ["Built-in tools:"]
        for name in registry.builtin_names:
            lines.append(f"- {name}: {_first_line(registry.get(name))}")
        lines.append("User tools:")
        lines += [f"- {name}: {_first_line(registry.get(name))}" for name in registry.user_names]
        if not registry.user_names:
            lines.append("- (none)")
        for error in registry.load_errors:
            lines.append(f"Failed to load {error.path}: {error.error}")
        if registry.external_names:
            lines.append("MCP server tools:")
            lines += [
                f"- {name} ({registry.source_of(name)}): {_first_line(registry.get(name))}"
                for name in registry.external_names
            ]
        return ok("\n".join(lines))


def _first_line(tool: Tool | None) -> str:
    if tool is None:
        return ""
    text = tool.description.strip().split("\n")[0]
    return text if len(text) <= 160 else text[:157] + "..."


class ToolManualTool(_RegistryTool):
    name = "tool_manual"
    description = (
        "Show the manual of a tool: its detailed guide when one is written, otherwise its "
        "parameters explained from its schema."
    )
    parameters = {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1, "description": "Tool name."}},
        "required": ["name"],
        "additionalProperties": False,
    }
    idempotent = True
    timeout_s = 10.0

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name = args["name"]
        tool = self.registry.get(name)
        if tool is None:
            available = ", ".join(sorted(self.registry.names()))
            raise ToolError(f"unknown tool '{name}'. Available tools: {available}")
        manual = ctx.settings.manuals_path / f"{name}.md"
        if USER_TOOL_NAME.match(name) and manual.is_file():
            return ok(manual.read_text(encoding="utf-8"))
        return ok(generate_manual(tool))


def generate_manual(tool: Tool) -> str:
    schema = tool.parameters
    required = set(schema.get("required", []))
    lines = [f"# {tool.name}", "", tool.description.strip(), "", "## Parameters"]
    properties: dict[str, Any] = schema.get("properties", {})
    if not properties:
        lines.append("None.")
    for prop, sub in properties.items():
        kind = sub.get("type", "any")
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        flag = "required" if prop in required else "optional"
        notes = [str(sub["description"])] if sub.get("description") else []
        if "enum" in sub:
            notes.append(f"One of: {', '.join(map(str, sub['enum']))}.")
        lines.append(f"- `{prop}` ({kind}, {flag})" + (": " + " ".join(notes) if notes else ""))
    return "\n".join(lines)


class ReloadToolsTool(_RegistryTool):
    name = "reload_tools"
    approval = "ask"  # offers code the agent may have written as tools
    description = (
        "Reload user tools from the tools folder (after a file was added or changed) without "
        "restarting. Reports each file that failed to load and why."
    )
    parameters = {"type": "object", "properties": {}, "additionalProperties": False}
    idempotent = True
    timeout_s = 30.0

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        # Each reload may load other code: never approved for a whole session.
        return CallDescription(
            summary="Reload the user tools: load the code in the tools folder into Navi",
            target=str(self.registry.tools_dir),
            risk="loads code from the tools folder into the server, where it runs with its rights",
            default_asker="Navi asks before loading tools' code",
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        # Each file is described by a sandboxed process: a worker thread waits.
        report = await anyio.to_thread.run_sync(self.registry.reload)
        return ok(report.describe())


TEMPLATE = """\
name = "my_tool"
description = "What it does and when to use it."
parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

async def execute(params: dict) -> str:
    return params["text"]
"""


class WriteToolTool(_RegistryTool):
    name = "write_tool"
    approval = "ask"  # installs code that later runs as a tool (in the sandbox)
    description = (
        "Install a new user tool permanently: give its name and Python source in the module "
        "format (module-level name, description, parameters JSON schema, and "
        "async def execute(params) -> str that raises on failure). The code is checked by "
        "importing it in a sandbox (no network, no access to the server's files); a broken "
        "tool is rejected with the error. On success it is saved, "
        "enabled in every profile and available from the next message. Each call runs in "
        "the sandbox too: the session's files (NAVI_FILES_DIR) are its only writable folder, "
        "it has no network unless the profile grants it, and it asks before each call.\n"
        "Example:\n" + TEMPLATE
    )
    parameters = {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "Tool name: lowercase letters, digits, _ (the file name too).",
            },
            "code": {"type": "string", "minLength": 1, "description": "The module's source."},
            "overwrite": {
                "type": "boolean",
                "description": "Replace an existing user tool of that name (default false).",
            },
        },
        "required": ["name", "code"],
        "additionalProperties": False,
    }
    timeout_s = 30.0

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        # Each tool's code is read on its own: never approved for a whole session.
        name = str(args.get("name", ""))
        replaces = " (replacing the one of that name)" if args.get("overwrite") else ""
        return CallDescription(
            summary=f"Install the tool {name}{replaces}, with the code shown",
            target=str(self.registry.tools_dir / f"{name}.py"),
            risk="installs code that runs inside the server whenever the tool is called",
            default_asker="Navi asks before installing tools",
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        name: str = args["name"]
        if not USER_TOOL_NAME.match(name):
            raise ToolError(
                f"invalid tool name {name!r}: use lowercase letters, digits and _, "
                "starting with a letter (at most 64)"
            )
        if self.registry.is_builtin(name):
            raise ToolError(f"'{name}' is a built-in tool and cannot be replaced")
        target = self.registry.tools_dir / f"{name}.py"
        if target.exists() and not args.get("overwrite"):
            raise ToolError(
                f"a user tool '{name}' exists already; pass overwrite=true to replace it"
            )
        if not ctx.settings.unsandboxed_tools:
            await require_sandbox()
        names = await _trial_check(name, args["code"], ctx)
        if names != [name]:
            raise ToolError(
                f"the code defines tool(s) {names}, but the name given is '{name}'; they must match"
            )
        write_atomic(target, args["code"])
        add_enabled(self.registry.tools_dir, name)
        report = await anyio.to_thread.run_sync(self.registry.reload)
        mine = [error for error in report.errors if Path(error.path) == target]
        if mine:
            raise ToolError(f"saved, but it failed to load: {mine[0].error}")
        return ok(
            f"Tool '{name}' installed at {target} and enabled in every profile. "
            "It is available from the next message.\n" + report.describe()
        )


async def _trial_check(name: str, code: str, ctx: ToolContext) -> list[str]:
    """The tool names the code defines, checked in a sandboxed process (never imported
    here), from a scratch file so a broken tool never reaches the tools folder."""
    try:
        compile(code, f"{name}.py", "exec")  # compiling runs nothing
    except SyntaxError as exc:
        raise ToolError(
            f"the tool was rejected: SyntaxError: {exc.msg} (line {exc.lineno})"
        ) from None
    with tempfile.TemporaryDirectory(prefix="navi-tool-check-") as scratch:
        path = Path(scratch) / f"{name}.py"
        path.write_text(code, encoding="utf-8")
        verdicts = await describe_files([path], ctx.settings)
    verdict = verdicts[path]
    problem = verdict.error or next(filter(None, map(spec_problem, verdict.tools)), None)
    if problem is not None:
        raise ToolError(f"the tool was rejected: {problem}")
    return list(verdict.names)
