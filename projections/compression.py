"""How ``context.compressed`` rewrites the context: pure, and never splits a tool-call group.

The context is cut into *units*: an assistant message with tool calls together with the
tool results that follow it, or any other single message. Each message covers a span of
seqs: its own seq, or for a summary the span it summarized. A compression
``(from_seq, to_seq)`` removes every unit that has a message whose span meets the range
(plus the summary it ``supersedes_seq``, if that one is still there), and everything
between the first and the last such unit, and puts one summary in their place: a user
message with ``is_summary``. So a range that would split a group is **extended to the
group's boundary**, and a summary is replaced as a whole, never in part. The new summary
covers the union of the range and of what it replaced.

A group whose calls still wait for results (possible only if a compression is recorded
while tools run) is never compressed: the block stops before it. A compression that
meets nothing still in the context changes nothing.
"""

from __future__ import annotations

from events.types import ContextCompressed
from projections.types import Message

# (seq of the summary message, first seq it covers, last seq it covers)
SummarySpan = tuple[int, int, int]


def units(messages: list[Message]) -> list[tuple[int, int]]:
    """``[start, end)`` index ranges of the units of ``messages``, in order."""
    result: list[tuple[int, int]] = []
    index, count = 0, len(messages)
    while index < count:
        end = index + 1
        if messages[index].role == "assistant" and messages[index].tool_calls:
            while end < count and messages[end].role == "tool":
                end += 1
        result.append((index, end))
        index = end
    return result


def compress(
    messages: list[Message],
    summaries: tuple[SummarySpan, ...],
    event: ContextCompressed,
    *,
    seq: int,
    created_at: str,
    open_group_at_end: bool = False,
) -> tuple[list[Message], tuple[SummarySpan, ...]] | None:
    """The context after ``event`` (recorded at ``seq``), or ``None`` if it changes nothing."""
    spans = {summary_seq: (first, last) for summary_seq, first, last in summaries}

    def span(message: Message) -> tuple[int, int]:
        if message.is_summary and message.seq in spans:
            return spans[message.seq]
        return (message.seq, message.seq)

    def selected(message: Message) -> bool:
        if message.is_summary and message.seq == event.supersedes_seq:
            return True
        first, last = span(message)
        return first <= event.to_seq and last >= event.from_seq

    candidates = units(messages)
    if open_group_at_end and candidates:
        candidates.pop()
    hits = [unit for unit in candidates if any(selected(m) for m in messages[unit[0] : unit[1]])]
    if not hits:
        return None
    start, end = hits[0][0], hits[-1][1]
    block = messages[start:end]
    covered = [span(message) for message in block]
    first = min(event.from_seq, *(s[0] for s in covered))
    last = max(event.to_seq, *(s[1] for s in covered))
    summary = Message(
        role="user", content=event.summary, is_summary=True, created_at=created_at, seq=seq
    )
    replaced = {message.seq for message in block if message.is_summary}
    kept = tuple(span for span in summaries if span[0] not in replaced)
    return [*messages[:start], summary, *messages[end:]], (*kept, (seq, first, last))
