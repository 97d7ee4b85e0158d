"""``code_exec``: Python in the bubblewrap sandbox with time, memory and output limits.

The code runs in a fresh temporary working directory (removed afterwards) under
``python -I`` (no user site, no PYTHON* variables) with a small bootstrap that sets
per-process limits before running it, inside the sandbox of ``tools.sandbox`` (which
limits the whole tree and hides the server). Without bubblewrap it refuses to run,
unless the operator set ``NAVI_UNSANDBOXED_TOOLS=1``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from tools.base import CallDescription, SessionScope, ToolResult
from tools.builtin.terminal import TIMEOUT_ARGUMENT, ProcessTool, describe_outcome
from tools.context import ToolContext
from tools.processes import minimal_env, run_process_tree
from tools.sandbox import (
    SandboxLimits,
    SandboxSpec,
    passed_env,
    python_install,
    run_sandboxed,
    sandbox_env,
)

FILE_SIZE_LIMIT = 256 * 1024 * 1024

# Runs in the child: limits first, then the user's script as __main__.
_BOOTSTRAP = """\
import resource, runpy, sys
memory = int(sys.argv[1])
cpu = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
size = int(sys.argv[4])
resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
script = sys.argv[3]
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""


class CodeExecTool(ProcessTool):
    name = "code_exec"
    description = (
        "Run Python 3 code in a separate sandboxed process and return its exit code and "
        "output (stdout and stderr; use print). Each call starts fresh in its own empty "
        "working directory; the session's files are at the path in the NAVI_FILES_DIR "
        "environment variable (the only folder besides the working directory it may write). "
        "Time, memory, process count and output are limited; the network is reachable only "
        "if the profile allows it."
    )
    parameters = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 1, "description": "Python source to run."},
            "timeout_s": TIMEOUT_ARGUMENT,
        },
        "required": ["code"],
        "additionalProperties": False,
    }

    def describe(self, args: dict[str, Any], ctx: ToolContext) -> CallDescription:
        """Where the code runs: in the sandbox with or without the network, or on this
        machine when the operator turned the sandbox off. "For this session": any Python
        code, in that same setting."""
        if ctx.settings.unsandboxed_tools:
            where, key = "directly on this machine, without a sandbox", "code_exec:unsandboxed"
            risk = (
                "runs Python on this machine with the server's rights, no sandbox "
                "(NAVI_UNSANDBOXED_TOOLS=1): it can read and change anything the server can"
            )
        elif ctx.profile.tool_network:
            where, key = "in a sandbox with network access", "code_exec:network"
            risk = (
                "runs Python in a sandbox with network access (the internet and the LAN); "
                f"it can change the files in {ctx.files_dir}"
            )
        else:
            where, key = "in a sandbox without network", "code_exec"
            risk = f"runs Python in a sandbox without network; it can change the files in {ctx.files_dir}"
        allows = "Allow any Python code" + ("" if key == "code_exec" else f" {where}")
        return CallDescription(
            summary=f"Run Python code {where}",
            target=str(ctx.files_dir),
            risk=risk,
            default_asker="Navi asks before running code",
            scope=SessionScope(key, allows),
        )

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        settings = ctx.settings
        timeout = min(
            float(args.get("timeout_s") or settings.code_exec_timeout_s),
            settings.code_exec_max_timeout_s,
        )
        memory = settings.code_exec_memory_mb * 1024 * 1024
        write_limit = ctx.write_limit_bytes
        # One file cannot pass the write limit at all; many are watched (run_sandboxed).
        file_size = max(min(FILE_SIZE_LIMIT, write_limit), 1)
        with tempfile.TemporaryDirectory(prefix="navi-code-") as workdir:
            script = Path(workdir) / "main.py"
            script.write_text(args["code"], encoding="utf-8")
            argv = [
                settings.code_exec_python,
                "-I",
                "-u",
                "-X",
                "utf8",
                "-c",
                _BOOTSTRAP,
                str(memory),
                str(int(timeout) + 1),
                str(script),
                str(file_size),
            ]
            extra = {"NAVI_FILES_DIR": str(ctx.files_dir)}
            if settings.unsandboxed_tools:
                env = minimal_env({**extra, "HOME": workdir, "TMPDIR": workdir})
                outcome = await run_process_tree(
                    argv,
                    cwd=Path(workdir),
                    env=env,
                    timeout_s=timeout,
                    stop=ctx.stop,
                    output_limit_bytes=settings.output_max_chars,
                    kill_grace_s=settings.kill_grace_s,
                )
            else:
                ctx.files_dir.mkdir(parents=True, exist_ok=True)
                spec = SandboxSpec(
                    workdir=Path(workdir),
                    owned=(ctx.files_dir,),
                    readonly=python_install(settings.code_exec_python),
                    network=ctx.profile.tool_network,
                    env=sandbox_env(
                        {**passed_env(settings.code_exec_env), **extra}, home=Path(workdir)
                    ),
                    write_limit_bytes=write_limit,
                )
                outcome = await run_sandboxed(
                    argv,
                    spec=spec,
                    limits=SandboxLimits.from_settings(settings, settings.code_exec_memory_mb),
                    timeout_s=timeout,
                    stop=ctx.stop,
                    output_limit_bytes=settings.output_max_chars,
                    kill_grace_s=settings.kill_grace_s,
                    user_id=ctx.user_id,
                )
        return describe_outcome(outcome, timeout)
