"""Errors of replay, fork, export and import: each says what is wrong and where."""

from __future__ import annotations


class ReplayError(Exception):
    """Base of the errors of ``navi.replay``."""


class SessionNotFoundError(ReplayError):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session {session_id!r}: its stream has no events")


class SessionExistsError(ReplayError):
    def __init__(self, stream_ids: list[str], hint: str = "") -> None:
        self.stream_ids = stream_ids
        names = ", ".join(repr(s) for s in stream_ids)
        super().__init__(f"stream(s) {names} already exist; nothing was written{hint}")


class SeqOutOfRangeError(ReplayError):
    def __init__(self, session_id: str, seq: int, head: int) -> None:
        self.session_id = session_id
        self.seq = seq
        self.head = head
        super().__init__(
            f"session {session_id!r} has events 1..{head}; seq {seq} is not one of them"
        )


class ExportFormatError(ReplayError):
    """An export file that cannot be imported; ``line`` is 1-based (0: the whole file)."""

    def __init__(self, line: int, reason: str) -> None:
        self.line = line
        self.reason = reason
        where = f"line {line}" if line else "export file"
        super().__init__(f"{where}: {reason}; nothing was imported")
