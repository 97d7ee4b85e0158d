"""What every route of the server reaches: the open ``Navi`` and the server's own views.

``create_app`` builds one ``ServerState`` at start-up and keeps it on the Starlette app;
route modules get it with ``state_of(request)`` and never import the app module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection

from navi.server.views import SessionLog, SessionsView, load_log

if TYPE_CHECKING:
    from navi.app import Navi
    from navi.server.files import FileStore


@dataclass
class ServerState:
    navi: Navi
    sessions: SessionsView
    files: FileStore
    session_created_hooks: list[Callable[[], None]] = field(default_factory=list)
    slow_clients_dropped: int = 0

    @property
    def max_context_tokens(self) -> int:
        """The context meter's scale: the window of the model in use, as its backend
        tells (it changes when ``auto`` moves from the embedded model to Ollama)."""
        return self.navi.context_window()

    async def load(self, session_id: str) -> SessionLog:
        return await load_log(self.navi.store, session_id)

    def on_session_created(self) -> None:
        for hook in self.session_created_hooks:
            hook()


def state_of(connection: HTTPConnection) -> ServerState:
    """The server's state, from a request or a WebSocket of its app."""
    state: ServerState = connection.app.state.navi_server
    return state
