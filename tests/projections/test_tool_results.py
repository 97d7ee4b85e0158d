"""What a tool call's outcome reads as (projections/tool_results.py)."""

from __future__ import annotations

from events.event import ToolCall
from events.types import ToolCompleted, ToolFailed
from navi.run.tool_step import _result_event
from projections.tool_results import tool_result_content
from tools import fail


def test_a_failed_tools_error_is_said_once() -> None:
    # A tool's failure is recorded with its output, which fail() starts with "Error:".
    event = _result_event(ToolCall(id="c1", name="x", arguments={}), fail("BrokenPipeError: x"))
    assert isinstance(event, ToolFailed)
    assert tool_result_content(event) == "Error: BrokenPipeError: x"
    bare = ToolFailed(call_id="c1", name="x", reason="error", error="no such file")
    assert tool_result_content(bare) == "Error: no such file"
    assert tool_result_content(ToolFailed(call_id="c1", name="x")) == "Error: the call failed."


def test_a_completed_but_failed_call_keeps_its_output_and_says_its_error_once() -> None:
    said = ToolCompleted(call_id="c", name="x", output="Error: boom", success=False, error="boom")
    assert tool_result_content(said) == "Error: boom"
    more = ToolCompleted(call_id="c", name="x", output="partial", success=False, error="boom")
    assert tool_result_content(more) == "partial\nError: boom"
