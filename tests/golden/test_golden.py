"""The golden logs replay to their recorded projections, byte for byte, directly and
after export → import → fold on every store."""

from __future__ import annotations

import pytest

from events.store import EventStore
from navi.replay.import_ import import_session, parse_export
from navi.replay.inspect import state_at
from navi.replay.snapshots import load_messages
from navi.replay.verify import verify_session
from tests.golden.make_golden import (
    EXPORTED_AT,
    SCENARIOS,
    expected_for,
    expected_json,
    paths,
    record,
)
from tests.navi.replay.support import export_bytes, load_context

pytestmark = pytest.mark.anyio

NAMES = sorted(SCENARIOS)


def golden(name: str) -> tuple[bytes, bytes]:
    export, expected = paths(name)
    return export.read_bytes(), expected.read_bytes()


@pytest.mark.parametrize("name", NAMES)
async def test_the_generator_reproduces_the_golden_files(name: str) -> None:
    assert await record(SCENARIOS[name]) == golden(name), (
        f"{name}: re-record on purpose with `.venv/bin/python -m tests.golden.make_golden`"
    )


@pytest.mark.parametrize("name", NAMES)
def test_each_golden_log_replays_to_its_projections(name: str) -> None:
    export, expected = golden(name)
    parsed = parse_export(export.splitlines())
    assert expected_for(parsed.streams) == expected


@pytest.mark.parametrize("name", NAMES)
async def test_export_import_replay_round_trip(name: str, store: EventStore) -> None:
    export, expected = golden(name)
    result = await import_session(store, export.splitlines(), snapshot_every=5)
    assert await export_bytes(store, result.session_id, now=EXPORTED_AT) == export
    messages, contexts = {}, {}
    for sid in result.streams:
        messages[sid] = (await load_messages(store, sid, every=5)).messages()
        contexts[sid] = (await load_context(store, sid, every=5)).as_list()
        report = await verify_session(store, sid, every=5)
        assert report.ok and report.snapshots_checked > 0, report
        at = await state_at(store, sid, report.head, every=5)
        assert (at.messages, at.context) == (messages[sid], contexts[sid])
    assert expected_json(messages, contexts) == expected
