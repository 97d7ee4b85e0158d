from __future__ import annotations

import functools

import msgspec
import pytest
from msgspec.structs import replace

from events.in_memory import InMemoryEventStore
from events.store import EventStore
from events.types import (
    Event,
    LLMCompleted,
    LLMRequested,
    RunStarted,
    RunStopped,
    SessionCreated,
    StopRequested,
    SubagentSpawned,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCall,
    ToolFailed,
    ToolRequested,
    UserMessage,
    tag_of,
)
from navi.replay.approvals import approvals
from navi.replay.errors import ExportFormatError, SessionExistsError
from navi.replay.fork import fork
from navi.replay.import_ import import_session, parse_export
from navi.replay.snapshot_store import snapshots_for
from navi.replay.snapshots import load_messages
from navi.run.progress import RunProgress, evolve
from navi.run.state import RunState, state_at
from projections.context import CONTEXT
from projections.fold import fold
from projections.messages import MESSAGES
from tests.golden.make_golden import CHILD, SESSION, subagent
from tests.navi.replay.support import (
    export_bytes,
    load_context,
    long_session,
    make_session,
    tool_turn,
    turn,
)

pytestmark = pytest.mark.anyio

NOW = 1_800_000_000.0
# Session ids are UUIDs (an import refuses any other).
ORIGIN = "00000000-0000-4000-8000-0000000000a0"
FORK = "00000000-0000-4000-8000-0000000000f0"
S = "00000000-0000-4000-8000-0000000000b0"
G = "00000000-0000-4000-8000-0000000000c0"
G_CHILD = "00000000-0000-4000-8000-0000000000c1"
COPY = "00000000-0000-4000-8000-0000000000d0"
CHILD_COPY = "00000000-0000-4000-8000-0000000000d1"


async def test_an_export_lists_the_session_then_its_subagents(store: EventStore) -> None:
    await subagent(store)
    lines = (await export_bytes(store, SESSION, now=NOW)).splitlines()
    header = msgspec.json.decode(lines[0])
    assert header["navi_export"] == 1 and header["session_id"] == SESSION
    assert header["exported_at"] == "2027-01-15T08:00:00.000+00:00"
    parent, child = await store.read(SESSION), await store.read(CHILD)
    assert header["streams"] == [
        {"stream_id": SESSION, "events": len(parent), "parent_stream_id": None},
        {"stream_id": CHILD, "events": len(child), "parent_stream_id": SESSION},
    ]
    assert header["events"] == len(lines) - 1 == len(parent) + len(child)
    streams = [msgspec.json.decode(line)["stream_id"] for line in lines[1:]]
    assert streams == [SESSION] * len(parent) + [CHILD] * len(child)


async def test_export_then_import_elsewhere_gives_the_same_log(store: EventStore) -> None:
    await subagent(store)
    export = await export_bytes(store, SESSION, now=NOW)
    async with InMemoryEventStore() as other:
        result = await import_session(other, export.splitlines())
        assert result.session_id == SESSION and result.renamed == {}
        assert result.streams == {SESSION: 26, CHILD: 15} and result.events == 41
        for sid in (SESSION, CHILD):
            ours, theirs = await store.read(sid), await other.read(sid)
            assert [(r.seq, r.event_id, r.timestamp, r.event, r.run_id) for r in ours] == [
                (r.seq, r.event_id, r.timestamp, r.event, r.run_id) for r in theirs
            ]
        assert await export_bytes(other, SESSION, now=NOW) == export


async def test_an_existing_session_is_refused_or_imported_as_new(store: EventStore) -> None:
    await subagent(store)
    export = (await export_bytes(store, SESSION, now=NOW)).splitlines()
    with pytest.raises(SessionExistsError, match="--as-new"):
        await import_session(store, export)
    ids = iter([CHILD_COPY])
    result = await import_session(store, export, new_session_id=COPY, new_id=lambda: next(ids))
    assert result.session_id == COPY
    assert result.renamed == {SESSION: COPY, CHILD: CHILD_COPY}
    copy, original = await store.read(COPY), await store.read(SESSION)
    assert fold(MESSAGES, copy) == fold(MESSAGES, original)
    assert fold(CONTEXT, copy) == fold(CONTEXT, original)
    assert {r.event_id for r in copy}.isdisjoint({r.event_id for r in original})
    assert [r.timestamp for r in copy] == [r.timestamp for r in original]
    spawned = [r.event for r in copy if isinstance(r.event, SubagentSpawned)]
    assert [e.child_stream_id for e in spawned] == [CHILD_COPY]
    created = (await store.read(CHILD_COPY))[0].event
    assert isinstance(created, SessionCreated) and created.parent_stream_id == COPY


async def test_a_fork_is_exported_self_contained(store: EventStore) -> None:
    await make_session(store, ORIGIN, turn("one"), turn("two"))
    await fork(store, ORIGIN, 9, FORK)
    await store.append(FORK, turn("three"), expected_seq=9)
    export = (await export_bytes(store, FORK, now=NOW)).splitlines()
    header = msgspec.json.decode(export[0])
    assert (header["forked_from"], header["forked_at_seq"]) == (ORIGIN, 9)
    history = await store.read(FORK)
    async with InMemoryEventStore() as other:  # without the origin: the file is enough
        result = await import_session(other, export)
        assert result.forked_from == ORIGIN
        imported = await other.read(FORK)
        assert [(r.seq, r.event, r.timestamp) for r in imported[1:]] == [
            (r.seq, r.event, r.timestamp) for r in history[1:]
        ]
        created = imported[0].event  # its origin is not the importer's: lineage dropped
        assert isinstance(created, SessionCreated) and created.forked_from is None
    # Where the origin is the importer's, the link stays and nothing is copied twice.
    again = await import_session(store, export, new_session_id=COPY)
    assert again.warnings == ()
    copy = await store.read(COPY)
    assert [(r.seq, r.event) for r in copy] == [(r.seq, r.event) for r in history]


async def test_an_old_export_of_a_linked_fork_is_imported_as_a_copy(store: EventStore) -> None:
    """An export made before forks were copies holds the fork's ``session.created``
    (``forked_from``, ``forked_at_seq``) and its own events only: the import copies the
    origin's events in from the store, and the fork's own follow at k+1…"""
    await make_session(store, ORIGIN, turn("one"), turn("two"))
    created = SessionCreated(profile_id="secretary", forked_from=ORIGIN, forked_at_seq=9)
    header = {
        "navi_export": 1,
        "session_id": FORK,
        "exported_at": "2024-01-01T00:00:00.000+00:00",
        "events": 2,
        "streams": [{"stream_id": FORK, "events": 2, "parent_stream_id": None}],
        "forked_from": ORIGIN,
        "forked_at_seq": 9,
    }
    lines = [msgspec.json.encode(header)]
    for seq, event in enumerate([created, UserMessage(text="mine")], start=1):
        line = {
            "stream_id": FORK,
            "seq": seq,
            "event_id": f"e{seq}",
            "timestamp": 1_700_000_000.0 + seq,
            "run_id": None,
            "causation_id": None,
            "type": tag_of(event),
            "version": type(event).schema_version,
            "payload": msgspec.to_builtins(event),
        }
        lines.append(msgspec.json.encode(line))
    result = await import_session(store, lines)
    assert result.events == 10 and result.warnings == ()
    imported, origin = await store.read(FORK), await store.read(ORIGIN)
    assert [r.seq for r in imported] == list(range(1, 11))
    assert imported[0].event == replace(created, history_copied=True)
    assert [r.event for r in imported[1:9]] == [r.event for r in origin[1:9]]
    assert imported[9].event == UserMessage(text="mine")


async def test_an_import_rebuilds_the_snapshots(store: EventStore) -> None:
    async with InMemoryEventStore() as source:
        await long_session(source, S, 6)  # 55 events
        export = (await export_bytes(source, S, now=NOW)).splitlines()
        expected = fold(MESSAGES, await source.read(S))
    await import_session(store, export, snapshot_every=20)
    assert sorted({r.seq for r in await snapshots_for(store).rows(S)}) == [20, 40]
    assert await load_messages(store, S, every=20) == expected
    assert await load_context(store, S, every=20) == fold(CONTEXT, await store.read(S))


# ---------------------------------------------------------------- refused files


async def _export() -> list[bytes]:
    async with InMemoryEventStore() as source:
        await make_session(source, S, turn("one"))
        return (await export_bytes(source, S, now=NOW)).splitlines()


def _line(lines: list[bytes], number: int) -> dict:  # type: ignore[type-arg]
    return msgspec.json.decode(lines[number - 1])  # type: ignore[no-any-return]


def _set(lines: list[bytes], number: int, value: object) -> list[bytes]:
    changed = list(lines)
    changed[number - 1] = msgspec.json.encode(value)
    return changed


async def test_refused_files_name_the_line() -> None:
    lines = await _export()  # header + 9 events
    header = _line(lines, 1)
    event3 = _line(lines, 4)  # user.message is line 3; run.started line 4
    cases: list[tuple[list[bytes], int, str]] = [
        ([], 0, "empty"),
        ([b"not json", *lines[1:]], 1, "not a Navi export header"),
        (_set(lines, 1, {**header, "navi_export": 2}), 1, "export format 2"),
        (_set(lines, 1, {**header, "events": 3}), 1, "event count"),
        ([*lines[:3], b"{broken", *lines[4:]], 4, "not an event line"),
        ([*lines[:3], b"", *lines[4:]], 4, "empty line"),
        (_set(lines, 4, {**event3, "extra": 1}), 4, "not an event line"),
        (_set(lines, 4, {**event3, "type": "run.begun"}), 4, "unknown event type 'run.begun'"),
        (_set(lines, 4, {**event3, "payload": {"type": "run.started"}}), 4, "corrupt"),
        (_set(lines, 4, {**event3, "seq": 5}), 4, "jumps to seq 5 (expected 3)"),
        (_set(lines, 4, {**event3, "stream_id": "x"}), 4, "'x' is not listed"),
        (_set(lines, 4, {**event3, "version": 9}), 4, "newer than this Navi knows"),
        (_set(lines, 2, {**_line(lines, 3), "seq": 1}), 2, "starts with user.message"),
        ([*lines[:3], lines[5], *lines[4:5], *lines[6:]], 4, "jumps to seq 5"),
        (lines[:-1], 10, "has 8 of the 9 events"),
        ([*lines[:-1], lines[-1][:-7]], 10, "not an event line"),
    ]
    async with InMemoryEventStore() as store:
        for broken, number, reason in cases:
            with pytest.raises(ExportFormatError) as err:
                await import_session(store, broken)
            assert err.value.line == number, (reason, str(err.value))
            assert reason in str(err.value), str(err.value)
            assert "nothing was imported" in str(err.value)
        assert await store.stream_heads() == {}


async def test_an_illegal_log_is_refused_at_its_line() -> None:
    lines = await _export()
    event = _line(lines, 9)  # llm.completed (seq 8)
    payload = {"type": "user.message", "text": "too soon", "images": [], "files": []}
    # A user message while the run is answering: the run state machine refuses it.
    broken = _set(lines, 9, {**event, "type": "user.message", "version": 2, "payload": payload})
    with pytest.raises(ExportFormatError, match=rf"line 9: stream '{S}': event 'user\.message'"):
        parse_export(broken)


async def test_a_subagent_stream_must_say_whose_it_is() -> None:
    async with InMemoryEventStore() as source:
        await subagent(source)
        lines = (await export_bytes(source, SESSION, now=NOW)).splitlines()
    index = next(
        i
        for i, line in enumerate(lines)
        if _line(lines, i + 1).get("seq") == 1 and _line(lines, i + 1).get("stream_id") == CHILD
    )
    created = _line(lines, index + 1)
    created["payload"]["parent_stream_id"] = None
    with pytest.raises(ExportFormatError, match="nor a subagent's"):
        parse_export(_set(lines, index + 1, created))


async def test_an_older_payload_is_upcast_on_import() -> None:
    lines = await _export()
    event = _line(lines, 3)
    old = {**event, "version": 1, "payload": {"type": "user.message", "content": "old shape"}}
    parsed = parse_export(_set(lines, 3, old))
    assert parsed.streams[S][1].event == UserMessage(text="old shape")


async def test_a_forks_subagents_follow_it_into_a_new_import(store: EventStore) -> None:
    await subagent(store)
    head = await store.last_seq(SESSION)
    await fork(store, SESSION, head, FORK)
    export = (await export_bytes(store, FORK, now=NOW)).splitlines()
    assert [s["stream_id"] for s in msgspec.json.decode(export[0])["streams"]] == [FORK, CHILD]
    result = await import_session(store, export, new_session_id=G, new_id=lambda: G_CHILD)
    assert result.renamed == {FORK: G, CHILD: G_CHILD}
    created = (await store.read(G_CHILD))[0].event
    assert isinstance(created, SessionCreated) and created.parent_stream_id == G
    own = (await store.read(G))[0].event
    assert isinstance(own, SessionCreated) and own.parent_stream_id is None


# ---------------------------------------------------------------- what a file may claim


def _created(lines: list[bytes], number: int) -> dict:  # type: ignore[type-arg]
    line = _line(lines, number)
    assert line["type"] == "session.created"
    return line


async def test_ids_times_and_links_are_checked_before_anything_is_written() -> None:
    lines = await _export()
    header, created, message = _line(lines, 1), _created(lines, 2), _line(lines, 3)
    spawned = {
        **message,
        "type": "subagent.spawned",
        "version": 1,
        "payload": {
            "type": "subagent.spawned",
            "child_stream_id": ORIGIN,
            "call_id": "c",
            "task": "t",
        },
    }
    cases: list[tuple[list[bytes], int, str]] = [
        (
            _set(
                lines,
                1,
                {**header, "session_id": "..", "streams": [{"stream_id": "..", "events": 9}]},
            ),
            1,
            "'..', which is not a UUID",
        ),
        (_set(lines, 1, {**header, "forked_from": "memory:x"}), 1, "not a UUID"),
        (_set(lines, 3, {**message, "timestamp": 1e300}), 3, "not between the years 2000"),
        (_set(lines, 3, {**message, "timestamp": -1.0}), 3, "not between the years 2000"),
        (_set(lines, 3, {**message, "event_id": "x" * 65}), 3, "event_id must be 1 to 64"),
        (_set(lines, 3, spawned), 3, "not a subagent stream of the file"),
        (
            _set(
                lines, 2, {**created, "payload": {**created["payload"], "parent_stream_id": ORIGIN}}
            ),
            2,
            "the session's own stream names a parent",
        ),
        (
            _set(lines, 2, {**created, "payload": {**created["payload"], "forked_from": ".."}}),
            2,
            "'..' is not a UUID",
        ),
    ]
    async with InMemoryEventStore() as store:
        for broken, number, reason in cases:
            with pytest.raises(ExportFormatError) as err:
                await import_session(store, broken)
            assert err.value.line == number, (reason, str(err.value))
            assert reason in str(err.value), str(err.value)
        assert await store.stream_heads() == {}


async def test_the_importer_owns_the_import_and_foreign_links_are_dropped() -> None:
    async with InMemoryEventStore() as store:
        await make_session(store, ORIGIN, turn("alice's words"))  # owned by "local"
        lines = await _export()
        created = _created(lines, 2)
        payload = {
            **created["payload"],
            "user_id": "alice",
            "forked_from": ORIGIN,
            "forked_at_seq": 2,
        }
        forged = _set(lines, 2, {**created, "payload": payload})
        result = await import_session(store, forged, owner="bob")
        assert result.owner == "bob" and len(result.warnings) == 1
        assert (
            "fork link dropped" in result.warnings[0]
            and "not a session of yours" in result.warnings[0]
        )
        first = (await store.read(S))[0].event
        assert isinstance(first, SessionCreated)
        assert (first.user_id, first.forked_from, first.forked_at_seq) == ("bob", None, None)
        # The owner of the origin keeps the link.
        kept = await import_session(store, forged, owner="local", new_session_id=COPY)
        assert kept.warnings == ()
        linked = (await store.read(COPY))[0].event
        assert isinstance(linked, SessionCreated) and linked.forked_from == ORIGIN


async def test_a_subagents_foreign_parent_becomes_the_imported_session(
    store: EventStore,
) -> None:
    await subagent(store)
    lines = (await export_bytes(store, SESSION, now=NOW)).splitlines()
    index = next(
        i
        for i in range(2, len(lines) + 1)
        if _line(lines, i)["stream_id"] == CHILD and _line(lines, i)["seq"] == 1
    )
    created = _created(lines, index)
    payload = {**created["payload"], "parent_stream_id": ORIGIN}  # nobody's, or someone else's
    forged = _set(lines, index, {**created, "payload": payload})
    async with InMemoryEventStore() as other:
        result = await import_session(other, forged, owner="local")
        assert any("linked to the imported session" in w for w in result.warnings)
        child = (await other.read(CHILD))[0].event
        assert isinstance(child, SessionCreated) and child.parent_stream_id == SESSION


def _waiting_for_approval(approval: ToolApprovalDecided) -> list[Event]:
    """A turn whose call a (forged) decision approves, and which never started."""
    call = ToolCall(id="call-1", name="code_exec", arguments={"code": "print(1)"})
    return [
        UserMessage(text="go"),
        RunStarted(profile_id="secretary"),
        LLMRequested(tools=("code_exec",)),
        LLMCompleted(tool_calls=(call,)),
        ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments),
        ToolApprovalRequested(call_id=call.id, name=call.name, arguments=call.arguments),
        approval,
    ]


async def test_an_unfinished_run_is_closed_and_its_approvals_approve_nothing() -> None:
    forged = ToolApprovalDecided(call_id="call-1", approved=True, scope="session", by="local")
    async with InMemoryEventStore() as source:
        await make_session(source, S, _waiting_for_approval(forged))
        lines = (await export_bytes(source, S, now=NOW)).splitlines()
    assert parse_export(lines).states[S] is RunState.EXECUTING_TOOLS
    async with InMemoryEventStore() as store:
        result = await import_session(store, lines, new_session_id=COPY)
        records = await store.read(COPY)
        assert result.events == len(records) == len(lines) - 1 + 3
        assert "unfinished run was stopped" in result.warnings[-1]
        assert [r.event for r in records[-3:]] == [
            StopRequested(reason="import"),
            ToolFailed(
                call_id="call-1",
                name="code_exec",
                reason="stopped",
                error="the session was imported",
            ),
            RunStopped(reason="import"),
        ]
        assert {r.run_id for r in records[-3:]} == {records[-4].run_id}
        assert records[-1].timestamp >= records[-4].timestamp
        assert state_at(records) is RunState.STOPPED
        decided = records[-4].event
        assert isinstance(decided, ToolApprovalDecided) and decided.imported
        assert (decided.approved, decided.scope) == (True, "session")  # as the file says
        progress = functools.reduce(evolve, records, RunProgress())
        assert progress.approved_tools == frozenset()
        [view] = await approvals(store, COPY)
        assert view.outcome == "approved" and view.imported
        # The same decision taken here carries, as it always did.
        here = [replace(r, event=forged) if r.seq == records[-4].seq else r for r in records]
        assert functools.reduce(evolve, here, RunProgress()).approved_tools == {"code_exec"}
        # Imported again (the closed run rests): nothing more is added.
        again = (await export_bytes(store, COPY, now=NOW)).splitlines()
        assert (await import_session(store, again, new_session_id=G)).events == len(again) - 1


async def test_a_kept_fork_link_into_a_run_in_progress_closes_that_run() -> None:
    """A file that is only a fork link to the importer's own session, at a seq where
    its run is in the middle of a tool call: the imported history ends that run."""
    async with InMemoryEventStore() as store:
        head = await make_session(store, ORIGIN, turn("hi"), tool_turn("search"))
        lines = await _export()
        created = _created(lines, 2)
        payload = {**created["payload"], "forked_from": ORIGIN, "forked_at_seq": head}
        linked = _set(lines, 2, {**created, "payload": payload})[:2]
        header = {**_line(linked, 1), "events": 1}
        header["streams"] = [{**header["streams"][0], "events": 1}]
        linked[0] = msgspec.json.encode(header)
        result = await import_session(store, linked, owner="local", new_session_id=COPY)
        assert "unfinished run was stopped" in result.warnings[-1]
        history = await store.read(COPY)
        assert [r.seq for r in history] == list(range(1, len(history) + 1))
        assert [r.event for r in history[1:head]] == [
            r.event for r in (await store.read(ORIGIN))[1:head]
        ]
        assert state_at(history) is RunState.STOPPED
        assert isinstance(history[-2].event, ToolFailed) and history[-2].event.call_id == "call-1"
