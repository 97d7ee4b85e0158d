"""The settings page's event: one stream per user, ``settings:<user_id>``, and the
server's own, ``settings:_server`` (no user id starts with "_"); its projection is
``projections.user_settings``. ``events.types`` re-exports it."""

from __future__ import annotations

from typing import Literal

from events.event import Event

ThinkChoice = Literal["default", "on", "off"]
ToolChoice = Literal["auto", "ask", "deny"]
# The LLM connection's type ("": as the environment says, NAVI_LLM_BACKEND).
BackendType = Literal["", "ollama", "openai"]


class SettingsUpdated(Event, frozen=True, kw_only=True, tag="settings.updated"):
    """Settings changed on the settings page; only the fields given (not None) change.

    ``model``: the model of new chats ("": the profile's). ``think``: thinking on, off,
    or as the profile says. ``tool_policy``: the whole new map of tool name → "auto",
    "ask" or "deny". ``backend_url``: the LLM server's URL, in the server's stream only
    ("": the one the environment gives). ``backend_type``: "ollama" or "openai" (an
    OpenAI-compatible server), "" as the environment says. ``api_key_hint``: the saved
    API key as shown ("sk-…abcd", "" none): the key itself is never in an event, it is
    kept in a file of the data folder (navi/llm/connection.py)."""

    model: str | None = None
    think: ThinkChoice | None = None
    tool_policy: dict[str, ToolChoice] | None = None
    backend_url: str | None = None
    backend_type: BackendType | None = None
    api_key_hint: str | None = None
