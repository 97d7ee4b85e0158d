"""Forks as copies (navi/replay/fork.py, fork_upgrade.py): a fork copies only what its
owner may read, a fork point no session has is a clear error that writes nothing, and
linked forks a log holds from before (or that someone planted) with a broken link —
origin missing, a cycle, a fork point past the origin — do not stop Navi from starting:
each is logged and stays readable as it is."""

from __future__ import annotations

import pytest

from events.envelope import NewEvent
from events.types import SessionCreated, UserMessage
from tests.security.conftest import NaviServerProcess, StartNavi
from tests.security.test_ids_import import ALICE, BOB, USERS, _uuid, heads_in_log, listing, plant


@pytest.fixture
def server(start_navi: StartNavi) -> NaviServerProcess:
    return start_navi(users=USERS)


def test_a_fork_copies_only_the_owners_session_and_only_seqs_it_has(
    server: NaviServerProcess,
) -> None:
    alice = server.create_session(token=ALICE)
    server.llm.script()
    assert server.send(alice, "a secret of alice", token=ALICE).status_code == 200
    before = heads_in_log(server)
    with server.client(token=BOB) as bob:
        refused = bob.post(f"/sessions/{alice}/fork", json={"at": 2})
        assert refused.status_code == 404, refused.text
        assert "secret" not in refused.text
    with server.client(token=ALICE) as owner:
        for at, status, says in [
            (10**30, 400, "seq"),  # past the head (and past any integer column)
            (0, 400, "seq"),
            (-5, 400, "seq"),
            ("2", 422, "`$.at`"),
            (None, 422, "`$.at`"),
        ]:
            answer = owner.post(f"/sessions/{alice}/fork", json={"at": at})
            assert answer.status_code == status, (at, answer.text)
            assert says in answer.json()["error"], (at, answer.text)
        assert owner.get(f"/sessions/{alice}").status_code == 200
    after = heads_in_log(server)
    assert {sid: seq for sid, seq in after.items() if sid in before} == before
    assert set(after) - set(before) <= {s for s in after if s.startswith("memory:")}


def test_broken_linked_forks_do_not_stop_start_up(server: NaviServerProcess) -> None:
    origin, gone, far, c1, c2, ok = (_uuid(0xF0 + i) for i in range(6))

    def link(to: str, at: int) -> list[NewEvent]:
        created = SessionCreated(
            profile_id="secretary", user_id="alice", forked_from=to, forked_at_seq=at
        )
        return [NewEvent(event=created), NewEvent(event=UserMessage(text=f"own of {to}"))]

    base = [
        NewEvent(event=SessionCreated(profile_id="secretary", user_id="alice")),
        NewEvent(event=UserMessage(text="origin words")),
    ]
    # plant() stops the server, writes, and starts it again: start-up runs the upgrade.
    plant(
        server,
        {
            origin: base,
            gone: link(_uuid(0xDEAD), 1),
            far: link(origin, 10**9),
            c1: link(c2, 1),
            c2: link(c1, 1),
            ok: link(origin, 2),
        },
    )
    found = {s["session_id"]: s for s in listing(server, ALICE)}
    assert {origin, gone, far, c1, c2, ok} <= set(found)
    with server.client(token=ALICE) as http:
        for sid in (gone, far, c1, c2):  # left as they were: readable, their own words
            shown = http.get(f"/sessions/{sid}")
            assert shown.status_code == 200, shown.text
            assert [m["content"] for m in shown.json()["messages"]][-1].startswith("own of")
        copied = http.get(f"/sessions/{ok}").json()
        assert [m["content"] for m in copied["messages"]] == ["origin words", f"own of {origin}"]
        events = [line for line in http.get(f"/sessions/{ok}/events").text.splitlines() if line]
        assert len(events) == 3
    logs = server.logs()
    for sid in (gone, far, c1, c2):
        assert f'"session_id": "{sid}"' in logs and "fork_upgrade.left_linked" in logs
    assert '"event": "fork_upgrade.copied"' in logs
