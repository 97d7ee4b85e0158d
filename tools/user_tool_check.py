"""Loading user tool files in a sandboxed process: the server never imports one.

Importing a module runs its module-level code, and a check that only *looks* at a file
can be fooled by code that looks where it runs (``if os.path.exists("/sys/kernel")``).
So the server never imports a user tool at all: :func:`describe_files` runs
``tools.user_tool_child describe FILE…`` in a ``python -I`` process in the bubblewrap
sandbox (no network, nothing of the server visible, nothing writable at all, only the
project's packages, the Python install and the files' folders mounted, read-only),
which imports each file there and answers, per file, its tools as data (name,
description, JSON schema, idempotent, timeout, declared approval) and the SHA-256 of
the bytes it imported; calls run in a process of their own the same way
(tools/user_tool_call.py). Without the sandbox files do not load, unless the operator
set ``NAVI_UNSANDBOXED_TOOLS=1``: then the process runs unsandboxed, still never in the
server.

A file whose import ends the process (``os._exit``) is the one that started and never
finished; the files after it are described by a fresh process.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec

from tools.context import NeverStop, StopSignal
from tools.processes import ProcessOutcome, minimal_env, run_process_tree
from tools.sandbox import (
    SandboxLimits,
    SandboxSpec,
    SandboxUnavailable,
    python_install,
    run_sandboxed,
    sandbox_env,
)
from tools.settings import ToolSettings
from tools.user_tool_protocol import FileAnswer, ToolSpec, answers

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHECK_TIMEOUT_S = 30.0
CHECK_MEMORY_BYTES = 1024 * 1024 * 1024
# What one process may print and answer (its tools' schemas; a call's result).
ANSWER_MAX_BYTES = 16 * 1024 * 1024

# The child: limits, the project's packages on the path, then tools.user_tool_child.
_BOOTSTRAP = """\
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024 * 1024, 256 * 1024 * 1024))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
sys.path.insert(0, sys.argv[2])
from tools.user_tool_child import main
sys.exit(main(sys.argv[3:]))
"""


@dataclass(frozen=True)
class FileCheck:
    """A file's verdict: its tools (and the SHA-256 of the code they came from), or why
    it cannot be a tool."""

    tools: tuple[ToolSpec, ...] = ()
    sha256: str = ""
    error: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)


def project_packages() -> tuple[Path, ...]:
    """The project's top-level packages (folders with ``__init__.py``), not its data."""
    return tuple(
        entry
        for entry in sorted(PROJECT_ROOT.iterdir())
        if entry.is_dir() and (entry / "__init__.py").is_file()
    )


async def run_child(
    command: Sequence[str],
    *,
    workdir: Path,
    settings: ToolSettings,
    memory_bytes: int,
    timeout_s: float,
    readonly: Sequence[Path] = (),
    owned: Sequence[Path] = (),
    network: bool = False,
    env: Mapping[str, str] | None = None,
    stop: StopSignal | None = None,
    writable_workdir: bool = True,
    user_id: str = "",
    write_limit_bytes: int | None = None,
) -> ProcessOutcome:
    """``tools.user_tool_child`` with ``command``, in the sandbox (or, with
    ``NAVI_UNSANDBOXED_TOOLS=1``, in a plain subprocess); :class:`SandboxUnavailable`
    when neither may run. ``owned``: Navi's folders the code writes (a session's files),
    handed to the sandbox user as code_exec's are; ``user_id``: whose sandbox slots the
    call takes."""
    python = sys.executable
    argv = [python, "-I", "-X", "utf8", "-c", _BOOTSTRAP, str(memory_bytes), str(PROJECT_ROOT)]
    argv += command
    stop = stop or NeverStop()
    if settings.unsandboxed_tools:
        return await run_process_tree(
            argv,
            cwd=workdir,
            env=minimal_env({**(env or {}), "HOME": str(workdir), "TMPDIR": str(workdir)}),
            timeout_s=timeout_s,
            stop=stop,
            output_limit_bytes=ANSWER_MAX_BYTES,
            kill_grace_s=settings.kill_grace_s,
        )
    spec = SandboxSpec(
        workdir=workdir,
        owned=tuple(owned),
        readonly=(*python_install(python), *project_packages(), *readonly),
        network=network,
        env=sandbox_env(env, home=workdir),
        writable_workdir=writable_workdir,
        write_limit_bytes=write_limit_bytes,
    )
    limits = SandboxLimits.from_settings(settings, 0)
    return await run_sandboxed(
        argv,
        spec=spec,
        limits=dataclasses.replace(limits, memory_bytes=memory_bytes),
        timeout_s=timeout_s,
        stop=stop,
        output_limit_bytes=ANSWER_MAX_BYTES,
        kill_grace_s=settings.kill_grace_s,
        user_id=user_id,
    )


def _why_it_ended(outcome: ProcessOutcome, printed: list[str]) -> str:
    if outcome.ended_by == "timeout":
        return f"importing it did not finish within {CHECK_TIMEOUT_S:g}s"
    if outcome.exit_code == 0:  # its module code printed over the loader's answers
        return "the loader gave no answer for it (its module code wrote on the loader's output)"
    problem = f"the check process ended with exit code {outcome.exit_code} while importing it"
    return problem + (f" ({printed[-1][:300]})" if printed else "")


async def _describe_batch(
    paths: Sequence[Path], readonly: Sequence[Path], settings: ToolSettings
) -> dict[str, FileCheck]:
    """One describing process: the verdicts it gave, and for the file it died on, why."""
    with tempfile.TemporaryDirectory(prefix="navi-tool-check-") as scratch:
        outcome = await run_child(
            ["describe", *map(str, paths)],
            workdir=Path(scratch),
            settings=settings,
            memory_bytes=CHECK_MEMORY_BYTES,
            timeout_s=CHECK_TIMEOUT_S,
            # The files' folders read-only: a tool may look beside itself, and write nowhere.
            readonly=(*readonly, *(path.parent for path in paths)),
            # Nothing writable at all, /tmp included: module code that writes fails here.
            writable_workdir=False,
        )
    own, printed = answers(outcome.output)
    wanted = {str(path) for path in paths}
    verdicts: dict[str, FileCheck] = {}
    started = ""
    for line in own:
        if line.startswith("start "):
            started = line[len("start ") :]
            continue
        try:
            answer = msgspec.json.decode(line, type=FileAnswer)
        except msgspec.DecodeError as exc:
            # Only the file being described could have written it.
            answer = FileAnswer(path=started, error=f"its description is not valid: {exc}")
        if answer.path == started and started in wanted and started not in verdicts:
            verdicts[started] = FileCheck(answer.tools, answer.sha256, answer.error)
        started = ""
    missing = [str(path) for path in paths if str(path) not in verdicts]
    if started in missing:
        verdicts[started] = FileCheck(error=_why_it_ended(outcome, printed))
    elif missing and len(missing) == len(paths):
        # No answer at all: the process itself failed (or a file's code garbled the
        # answers); the first file takes the error, so that every round settles one.
        verdicts[missing[0]] = FileCheck(error=_why_it_ended(outcome, printed))
    return verdicts


async def describe_files(
    paths: Sequence[Path], settings: ToolSettings, readonly: Sequence[Path] = ()
) -> dict[Path, FileCheck]:
    """The verdict for every file, each imported in a sandboxed process, never here.

    ``readonly``: more folders the process may see (each file's own folder is seen)."""
    given = {path.absolute(): path for path in paths}  # the sandbox has another cwd
    verdicts: dict[Path, FileCheck] = {}
    remaining = list(given)
    while remaining:
        try:
            found = await _describe_batch(remaining, readonly, settings)
        except SandboxUnavailable as exc:
            return {path: FileCheck(error=f"cannot load it: {exc}") for path in paths}
        for path in remaining:
            if str(path) in found:
                verdicts[given[path]] = found[str(path)]
        remaining = [p for p in remaining if given[p] not in verdicts]
    return verdicts


def check_files(
    paths: Sequence[Path], settings: ToolSettings, readonly: Sequence[Path] = ()
) -> dict[Path, FileCheck]:
    """:func:`describe_files` for synchronous callers (start-up, a reload in a worker
    thread): it runs on an event loop of its own, in a thread of its own, so that it
    works from any thread, the event loop's included (which it then blocks)."""
    done: dict[str, Any] = {}

    def load() -> None:
        try:
            done["verdicts"] = anyio.run(describe_files, paths, settings, readonly)
        except BaseException as exc:  # handed to the caller's thread
            done["error"] = exc

    thread = threading.Thread(target=load, name="navi-user-tool-load")
    thread.start()
    thread.join()
    if "error" in done:
        raise done["error"]
    verdicts: dict[Path, FileCheck] = done["verdicts"]
    return verdicts
