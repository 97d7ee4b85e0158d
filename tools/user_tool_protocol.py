"""What the server and a user tool's sandboxed process say to each other.

The process (``tools.user_tool_child``) shares its standard output with the tool's own
prints, so every line of its own starts with :data:`ANSWER_PREFIX`. Whatever comes back
is untrusted: the tool's code ran in that process and may have written anything. The
server decodes it into these types (a wrong shape is a failed load or call) and checks
every value again (``tools.user_tools``).

- ``describe FILE…``: ``start <path>`` before each file, then one :class:`FileAnswer`;
- ``call REQUEST_FILE``: one :class:`CallAnswer` for the :class:`CallRequest` in the file.
"""

from __future__ import annotations

from typing import Any

import msgspec

from events.types import NoteDeleted, NoteSaved, ScratchpadUpdated, TodoItem, TodoUpdated
from tools.base import ToolResult
from tools.context import ProfileInfo

# An ASCII record separator: no ordinary print starts a line with it.
ANSWER_PREFIX = "\x1enavi-user-tool "

# The only events a user tool may record: the session state a tool keeps (todo,
# scratchpad, notes), as the built-in tools do. Never a tool result, an approval or a run.
StateEvent = TodoUpdated | ScratchpadUpdated | NoteSaved | NoteDeleted
STATE_EVENTS = (TodoUpdated, ScratchpadUpdated, NoteSaved, NoteDeleted)


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One tool a file defines, as data: what the server offers and checks calls against."""

    name: str
    description: str
    parameters: dict[str, Any]
    idempotent: bool = False
    # None: the file does not say (the server's TOOL_TIMEOUT_S applies).
    timeout_s: float | None = None
    # As the tool declares it; None: it does not say. It counts only as far as the
    # admin confirmed it in enabled.json (tools.user_tools.effective_approval).
    approval: str | None = None


class FileAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """One file described: the SHA-256 of the bytes imported and its tools, or why not."""

    path: str
    sha256: str = ""
    tools: tuple[ToolSpec, ...] = ()
    error: str | None = None


class CallContext(msgspec.Struct, frozen=True, kw_only=True):
    """What the tool's ``ctx`` holds in the sandbox (the rest of ``ToolContext`` stays
    in the server: the stop signal, the hooks, the settings)."""

    session_id: str
    files_dir: str
    user_id: str
    call_id: str
    profile: ProfileInfo
    output_max_chars: int
    todo: tuple[TodoItem, ...] = ()
    scratchpad: dict[str, str] = {}
    notes: dict[str, str] = {}


class CallRequest(msgspec.Struct, frozen=True, kw_only=True):
    path: str
    # The bytes the server loaded the tool from: another file's code never runs instead.
    sha256: str
    name: str
    arguments: dict[str, Any]
    context: CallContext


class CallAnswer(msgspec.Struct, frozen=True, kw_only=True):
    result: ToolResult
    # Recorded by the server in order, after the call, through the call's ``ctx.emit``.
    events: tuple[StateEvent, ...] = ()


def answers(output: str) -> tuple[list[str], list[str]]:
    """The process's own lines (prefix removed) and the tool's prints, in order."""
    own: list[str] = []
    printed: list[str] = []
    for line in output.split("\n"):  # not splitlines(): it splits at the prefix's \x1e
        if line.startswith(ANSWER_PREFIX):
            own.append(line[len(ANSWER_PREFIX) :])
        elif line.strip():
            printed.append(line)
    return own, printed
