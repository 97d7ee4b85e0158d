"""What a big import does to another user: Bob's ``GET /sessions`` while Alice imports a
~60 MB export (about 150,000 events), against a real ``navi serve`` (SQLite).

Bob asks for his list back to back (one request at a time, as a page polling would)
first with nothing else going on, then for as long as Alice's import runs; the
figures are his latencies (p50, p99, worst) in both phases and the import's own time.
The budget is for Bob's p99 during the import.

    .venv/bin/python bench/import_load.py [--megabytes 60]

Before/after: ``PYTHONPATH=/path/to/older/checkout .venv/bin/python bench/import_load.py``
measures that checkout's server (bench/_navi_process.py).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from _common import percentile, report
from _exports import synthetic_export, turns_for
from _navi_process import ALICE, BOB, NaviProcess, navi_process

# Bob's p99 while the import runs. Before the import ran on the event loop: his requests
# waited for its parsing, checking and writing (up to seconds at a time).
P99_BUDGET_MS = 150.0
IDLE_REQUESTS = 200


def bob_lists(server: NaviProcess, until: threading.Event, count: int | None = None) -> list[float]:
    """Bob's list, back to back, until ``until`` is set (or ``count`` times): each
    request's time in ms."""
    times: list[float] = []
    with server.client(BOB) as bob:
        while not until.is_set() and (count is None or len(times) < count):
            t0 = time.perf_counter()
            response = bob.get("/sessions")
            times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200, response.text
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--megabytes", type=float, default=60.0)
    args = parser.parse_args()
    body = synthetic_export(turns_for(args.megabytes), user_id="alice")
    events = body.count(b"\n") - 1
    print(f"export: {len(body) / 1e6:.1f} MB, {events} events")
    env = {"NAVI_MAX_IMPORT_MB": str(int(args.megabytes * 2) + 1)}
    with tempfile.TemporaryDirectory() as tmp, navi_process(Path(tmp), env) as server:
        with server.client(BOB) as bob:
            assert bob.post("/sessions", json={}).status_code == 201
        idle = bob_lists(server, threading.Event(), IDLE_REQUESTS)
        done = threading.Event()
        during: list[float] = []
        poller = threading.Thread(target=lambda: during.extend(bob_lists(server, done)))
        poller.start()
        t0 = time.perf_counter()
        with server.client(ALICE, timeout=600) as alice:
            answer = alice.post(
                "/sessions/import",
                content=body,
                headers={"content-type": "application/x-ndjson"},
            )
        import_s = time.perf_counter() - t0
        done.set()
        poller.join()
        assert answer.status_code == 201, answer.text[:500]
    figures: dict[str, object] = {
        "bench": "import_load",
        "import_mb": round(len(body) / 1e6, 1),
        "import_events": events,
        "import_s": import_s,
        "idle_p50_ms": percentile(idle, 50),
        "idle_p99_ms": percentile(idle, 99),
        "during_requests": len(during),
        "during_p50_ms": percentile(during, 50),
        "during_p99_ms": percentile(during, 99),
        "during_max_ms": max(during) if during else float("nan"),
        "p99_budget_ms": P99_BUDGET_MS,
    }
    within = percentile(during, 99) <= P99_BUDGET_MS
    figures["within_budget"] = within
    print(f"import: {import_s:.1f} s")
    print(
        f"Bob's list, idle: p50 {figures['idle_p50_ms']:.1f} ms, p99 {figures['idle_p99_ms']:.1f} ms"
    )
    print(
        f"Bob's list during the import ({len(during)} requests): p50 "
        f"{figures['during_p50_ms']:.1f} ms, p99 {figures['during_p99_ms']:.1f} ms, worst "
        f"{figures['during_max_ms']:.1f} ms (budget p99 {P99_BUDGET_MS} ms: "
        + ("within)" if within else "OVER)")
    )
    report(figures)


if __name__ == "__main__":
    main()
