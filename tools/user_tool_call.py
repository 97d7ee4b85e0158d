"""One call of a user tool: a sandboxed process of its own, never the server.

Like ``code_exec``, the call runs in a fresh, empty working directory (removed after)
in the bubblewrap sandbox: it sees the session's files folder (writable, also in
``NAVI_FILES_DIR``), the tools folder, the project's packages and the Python install
(read-only), and nothing else of the server: not its environment, data folder, users
file, home folder or other sessions. It has no network unless the run's profile grants
``tool_network``, and then the same user-mode network as ``code_exec`` (never the
host's loopback). Time (the tool's ``timeout_s``), memory (``CODE_EXEC_MEMORY_MB``) and
processes (``SANDBOX_MAX_PROCESSES``) are limited, and Stop ends the process tree.

The process gets the call in a request file: the arguments (already checked against the
schema), the tool's file and the SHA-256 of the code that was loaded (other code never
runs instead), and a copy of what ``ctx`` offers (session id, files folder, user id,
profile, the session's todo, scratchpad and notes). It answers the result and the
session-state events the tool recorded with ``ctx.emit``; the server records those
(only todo, scratchpad and note events are accepted) and returns the result.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec

from tools.base import ToolResult, fail
from tools.context import ToolContext
from tools.user_tool_check import ANSWER_MAX_BYTES, run_child
from tools.user_tool_protocol import CallAnswer, CallContext, CallRequest, answers

REQUEST_FILE = "request.json"


def _request(
    path: Path, sha256: str, name: str, args: dict[str, Any], ctx: ToolContext
) -> CallRequest:
    state = ctx.state
    return CallRequest(
        path=str(path),
        sha256=sha256,
        name=name,
        arguments=args,
        context=CallContext(
            session_id=ctx.session_id,
            files_dir=str(ctx.files_dir),
            user_id=ctx.user_id,
            call_id=ctx.call_id,
            profile=ctx.profile,
            output_max_chars=ctx.settings.output_max_chars,
            todo=tuple(state.todo()),
            scratchpad=dict(state.scratchpad()),
            notes=dict(state.notes()),
        ),
    )


async def call_user_tool(
    *,
    path: Path,
    sha256: str,
    name: str,
    timeout_s: float,
    args: dict[str, Any],
    ctx: ToolContext,
) -> ToolResult:
    """Run tool ``name`` of the file at ``path`` once, in the sandbox; its result."""
    settings = ctx.settings
    request = msgspec.json.encode(_request(path, sha256, name, args, ctx))
    with tempfile.TemporaryDirectory(prefix="navi-user-tool-") as workdir:
        request_file = Path(workdir) / REQUEST_FILE
        request_file.write_bytes(request)
        ctx.files_dir.mkdir(parents=True, exist_ok=True)
        outcome = await run_child(
            ["call", str(request_file)],
            workdir=Path(workdir),
            settings=settings,
            memory_bytes=settings.code_exec_memory_mb * 1024 * 1024,
            timeout_s=timeout_s,
            readonly=(path.parent,),
            owned=(ctx.files_dir,),
            network=ctx.profile.tool_network,
            env={"NAVI_FILES_DIR": str(ctx.files_dir)},
            stop=ctx.stop,
            user_id=ctx.user_id,
            write_limit_bytes=ctx.write_limit_bytes,
        )
    if outcome.ended_by == "stop":
        return fail(f"'{name}' was stopped", reason="stopped")
    if outcome.ended_by == "timeout":
        return fail(f"'{name}' timed out after {timeout_s:g}s", reason="timeout")
    own, printed = answers(outcome.output)
    said = f" ({printed[-1][:300]})" if printed else ""
    if not own:
        if len(outcome.output.encode()) >= ANSWER_MAX_BYTES:
            return fail(f"'{name}' printed more than {ANSWER_MAX_BYTES} bytes and gave no result")
        return fail(f"'{name}' ended with exit code {outcome.exit_code} and no result{said}")
    try:
        answer = msgspec.json.decode(own[-1], type=CallAnswer)
    except msgspec.DecodeError as exc:
        return fail(f"'{name}' gave a result Navi cannot read: {exc}")
    for event in answer.events:
        await ctx.emit(event)
    # A tool's own failure: "stopped" and "timeout" are Navi's words about a call.
    return msgspec.structs.replace(answer.result, failure_reason=None)
