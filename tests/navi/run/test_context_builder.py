"""The tools a call offers: built once per tool set, rebuilt when the set changes."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from navi.run.context_builder import ContextBuilder
from profiles import Profile, ProfileRegistry
from tools import ToolSettings, create_registry

SHOUT = """
name = "shout"
description = "Shout the text."
parameters = {"type": "object", "properties": {"text": {"type": "string"}}}

async def execute(params: dict) -> str:
    return params["text"].upper()
"""


@pytest.mark.slow  # user tools and code_exec run in bubblewrap
def test_the_tools_offered_follow_a_reload(tmp_path: Path) -> None:
    tools_dir = tmp_path / "tools"
    tools_dir.mkdir()
    registry = create_registry(ToolSettings(tools_dir=str(tools_dir)))
    builder = ContextBuilder(ProfileRegistry(()), registry)
    profile = Profile(id="p", name="P", system_prompt="You help.", enabled_tools=("todo", "shout"))
    assert builder.tool_names(profile) == ["todo"]
    specs = builder.tool_specs(["todo"])
    assert [s.name for s in specs] == ["todo"]
    assert builder.tool_specs(["todo"]) is specs  # built once

    (tools_dir / "shout.py").write_text(SHOUT)
    registry.reload()
    assert builder.tool_names(profile) == ["todo", "shout"]
    shout = builder.tool_specs(["todo", "shout"])[1]
    assert (shout.name, shout.description) == ("shout", "Shout the text.")

    # A profile switch offers that profile's tools (subagents: its subagent tools).
    other = msgspec.structs.replace(profile, subagent_tools=("shout",))
    assert builder.tool_names(other, subagent=True) == ["shout"]
    assert builder.tool_names(other) == ["todo", "shout"]
