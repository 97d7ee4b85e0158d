"""The global personality put before every profile's system prompt.

Resolution: ``NAVI_PERSONA`` (inline text; a literal ``\\n`` becomes a newline, since
``.env`` files hold one line) → ``NAVI_PERSONA_FILE`` (a path) → the default file
(``profiles/persona.txt``). A blank variable counts as unset.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from profiles.errors import ProfileError

SHIPPED_PERSONA = Path(__file__).with_name("persona.txt")


def persona(
    environ: Mapping[str, str] | None = None, *, default_file: Path = SHIPPED_PERSONA
) -> str:
    env = os.environ if environ is None else environ
    inline = env.get("NAVI_PERSONA", "")
    if inline.strip():
        return inline.replace("\\n", "\n").strip()
    configured = env.get("NAVI_PERSONA_FILE", "")
    if configured.strip():
        return read_persona_file(Path(configured.strip()).expanduser(), "NAVI_PERSONA_FILE")
    return read_persona_file(default_file, "the default persona file")


def read_persona_file(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ProfileError(path, f"{what} does not exist") from None
    except IsADirectoryError:
        raise ProfileError(path, f"{what} is a directory, not a text file") from None
    except UnicodeDecodeError as error:
        raise ProfileError(path, f"{what} is not UTF-8 text ({error.reason})") from None
    except OSError as error:
        raise ProfileError(path, f"{what} cannot be read: {error.strerror}") from None
