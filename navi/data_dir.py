"""Navi's data folder: where everything Navi writes lives unless a setting names a place.

``NAVI_DATA_DIR``, else the platform's user data folder (platformdirs:
``~/.local/share/navi`` on Linux, ``$XDG_DATA_HOME/navi`` when that is set). In it, by
default: ``navi.db``, ``blobs/``, ``session_files/``, ``user_tools/``, ``mcp.json`` and
``users.json``. Each of their own settings still wins when set.

Older installs kept ``navi.db`` (and ``session_files/``, ``user_tools/`` beside it) in
the folder Navi was started in. Such a ``navi.db`` is used, never replaced by an empty
database in the data folder, and every start says so until it is moved.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

import msgspec

DATABASE_FILE = "navi.db"
SESSION_FILES = "session_files"
USER_TOOLS = "user_tools"
USERS_FILE = "users.json"


class DataDefaults(msgspec.Struct, frozen=True, kw_only=True):
    """The defaults of the settings a user did not set, and what is worth saying about
    them (an older install's files in use)."""

    data_dir: str
    database_url: str
    session_files_dir: str
    tools_dir: str
    users_file: str
    notes: tuple[str, ...] = ()


def data_dir(env: Mapping[str, str]) -> Path:
    """``NAVI_DATA_DIR`` (``~`` expanded, made absolute), else the user data folder."""
    named = env.get("NAVI_DATA_DIR", "").strip()
    if named:
        return Path(named).expanduser().absolute()
    import platformdirs

    return Path(platformdirs.user_data_dir("navi", appauthor=False))


def data_defaults(env: Mapping[str, str], cwd: Path | None = None) -> DataDefaults:
    """Where the database, session files, user tools and users file go when their own
    variables are unset. ``cwd`` is where an older install's ``navi.db`` is looked for."""
    root = data_dir(env)
    here = (cwd or Path.cwd()).absolute()
    explicit_db = bool(env.get("NAVI_DATABASE_URL", "").strip() or env.get("DB_PATH", "").strip())
    old_db = here / DATABASE_FILE
    legacy = not explicit_db and old_db.is_file() and here != root
    notes: list[str] = []
    database = root / DATABASE_FILE
    if legacy:
        database = old_db
        also = (
            " (the data folder's own navi.db is not used)"
            if (root / DATABASE_FILE).exists()
            else ""
        )
        notes.append(
            f"using ./{DATABASE_FILE} from an older install{also}; move it to {root} "
            f"(with its {DATABASE_FILE}-wal, blobs/ and session_files/) to keep all of "
            "Navi's data in the data folder, or set NAVI_DATABASE_URL to keep it here"
        )

    def folder(variable: str, name: str) -> str:
        """The data folder's ``name``, or an older install's beside its ``navi.db``."""
        if legacy and not env.get(variable, "").strip() and (here / name).is_dir():
            notes.append(f"using ./{name}/ beside the older install's {DATABASE_FILE}")
            return str(here / name)
        return str(root / name)

    users = root / USERS_FILE
    return DataDefaults(
        data_dir=str(root),
        database_url=f"sqlite:///{database}",
        session_files_dir=folder("SESSION_FILES_DIR", SESSION_FILES),
        tools_dir=folder("TOOLS_DIR", USER_TOOLS),
        # Only a users file that exists: without one Navi is open on loopback, as before.
        users_file=str(users) if users.is_file() else "",
        notes=tuple(notes),
    )


_SCHEMES = ("sqlite", "sqlite+aiosqlite", "postgresql", "postgres", "postgresql+asyncpg", "memory")


def database_url(value: str) -> str:
    """A database URL, or a plain file path taken as SQLite (``x.db`` →
    ``sqlite:///<absolute path>/x.db``). Raises ValueError, in one line, for what is
    neither."""
    text = value.strip()
    scheme, colon, rest = text.partition(":")
    if colon and scheme.lower() in _SCHEMES:
        if scheme.lower().startswith("sqlite") and not rest.startswith("///"):
            raise ValueError(f"a SQLite URL is sqlite:///PATH (three slashes), got {value!r}")
        if scheme.lower().startswith("sqlite") and not rest[3:]:
            raise ValueError(f"a SQLite URL needs a file path after sqlite:///, got {value!r}")
        return text
    if "://" in text:
        raise ValueError(
            f"unknown database URL {value!r}: use a file path, sqlite:///PATH, "
            "postgresql://USER@HOST/DB or memory://"
        )
    if not text:
        raise ValueError("no database given: use a file path or a URL like sqlite:///PATH")
    path = Path(text).expanduser()
    if path.is_dir():
        raise ValueError(
            f"{value!r} is a folder: name the database file, e.g. {path / DATABASE_FILE}"
        )
    return f"sqlite:///{path.absolute()}"


def prepare(root: Path, tools_dir: Path) -> None:
    """Make the data folder (private to this user) before a server writes into it. A
    new data folder's ``user_tools/`` starts with the examples of the source tree
    (``get_current_datetime``, ``user_notes``) when Navi runs from one."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    shipped = Path(__file__).resolve().parents[1] / USER_TOOLS
    if tools_dir != root / USER_TOOLS or tools_dir.exists() or not shipped.is_dir():
        return
    import shutil

    # Another node on a shared data folder may have made it first.
    with contextlib.suppress(FileExistsError):
        shutil.copytree(shipped, tools_dir, ignore=shutil.ignore_patterns("__pycache__"))
