"""What one user's many sessions cost another user: Bob's ``GET /sessions`` and Bob's
turn, with Alice holding 0 and then ``--sessions`` (10,000) sessions.

A real ``navi serve`` process (SQLite, the fake LLM process). Alice's sessions are
written to the database before the server starts (one ``session.created`` each: empty
sessions, as a script makes them). Each round is one turn of Bob's over REST (``POST
/sessions/{id}/messages``, the fake LLM answers at once) and then Bob's list, which
folds the turn's events into the sessions projection. Figures in milliseconds; the
budget says what the list may cost with 10,000 sessions of someone else's.

    .venv/bin/python bench/sessions_list.py [--sessions 10000] [--rounds 60]

Before/after: ``PYTHONPATH=/path/to/older/checkout .venv/bin/python bench/sessions_list.py``
measures that checkout's server (bench/_navi_process.py).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio

from _common import percentile, report
from _navi_process import ALICE, BOB, navi_process
from events.factory import store_for_url
from events.types import SessionCreated
from navi.ids import new_id

# Bob's list with Alice's 10,000 sessions: within this of his list with none of hers.
LIST_BUDGET_MS = 5.0


async def fill(database: Path, sessions: int) -> None:
    """``sessions`` empty sessions of Alice's, written before the server starts."""
    database.parent.mkdir(parents=True, exist_ok=True)
    async with store_for_url(f"sqlite:///{database}") as store:
        created = SessionCreated(profile_id="secretary", user_id="alice")
        for _ in range(sessions):
            await store.append(new_id(), [created], expected_seq=0)


def measure(root: Path, sessions: int, rounds: int) -> dict[str, float]:
    anyio.run(fill, root / "data" / "navi.db", sessions)
    with navi_process(root) as server, server.client(BOB) as bob, server.client(ALICE) as alice:
        assert alice.get("/sessions").status_code == 200  # the server has caught up
        made = bob.post("/sessions", json={})
        assert made.status_code == 201, made.text
        session = made.json()["session_id"]
        lists: list[float] = []
        turns: list[float] = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            answer = bob.post(f"/sessions/{session}/messages", json={"content": "hello"})
            turns.append((time.perf_counter() - t0) * 1000)
            assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.text
            t0 = time.perf_counter()
            listed = bob.get("/sessions")
            lists.append((time.perf_counter() - t0) * 1000)
            assert listed.status_code == 200 and len(listed.json()) == 1, listed.text
    return {
        "list_p50_ms": percentile(lists, 50),
        "list_p99_ms": percentile(lists, 99),
        "turn_p50_ms": percentile(turns, 50),
        "turn_p99_ms": percentile(turns, 99),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    figures: dict[str, object] = {"bench": "sessions_list", "sessions": args.sessions}
    for label, count in (("none", 0), ("many", args.sessions)):
        with tempfile.TemporaryDirectory() as tmp:
            got = measure(Path(tmp), count, args.rounds)
        print(
            f"Alice has {count:>6} sessions: Bob's list p50 {got['list_p50_ms']:.1f} ms, "
            f"p99 {got['list_p99_ms']:.1f} ms; his turn p50 {got['turn_p50_ms']:.1f} ms, "
            f"p99 {got['turn_p99_ms']:.1f} ms"
        )
        figures.update({f"{label}_{k}": v for k, v in got.items()})
    extra = float(figures["many_list_p50_ms"]) - float(figures["none_list_p50_ms"])  # type: ignore[arg-type]
    figures["list_extra_p50_ms"] = extra
    figures["list_budget_ms"] = LIST_BUDGET_MS
    figures["within_budget"] = extra <= LIST_BUDGET_MS
    print(
        f"Alice's sessions add {extra:.1f} ms to Bob's list (budget {LIST_BUDGET_MS} ms): "
        + ("within" if extra <= LIST_BUDGET_MS else "OVER")
    )
    report(figures)


if __name__ == "__main__":
    main()
