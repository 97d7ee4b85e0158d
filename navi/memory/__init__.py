"""Navi's long-term memory of its user, event-sourced.

Each user's memory is a stream, ``memory:<user_id>``: facts learned from idle sessions
(``memory.fact_learned``, with the messages they came from), edits and forgets by the
user, summaries, and which session ranges were processed. The ``memory`` projection
(``projections.memory``) and the search index are folds of it. See docs/memory.md.

- ``MemoryService``: facts, search, forget, edit, ``summary_message`` for the context.
- ``MemoryWorker``: extraction sweeps, summaries, re-extraction (needs an LLM backend).
- ``memory_tools(service)``: ``memory_search`` and ``memory_forget``.
- ``memory_routes(service_getter)``: the REST API.
"""

from navi.memory.decisions import FactNotFound
from navi.memory.facts import LOCAL_USER, fact_id, memory_stream_id
from navi.memory.index import MemoryIndex, memory_index_for
from navi.memory.routes import memory_routes
from navi.memory.service import MemoryService, SourceMessage
from navi.memory.summary import MEMORY_HEADER
from navi.memory.tools import memory_tools
from navi.memory.worker import MemoryWorker, SweepReport

__all__ = [
    "LOCAL_USER",
    "MEMORY_HEADER",
    "FactNotFound",
    "MemoryIndex",
    "MemoryService",
    "MemoryWorker",
    "SourceMessage",
    "SweepReport",
    "fact_id",
    "memory_index_for",
    "memory_routes",
    "memory_stream_id",
    "memory_tools",
]
