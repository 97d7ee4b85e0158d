"""The rule every LLM context must keep: each tool call is answered, right after it.

An assistant message with ``tool_calls`` must be followed by exactly one tool message
per call id (in any order) before any other message. ``complete=False`` accepts a last
group still waiting for results (a context seen in the middle of a tool step).
"""

from __future__ import annotations

from collections.abc import Iterable

from projections.context import ContextState
from projections.types import Message


class MalformedContext(AssertionError):
    """The context breaks the tool-call rule; the message says where and how."""


def assert_well_formed(context: ContextState | Iterable[Message], *, complete: bool = True) -> None:
    """Raise ``MalformedContext`` if ``context`` (a state or its messages) breaks the rule."""
    messages = context.as_list() if isinstance(context, ContextState) else context
    waiting: dict[str, str] = {}  # call id → tool name, for the group being answered
    group_at = -1
    for index, message in enumerate(messages):
        if message.role == "tool":
            call_id = message.tool_call_id
            if call_id is None or call_id not in waiting:
                raise MalformedContext(
                    f"message {index} (seq {message.seq}) is a result for call {call_id!r}, "
                    "which no assistant message right before it is waiting for"
                )
            del waiting[call_id]
            continue
        if waiting:
            raise MalformedContext(
                f"message {index} (seq {message.seq}, role {message.role}) comes before the "
                f"results of calls {sorted(waiting)} of the assistant message {group_at}"
            )
        if message.role == "assistant" and message.tool_calls:
            ids = [call.id for call in message.tool_calls]
            if len(set(ids)) != len(ids):
                raise MalformedContext(
                    f"message {index} (seq {message.seq}) repeats a tool call id: {ids}"
                )
            waiting = {call.id: call.name for call in message.tool_calls}
            group_at = index
    if waiting and complete:
        raise MalformedContext(
            f"the context ends before the results of calls {sorted(waiting)} "
            f"of the assistant message {group_at}"
        )
