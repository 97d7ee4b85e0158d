"""``todo``: the session's step checklist, kept as ``todo.updated`` events in its log."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from events.types import TodoItem, TodoUpdated
from tools.base import Tool, ToolError, ToolResult, ok
from tools.context import ToolContext

# The values of TodoItem.status.
STATUSES: tuple[str, ...] = ("pending", "in_progress", "done", "failed", "skipped")
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]", "failed": "[!]", "skipped": "[-]"}
MAX_ITEMS = 50


def format_todo(items: Sequence[TodoItem]) -> str:
    if not items:
        return "The todo list is empty."
    done = sum(1 for item in items if item.status in ("done", "skipped"))
    lines = [f"Todo ({done}/{len(items)} done):"]
    for item in items:
        line = f"{_MARKS.get(item.status, '[?]')} {item.id}. {item.text}"
        if item.executor and item.executor != "SELF":
            line += f"  ({item.executor})"
        lines.append(line)
        if item.validation:
            lines.append(f"      validation: {item.validation}")
        if item.note:
            lines.append(f"      note: {item.note}")
    return "\n".join(lines)


class TodoTool(Tool):
    name = "todo"
    uses_files = False
    description = (
        "Your task checklist for this session. 'set' replaces the list with new steps; "
        "'update' changes one step's status (pending, in_progress, done, failed, skipped), "
        "validation (how you checked it is done) or note; 'read' shows the list."
    )
    parameters = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["set", "update", "read"]},
            "items": {
                "type": "array",
                "description": "set: the steps, in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "minLength": 1},
                        "executor": {
                            "type": "string",
                            "description": "SELF, TOOL: name or AGENT: profile (default SELF).",
                        },
                    },
                    "required": ["text"],
                    "additionalProperties": False,
                },
            },
            "id": {"type": "integer", "minimum": 1, "description": "update: the step number."},
            "status": {"type": "string", "enum": list(STATUSES)},
            "validation": {
                "type": "string",
                "description": "update: evidence the step is really done.",
            },
            "note": {"type": "string", "description": "update: a short note on the step."},
        },
        "required": ["action"],
        "additionalProperties": False,
    }
    timeout_s = 10.0

    def is_idempotent(self, args: dict[str, Any]) -> bool:
        return args.get("action") == "read"

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        action = args["action"]
        current = tuple(ctx.state.todo())
        if action == "read":
            return ok(format_todo(current))
        if action == "set":
            items = _new_list(args)
        else:
            items = _updated(current, args, ctx.profile.step_validation_enabled)
        await ctx.emit(TodoUpdated(items=items))
        return ok(format_todo(items))


def _new_list(args: dict[str, Any]) -> tuple[TodoItem, ...]:
    steps = args.get("items")
    if not steps:
        raise ToolError("action 'set' needs 'items': a non-empty list of steps")
    if len(steps) > MAX_ITEMS:
        raise ToolError(f"at most {MAX_ITEMS} steps, got {len(steps)}; group smaller steps")
    return tuple(
        TodoItem(id=index, text=step["text"].strip(), executor=step.get("executor") or "SELF")
        for index, step in enumerate(steps, 1)
    )


def _updated(
    current: tuple[TodoItem, ...], args: dict[str, Any], validation_required: bool
) -> tuple[TodoItem, ...]:
    if "id" not in args:
        raise ToolError("action 'update' needs 'id', the step number")
    changes = {key: args[key] for key in ("status", "validation", "note") if key in args}
    if not changes:
        raise ToolError("action 'update' needs at least one of 'status', 'validation', 'note'")
    step_id = int(args["id"])
    target = next((item for item in current if item.id == step_id), None)
    if target is None:
        known = ", ".join(str(item.id) for item in current) or "none (the list is empty; use set)"
        raise ToolError(f"no step {step_id}; steps are: {known}")
    updated = msgspec.structs.replace(target, **changes)
    if validation_required and updated.status == "done" and not updated.validation.strip():
        raise ToolError(
            f"step {step_id} cannot be marked done without 'validation': say how you verified "
            "it is complete (e.g. the command output or file you checked)"
        )
    return tuple(updated if item.id == step_id else item for item in current)
