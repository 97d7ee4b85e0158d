"""Navi's long-term memory of its user, event-sourced.

Each user's memory is a stream, ``memory:<user_id>``: facts learned from idle sessions
(``memory.fact_learned``, with the messages they came from), edits and forgets by the
user, summaries, and which session ranges were processed. The ``memory`` projection
(``projections.memory``) and the search index are folds of it. See docs/memory.md.

- ``MemoryService``: facts, search, forget, edit, ``summary_message`` for the context.
- ``MemoryWorker``: extraction sweeps, summaries, re-extraction (needs an LLM backend).
- ``memory_tools(service)``: ``memory_search``, ``memory_remember`` and ``memory_forget``.
- ``memory_routes(service_getter)``: the REST API.
"""

from navi.memory.routes import memory_routes
from navi.memory.service import MemoryService
from navi.memory.tools import memory_tools
from navi.memory.worker import MemoryWorker

__all__ = [
    "MemoryService",
    "MemoryWorker",
    "memory_routes",
    "memory_tools",
]
