"""The ``user_settings`` projection: what the settings page saved, folded from one
settings stream (``settings:<user_id>``, or the server's ``settings:_server``).

Each ``settings.updated`` changes the fields it gives and leaves the others.
"""

from __future__ import annotations

import msgspec
from msgspec.structs import replace

from events.envelope import Recorded
from events.settings_events import BackendType, SettingsUpdated, ThinkChoice, ToolChoice
from projections.fold import Projection

SERVER = "_server"  # the server's stream: no user id starts with "_" (navi.accounts)
STREAM_PREFIX = "settings:"


def settings_stream_id(owner: str) -> str:
    """The settings stream of a user id (or of ``SERVER``)."""
    return f"{STREAM_PREFIX}{owner}"


class UserSettings(msgspec.Struct, frozen=True, kw_only=True):
    model: str = ""  # the model of new chats; "": the profile's
    think: ThinkChoice = "default"  # "default": as the profile says
    tool_policy: dict[str, ToolChoice] = msgspec.field(default_factory=dict)
    backend_url: str = ""  # the server's stream only; "": the environment's
    backend_type: BackendType = ""  # the server's stream only; "": the environment's
    api_key_hint: str = ""  # the server's stream only: the saved key, masked


def evolve(state: UserSettings, record: Recorded) -> UserSettings:
    event = record.event
    if not isinstance(event, SettingsUpdated):
        return state
    return replace(
        state,
        model=state.model if event.model is None else event.model,
        think=state.think if event.think is None else event.think,
        tool_policy=state.tool_policy if event.tool_policy is None else dict(event.tool_policy),
        backend_url=state.backend_url if event.backend_url is None else event.backend_url,
        backend_type=state.backend_type if event.backend_type is None else event.backend_type,
        api_key_hint=state.api_key_hint if event.api_key_hint is None else event.api_key_hint,
    )


INITIAL = UserSettings()
USER_SETTINGS: Projection[UserSettings] = Projection("user_settings", INITIAL, evolve)
