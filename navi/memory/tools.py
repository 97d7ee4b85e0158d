"""The memory tools the LLM can call: ``memory_search``, ``memory_remember`` and
``memory_forget``.

They act on the memory of the user the run belongs to (``ToolContext.user_id``).
"""

from __future__ import annotations

from typing import Any

from navi.memory.decisions import MAX_VALUE_LENGTH, FactNotFound
from navi.memory.facts import CATEGORIES, normalize_key
from navi.memory.service import MemoryService
from projections.memory import Fact
from tools.base import Tool, ToolError, ToolResult, ok
from tools.context import ToolContext

USAGE_RULES = (
    "Call memory_search when the user mentions something personal or before making "
    "assumptions about their environment. Do not call at session start reflexively — "
    "only when context warrants it. Call memory_remember and memory_forget only when "
    "the user explicitly asks."
)


def describe(fact: Fact) -> str:
    return f"- [{fact.category}] {fact.key}: {fact.value} (id {fact.fact_id})"


class MemoryTool(Tool):
    """A tool on the memory of the run's user (``ToolContext.user_id``)."""

    uses_files = False
    timeout_s = 30.0

    def __init__(self, service: MemoryService) -> None:
        self.service = service


class MemorySearchTool(MemoryTool):
    name = "memory_search"
    description = (
        "Search your long-term memory of the user: facts (preferences, projects, "
        "environment, personal details) learned from past conversations, by keywords, "
        "best matches first. " + USAGE_RULES
    )
    parameters = {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "description": "Keywords, e.g. 'editor operating system'.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 50,
                "description": "How many facts at most (default 10).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    idempotent = True

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = str(args["query"])
        facts = await self.service.search(ctx.user_id, query, int(args.get("limit", 10)))
        if not facts:
            return ok(f"No remembered fact matches {query!r}.", count=0)
        lines = [f"{len(facts)} remembered fact(s) for {query!r}:"]
        lines += [describe(fact) for fact in facts]
        return ok("\n".join(lines), count=len(facts), fact_ids=[f.fact_id for f in facts])


class MemoryRememberTool(MemoryTool):
    name = "memory_remember"
    description = (
        "Remember a fact about the user for future conversations, when the user asks "
        '("remember that …"). A new value for a key replaces the old one; the user '
        "sees and manages every fact on the Memory page. " + USAGE_RULES
    )
    parameters = {
        "type": "object",
        "properties": {
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "key": {
                "type": "string",
                "minLength": 1,
                "maxLength": 80,
                "description": "A short name for the fact, e.g. 'units' or 'editor'.",
            },
            "value": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_VALUE_LENGTH,
                "description": "The fact in the user's words, e.g. 'Prefers metric units'.",
            },
        },
        "required": ["category", "key", "value"],
        "additionalProperties": False,
    }
    # Writing the same value again changes nothing: safe to run again after a crash.
    idempotent = True
    # A remembered fact steers every future chat, and a page the model read may ask for
    # one: the user sees the fact on the card and says yes first.
    approval = "ask"

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            fact = await self.service.remember(
                ctx.user_id,
                ctx.session_id,
                category=str(args["category"]),
                key=str(args["key"]),
                value=str(args["value"]),
            )
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return ok(
            f"Remembered [{fact.category}] {fact.key}: {fact.value} (id {fact.fact_id}). "
            "The user can see, edit or forget it on the Memory page.",
            fact_id=fact.fact_id,
        )


class MemoryForgetTool(MemoryTool):
    name = "memory_forget"
    description = (
        "Forget a fact about the user for good: it disappears from memory search, from "
        "the memory summary and from every future conversation. Name it by its id (from "
        "memory_search) or by its key. " + USAGE_RULES
    )
    parameters = {
        "type": "object",
        "properties": {
            "fact_id": {"type": "string", "minLength": 1, "description": "The fact's id."},
            "key": {"type": "string", "minLength": 1, "description": "Or the fact's key."},
            "category": {
                "type": "string",
                "enum": list(CATEGORIES),
                "description": "With key: the fact's category, if several facts share the key.",
            },
        },
        "additionalProperties": False,
    }
    # Forgetting twice leaves the same memory: safe to run again after a crash.
    idempotent = True
    # A fact forgotten is gone for good, and a page the model read may ask for it: the
    # user says yes first (a profile or the user's settings may make it "auto").
    approval = "ask"

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        fact_id = args.get("fact_id") or await self._find(ctx.user_id, args)
        try:
            fact = await self.service.forget(ctx.user_id, fact_id, reason="assistant")
        except FactNotFound as exc:
            raise ToolError(f"{exc}; use memory_search to find the fact's id") from None
        return ok(
            f"Forgot the fact [{fact.category}] {fact.key} (id {fact.fact_id}). It is gone "
            "from memory and from future conversations.",
            fact_id=fact.fact_id,
        )

    async def _find(self, user_id: str, args: dict[str, Any]) -> str:
        if not args.get("key"):
            raise ToolError("give the fact's id (fact_id) or its key (key)")
        key = normalize_key(str(args["key"]))
        category = args.get("category")
        matches = [
            f
            for f in await self.service.facts(user_id)
            if f.key == key and (category is None or f.category == category)
        ]
        if not matches:
            raise ToolError(f"no remembered fact has the key {key!r}; use memory_search")
        if len(matches) > 1:
            listed = "\n".join(describe(f) for f in matches)
            raise ToolError(f"several facts have the key {key!r}; give the fact_id:\n{listed}")
        return matches[0].fact_id


def memory_tools(service: MemoryService) -> list[Tool]:
    return [MemorySearchTool(service), MemoryRememberTool(service), MemoryForgetTool(service)]
