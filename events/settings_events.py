"""The settings page's event: one stream per user, ``settings:<user_id>``, and the
server's own, ``settings:_server`` (no user id starts with "_"); its projection is
``projections.user_settings``. ``events.types`` re-exports it."""

from __future__ import annotations

from typing import Literal

from events.event_base import Event

ThinkChoice = Literal["default", "on", "off"]
ToolChoice = Literal["auto", "ask", "deny"]


class SettingsUpdated(Event, frozen=True, kw_only=True, tag="settings.updated"):
    """Settings changed on the settings page; only the fields given (not None) change.

    ``model``: the model of new chats ("": the profile's). ``think``: thinking on, off,
    or as the profile says. ``tool_policy``: the whole new map of tool name → "auto",
    "ask" or "deny". ``backend_url``: the LLM server's URL, in the server's stream only
    ("": the one the environment gives)."""

    model: str | None = None
    think: ThinkChoice | None = None
    tool_policy: dict[str, ToolChoice] | None = None
    backend_url: str | None = None
