"""The tools that act on the session itself: which of their calls wait for a person."""

from __future__ import annotations

import pytest

from navi.session_tools import SwitchProfileTool
from navi.subagents import SpawnAgentTool
from profiles import SHIPPED_DIR, ProfileRegistry


@pytest.mark.parametrize(
    ("profile_id", "asks"),
    [
        ("secretary", False),
        ("server_admin", True),  # its sandboxed code has the network
        ("smart_home", True),  # its requests reach the LAN
        ("no_such_profile", False),  # the call fails: nothing to ask about
        (None, False),  # spawn_agent without one: the conversation's own profile
        (["server_admin"], False),  # not an id: the call's schema refuses it
    ],
)
def test_entering_a_profile_that_loosens_safety_asks_first(profile_id: object, asks: bool) -> None:
    registry = ProfileRegistry.load(SHIPPED_DIR, environ={})
    args = {"task": "t"} if profile_id is None else {"task": "t", "profile_id": profile_id}
    expected = "ask" if asks else "auto"
    assert SpawnAgentTool(registry).approval_for(args) == expected
    assert SwitchProfileTool(registry).approval_for(args) == expected
