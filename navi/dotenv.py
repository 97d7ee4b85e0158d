"""A minimal ``.env`` reader: ``KEY=value`` lines, ``#`` comments, optional quotes.

The process environment always wins over the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def read_dotenv(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").isalnum():
            raise ValueError(f"{path}:{number}: expected KEY=value, got {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
            if line.split("=", 1)[1].strip()[0] == '"':
                value = value.replace("\\n", "\n")
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


def environment(
    dotenv: Path | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The effective environment: ``.env`` (if any) overlaid by the real environment."""
    env = read_dotenv(dotenv if dotenv is not None else Path(".env"))
    env.update(os.environ if base is None else base)
    return env
