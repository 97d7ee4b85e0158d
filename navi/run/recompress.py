"""A recompression, asked for by ``navi recompress`` while the session is at rest: the
range of the latest summary is summarised again (from the original messages, with
another model if asked), and a new ``context.compressed`` supersedes the old one. The
log keeps both, so the context at any seq is what the LLM saw then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from events.envelope import Recorded
from events.types import ContextCompressed
from navi.run.compression import (
    Selection,
    abandon_interrupted,
    context_tokens,
    select_old_turns,
    summarise,
    summary_spans,
)
from navi.run.host import active_profile
from projections import context as context_projection
from projections.types import Message

if TYPE_CHECKING:
    from navi.run.host import RunDeps, RunHost


def raw_messages(records: Sequence[Recorded], first: int, last: int) -> list[Message]:
    """The context messages recorded from ``first`` to ``last``, as they were before any
    compression of that range (compressions inside it are left out of the fold)."""
    state = context_projection.INITIAL
    for record in records:
        event = record.event
        if (
            isinstance(event, ContextCompressed)
            and event.from_seq >= first
            and event.to_seq <= last
        ):
            continue
        state = context_projection.evolve(state, record)
    spans = summary_spans(state.summaries)
    picked = []
    for message in state.as_list():
        start, end = (
            spans.get(message.seq, (message.seq, message.seq))
            if message.is_summary
            else (message.seq, message.seq)
        )
        if start >= first and end <= last:
            picked.append(message)
    return picked


def recompress_selection(
    context: context_projection.ContextState, records: Sequence[Recorded], keep_recent: int
) -> Selection | None:
    """What a recompression covers: the range of the latest summary in the context, from
    its original messages; with no summary, the older turns as a compression would."""
    messages = context.as_list()
    in_context = {m.seq for m in messages if m.is_summary}
    latest = next((s for s in reversed(context.summaries) if s[0] in in_context), None)
    if latest is None:
        return select_old_turns(messages, context.summaries, keep_recent)
    summary_seq, first, last = latest
    originals = raw_messages([r for r in records if r.seq < summary_seq], first, last)
    if not originals:
        return None
    return Selection(
        from_seq=first,
        to_seq=last,
        supersedes_seq=summary_seq,
        messages=tuple(originals),
        messages_before=len(messages),
        messages_after=len(messages),
    )


async def recompress_range(
    host: RunHost, deps: RunDeps, selection: Selection, model: str | None
) -> bool:
    """Record a recompression of ``selection`` (the session is at rest)."""
    context = host.state.context
    tokens = context_tokens(context)
    try:
        return await summarise(
            host, deps, active_profile(host.state, deps), selection, tokens=tokens, model=model
        )
    except Exception:
        # Whatever went wrong, the session must not stay in compressing_after_run.
        await abandon_interrupted(host, error="the recompression failed unexpectedly")
        raise
