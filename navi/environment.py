"""The effective environment: the process's variables over a ``.env`` file's.

The file is ``.env`` in the folder Navi starts in, read by python-dotenv (the format
Docker Compose and most tools share: quotes, ``# comments``, ``export``, multi-line
quoted values, ``${VAR}`` references). A variable set in the real environment always
wins over the file, even when it is set to an empty value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values


def read_dotenv(path: Path) -> dict[str, str]:
    """The file's variables; none if there is no such file. A line python-dotenv cannot
    parse is skipped with a warning naming its line (the rest still counts)."""
    if not path.is_file():
        return {}
    values = dotenv_values(path, encoding="utf-8")
    # ``KEY`` alone on a line (no ``=``) has no value: it sets nothing.
    return {key: value for key, value in values.items() if value is not None}


def environment(
    dotenv: Path | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``.env`` (or ``dotenv``) overlaid by the real environment (or ``base``)."""
    env = read_dotenv(dotenv if dotenv is not None else Path(".env"))
    env.update(os.environ if base is None else base)
    return env
