"""Recompressing a session's context on request (``POST /sessions/{id}/recompress``,
``navi recompress``): ask the session actor (navi/run/compression.py does the work) and
wait for the ``context.compressed`` or ``context.compression_failed`` it records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events.envelope import Recorded
from navi.session import messages as m

if TYPE_CHECKING:
    from navi.app import Navi

ENDS = frozenset({"context.compressed", "context.compression_failed"})


async def recompress_and_wait(navi: Navi, session_id: str, model: str | None) -> Recorded:
    """The recorded end of the recompression; raises ``SessionError`` when the session
    refuses (a run is active, nothing to summarise)."""
    after: int = await navi.sessions.ask(session_id, m.Recompress(model=model))
    async for record in navi.store.subscribe(session_id, after_seq=after):
        if record.type in ENDS:
            return record
    raise AssertionError("unreachable: a subscription never ends")
