"""What an MCP server with ``"sandbox": true`` sees, and the bwrap command that starts it.

The tool sandbox (tools/sandbox.py) shows the system folders only. A server also needs
its own code, found from its entry as people write them:

- the command's install: its folder and prefix (``<prefix>/bin/<command>``), for a venv
  the venv and the real prefix its ``python`` links into (pyenv, uv), the folders its
  ``.pth`` files add (editable installs); for a script, the same for the interpreter of
  its ``#!`` line (a venv's console script);
- a script named in ``args`` (``node /abs/dist/index.js``): its package folder, the
  nearest one up with a ``package.json`` (for a package inside ``node_modules``, the
  project holding that), else the script's own folder;
- every absolute path ``args`` names that exists, read-only, and the entry's ``rw``
  paths, writable;
- its home, ``<data folder>/mcp/<server>/home``: writable, its working folder, and kept
  from one start to the next, so ``npx`` and ``uvx`` download into their caches once.

A folder found that way is shown only if it is not, does not hold and does not lie in
one of Navi's places (data folder, database, users file, mcp.json, user tools, session
files, images) nor ``/proc``, ``/sys``, ``/dev``, does not hold the home folder and is
not ``/`` or a folder right under it (``/tmp``, ``/home``); otherwise a narrower one is
taken (the script's own folder, then the file alone) and the log says what was left
out. A path the entry names itself is the operator's choice, but one that is, holds or
lies in Navi's places or the kernel's stops the server with a message saying why (an
``rw`` path also in the system folders: ``/usr``, ``/etc``...).

``"network": true`` is the user-mode network of ``code_exec`` (tools/sandbox_net.py):
the internet and the LAN, never this machine's loopback; without slirp4netns such a
server does not start, and says why.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread
import structlog

from navi.mcp.config import SERVER_NAME, ServerEntry
from navi.mcp.environment import passed_through
from tools.sandbox import SANDBOX_PATH, SandboxSpec, bwrap_command, require_sandbox, sandbox_env
from tools.sandbox_net import UserNetwork, find_slirp4netns

if TYPE_CHECKING:
    from navi.config import Settings

log = structlog.get_logger(__name__)

HOMES = "mcp"
_KERNEL = tuple(Path(p) for p in ("/proc", "/sys", "/dev"))
# Shown by every sandbox, read-only (tools/sandbox.py); with /etc and /boot, never writable.
_SHOWN = tuple(Path(p) for p in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"))
_SYSTEM = (*_SHOWN, Path("/etc"), Path("/boot"))
# A file named in args with one of these is a script: its package folder is shown too.
_SCRIPTS = {".js", ".mjs", ".cjs", ".ts", ".mts", ".py", ".pyz"}
# pip's console script for a long interpreter path: "#!/bin/sh" then this line.
_SH_EXEC = re.compile(r"""^'''exec' "?([^"\s]+)"?""")


class SandboxRefused(Exception):
    """The entry names something the sandbox will not show; the message says what."""


@dataclass(frozen=True)
class SandboxPlaces:
    """Where the servers' homes go, and what no sandbox shows (real paths)."""

    # <data folder>/mcp: a server's home is <homes>/<server>/home.
    homes: Path
    # Never shown, nor a folder that holds one, nor anything in one.
    navi: tuple[Path, ...]
    # Never shown whole, nor a folder holding one (what is in it may be: ~/.nvm).
    private: tuple[Path, ...] = ()


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def _holds(outer: Path, inner: Path) -> bool:
    return outer == inner or outer in inner.parents


def sandbox_places(settings: Settings) -> SandboxPlaces:
    """Navi's places from its settings: the data folder and what its settings move out of it."""
    data = Path(settings.data_dir) if settings.data_dir else settings.files_root.absolute().parent
    navi = [
        data,
        settings.files_root,
        settings.blobs_root,
        settings.mcp_config_path,
        settings.tools.tools_path,
    ]
    if settings.users_file:
        navi.append(Path(settings.users_file))
    scheme, _, database = settings.database_url.partition(":///")
    if scheme.lower().startswith("sqlite") and database and ":memory:" not in database:
        navi.append(Path(database))
    return SandboxPlaces(
        homes=_real(data) / HOMES,
        navi=tuple(dict.fromkeys(_real(p.expanduser()) for p in navi)),
        private=(_real(Path.home()),),
    )


def server_home(places: SandboxPlaces, name: str) -> Path:
    """``<homes>/<name>/home``, made (0700) if new. The name was checked when the config
    was read; it is checked again here, where it becomes a path, and the folder must be
    that very folder, not a link to another."""
    if not SERVER_NAME.match(name):
        raise SandboxRefused(f"a server named {name!r} gets no home: names are [A-Za-z0-9_-]")
    home = places.homes / name / "home"
    places.homes.mkdir(mode=0o700, parents=True, exist_ok=True)
    for folder in (home.parent, home):
        # Looked at before anything is made: a link would make it elsewhere.
        if folder.is_symlink():
            raise SandboxRefused(f"the home of {name!r} ({folder}) is a link elsewhere: refused")
        folder.mkdir(mode=0o700, exist_ok=True)
    if _real(home) != _real(places.homes) / name / "home":
        raise SandboxRefused(f"the home of {name!r} ({home}) is a link elsewhere: refused")
    return _real(home)


def _refusal(path: Path, places: SandboxPlaces, *, writable: bool = False) -> str:
    """Why a path the entry names may not be shown ("" if it may)."""
    real = _real(path)
    for place in (*places.navi, *_KERNEL, *(_SYSTEM if writable else ())):
        if _holds(real, place) or _holds(place, real):
            where = "holds" if real != place and _holds(real, place) else "is in"
            return f"{path} {where} {place}, which the sandbox never shows"
    return ""


def _found_refusal(path: Path, places: SandboxPlaces) -> str:
    """Why a folder found from the entry may not be shown ("" if it may)."""
    if why := _refusal(path, places):
        return why
    real = _real(path)
    if any(_holds(shown, real) for shown in _SHOWN):
        return ""  # shown anyway
    if len(real.parts) <= 2:
        return f"{path} is / or right under it"
    for place in places.private:
        if _holds(real, place):
            return f"{path} holds {place}"
    return ""


# ---------------------------------------------------------------------- what code needs


def _interpreter(script: Path, search_path: str) -> Path | None:
    """The interpreter a script's ``#!`` line names (``env`` resolved on ``search_path``)."""
    try:
        with script.open("rb") as file:
            head = file.read(1024).decode("utf-8", errors="replace")
    except OSError:
        return None
    if not head.startswith("#!"):
        return None
    lines = head[2:].splitlines() or [""]
    words = lines[0].split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        found = shutil.which(names[0], path=search_path) if names else None
        return Path(found) if found else None
    if Path(words[0]).name == "sh" and len(lines) > 1 and (match := _SH_EXEC.match(lines[1])):
        return Path(match.group(1))
    return Path(words[0])


def _pth_folders(venv: Path) -> Iterator[Path]:
    """The folders a venv's ``.pth`` files add (an editable install's sources)."""
    for pth in venv.glob("lib/python*/site-packages/*.pth"):
        try:
            lines = pth.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            line = line.strip()
            if os.path.isabs(line) and os.path.isdir(line):
                yield Path(line)


def _package_root(file: Path) -> Path | None:
    """The nearest folder up with a ``package.json``; for a package inside
    ``node_modules``, the project holding that (its dependencies may sit beside it)."""
    for folder in file.parents:
        if len(folder.parts) <= 2:
            return None
        if (folder / "package.json").is_file():
            if "node_modules" in folder.parts:
                project = Path(*folder.parts[: folder.parts.index("node_modules")])
                return project if len(project.parts) > 2 else folder
            return folder
    return None


def _install(executable: Path, search_path: str, depth: int = 0) -> list[list[Path]]:
    """What an executable needs, as choices: the first safe folder of each is shown."""
    real = _real(executable)
    needs: list[list[Path]] = [[executable.parent], [real.parent]]
    for exe in (executable, real):
        prefix = exe.parent.parent
        venv = (prefix / "pyvenv.cfg").is_file()
        if venv or exe == real:
            needs.append([prefix])
        if venv:
            needs += [[p] for p in _pth_folders(prefix)]
    if (package := _package_root(real)) is not None:
        needs.append([package])
    interpreter = _interpreter(real, search_path) if depth < 2 else None
    if interpreter is not None and interpreter.is_absolute():
        needs.append([interpreter])
        needs += _install(interpreter, search_path, depth + 1)
    return needs


def _script(file: Path) -> list[Path]:
    """The choices for a script named in ``args``: its package folder, its own folder."""
    real = _real(file)
    package = _package_root(real)
    return [*([package] if package else []), real.parent, file.parent]


@dataclass(frozen=True)
class Mounts:
    readonly: tuple[Path, ...]
    writable: tuple[Path, ...]
    # What was found but is not shown, and why (logged).
    left_out: tuple[str, ...] = ()


def sandbox_mounts(entry: ServerEntry, executable: Path, places: SandboxPlaces) -> Mounts:
    """The folders the sandbox shows the entry's server (blocking: reads files)."""
    named: list[Path] = [executable]
    choices = _install(executable, entry.env.get("PATH", SANDBOX_PATH))
    for arg in entry.args:
        if os.path.isabs(arg) and os.path.exists(arg):
            named.append(Path(arg))
            if os.path.isfile(arg) and Path(arg).suffix in _SCRIPTS:
                choices.append(_script(Path(arg)))
    for path in named:
        if why := _refusal(path, places):
            raise SandboxRefused(f"the command or its arguments name {why}")
    writable: list[Path] = []
    for text in entry.rw:
        path = Path(text)
        if not path.exists():
            raise SandboxRefused(f'the "rw" path {path} does not exist')
        if why := _refusal(path, places, writable=True):
            raise SandboxRefused(f'"rw": {why}')
        writable.append(path)
    left_out: list[str] = []
    readonly = list(named)
    for options in choices:
        for folder in options:
            if why := _found_refusal(folder, places):
                left_out.append(why)
            else:
                readonly.append(folder)
                break
    return Mounts(
        readonly=tuple(dict.fromkeys(readonly)),
        writable=tuple(dict.fromkeys(writable)),
        left_out=tuple(dict.fromkeys(left_out)),
    )


def sandbox_spec(entry: ServerEntry, places: SandboxPlaces) -> tuple[str, SandboxSpec]:
    """The executable to run and what its sandbox shows; makes the server's home.
    Blocking (reads files): run it in a thread."""
    found = shutil.which(entry.command)
    if found is None:
        raise SandboxRefused(f"command {entry.command!r} not found on PATH")
    home = server_home(places, entry.name)
    mounts = sandbox_mounts(entry, Path(os.path.abspath(found)), places)
    if mounts.left_out:
        log.info("mcp.sandbox_left_out", server=entry.name, folders=list(mounts.left_out))
    spec = SandboxSpec(
        workdir=home,
        readonly=mounts.readonly,
        writable=mounts.writable,
        network=entry.network,
        # With the network, the proxy and CA variables too (navi/mcp/environment.py).
        env=sandbox_env(
            {**passed_through(), **entry.env} if entry.network else entry.env, home=home
        ),
    )
    return found, spec


async def sandboxed_launch(
    entry: ServerEntry, places: SandboxPlaces
) -> tuple[list[str], Path, UserNetwork | None]:
    """The command line that runs the entry's command in the tool sandbox, the server's
    home (its working folder) and, with ``"network": true``, its network (to start once
    bwrap runs, and close at the end)."""
    bwrap = await require_sandbox()
    found, spec = await anyio.to_thread.run_sync(sandbox_spec, entry, places)
    inner = [found, *entry.args]
    if not entry.network:
        return bwrap_command(bwrap, inner, spec), spec.workdir, None
    slirp4netns = find_slirp4netns()
    if slirp4netns is None:
        # Never the host's network (its loopback has Navi's API on it).
        raise SandboxRefused(
            '"network": true needs slirp4netns, which is not installed (apt-get install slirp4netns)'
        )
    network = UserNetwork(slirp4netns)
    # The SDK passes the child no file descriptor: a /bin/sh before bwrap opens the
    # network's pipes again.
    prefix, options = network.reopened()
    return (
        [*prefix, *bwrap_command(bwrap, inner, spec, user_network=options)],
        spec.workdir,
        network,
    )
