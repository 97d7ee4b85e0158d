"""Imports are bounded per user (issue 29, point 4), against a real ``navi serve``: at
most ``NAVI_USER_IMPORTS_PER_HOUR`` attempts an hour (a refused file counts: checking
it costs what importing it does), answered 429 with ``Retry-After``; an imported log's
bytes count against ``NAVI_USER_QUOTA_MB`` (413, nothing written); each user's count
and quota are their own.

Before: imports were not limited in number, and their bytes counted against nothing.
How a big import leaves other users' requests alone is measured, not asserted:
bench/import_load.py.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from tests.security.conftest import NaviServerProcess, StartNavi

ALICE = "alice-import-token-0123456789"
BOB = "bob-import-token-0123456789"
USERS: list[dict[str, Any]] = [
    {"id": "alice", "token": ALICE, "role": "admin"},
    {"id": "bob", "token": BOB, "role": "user"},
]
NDJSON = {"content-type": "application/x-ndjson"}


def export_file(text_bytes: int = 100) -> bytes:
    """A valid export of one session holding one user message of ``text_bytes``."""
    sid = str(uuid.uuid4())

    def line(seq: int, payload: dict[str, Any]) -> str:
        return json.dumps(
            {
                "stream_id": sid,
                "seq": seq,
                "event_id": str(uuid.uuid4()),
                "timestamp": 1_700_000_000.0 + seq,
                "run_id": None,
                "causation_id": None,
                "type": payload["type"],
                "version": 2 if payload["type"] == "user.message" else 1,
                "payload": payload,
            }
        )

    header = {
        "navi_export": 1,
        "session_id": sid,
        "exported_at": "2023-11-15T22:13:20.000+00:00",
        "events": 2,
        "streams": [{"stream_id": sid, "events": 2, "parent_stream_id": None}],
    }
    lines = [
        json.dumps(header),
        line(1, {"type": "session.created", "profile_id": "secretary", "user_id": "x"}),
        line(2, {"type": "user.message", "text": "t" * text_bytes}),
    ]
    return ("\n".join(lines) + "\n").encode()


def imported(http: httpx.Client, body: bytes) -> httpx.Response:
    return http.post("/sessions/import", content=body, headers=NDJSON)


def listed(server: NaviServerProcess, token: str) -> list[str]:
    with server.client(token=token) as http:
        return [s["session_id"] for s in http.get("/sessions").json()]


def test_imports_per_hour_are_bounded_per_user(start_navi: StartNavi) -> None:
    server = start_navi(users=USERS, env={"NAVI_USER_IMPORTS_PER_HOUR": "2"}, canary_row=False)
    with server.client(token=ALICE) as alice, server.client(token=BOB) as bob:
        assert imported(alice, export_file()).status_code == 201
        broken = imported(alice, b'{"navi_export": 1}\nnot json\n')  # refused, and counted
        assert broken.status_code == 422, broken.text
        before = listed(server, ALICE)
        third = imported(alice, export_file())
        assert third.status_code == 429, third.text
        assert "NAVI_USER_IMPORTS_PER_HOUR" in third.json()["error"]
        wait = int(third.headers["retry-after"])
        assert 0 < wait <= 3600
        assert listed(server, ALICE) == before  # nothing written
        # Bob's imports are his own.
        assert imported(bob, export_file()).status_code == 201
        assert imported(bob, export_file()).status_code == 201
        assert imported(bob, export_file()).status_code == 429
        # Other requests of Alice's go on.
        assert alice.post("/sessions", json={}).status_code == 201


def test_imported_logs_count_against_the_quota(start_navi: StartNavi) -> None:
    server = start_navi(users=USERS, env={"NAVI_USER_QUOTA_MB": "1"}, canary_row=False)
    big = export_file(600_000)
    with server.client(token=ALICE) as alice, server.client(token=BOB) as bob:
        first = imported(alice, big)
        assert first.status_code == 201, first.text
        session = first.json()["session_id"]
        before = listed(server, ALICE)
        over = imported(alice, export_file(600_000))
        assert over.status_code == 413, over.text
        assert "quota" in over.json()["error"] and "1 MB" in over.json()["error"]
        assert listed(server, ALICE) == before  # nothing written
        # Bob has his own quota.
        assert imported(bob, export_file(600_000)).status_code == 201
        # Deleting the imported session frees its bytes.
        assert alice.delete(f"/sessions/{session}").status_code == 200
        assert imported(alice, export_file(600_000)).status_code == 201
