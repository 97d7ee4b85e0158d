"""Errors a session request can meet; each maps to one HTTP status and a clear message."""

from __future__ import annotations


class SessionError(Exception):
    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SessionNotFound(SessionError):
    status = 404

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} not found")
        self.session_id = session_id


class RunActive(SessionError):
    status = 409

    def __init__(self) -> None:
        super().__init__(
            "a run is already active in this session: wait for it to end, stop it, "
            'or send the message with "queue": true to run it next'
        )


class StorageFull(SessionError):
    """The server's disk (or database) is full: nothing new can be saved. 507."""

    status = 507

    def __init__(self) -> None:
        super().__init__(
            "the server's storage is full: Navi cannot save anything new until space is "
            'freed on its disk (GET /health says storage "full" until then); a run '
            "under way goes on by itself once there is room"
        )


class BadInput(SessionError):
    status = 422


class QueueFull(SessionError):
    status = 409


class QuotaExceeded(SessionError):
    """What the user stores (images, uploads, session files, imported logs) would pass
    ``NAVI_USER_QUOTA_MB``."""

    status = 413


class TooManySessions(SessionError):
    """The user has ``NAVI_USER_MAX_SESSIONS`` sessions: a new one (created, forked,
    imported, or a new ``/v1`` conversation) is refused, and nothing is written. 403,
    not 429: waiting does not help, deleting sessions does."""

    status = 403

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"you have {limit} sessions, the most a user may keep (NAVI_USER_MAX_SESSIONS): "
            "delete sessions you no longer need to make new ones"
        )


class TooManyImports(SessionError):
    """The user imported ``NAVI_USER_IMPORTS_PER_HOUR`` sessions within the last hour."""

    status = 429

    def __init__(self, limit: int, retry_after_s: int) -> None:
        super().__init__(
            f"at most {limit} imports per hour (NAVI_USER_IMPORTS_PER_HOUR): "
            f"try again in {retry_after_s} s"
        )
        self.retry_after_s = retry_after_s


class ApprovalNotFound(SessionError):
    """No call of this session (or of its running subagents) waits for this decision."""

    status = 404


class NotWaitingForLLM(SessionError):
    """Try again, asked of a session whose run does not wait for the model's server."""

    status = 409


class AlreadyDecided(SessionError):
    status = 409


class AmbiguousCall(SessionError):
    """A decision without a stream id, and more than one waiting call has its call id."""

    status = 409


class SessionDamaged(SessionError):
    """The session's log holds an event its projections cannot take (written by hand
    or by an older bug): only this session fails, with a message that says so."""

    status = 500

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id!r} cannot be shown: {reason}")
