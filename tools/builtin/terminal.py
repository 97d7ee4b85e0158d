"""``terminal``: run one allowlisted command, no shell, in the session's files directory.

The command runs in the bubblewrap sandbox (``tools.sandbox``): the files directory is
the one writable folder, nothing of the server is visible, no network unless the
profile grants it. Its arguments are checked first (``command_args``): the default
commands are read-only, whatever options the LLM picks. Without bubblewrap the tool
refuses to run, unless the operator set ``NAVI_UNSANDBOXED_TOOLS=1``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tools.base import CallDescription, SessionScope, Tool, ToolResult, fail, ok, shorten
from tools.builtin.command_args import check_arguments, check_no_process_paths
from tools.builtin.command_line import NO_SHELL, resolve_executable, split_command
from tools.context import ToolContext
from tools.processes import ProcessOutcome, minimal_env, run_process_tree
from tools.sandbox import (
    SandboxLimits,
    SandboxSpec,
    require_sandbox,
    run_sandboxed,
    sandbox_env,
)


def describe_outcome(outcome: ProcessOutcome, timeout_s: float) -> ToolResult:
    body = outcome.output or "(no output)"
    if outcome.ended_by == "timeout":
        message = f"timed out after {timeout_s:g}s; the process tree was killed"
        return fail(message, f"Error: {message}\nPartial output:\n{body}", reason="timeout")
    if outcome.ended_by == "write_limit":
        return fail(outcome.detail, f"Error: {outcome.detail}\nPartial output:\n{body}")
    if outcome.ended_by == "stop":
        message = "stopped; the process tree was killed"
        return fail(message, f"Error: {message}\nPartial output:\n{body}", reason="stopped")
    text = f"exit code: {outcome.exit_code}\n{body}"
    if outcome.exit_code != 0:
        return fail(f"exit code {outcome.exit_code}", text)
    return ok(text)


TIMEOUT_ARGUMENT = {
    "type": "number",
    "minimum": 1,
    "description": "Time limit in seconds (default 30).",
}


class ProcessTool(Tool):
    """A tool that runs a process tree on the user's machine, for ``timeout_s`` at most."""

    approval = "ask"  # runs commands on the user's machine
    idempotent = False

    def timeout_for(self, args: dict[str, Any]) -> float:
        # The process runner enforces the real limit and kills the tree; this is a backstop.
        return float(args.get("timeout_s") or 300.0) + 15.0


class TerminalTool(ProcessTool):
    name = "terminal"
    description = (
        "Run one command (an allowlisted program with arguments) in the session's files "
        "directory and return its exit code and output. " + NO_SHELL + " Pipes, ';', '&&', "
        "redirections, $VARS and wildcards are refused. It runs in a sandbox where only the "
        "files directory is writable; options that write files or run other programs "
        "(e.g. sort -o) are refused."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "description": 'The command line, e.g. "ls -la" or "grep -n \'a|b\' notes.txt".',
            },
            "timeout_s": TIMEOUT_ARGUMENT,
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        command = str(args.get("command", ""))
        if ctx.settings.unsandboxed_tools:
            risk = (
                f"runs the command on this machine without a sandbox, in {ctx.files_dir} "
                "(NAVI_UNSANDBOXED_TOOLS=1)"
            )
            key, allows = "terminal:unsandboxed", "Allow any command without a sandbox"
        else:
            network = "with" if ctx.profile.tool_network else "without"
            risk = (
                f"runs an allowed command in a sandbox {network} network; only "
                f"{ctx.files_dir} is writable"
            )
            key = "terminal:network" if ctx.profile.tool_network else "terminal"
            allows = "Allow any command" + (" with network" if ctx.profile.tool_network else "")
        return CallDescription(
            summary=f"Run the command {shorten(command, 300)}",
            target=command,
            risk=risk,
            default_asker="Navi asks before running commands",
            scope=SessionScope(key, allows),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        settings = ctx.settings
        timeout = min(
            float(args.get("timeout_s") or settings.terminal_timeout_s),
            settings.terminal_max_timeout_s,
        )
        sandboxed = not settings.unsandboxed_tools
        if sandboxed:
            await require_sandbox()  # before anything else: say how to get it
        env = minimal_env()
        argv = split_command(args["command"])
        argv[0] = resolve_executable(argv[0], settings.terminal_allowed_commands, env["PATH"])
        executable = Path(argv[0])
        real_executable = Path(os.path.realpath(executable))  # noqa: ASYNC240 (no I/O wait)
        # The rules go with the program, whichever name (a symlink's) it was called by.
        for name in dict.fromkeys((executable.name, real_executable.name)):
            check_arguments(name, argv[1:])
        ctx.files_dir.mkdir(parents=True, exist_ok=True)
        if not sandboxed:
            check_no_process_paths(argv[1:], os.fspath(ctx.files_dir))
            outcome = await run_process_tree(
                argv,
                cwd=ctx.files_dir,
                env=env,
                timeout_s=timeout,
                stop=ctx.stop,
                output_limit_bytes=settings.output_max_chars,
                kill_grace_s=settings.kill_grace_s,
            )
            return describe_outcome(outcome, timeout)
        spec = SandboxSpec(
            workdir=ctx.files_dir,
            # An operator's command outside the system folders is shown as the one file.
            readonly=(executable, real_executable),
            network=ctx.profile.tool_network,
            env=sandbox_env(home=ctx.files_dir),
            write_limit_bytes=ctx.write_limit_bytes,
        )
        outcome = await run_sandboxed(
            argv,
            spec=spec,
            limits=SandboxLimits.from_settings(settings, settings.terminal_memory_mb),
            timeout_s=timeout,
            stop=ctx.stop,
            output_limit_bytes=settings.output_max_chars,
            kill_grace_s=settings.kill_grace_s,
            user_id=ctx.user_id,
        )
        return describe_outcome(outcome, timeout)
