"""A synthetic export file of any size, for the import benchmarks (not a benchmark).

One session of ``turns`` plain turns, each as a real run records it: ``user.message``,
``run.started``, ``llm.requested``, eight ``llm.text`` chunks, ``llm.completed``,
``run.completed`` (13 events, about 5.3 KB). 60 MB is about 11,800 turns, 153,000 events.
"""

from __future__ import annotations

import json
import uuid

EVENTS_PER_TURN = 13
_CHUNK = "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod "


def _line(sid: str, seq: int, at: float, run: str, payload: dict[str, object]) -> str:
    kind = str(payload["type"])
    version = 2 if kind == "user.message" else 1
    return json.dumps(
        {
            "stream_id": sid,
            "seq": seq,
            "event_id": str(uuid.UUID(int=seq, version=4)),
            "timestamp": at,
            "run_id": run,
            "causation_id": None,
            "type": kind,
            "version": version,
            "payload": payload,
        },
        separators=(",", ":"),
    )


def turns_for(megabytes: float) -> int:
    """How many turns make an export of about ``megabytes``."""
    return max(1, round(megabytes * 1024 * 1024 / 5350))


def synthetic_export(turns: int, *, user_id: str = "local", session_id: str = "") -> bytes:
    sid = session_id or str(uuid.uuid4())
    at = 1_700_000_000.0
    lines = [
        _line(
            sid,
            1,
            at,
            "run-0",
            {"type": "session.created", "profile_id": "secretary", "user_id": user_id},
        )
    ]
    seq = 1
    for turn in range(turns):
        run = f"run-{turn + 1}"
        answer = _CHUNK * 8
        payloads: list[dict[str, object]] = [
            {"type": "user.message", "text": f"question {turn}: " + _CHUNK * 2},
            {"type": "run.started", "profile_id": "secretary", "model": "m"},
            {"type": "llm.requested", "iteration": 0, "model": "m"},
            *({"type": "llm.text", "text": _CHUNK} for _ in range(8)),
            {"type": "llm.completed", "content": answer, "prompt_tokens": 10},
            {"type": "run.completed", "content": answer, "iterations": 1},
        ]
        for payload in payloads:
            seq += 1
            at += 0.01
            lines.append(_line(sid, seq, at, run, payload))
    header = {
        "navi_export": 1,
        "session_id": sid,
        "exported_at": "2023-11-15T22:13:20.000+00:00",
        "events": seq,
        "streams": [{"stream_id": sid, "events": seq, "parent_stream_id": None}],
        "forked_from": None,
        "forked_at_seq": None,
    }
    return ("\n".join([json.dumps(header), *lines]) + "\n").encode()
