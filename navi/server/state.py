"""What every route of the server reaches: the open ``Navi`` and the server's own views.

``create_app`` builds one ``ServerState`` at start-up and keeps it on the Starlette app;
route modules get it with ``state_of(request)`` and never import the app module.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection

from navi.server.rate import HourlyLimit
from navi.server.views import SessionLog, SessionsView, load_log

if TYPE_CHECKING:
    from navi.accounts import User
    from navi.app import Navi
    from navi.server.files import FileStore


@dataclass
class ServerState:
    navi: Navi
    sessions: SessionsView
    files: FileStore
    # NAVI_USER_IMPORTS_PER_HOUR, per user (replay/routes.py, import_export).
    import_rate: HourlyLimit = field(default_factory=lambda: HourlyLimit(0))
    session_created_hooks: list[Callable[[], None]] = field(default_factory=list)
    slow_clients_dropped: int = 0

    @property
    def max_context_tokens(self) -> int:
        """The context meter's scale: the window of the model in use, as its backend
        tells (it changes when ``auto`` moves from the embedded model to Ollama)."""
        return self.navi.context_window()

    async def load(self, session_id: str) -> SessionLog:
        return await load_log(self.navi.store, session_id)

    def new_session(self, user: User) -> AbstractAsyncContextManager[None]:
        """Held while one of ``user``'s sessions is made (created, forked, imported,
        seeded by ``/v1``): refused past ``NAVI_USER_MAX_SESSIONS`` (views.py)."""
        return self.sessions.room_for(user, self.navi.settings.user_max_sessions)

    def on_session_created(self) -> None:
        for hook in self.session_created_hooks:
            hook()


def state_of(connection: HTTPConnection) -> ServerState:
    """The server's state, from a request or a WebSocket of its app."""
    state: ServerState = connection.app.state.navi_server
    return state
