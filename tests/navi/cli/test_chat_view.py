"""How ``navi chat`` shows a turn without a terminal: standard output holds the answer's
text and nothing else; every other line goes to standard error."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from navi.cli.chat_view import COMPLETED, ChatView

TURN = [
    {"type": "stream_start"},
    {"type": "plan_ready", "plan": "1. Look it up.\n2. Answer."},
    {"type": "thinking_delta", "delta": "hmm"},
    {"type": "thinking_end"},
    {"type": "stream_delta", "delta": "Let me "},
    {"type": "stream_delta", "delta": "look."},
    {"type": "tool_started", "tool": "web_search", "args": {"query": "x"}},
    {"type": "tool_call", "success": True, "result": "found"},
    {"type": "context_compressed", "messages_before": 9, "messages_after": 3},
    {"type": "stream_retry", "attempt": 2},
    {"type": "stream_delta", "delta": "It is **42**."},
    {"type": "stream_end", "elapsed_seconds": 1.5, "token_count": 7, "tool_call_count": 1},
]


def test_a_pipe_gets_only_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    view = ChatView(Console(file=out, force_terminal=False))
    assert not view.rich
    view.begin()
    outcomes = [view.show(frame) for frame in TURN]
    view.end()
    assert outcomes[-1] == COMPLETED
    assert out.getvalue() == "Let me look.\nIt is **42**.\n"
    aside = capsys.readouterr()
    assert aside.out == ""
    assert aside.err.splitlines() == [
        "plan:",
        "1. Look it up.",
        "2. Answer.",
        '⚙ web_search {"query": "x"}',
        "  ✓ found",
        "(context compressed: 9 → 3 messages)",
        "the model's answer broke off: asking again (attempt 2)",
    ]


def test_an_error_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    view = ChatView(Console(file=out, force_terminal=False))
    view.begin()
    assert view.show({"type": "error", "message": "no LLM"}) == "failed"
    view.end()
    assert out.getvalue() == ""
    assert capsys.readouterr().err == "error: no LLM\n"


def test_a_queued_run_says_so_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    view = ChatView(Console(file=out, force_terminal=False))
    view.begin()
    for frame in (
        {"type": "run_queued", "ahead": 2},
        {"type": "run_queued", "ahead": 0},
        {"type": "run_dequeued"},
        {"type": "stream_delta", "delta": "Hi."},
    ):
        assert view.show(frame) is None
    view.end()
    assert out.getvalue() == "Hi.\n"
    assert capsys.readouterr().err.splitlines() == [
        "queued (2 ahead): the server is busy",
        "queued (0 ahead): the server is busy",
    ]


def test_a_running_calls_progress_is_the_status_line_and_nothing_else(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    view = ChatView(Console(file=out, force_terminal=False))
    view.begin()
    view.show({"type": "tool_started", "tool": "mcp__s__build", "args": {}})
    view.show(
        {"type": "tool_progress", "call_id": "c", "progress": 3, "total": 8, "message": "linking"}
    )
    assert view.status == "running mcp__s__build: 3/8 · linking"
    view.show(
        {"type": "tool_progress", "call_id": "c", "progress": 0.5, "total": None, "message": ""}
    )
    assert view.status == "running mcp__s__build: 0.5"
    view.end()
    assert out.getvalue() == ""
    assert capsys.readouterr().err.splitlines() == ["⚙ mcp__s__build {}"]
