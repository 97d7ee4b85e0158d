"""``${VAR}`` and ``${VAR:-default}`` in an mcp.json entry, as Claude Code and LibreChat
write them (VS Code's ``${env:VAR}`` too), taken from Navi's environment.

Expanded in ``command``, ``args``, ``env``, ``url`` and ``headers``. A variable that is
not set and has no default is an error naming it (the server is not started); so is any
other ``${...}`` (VS Code's ``${input:...}`` prompts: Navi has nobody to prompt). The
values taken from the environment (8 characters or more) are kept
(:attr:`Expanded.hidden`): once a server is started with them, every log line and error
message that quotes one (a URL with a token in its path, say) shows ``${VAR}`` instead
(:func:`navi.log_redaction.hide_values`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# ${NAME}, ${env:NAME}, ${NAME:-default} (the default up to the first "}").
_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_ANY = re.compile(r"\$\{[^}]*\}?")
# A value this short is not worth hiding (and hiding it would mangle messages).
_HIDE_MIN = 8


class VariableError(ValueError):
    """A ``${...}`` that cannot be expanded; the message names it."""


@dataclass
class Expanded:
    """Expands text, remembering the environment's values it put in."""

    environ: Mapping[str, str]
    # value → "${NAME}", for the values taken from the environment.
    hidden: dict[str, str] = field(default_factory=dict)

    def text(self, value: str, where: str) -> str:
        if "${" not in value:
            return value

        def one(match: re.Match[str]) -> str:
            name, default = match[1], match[2]
            got = self.environ.get(name)
            if got is not None and (got or default is None):
                if len(got) >= _HIDE_MIN:
                    self.hidden[got] = f"${{{name}}}"
                return got
            if default is not None:
                return default
            raise VariableError(f"{where} uses ${{{name}}}, which is not set (and has no default)")

        out = _VARIABLE.sub(one, value)
        # Whatever ${...} is left is a form Navi does not know.
        leftover = _ANY.search(_VARIABLE.sub("", value))
        if leftover:
            raise VariableError(
                f"{where} uses {leftover[0]!r}: only ${{VAR}} and ${{VAR:-default}} are expanded"
            )
        return out
