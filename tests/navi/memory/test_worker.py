"""Extraction, summaries and re-extraction against the fake LLM, on every store."""

from __future__ import annotations

import itertools

import anyio
import pytest

from events.store import EventStore
from events.types import (
    MemoryExtractionFailed,
    MemoryReset,
    MemorySessionProcessed,
    SessionDeleted,
)
from navi.llm.errors import LLMError
from navi.llm.ollama import OllamaBackend
from navi.memory.decisions import learn
from navi.memory.extraction import ExtractedFact
from navi.memory.facts import fact_id, memory_stream_id
from navi.memory.service import MemoryService
from navi.memory.summary import MEMORY_HEADER
from navi.memory.turns import TurnChunk
from navi.memory.worker import MemoryWorker
from tests.navi.memory.conftest import (
    MINUTE,
    Clock,
    add_turns,
    answer,
    chat_text,
    new_session,
    summary,
)
from tests.support.fake_backend import FakeLLM
from tests.support.fake_llm import Reply

# At collection time: the parametrized async ``store`` fixture needs it (anyio >= 4.16).
pytestmark = pytest.mark.anyio

EDITOR = fact_id("preference", "editor")
OS = fact_id("environment", "operating_system")


def make_worker(
    store: EventStore, backend: OllamaBackend, clock: Clock, **kw: object
) -> tuple[MemoryService, MemoryWorker]:
    service = MemoryService(store)
    return service, MemoryWorker(service, backend, now=clock, **kw)  # type: ignore[arg-type]


async def memory_types(store: EventStore) -> list[str]:
    return [r.type for r in await store.read(memory_stream_id("local"))]


async def test_extraction_happens_after_idle_not_before(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [ask, _reply] = await new_session(
        store, "s1", [("user", "I use vim on Arch Linux."), ("assistant", "Noted!")]
    )
    report = await worker.process_stale(clock.t + 30 * MINUTE)  # idle for exactly 30 min
    assert report.sessions == [] and fake.requests == []
    assert await memory_types(store) == []

    fake.script(
        answer(
            ("preference", "editor", "Uses vim", [ask]),
            ("environment", "Operating System", "Arch Linux", [ask]),
        ),
        summary("The user edits with vim on Arch Linux."),
    )
    report = await worker.process_stale(clock.advance(31 * MINUTE))
    assert report.sessions == ["s1"] and report.facts == 2 and report.summaries == 1
    assert len(fake.requests) == 2
    assert "[seq 2] user: I use vim on Arch Linux." in chat_text(fake.requests[0])

    facts = {f.fact_id: f for f in await service.facts()}
    assert facts[EDITOR].value == "Uses vim"
    assert facts[OS].key == "operating_system" and facts[OS].model == "extractor:1b"
    assert await memory_types(store) == [
        "memory.fact_learned",
        "memory.fact_learned",
        "memory.session_processed",
        "memory.summary_updated",
    ]
    message = await service.summary_message()
    assert message == f"{MEMORY_HEADER}\n\nThe user edits with vim on Arch Linux."


async def test_processing_the_same_range_twice_changes_nothing(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [ask] = await new_session(store, "s1", [("user", "I use vim.")])
    fake.script(answer(("preference", "editor", "Uses vim", [ask])), summary("Uses vim."))
    await worker.process_stale(clock.advance(31 * MINUTE))
    before = await store.read(memory_stream_id("local"))

    again = await worker.process_stale(clock.advance(60 * MINUTE))
    forced = await worker.process_session("s1")
    assert again.sessions == [] and forced.sessions == [] and len(fake.requests) == 2
    # The same decision made again (a second node, a retry) decides nothing.
    state = await service.state()
    chunk = TurnChunk(after_seq=0, to_seq=2, turns=())
    same = [ExtractedFact("preference", "editor", "Uses vim", [ask])]
    assert learn(state, chunk, same, session_id="s1", generation=0, model="m") == []
    assert await store.read(memory_stream_id("local")) == before


async def test_only_new_turns_are_read_the_next_time(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [first] = await new_session(store, "s1", [("user", "I use vim.")])
    fake.script(answer(("preference", "editor", "Uses vim", [first])), summary("Uses vim."))
    await worker.process_stale(clock.advance(31 * MINUTE))

    [second] = await add_turns(store, "s1", [("user", "My laptop runs Fedora.")])
    fake.script(answer(("environment", "os", "Fedora", [second])), summary("Vim on Fedora."))
    await worker.process_stale(clock.advance(31 * MINUTE))
    prompt = chat_text(fake.requests[2])
    assert "My laptop runs Fedora." in prompt and "[seq 2] user: I use vim." not in prompt
    assert "- preference / editor: Uses vim" in prompt  # known facts, so keys are reused
    assert (await service.state()).processed_seq("s1") == second
    assert len(await service.facts()) == 2


async def test_a_newer_value_replaces_the_older_one(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [old] = await new_session(store, "s1", [("user", "I use vim.")])
    clock.advance(MINUTE)
    [new] = await new_session(store, "s2", [("user", "I switched to Helix.")])
    fake.script(
        answer(("preference", "editor", "Uses vim", [old])),
        answer(("preference", "editor", "Uses Helix", [new])),
        summary("Uses Helix."),
    )
    await worker.process_stale(clock.advance(31 * MINUTE))
    [fact] = await service.facts()
    assert fact.fact_id == EDITOR and fact.value == "Uses Helix"
    assert [(v.value, v.source.session_id if v.source else None) for v in fact.history] == [
        ("Uses vim", "s1"),
        ("Uses Helix", "s2"),
    ]


async def test_an_older_message_does_not_overrule_a_newer_value(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [old] = await new_session(store, "old", [("user", "I use vim.")])
    clock.advance(MINUTE)
    [new] = await new_session(store, "new", [("user", "I switched to Helix.")])
    clock.advance(31 * MINUTE)
    fake.script(answer(("preference", "editor", "Uses Helix", [new])), summary("Helix."))
    await worker.process_session("new")
    fake.script(answer(("preference", "editor", "Uses vim", [old])))
    await worker.process_session("old")
    [fact] = await service.facts()
    assert fact.value == "Uses Helix"
    assert (await service.state()).processed_seq("old") == 2


async def test_forgetting_removes_a_fact_from_search_summary_and_context(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [ask] = await new_session(store, "s1", [("user", "I use vim on Arch Linux.")])
    fake.script(
        answer(
            ("preference", "editor", "Uses vim", [ask]),
            ("environment", "os", "Arch Linux", [ask]),
        ),
        summary("The user edits with vim on Arch Linux."),
    )
    await worker.process_stale(clock.advance(31 * MINUTE))
    assert [f.fact_id for f in await service.search("local", "vim editor")] == [EDITOR]

    clock.advance(MINUTE)
    tomb = await service.forget("local", EDITOR)
    assert tomb.forgotten and tomb.value == ""
    assert await service.search("local", "vim editor") == []
    message = await service.summary_message()
    assert message is not None and "vim" not in message and "Arch Linux" in message

    # The summary is rewritten from the remaining facts, without the forgotten one.
    fake.script(summary("The user runs Arch Linux."))
    report = await worker.process_stale(clock.advance(MINUTE))
    assert report.summaries == 1
    assert "vim" not in chat_text(fake.requests[-1])
    assert await service.summary_message() == f"{MEMORY_HEADER}\n\nThe user runs Arch Linux."

    # Later extractions never show the forgotten value to the model again...
    [more] = await add_turns(store, "s1", [("user", "I also like dark themes.")])
    fake.script(
        # ...and an answer that repeats the old message does not bring it back.
        answer(
            ("preference", "editor", "Uses vim", [more]), ("preference", "theme", "dark", [more])
        ),
        summary("Arch Linux, dark themes."),
    )
    await worker.process_stale(clock.advance(31 * MINUTE))
    assert "Uses vim" not in chat_text(fake.requests[-2])
    assert {f.key for f in await service.facts()} == {"os", "theme", "editor"}


async def test_sources_point_at_the_messages_the_fact_came_from(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    seqs = await new_session(
        store,
        "s1",
        [
            ("user", "Hello there."),
            ("assistant", "Hi! How can I help?"),
            ("user", "My main project is Navi, an agent server."),
            ("assistant", "Nice, Navi sounds fun."),
        ],
    )
    hello, hi, project, nice = seqs
    fake.script(
        answer(("project", "current_project", "Navi, an agent server", [project, nice])),
        summary("Works on Navi."),
    )
    await worker.process_stale(clock.advance(31 * MINUTE))
    [fact] = await service.facts()
    assert fact.source is not None
    assert fact.source.session_id == "s1" and fact.source.seqs == (project, nice)
    assert fact.source.from_seq == 1 and fact.source.to_seq == await store.last_seq("s1")
    why = await service.sources("local", fact)
    assert [(m.seq, m.role, m.content) for m in why] == [
        (project, "user", "My main project is Navi, an agent server."),
        (nice, "assistant", "Nice, Navi sounds fun."),
    ]
    assert hello < hi < project


async def test_reextraction_rebuilds_the_same_facts_from_the_same_answers(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [a] = await new_session(store, "s1", [("user", "I use vim.")])
    clock.advance(MINUTE)
    [b] = await new_session(store, "s2", [("user", "I'm on Fedora, and I like tea.")])
    answers = [
        answer(("preference", "editor", "Uses vim", [a])),
        answer(("environment", "os", "Fedora", [b]), ("personal", "drink", "Tea", [b])),
    ]
    fake.script(*answers, summary("Vim, Fedora, tea."))
    await worker.process_stale(clock.advance(31 * MINUTE))
    clock.advance(MINUTE)
    await service.forget("local", fact_id("personal", "drink"))

    def snapshot(facts: list) -> list:  # type: ignore[type-arg]
        return [(f.fact_id, f.value, f.source) for f in facts]

    before = snapshot(await service.facts())
    fake.script(*answers, summary("Vim and Fedora."))
    report = await worker.reextract_all(model="bigger:7b", prompt="Extract facts. JSON only.")
    assert report.sessions == ["s1", "s2"] and report.summaries == 1
    assert snapshot(await service.facts()) == before  # the forgotten fact stays forgotten
    assert fake.requests[-3]["model"] == "bigger:7b"
    assert fake.requests[-3]["messages"][0]["content"] == "Extract facts. JSON only."
    log = await store.read(memory_stream_id("local"))
    [reset] = [r.event for r in log if isinstance(r.event, MemoryReset)]
    assert reset.model == "bigger:7b" and reset.prompt_sha
    state = await service.state()
    assert state.generation == 1 and all(f.model == "bigger:7b" for f in state.active())
    assert state.summary is not None and state.summary.text == "Vim and Fedora."


@pytest.mark.parametrize(
    "broken",
    [
        "Sure! Here are the facts: editor is vim",
        '{"facts": [{"category": "preference", "key": "editor"}]}',
        '{"facts": [{"category": "mood", "key": "k", "value": "v", "source_seqs": [2]}]}',
        '{"facts": [{"category": "other", "key": "k", "value": "v", "source_seqs": [99]}]}',
    ],
)
async def test_a_broken_answer_loses_nothing_and_is_retried(
    store: EventStore,
    backend: OllamaBackend,
    fake: FakeLLM,
    clock: Clock,
    broken: str,
) -> None:
    service, worker = make_worker(store, backend, clock)
    [ask] = await new_session(store, "s1", [("user", "I use vim.")])
    fake.script(Reply(text=broken))
    report = await worker.process_stale(clock.advance(31 * MINUTE))
    assert report.broken_answers == 1 and report.facts == 0
    assert await memory_types(store) == ["memory.extraction_failed"]
    state = await service.state()
    assert state.active() == [] and state.processed_seq("s1") == 0

    fake.script(answer(("preference", "editor", "Uses vim", [ask])), summary("Vim."))
    await worker.process_stale(clock.advance(5 * MINUTE))
    assert [f.value for f in await service.facts()] == ["Uses vim"]
    assert (await service.state()).processed_seq("s1") == 2


async def test_a_range_is_skipped_after_too_many_broken_answers(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock, max_attempts=2)
    await new_session(store, "s1", [("user", "I use vim.")])
    fake.script(Reply(text="nope"), Reply(text="still not JSON"))
    await worker.process_stale(clock.advance(31 * MINUTE))
    await worker.process_stale(clock.advance(5 * MINUTE))
    log = [r.event for r in await store.read(memory_stream_id("local"))]
    assert [type(e) for e in log] == [
        MemoryExtractionFailed,
        MemoryExtractionFailed,
        MemorySessionProcessed,
    ]
    assert isinstance(log[-1], MemorySessionProcessed) and "2 unusable" in log[-1].skipped
    assert (await service.state()).processed_seq("s1") == 2
    await worker.process_stale(clock.advance(31 * MINUTE))
    assert len(fake.requests) == 2  # not tried again: a re-extraction can revisit it


async def test_a_failed_llm_call_leaves_the_session_unprocessed(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [ask] = await new_session(store, "s1", [("user", "I use vim.")])
    fake.script(Reply(error_before="model is loading", error_status=503))
    report = await worker.process_stale(clock.advance(31 * MINUTE))
    assert report.failed_calls == 1 and await memory_types(store) == []

    fake.script(answer(("preference", "editor", "Uses vim", [ask])), summary("Vim."))
    await worker.process_stale(clock.advance(5 * MINUTE))
    assert [f.value for f in await service.facts()] == ["Uses vim"]


async def test_a_failed_summary_call_keeps_the_facts_in_the_context(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [ask] = await new_session(store, "s1", [("user", "I use vim.")])
    fake.script(answer(("preference", "editor", "Uses vim", [ask])), Reply(error_before="down"))
    report = await worker.process_stale(clock.advance(31 * MINUTE))
    assert report.facts == 1 and report.summaries == 0 and report.failed_calls == 1
    assert await service.summary_message() == (
        f"{MEMORY_HEADER}\n\nKnown facts about the user:\n- preference / editor: Uses vim"
    )
    fake.script(summary("Uses vim."))
    assert (await worker.process_stale(clock.advance(MINUTE))).summaries == 1


async def test_a_long_session_is_processed_in_chunks(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock, max_chunk_chars=400)
    turns = [("user", f"Fact number {i}: " + "blah " * 40) for i in range(5)]
    seqs = await new_session(store, "s1", turns)
    fake.script(
        *[answer(("other", f"fact_{i}", f"value {i}", [seq])) for i, seq in enumerate(seqs)],
        summary("Five facts."),
    )
    report = await worker.process_stale(clock.advance(31 * MINUTE))
    assert report.chunks == 5 and report.facts == 5
    for i, request in enumerate(fake.requests[:5]):
        prompt = chat_text(request)
        assert f"Fact number {i}:" in prompt and len(prompt) < 4000
    log = [r.event for r in await store.read(memory_stream_id("local"))]
    ranges = [(e.from_seq, e.to_seq) for e in log if isinstance(e, MemorySessionProcessed)]
    assert ranges[0][0] == 1 and ranges[-1][1] == await store.last_seq("s1")
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))
    assert len(await service.facts()) == 5


async def test_subagents_deleted_sessions_and_other_streams_are_not_extracted(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    await new_session(store, "parent", [])
    await new_session(store, "child", [("user", "Subtask: I use vim.")], parent="parent")
    await new_session(store, "gone", [("user", "I use vim.")])
    await store.append("gone", [SessionDeleted()], expected_seq=await store.last_seq("gone"))
    await store.append("not-a-session", [SessionDeleted()], expected_seq=0)
    await worker.process_stale(clock.advance(31 * MINUTE))
    assert fake.requests == []
    state = await service.state()
    assert state.processed == {"parent": 1, "gone": 3} and state.active() == []
    log = [r.event for r in await store.read(memory_stream_id("local"))]
    skipped = {e.session_id: e.skipped for e in log if isinstance(e, MemorySessionProcessed)}
    assert skipped == {"parent": "", "gone": "deleted"}


async def test_each_user_has_a_memory_of_their_own(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [a] = await new_session(store, "sa", [("user", "I use vim.")], user_id="alice")
    clock.advance(1)
    [b] = await new_session(store, "sb", [("user", "I use emacs.")], user_id="bob")
    fake.script(
        answer(("preference", "editor", "vim", [a])),
        answer(("preference", "editor", "emacs", [b])),
        summary("Alice: vim."),
        summary("Bob: emacs."),
    )
    await worker.process_stale(clock.advance(31 * MINUTE))
    assert [f.value for f in await service.facts("alice")] == ["vim"]
    assert [f.value for f in await service.facts("bob")] == ["emacs"]
    assert await service.facts("local") == []
    assert [f.value for f in await service.search("bob", "editor")] == ["emacs"]
    assert await service.users() == ["alice", "bob"]


async def test_the_periodic_task_sweeps_on_start_and_when_triggered(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [ask] = await new_session(store, "s1", [("user", "I use vim on Fedora.")])
    clock.advance(31 * MINUTE)
    fake.script(
        answer(("preference", "editor", "Uses vim", [ask]), ("environment", "os", "Fedora", [ask])),
        summary("Vim on Fedora."),
    )
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run_periodic, 3600.0)
            await fake.wait_for_requests(2)
            while not (await service.state()).summary_is_current:
                await anyio.sleep(0.01)
            # A forget triggers a sweep, which rewrites the summary without the fact;
            # a session active a moment ago is left alone.
            [more] = await add_turns(store, "s1", [("user", "I also like tea.")])
            fake.script(summary("Runs Fedora."))
            await service.forget("local", EDITOR)
            await fake.wait_for_requests(3)
            while not (await service.state()).summary_is_current:
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    state = await service.state()
    assert state.summary is not None and state.summary.text == "Runs Fedora."
    assert state.processed_seq("s1") < more


async def test_a_reextraction_that_fails_midway_changes_nothing(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [a] = await new_session(store, "s1", [("user", "I use vim.")])
    clock.advance(MINUTE)
    [b] = await new_session(store, "s2", [("user", "I'm on Fedora.")])
    fake.script(
        answer(("preference", "editor", "Uses vim", [a])),
        answer(("environment", "os", "Fedora", [b])),
        summary("Vim on Fedora."),
    )
    await worker.process_stale(clock.advance(31 * MINUTE))
    before = await store.read(memory_stream_id("local"))

    fake.script(answer(("preference", "editor", "Uses vi", [a])), Reply(error_before="gone"))
    with pytest.raises(LLMError):
        await worker.reextract_all(model="missing:1b")
    assert await store.read(memory_stream_id("local")) == before
    assert [f.value for f in await service.facts()] == ["Fedora", "Uses vim"]


async def test_a_broken_answer_during_reextraction_leaves_that_session_to_the_sweeps(
    store: EventStore, backend: OllamaBackend, fake: FakeLLM, clock: Clock
) -> None:
    service, worker = make_worker(store, backend, clock)
    [a] = await new_session(store, "s1", [("user", "I use vim.")])
    clock.advance(MINUTE)
    [b] = await new_session(store, "s2", [("user", "I'm on Fedora.")])
    clock.advance(31 * MINUTE)
    fake.script(
        answer(("preference", "editor", "Uses vim", [a])),
        Reply(text="no JSON today"),
        summary("Vim."),
    )
    report = await worker.reextract_all()
    assert report.broken_answers == 1 and report.facts == 1
    state = await service.state()
    assert state.processed_seq("s1") == 2 and state.processed_seq("s2") == 0
    assert state.attempts("s2", 1) == 1

    fake.script(answer(("environment", "os", "Fedora", [b])), summary("Vim on Fedora."))
    await worker.process_stale()
    assert [f.value for f in await service.facts()] == ["Fedora", "Uses vim"]
