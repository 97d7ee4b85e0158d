"""Recompressing a session's context on request (``POST /sessions/{id}/recompress``,
``navi recompress``): ask the session actor (navi/run/compression.py does the work) and
wait for the ``context.compressed`` or ``context.compression_failed`` it records.

The wait follows the session's history (replay.history.follow_history), so it also works for a
fork, whose actor answers in history seqs while its own stream is numbered from the fork
point on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from events.envelope import Recorded
from navi.replay.history import follow_history, load_history
from navi.session import messages as m

if TYPE_CHECKING:
    from navi.app import Navi

ENDS = frozenset({"context.compressed", "context.compression_failed"})


async def recompress_and_wait(navi: Navi, session_id: str, model: str | None) -> Recorded:
    """The recorded end of the recompression; raises ``SessionError`` when the session
    refuses (a run is active, nothing to summarise)."""
    after: int = await navi.sessions.ask(session_id, m.Recompress(model=model))
    history = await load_history(navi.store, session_id)
    async for record in follow_history(navi.store, history, after):
        if record.type in ENDS:
            return record
    raise AssertionError("unreachable: a subscription never ends")
