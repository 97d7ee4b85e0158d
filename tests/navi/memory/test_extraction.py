"""The pure parts of extraction: turns, chunks, the prompt, the strict answer parser."""

from __future__ import annotations

import pytest

from events.types import (
    LLMCompleted,
    LLMRequested,
    MemoryFactForgotten,
    MemoryFactLearned,
    SessionCreated,
    ToolCompleted,
    UserMessage,
)
from navi.memory.extraction import (
    DEFAULT_EXTRACTION_PROMPT,
    BrokenAnswer,
    ExtractedFact,
    extraction_messages,
    parse_answer,
)
from navi.memory.facts import fact_id, memory_stream_id, normalize_key, user_of_stream
from navi.memory.turns import Turn, TurnChunk, chunk_turns, clip, session_user, turns_of
from projections.fold import fold
from projections.memory import MEMORY
from tests.projections.logs import records

CHUNK = TurnChunk(
    after_seq=0,
    to_seq=5,
    turns=(
        Turn(seq=2, role="user", text="I use vim.", timestamp=1.0),
        Turn(seq=5, role="assistant", text="Great.", timestamp=2.0),
    ),
)


def turn(seq: int, size: int) -> Turn:
    return Turn(seq=seq, role="user", text="x" * size, timestamp=float(seq))


# ---------------------------------------------------------------- names


def test_keys_and_ids_ignore_case_spacing_and_punctuation() -> None:
    assert normalize_key("  Favorite  Editor! ") == "favorite_editor"
    assert normalize_key("favorite__editor") == "favorite_editor"
    assert fact_id("preference", "Favorite Editor") == fact_id("preference", "favorite_editor")
    assert fact_id("preference", "editor") != fact_id("environment", "editor")
    assert fact_id("preference", "editor").startswith("f_")
    assert user_of_stream(memory_stream_id("alice")) == "alice"
    assert user_of_stream("session-1") is None


# ---------------------------------------------------------------- turns


def test_turns_are_user_messages_and_the_agents_answers() -> None:
    log = records(
        [
            SessionCreated(profile_id="p"),
            UserMessage(text="I use vim."),
            LLMRequested(),
            LLMCompleted(content="", tool_calls=()),  # tool calls only: no text
            ToolCompleted(call_id="c", name="t", output="tool output is not a turn"),
            LLMRequested(),
            LLMCompleted(content="Noted."),
            LLMRequested(purpose="compress"),
            LLMCompleted(content="a compression summary is not a turn"),
            UserMessage(text="   "),
        ]
    )
    assert [(t.seq, t.role, t.text) for t in turns_of(log)] == [
        (2, "user", "I use vim."),
        (7, "assistant", "Noted."),
    ]


def test_only_a_users_own_sessions_are_sessions() -> None:
    [session] = records([SessionCreated(profile_id="p", user_id="alice")])
    [child] = records([SessionCreated(profile_id="p", parent_stream_id="s0")])
    [memory] = records([MemoryFactForgotten(fact_id="f")], stream_id="memory:alice")
    [late] = records([SessionCreated(profile_id="p")], start_seq=2)
    assert session_user(session) == "alice"
    assert session_user(child) is None
    assert session_user(memory) is None
    assert session_user(late) is None


def test_chunks_cover_the_range_without_gaps_and_fit() -> None:
    turns = [turn(2, 100), turn(4, 100), turn(7, 100), turn(9, 100)]
    chunks = chunk_turns(turns, after_seq=1, to_seq=12, max_chars=300)
    assert [(c.after_seq, c.to_seq, [t.seq for t in c.turns]) for c in chunks] == [
        (1, 6, [2, 4]),
        (6, 12, [7, 9]),
    ]
    assert chunks[0].from_seq == 2 and chunks[1].from_seq == 7


def test_a_range_without_turns_is_one_empty_chunk() -> None:
    assert chunk_turns([], after_seq=3, to_seq=8, max_chars=300) == [
        TurnChunk(after_seq=3, to_seq=8, turns=())
    ]


def test_a_huge_message_is_clipped_to_fit_a_chunk_alone() -> None:
    huge = turn(2, 10_000)
    [chunk] = chunk_turns([huge], after_seq=0, to_seq=2, max_chars=500)
    assert len(chunk.turns[0].text) < 500 and chunk.turns[0].text.endswith("[…]")
    assert clip(turn(3, 10), 500) == turn(3, 10)


# ---------------------------------------------------------------- prompt


def test_the_prompt_shows_known_facts_and_numbered_messages() -> None:
    known = fold(
        MEMORY,
        records(
            [
                MemoryFactLearned(
                    fact_id="f_1",
                    category="preference",
                    key="editor",
                    value="vim",
                    session_id="s",
                    from_seq=1,
                    to_seq=2,
                )
            ]
        ),
    ).active()
    system, user = extraction_messages(CHUNK, known)
    assert system.role == "system" and system.content == DEFAULT_EXTRACTION_PROMPT
    assert user.content.splitlines() == [
        "Known facts (reuse their keys when a value changed):",
        "- preference / editor: vim",
        "",
        "Conversation:",
        "[seq 2] user: I use vim.",
        "[seq 5] assistant: Great.",
    ]
    _, empty = extraction_messages(CHUNK, [], prompt="custom")
    assert "(none yet)" in empty.content


# ---------------------------------------------------------------- answers


def test_a_valid_answer_is_read() -> None:
    text = (
        '{"facts": [{"category": "preference", "key": "editor", "value": "vim", '
        '"source_seqs": [2, 5]}]}'
    )
    assert parse_answer(text, CHUNK) == [ExtractedFact("preference", "editor", "vim", [2, 5])]
    assert parse_answer('{"facts": []}', CHUNK) == []
    assert parse_answer('```json\n{"facts": []}\n```', CHUNK) == []


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "empty"),
        ("I found that the user likes vim.", "not valid JSON"),
        ('{"facts": [', "not valid JSON"),
        ("[]", "wrong fields"),
        ('{"fact": []}', "wrong fields"),
        ('{"facts": [{"category": "preference", "key": "editor", "value": "vim"}]}', "wrong"),
        (
            '{"facts": [{"category": "hobby", "key": "k", "value": "v", "source_seqs": [2]}]}',
            "wrong fields",
        ),
        (
            '{"facts": [{"category": "other", "key": "k", "value": "v", "source_seqs": [2], '
            '"confidence": 0.9}]}',
            "wrong fields",
        ),
        (
            '{"facts": [{"category": "other", "key": "k", "value": 3, "source_seqs": [2]}]}',
            "wrong fields",
        ),
        (
            '{"facts": [{"category": "other", "key": "k", "value": "v", "source_seqs": []}]}',
            "wrong fields",
        ),
        (
            '{"facts": [{"category": "other", "key": "!!", "value": "v", "source_seqs": [2]}]}',
            "no letters or digits",
        ),
        (
            '{"facts": [{"category": "other", "key": "k", "value": "  ", "source_seqs": [2]}]}',
            "blank",
        ),
        (
            '{"facts": [{"category": "other", "key": "k", "value": "v", "source_seqs": [3]}]}',
            "not messages of this conversation",
        ),
    ],
)
def test_a_broken_answer_is_refused_whole(answer: str, reason: str) -> None:
    good = '{"category": "other", "key": "ok", "value": "fine", "source_seqs": [2]}'
    with pytest.raises(BrokenAnswer, match=reason):
        parse_answer(answer, CHUNK)
    if answer.startswith('{"facts": [{'):
        # One bad fact among good ones still refuses the whole answer.
        with pytest.raises(BrokenAnswer):
            parse_answer(answer.replace('{"facts": [', '{"facts": [' + good + ", "), CHUNK)
