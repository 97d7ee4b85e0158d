"""What extraction reads from a session's log: its turns, cut into chunks that fit.

A session is a stream whose first event is ``session.created`` without a parent (a
subagent's stream is not the user talking). Its turns are ``user.message`` events and
the tool-loop ``llm.completed`` answers with text; each keeps its seq, so a fact can
name the exact messages it came from.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from events.envelope import Recorded
from events.types import LLMCompleted, LLMRequested, SessionCreated, UserMessage

# What a turn costs beyond its text in the prompt ("[seq 123] assistant: ", newlines).
TURN_OVERHEAD = 32
CLIP_MARK = " […]"


class Turn(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    role: str  # "user" or "assistant"
    text: str
    timestamp: float


class TurnChunk(msgspec.Struct, frozen=True, kw_only=True):
    """Turns extracted in one LLM call; covers the seqs ``after_seq + 1``..``to_seq``."""

    after_seq: int
    to_seq: int
    turns: tuple[Turn, ...]

    @property
    def from_seq(self) -> int:
        return self.after_seq + 1

    @property
    def seqs(self) -> frozenset[int]:
        return frozenset(turn.seq for turn in self.turns)


def session_user(first: Recorded) -> str | None:
    """The user of a session stream, given its first event; None if the stream is not a
    user's session (a subagent's, a memory stream, anything else)."""
    event = first.event
    if first.seq != 1 or not isinstance(event, SessionCreated):
        return None
    return None if event.parent_stream_id is not None else event.user_id


def turns_of(records: Sequence[Recorded]) -> list[Turn]:
    """The user's messages and the agent's answers among ``records``.

    Planning, compression and memory LLM calls are not turns. (A range that starts
    between such a call's request and its answer counts the answer: harmless.)"""
    turns: list[Turn] = []
    purpose = "loop"
    for record in records:
        event = record.event
        if isinstance(event, UserMessage):
            if event.text.strip():
                turns.append(_turn(record, "user", event.text))
        elif isinstance(event, LLMRequested):
            purpose = event.purpose
        elif isinstance(event, LLMCompleted):
            if purpose == "loop" and event.content.strip():
                turns.append(_turn(record, "assistant", event.content))
            purpose = "loop"
    return turns


def _turn(record: Recorded, role: str, text: str) -> Turn:
    return Turn(seq=record.seq, role=role, text=text.strip(), timestamp=record.timestamp)


def clip(turn: Turn, max_chars: int) -> Turn:
    """A turn whose text fits in one chunk on its own (a huge paste keeps its start)."""
    room = max(max_chars - TURN_OVERHEAD - len(CLIP_MARK), 1)
    if len(turn.text) <= room:
        return turn
    return msgspec.structs.replace(turn, text=turn.text[:room] + CLIP_MARK)


def chunk_turns(
    turns: Sequence[Turn], *, after_seq: int, to_seq: int, max_chars: int
) -> list[TurnChunk]:
    """Consecutive chunks covering ``after_seq + 1``..``to_seq`` without gaps, each with at
    most ``max_chars`` of turns. A range without turns is one chunk with none."""
    groups: list[list[Turn]] = []
    current: list[Turn] = []
    size = 0
    for turn in turns:
        turn = clip(turn, max_chars)
        cost = len(turn.text) + TURN_OVERHEAD
        if current and size + cost > max_chars:
            groups.append(current)
            current, size = [], 0
        current.append(turn)
        size += cost
    if current:
        groups.append(current)
    if not groups:
        return [TurnChunk(after_seq=after_seq, to_seq=to_seq, turns=())]
    chunks: list[TurnChunk] = []
    start = after_seq
    for index, group in enumerate(groups):
        end = groups[index + 1][0].seq - 1 if index + 1 < len(groups) else to_seq
        chunks.append(TurnChunk(after_seq=start, to_seq=end, turns=tuple(group)))
        start = end
    return chunks
