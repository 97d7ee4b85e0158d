"""``SettingsService``: what the settings page saved, per user, in the event store.

Each user's settings are a stream of their own, ``settings:<user_id>`` (the server's:
``settings:_server``, for the LLM backend's URL), folded by ``projections.user_settings``
and caught up before every read, so a change made on another node is seen here too.
Writes append at the folded seq (optimistic concurrency, as the memory streams do).

Who may change what is the routes' business (navi/server/settings_routes.py); this
module only reads and writes.
"""

from __future__ import annotations

import anyio

from events.errors import ConcurrencyError
from events.settings_events import SettingsUpdated
from events.store import EventStore
from projections.runner import ProjectionRunner
from projections.user_settings import SERVER, USER_SETTINGS, UserSettings, settings_stream_id

__all__ = ["SERVER", "SettingsService", "UserSettings"]

MAX_RACES = 8


class SettingsService:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._runners: dict[str, ProjectionRunner[UserSettings]] = {}
        self._lock = anyio.Lock()

    async def get(self, owner: str) -> UserSettings:
        """The settings of user ``owner`` (or of ``SERVER``), caught up with the log."""
        runner = self._runners.get(owner)
        if runner is None:
            runner = ProjectionRunner(self.store, settings_stream_id(owner), USER_SETTINGS)
            self._runners[owner] = runner
        return await runner.catch_up()

    async def update(self, owner: str, change: SettingsUpdated) -> UserSettings:
        """Record ``change`` in the owner's stream; returns the settings after it."""
        async with self._lock:
            for _ in range(MAX_RACES):
                await self.get(owner)
                runner = self._runners[owner]
                try:
                    records = await self.store.append(
                        settings_stream_id(owner), [change], expected_seq=runner.seq
                    )
                except ConcurrencyError:
                    continue  # another node wrote first: catch up and append after it
                for record in records:
                    runner.apply(record)
                return runner.state
        raise ConcurrencyError(settings_stream_id(owner), -1)
