"""Context compression: the pure selection, and the whole thing with the fake LLM server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from events.envelope import NewEvent, Recorded
from events.factory import store_for_url
from events.types import (
    ContextCompressed,
    ContextCompressionFailed,
    LLMRequested,
    ToolCall,
)
from navi.app import Navi
from navi.recompress import recompress_and_wait
from navi.run.compression import (
    SUMMARY_HEADER,
    SUMMARY_SYSTEM,
    format_turns,
    select_old_turns,
)
from navi.run.context_builder import to_chat
from navi.server.frames import FrameTranslator
from navi.session.errors import SessionError
from projections import messages as messages_projection
from projections.compression import compress
from projections.context import CONTEXT, estimate_tokens
from projections.fold import fold, fold_until
from projections.types import Message
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import FakeToolCall, RecordedRequest, Reply
from tests.support.frames import wire
from tests.support.navi_app import navi_settings, open_navi, run_stream
from tests.support.well_formed import assert_well_formed

OVER = 7000  # prompt tokens over 80 % of the test num_ctx (8192)
SUMMARY = "- The user said one and two; Navi answered both."


def settings_for(tmp_path: Path, url: str, **overrides: Any) -> Any:
    overrides.setdefault("compression_keep_recent", 2)
    return navi_settings(tmp_path, url, planning="off", **overrides)


def is_summary_call(body: dict[str, Any]) -> bool:
    return bool(body["messages"][0]["content"] == SUMMARY_SYSTEM)


async def turn(navi: Navi, session: str, text: str) -> list[Recorded]:
    seen = []
    with anyio.fail_after(20):
        async for record in run_stream(navi, session, text):
            seen.append(record)
    return seen


async def settle(navi: Navi, session: str) -> list[Recorded]:
    """The log once the post-turn workers are done (the session is at rest)."""
    with anyio.fail_after(10):
        while True:
            records = await navi.store.read(session)
            if records[-1].type in ("run.completed", "context.compressed") or records[-1].type in (
                "context.compression_failed",
                "run.stopped",
                "run.failed",
            ):
                await anyio.sleep(0.05)
                if (await navi.store.read(session))[-1].seq == records[-1].seq:
                    return records
            await anyio.sleep(0.02)


def msg(seq: int, role: str = "user", **kw: Any) -> Message:
    return Message(role=role, content=kw.pop("content", f"m{seq}"), created_at="", seq=seq, **kw)  # type: ignore[arg-type]


def call(call_id: str, args: dict[str, Any] | None = None) -> ToolCall:
    return ToolCall(id=call_id, name="web_search", arguments=args or {"q": "x"})


# ---------------------------------------------------------------- the pure parts


def test_the_recent_turns_are_kept_and_a_tool_group_is_one_turn() -> None:
    context = [
        msg(1),
        msg(2, "assistant", tool_calls=(call("a"), call("b"))),
        msg(3, "tool", tool_call_id="a", name="web_search"),
        msg(4, "tool", tool_call_id="b", name="web_search"),
        msg(5, "assistant"),
        msg(6),
        msg(7, "assistant"),
    ]
    selection = select_old_turns(context, (), keep_recent=3)
    assert selection is not None
    # Units: [1] [2,3,4] [5] [6] [7]; the last three are kept, the group goes whole.
    assert [m.seq for m in selection.messages] == [1, 2, 3, 4]
    assert (selection.from_seq, selection.to_seq) == (1, 4)
    assert (selection.messages_before, selection.messages_after) == (7, 4)
    selection = select_old_turns(context, (), keep_recent=4)
    assert selection is not None and [m.seq for m in selection.messages] == [1]
    assert select_old_turns(context, (), keep_recent=5) is None
    assert select_old_turns(context, (), keep_recent=10) is None


def test_whatever_the_boundary_the_result_is_well_formed() -> None:
    context = [
        msg(1),
        msg(2, "assistant", tool_calls=(call("a"),)),
        msg(3, "tool", tool_call_id="a", name="web_search"),
        msg(4, "assistant", tool_calls=(call("b"), call("c"))),
        msg(5, "tool", tool_call_id="b", name="web_search"),
        msg(6, "tool", tool_call_id="c", name="web_search"),
        msg(7, "assistant"),
    ]
    for keep in range(0, 6):
        selection = select_old_turns(context, (), keep_recent=keep)
        if selection is None:
            continue
        event = ContextCompressed(from_seq=selection.from_seq, to_seq=selection.to_seq, summary="s")
        result = compress(context, (), event, seq=100, created_at="")
        assert result is not None
        assert_well_formed(result[0])
        assert len(result[0]) == selection.messages_after


def test_a_message_placed_after_its_seq_moves_the_boundary() -> None:
    # An injected message (seq 4) deferred past the tool result (seq 5).
    context = [
        msg(1),
        msg(2, "assistant"),
        msg(3, "assistant", tool_calls=(call("a"),)),
        msg(5, "tool", tool_call_id="a", name="web_search"),
        msg(4, "system"),
        msg(6),
    ]
    selection = select_old_turns(context, (), keep_recent=2)
    assert selection is not None
    # Keeping [4] and [6] would leave seq 4 inside a range ending at 5: one turn less.
    assert [m.seq for m in selection.messages] == [1, 2]
    assert selection.to_seq == 2
    selection = select_old_turns([*context[:4], msg(6)], (), keep_recent=1)
    assert selection is not None and selection.to_seq == 5


def test_an_earlier_summary_is_superseded_and_a_lone_one_left_alone() -> None:
    summary = msg(20, content="old summary", is_summary=True)
    spans = ((20, 1, 10),)
    context = [summary, msg(11), msg(12, "assistant"), msg(13), msg(14, "assistant")]
    selection = select_old_turns(context, spans, keep_recent=2)
    assert selection is not None
    assert selection.supersedes_seq == 20 and selection.from_seq == 1
    assert selection.to_seq == 12
    assert select_old_turns(context[:1] + context[3:], spans, keep_recent=2) is None


def test_old_turns_are_formatted_with_the_seeds_limits() -> None:
    big_args = {"text": "a" * 500}
    context = [
        msg(1, content="please research"),
        msg(2, "assistant", content="", tool_calls=(call("a", big_args),)),
        msg(3, "tool", content="r" * 1000, tool_call_id="a", name="web_search"),
        msg(4, "tool", content="oops", tool_call_id="b", name="web_search", success=False),
    ]
    text = format_turns(context)
    line = next(x for x in text.splitlines() if x.startswith("Assistant called"))
    assert len(line) < 120 + 80 and "more chars" in line
    result = next(x for x in text.splitlines() if x.startswith("Tool web_search returned"))
    assert result.split(": ", 1)[1].startswith("r" * 300 + "… [700 more chars]")
    assert "Tool web_search failed: oops" in text
    huge = [msg(i, content="x" * 1900) for i in range(1, 40)]
    capped = format_turns(huge)
    assert len(capped) < 12_000 + 100 and "characters left out" in capped


# ---------------------------------------------------------------- end to end


async def test_compression_before_an_llm_call_at_the_threshold(tmp_path: Path) -> None:
    look = FakeToolCall(name="todo", arguments={"action": "read"})
    async with FakeLLM() as fake:
        fake.script(
            Reply(text="answer one"),
            Reply(text="answer two"),
            Reply(tool_calls=[look], prompt_tokens=OVER),
            Reply(text=SUMMARY),
            Reply(text="answer three"),
        )
        async with open_navi(settings_for(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await turn(navi, session, "one")
            await turn(navi, session, "two")
            seen = await turn(navi, session, "three")
            records = await settle(navi, session)
        types = [r.type for r in seen]
        at = types.index("context.compressing")
        assert types[at : at + 5] == [
            "context.compressing",
            "llm.requested",
            "llm.completed",
            "context.compressed",
            "llm.requested",
        ]
        assert at > types.index("tool.completed")
        compressed = seen[at + 3].event
        assert isinstance(compressed, ContextCompressed)
        assert compressed.summary == SUMMARY_HEADER + SUMMARY
        assert compressed.model == "fake-model:latest"
        assert (compressed.messages_before, compressed.messages_after) == (7, 4)
        summary_call = seen[at + 1].event
        assert isinstance(summary_call, LLMRequested) and summary_call.purpose == "compress"
        # The context: summary (a user message) + the recent turns; messages untouched.
        context = fold(CONTEXT, records)
        listed = context.as_list()
        assert listed[0].is_summary and listed[0].role == "user"
        assert [m.content for m in listed[1:2]] == ["three"]
        assert_well_formed(listed)
        # The token count is reset from the new context (then the next call reports).
        then = fold_until(CONTEXT, records, seen[at + 3].seq)
        assert then.token_count == estimate_tokens(then.as_list()) < OVER
        shown = fold(messages_projection.MESSAGES, records).messages()
        assert [m.content for m in shown if m.role == "user"] == ["one", "two", "three"]
        assert not any(m.is_summary for m in shown)
        # The client is told.
        translator = FrameTranslator(max_context_tokens=8192)
        frames = wire(translator.frames(seen[at + 3]))
        assert frames[0]["type"] == "context_compressed"
        assert (frames[0]["messages_before"], frames[0]["messages_after"]) == (7, 4)
    request = fake.requests[3]
    assert is_summary_call(request)
    assert "tools" not in request and request["think"] is False
    assert request["options"]["temperature"] == 0.3
    assert "User: one" in request["messages"][1]["content"]
    assert "User: three" not in request["messages"][1]["content"]
    after = fake.requests[4]["messages"]
    assert after[1] == {"role": "user", "content": SUMMARY_HEADER + SUMMARY}
    assert after[2] == {"role": "user", "content": "three"}


async def test_the_post_turn_worker_compresses_after_the_run(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(
            Reply(text="answer one"),
            Reply(text="answer two", prompt_tokens=OVER),
            Reply(text=SUMMARY),
        )
        async with open_navi(settings_for(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await turn(navi, session, "one")
            await turn(navi, session, "two")
            records = await settle(navi, session)
            types = [r.type for r in records]
            assert types[-5:] == [
                "run.completed",
                "context.compressing",
                "llm.requested",
                "llm.completed",
                "context.compressed",
            ]
            context = fold(CONTEXT, records).as_list()
            assert [m.content for m in context[1:]] == ["two", "answer two"]
            # The next turn starts normally from the compressed context.
            fake.script(Reply(text="answer three"))
            await turn(navi, session, "three")
        assert fake.requests[-1]["messages"][1]["content"].startswith(SUMMARY_HEADER)


async def test_a_failed_summary_leaves_the_context_as_it_was(tmp_path: Path) -> None:
    look = FakeToolCall(name="todo", arguments={"action": "read"})
    async with FakeLLM() as fake:
        fake.script(
            Reply(text="answer one"),
            Reply(text="answer two"),
            Reply(tool_calls=[look], prompt_tokens=OVER),
            Reply(error_before="model crashed", error_status=500),
            Reply(text="answer three"),
        )
        async with open_navi(settings_for(tmp_path, fake.url, llm_retries=0), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await turn(navi, session, "one")
            await turn(navi, session, "two")
            before = fold(CONTEXT, await navi.store.read(session)).as_list()
            seen = await turn(navi, session, "three")
        types = [r.type for r in seen]
        at = types.index("llm.failed")
        assert types[at - 2 : at + 3] == [
            "context.compressing",
            "llm.requested",
            "llm.failed",
            "context.compression_failed",
            "llm.requested",
        ]
        failed = seen[at + 1].event
        assert isinstance(failed, ContextCompressionFailed) and "model crashed" in failed.error
        assert types[-1] == "run.completed"
    # The loop call after the failure saw the whole context.
    assert [m["content"] for m in fake.requests[4]["messages"][1:5]] == [m.content for m in before]


async def test_compression_can_be_turned_off(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(text="answer one"), Reply(text="answer two", prompt_tokens=OVER))
        settings = settings_for(tmp_path, fake.url, compression_enabled=False)
        async with open_navi(settings, llm=fake) as navi:
            session = await navi.create_session("secretary")
            await turn(navi, session, "one")
            await turn(navi, session, "two")
            records = await settle(navi, session)
        assert not any(r.type.startswith("context.compress") for r in records)
        assert len(fake.requests) == 2


async def test_replay_gives_the_context_the_llm_saw(tmp_path: Path) -> None:
    look = FakeToolCall(name="todo", arguments={"action": "read"})
    async with FakeLLM() as fake:
        fake.script(
            Reply(text="answer one"),
            Reply(text="answer two"),
            Reply(tool_calls=[look], prompt_tokens=OVER),
            Reply(text=SUMMARY),
            Reply(text="answer three", prompt_tokens=OVER),
            Reply(text="- one, two and three were discussed."),
        )
        async with open_navi(settings_for(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            for text in ("one", "two", "three"):
                await turn(navi, session, text)
            records = await settle(navi, session)
        loop_calls = [
            r for r in records if isinstance(r.event, LLMRequested) and r.event.purpose == "loop"
        ]
        loop_bodies = [b for b in fake.requests if not is_summary_call(b)]
        assert len(loop_calls) == len(loop_bodies) == 4
        for record, body in zip(loop_calls, loop_bodies, strict=True):
            context = fold_until(CONTEXT, records, record.seq).as_list()
            # As the context becomes the request (tool results after the untrusted note).
            sent = [to_chat(m).content for m in context]
            assert sent == [m["content"] for m in body["messages"][1:]]
        # Two summaries: the second supersedes the first; both stay in the log.
        summaries = [r.event for r in records if isinstance(r.event, ContextCompressed)]
        assert len(summaries) == 2
        assert summaries[1].supersedes_seq == next(
            r.seq for r in records if isinstance(r.event, ContextCompressed)
        )
        assert sum(m.is_summary for m in fold(CONTEXT, records).as_list()) == 1


async def test_recompress_summarises_the_range_again_with_another_model(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(
            Reply(text="answer one"),
            Reply(text="answer two", prompt_tokens=OVER),
            Reply(text=SUMMARY),
            Reply(text="- A better summary of one and two."),
        )
        async with open_navi(settings_for(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await turn(navi, session, "one")
            await turn(navi, session, "two")
            before = await settle(navi, session)
            old = next(r for r in before if isinstance(r.event, ContextCompressed))
            with anyio.fail_after(10):
                record = await recompress_and_wait(navi, session, model="bigger-model:latest")
            event = record.event
            assert isinstance(event, ContextCompressed)
            assert event.supersedes_seq == old.seq and event.model == "bigger-model:latest"
            assert isinstance(old.event, ContextCompressed)
            assert (event.from_seq, event.to_seq) == (old.event.from_seq, old.event.to_seq)
            records = await settle(navi, session)
            context = fold(CONTEXT, records).as_list()
            assert context[0].content == SUMMARY_HEADER + "- A better summary of one and two."
            assert sum(m.is_summary for m in context) == 1
            # The context as of before the recompression is still the one the LLM saw then.
            then = fold_until(CONTEXT, records, old.seq).as_list()
            assert then[0].content == SUMMARY_HEADER + SUMMARY
            assert [m.content for m in context[1:]] == [m.content for m in then[1:]]
            # The session goes on normally.
            fake.script(Reply(text="answer three"))
            await turn(navi, session, "three")
        request = fake.requests[3]
        assert request["model"] == "bigger-model:latest"
        text = request["messages"][1]["content"]
        assert "User: one" in text and "Earlier summary" not in text


async def test_recompress_refuses_when_there_is_nothing_or_a_run_is_active(
    tmp_path: Path,
) -> None:
    async with FakeLLM() as fake:
        fake.script(Reply(text="answer one"), Reply(text="slow " * 50, delay=0.02))
        async with open_navi(settings_for(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await turn(navi, session, "one")
            await settle(navi, session)
            before = await navi.store.last_seq(session)
            with pytest.raises(SessionError, match="nothing to summarise"):
                await recompress_and_wait(navi, session, None)
            reply = await navi.send(session, "two")
            with pytest.raises(SessionError, match="already active"):
                await recompress_and_wait(navi, session, None)
            await navi.wait_for_end(session, reply)
            assert await navi.store.last_seq(session) > before


def summary_or_answer(request: RecordedRequest) -> Reply:
    if is_summary_call(request.body):
        return Reply(text=SUMMARY)
    return Reply(text="answer")


async def test_a_compression_cut_by_a_crash_is_recorded_failed_then_redone(
    tmp_path: Path,
) -> None:
    look = FakeToolCall(name="todo", arguments={"action": "read"})
    async with FakeLLM() as fake:
        fake.script(
            Reply(text="answer one"),
            Reply(text="answer two"),
            Reply(tool_calls=[look], prompt_tokens=OVER),
            Reply(text=SUMMARY),
            Reply(text="answer three"),
        )
        async with open_navi(settings_for(tmp_path / "ref", fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            for text in ("one", "two", "three"):
                await turn(navi, session, text)
            reference = await settle(navi, session)
        at = [r.type for r in reference].index(
            "llm.completed", [r.type for r in reference].index("context.compressing")
        )
        cut = reference[:at]  # compressing + llm.requested(compress), no answer
        root = tmp_path / "cut"
        root.mkdir()
        url = f"sqlite:///{root}/navi.db"
        async with store_for_url(url) as store:
            await store.append(
                session, [NewEvent(event=r.event, run_id=r.run_id) for r in cut], expected_seq=0
            )
        fake.responder = summary_or_answer
        settings = settings_for(root, fake.url, database_url=url, resume_on_start=True)
        async with open_navi(settings, llm=fake) as navi:
            records = await settle(navi, session)
        types = [r.type for r in records[len(cut) :]]
        assert types[:5] == [
            "context.compression_failed",
            "context.compressing",
            "llm.requested",
            "llm.completed",
            "context.compressed",
        ]
        assert types[-1] == "run.completed"
        assert_well_formed(fold(CONTEXT, records).as_list())


async def test_recompress_after_a_stopped_run_compresses_now(tmp_path: Path) -> None:
    async with FakeLLM() as fake:
        fake.script(
            Reply(text="answer one"),
            Reply(text="answer two"),
            Reply(text="word " * 400, delay=0.01),
            Reply(text=SUMMARY),
            Reply(text="answer four"),
        )
        async with open_navi(settings_for(tmp_path, fake.url), llm=fake) as navi:
            session = await navi.create_session("secretary")
            await turn(navi, session, "one")
            await turn(navi, session, "two")
            reply = await navi.send(session, "three")
            with anyio.fail_after(10):
                async for record in navi.store.subscribe(session, after_seq=reply.after_seq):
                    if record.type == "llm.text":
                        await navi.stop(session)
                        break
                await navi.wait_for_end(session, reply)
                done = await recompress_and_wait(navi, session, None)
            event = done.event
            assert isinstance(event, ContextCompressed) and event.supersedes_seq is None
            assert event.summary == SUMMARY_HEADER + SUMMARY
            records = await settle(navi, session)
            context = fold(CONTEXT, records).as_list()
            assert context[0].is_summary and context[1].content == "three"
            assert "cut short" in context[2].content
            await turn(navi, session, "four")
        assert fake.requests[-1]["messages"][1]["content"] == SUMMARY_HEADER + SUMMARY
