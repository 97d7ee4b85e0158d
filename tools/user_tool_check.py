"""Checking user tool files in a sandboxed subprocess before the server imports them.

Importing a module runs its module-level code, so a check that imports a file in the
server has already run it, even if it then rejects the tool. The check therefore runs
:func:`tools.user_tools.child_main` in a ``python -I`` subprocess in the bubblewrap sandbox (no network,
nothing of the server visible, nothing writable at all, only the project's packages, the
Python install and the files' folders mounted, read-only): it imports each file
there, checks the tool contract, and reports one JSON line per file. The server loads
a file only after it passed (so module-level code that writes a file is rejected, and
its write never happened). Where bubblewrap cannot run, the check still runs in a
subprocess of its own (never in the server), with the server's rights.

The child's protocol on a private pipe: ``start <path>`` before each file, then
``{"path": ..., "names": [...]}`` or ``{"path": ..., "error": ...}``. A file whose
import ends the process (``os._exit``) is the one that started and never finished;
the files after it are checked in a fresh process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHECK_TIMEOUT_S = 30.0
CHECK_MEMORY_BYTES = 1024 * 1024 * 1024

# The child: limits, the project's packages on the path, then the check.
_BOOTSTRAP = """\
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
sys.path.insert(0, sys.argv[2])
from tools.user_tools import child_main
sys.exit(child_main(sys.argv[3:]))
"""


@dataclass(frozen=True)
class FileCheck:
    """A file's verdict: the tool names it defines, or why it cannot be a tool."""

    names: tuple[str, ...] = ()
    error: str | None = None


def _project_packages() -> tuple[Path, ...]:
    """The project's top-level packages (folders with ``__init__.py``), not its data."""
    return tuple(
        entry
        for entry in sorted(PROJECT_ROOT.iterdir())
        if entry.is_dir() and (entry / "__init__.py").is_file()
    )


def _command(paths: Sequence[Path], scratch: Path, readonly: Sequence[Path]) -> list[str]:
    from tools.sandbox import SandboxSpec, bwrap_command, python_install, sandbox_env
    from tools.sandbox import sandbox_status as status

    python = sys.executable
    argv = [
        python,
        "-I",
        "-X",
        "utf8",
        "-c",
        _BOOTSTRAP,
        str(CHECK_MEMORY_BYTES),
        str(PROJECT_ROOT),
        *map(str, paths),
    ]
    sandbox = status()
    if not sandbox.available or sandbox.bwrap is None:
        return argv
    spec = SandboxSpec(
        workdir=scratch,
        # The files' folders read-only: a tool may look beside itself, and write nowhere.
        readonly=(
            *python_install(python),
            *_project_packages(),
            *readonly,
            *(path.parent for path in paths),
        ),
        env=sandbox_env(home=scratch),
        # Read-only throughout: module-level code that writes a file fails the check.
        writable_workdir=False,
    )
    return bwrap_command(sandbox.bwrap, argv, spec)


def _run(paths: Sequence[Path], readonly: Sequence[Path]) -> tuple[dict[str, FileCheck], str]:
    """One checker process: the verdicts it gave and the file it died on ("" if none)."""
    with tempfile.TemporaryDirectory(prefix="navi-tool-check-") as scratch:
        command = _command(paths, Path(scratch), readonly)
        env = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}
        try:
            done = subprocess.run(
                command,
                cwd=scratch,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=CHECK_TIMEOUT_S,
                check=False,
                start_new_session=True,
            )
            out, code = done.stdout.decode(errors="replace"), done.returncode
            problem = f"the check process ended with exit code {code} while importing it"
            said = done.stderr.decode(errors="replace").strip().splitlines()
            if said:
                problem += f" ({said[-1][:300]})"
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode(errors="replace")
            problem = f"importing it did not finish within {CHECK_TIMEOUT_S:g}s"
    verdicts: dict[str, FileCheck] = {}
    started = ""
    for line in out.splitlines():
        if line.startswith("start "):
            started = line[len("start ") :]
            continue
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        path = answer["path"]
        verdicts[path] = FileCheck(names=tuple(answer.get("names", ())), error=answer.get("error"))
        started = ""
    if started:
        verdicts[started] = FileCheck(error=problem)
    elif len(verdicts) < len(paths):
        # Died before it started a file: the checker itself failed, not a tool.
        first = next(str(p) for p in paths if str(p) not in verdicts)
        verdicts[first] = FileCheck(error=problem)
    return verdicts, started


def check_files(paths: Sequence[Path], readonly: Sequence[Path] = ()) -> dict[Path, FileCheck]:
    """The verdict for every file, each imported in a sandboxed subprocess, never here.

    ``readonly``: more folders the check may see (each file's own folder is seen)."""
    from tools.sandbox import SandboxUnavailable

    given = {path.absolute(): path for path in paths}  # the sandbox has another cwd
    verdicts: dict[Path, FileCheck] = {}
    remaining = list(given)
    try:
        _command(remaining, PROJECT_ROOT, readonly)
    except SandboxUnavailable as exc:
        return {path: FileCheck(error=f"cannot check it: {exc}") for path in paths}
    while remaining:
        found, _ = _run(remaining, readonly)
        for path in remaining:
            if str(path) in found:
                verdicts[given[path]] = found[str(path)]
        remaining = [p for p in remaining if given[p] not in verdicts]
    return verdicts
