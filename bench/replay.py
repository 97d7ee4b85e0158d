"""Replay of long logs: fold speed, opening a session with snapshots, time travel.

One session of ~100,000 events in a SQLite store: turns with streamed thinking and
answers, tool calls, and a post-run compression now and then. Measures

- decode: msgspec decoding of the stored payloads (the ceiling for reading a log);
- fold: ``messages`` + ``context`` folded from scratch over decoded events (events/s;
  target >= 300,000), and the whole projection set of navi.replay;
- snapshots: building them all (one every 1,000 events) and their size;
- open: ``load_messages`` from the latest snapshot plus encoding the messages as the
  ``GET /sessions/{id}`` body (ms; target < 300);
- state_at: ``state_at`` at random seqs, encoded as the REST body (ms; target < 100).

    .venv/bin/python bench/replay.py [--events N] [--every N]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

import anyio
import msgspec
from _common import median, percentile, report
from sqlalchemy import func, select

from events.codec import decode, encode, version_of
from events.sqlite import SqliteEventStore
from events.types import (
    ContextCompressed,
    ContextCompressing,
    Event,
    LLMCompleted,
    LLMRequested,
    LLMText,
    LLMThinking,
    RunCompleted,
    RunStarted,
    SessionCreated,
    ToolCall,
    ToolCompleted,
    ToolRequested,
    ToolStarted,
    UserMessage,
    tag_of,
)
from navi.replay.inspect import state_at
from navi.replay.projection_set import fold_states, initial_states
from navi.replay.snapshot_store import snapshots_table
from navi.replay.snapshots import catch_up_snapshots, load_messages
from projections.context import CONTEXT
from projections.fold import fold
from projections.messages import MESSAGES

SESSION = "bench-session"
WORDS = ["the ", "navi ", "agent ", "log ", "event ", "fold ", "replay ", "token "]


def answer(n: int, seed: int) -> list[str]:
    return [WORDS[(seed + i) % len(WORDS)] for i in range(n)]


def turn(i: int) -> list[Event]:
    """One turn (~200 events); every other one calls a tool."""
    events: list[Event] = [
        UserMessage(text=f"Question number {i}: what does the log say about replay?"),
        RunStarted(profile_id="secretary", profile_hash="h", model="qwen3:4b"),
        LLMRequested(
            model="qwen3:4b", tools=("web_search", "read_file"), options={"num_ctx": 8192}
        ),
    ]
    thinking = answer(20, i)
    events += [LLMThinking(text=t) for t in thinking]
    if i % 2:
        call = ToolCall(id=f"call-{i}", name="web_search", arguments={"query": f"replay {i}"})
        events += [
            LLMCompleted(thinking="".join(thinking), tool_calls=(call,), prompt_tokens=900),
            ToolRequested(call_id=call.id, name=call.name, arguments=call.arguments),
            ToolStarted(call_id=call.id, name=call.name),
            ToolCompleted(call_id=call.id, name=call.name, output="result " * 80),
            LLMRequested(iteration=1, model="qwen3:4b", tools=("web_search", "read_file")),
        ]
    text = answer(150, i + 1)
    events += [LLMText(text=t) for t in text]
    events += [
        LLMCompleted(content="".join(text), prompt_tokens=1200, completion_tokens=150),
        RunCompleted(content="".join(text), iterations=1 + i % 2),
    ]
    return events


def session_events(total: int) -> list[Event]:
    events: list[Event] = [SessionCreated(profile_id="secretary")]
    compressed_to = 1
    i = 0
    while len(events) < total:
        events += turn(i)
        i += 1
        if i % 20 == 0:  # post-run compression of all but the last few turns
            upto = len(events) - 600
            events += [
                ContextCompressing(context_tokens=20_000),
                LLMRequested(purpose="compress"),
                LLMCompleted(content="summary"),
                ContextCompressed(
                    from_seq=compressed_to, to_seq=upto, summary=f"Summary up to {upto}."
                ),
            ]
            compressed_to = upto
    return events[:total] if total < len(events) else events


async def write(store: SqliteEventStore, events: list[Event]) -> None:
    seq = 0
    for start in range(0, len(events), 5000):
        batch = events[start : start + 5000]
        await store.append(SESSION, batch, expected_seq=seq)
        seq += len(batch)


async def main(total: int, every: int) -> None:
    events = session_events(total)
    # A log cut in the middle of a turn is fine: the projections show a streaming answer.
    total = len(events)
    with tempfile.TemporaryDirectory() as tmp:
        async with SqliteEventStore(Path(tmp) / "navi.db", synchronous="OFF") as store:
            start = time.perf_counter()
            await write(store, events)
            print(f"wrote {total:,} events in {time.perf_counter() - start:.1f} s")

            start = time.perf_counter()
            records = await store.read(SESSION)
            read_rate = total / (time.perf_counter() - start)
            print(f"read + decode from SQLite: {read_rate:,.0f} events/s")

            payloads = [(tag_of(e), version_of(tag_of(e)), encode(e)) for e in events]
            start = time.perf_counter()
            for tag, version, payload in payloads:
                decode(tag, version, payload)
            decode_rate = total / (time.perf_counter() - start)
            print(f"decode (msgspec): {decode_rate:,.0f} events/s")

            fold_rates = []
            for _ in range(3):
                start = time.perf_counter()
                messages = fold(MESSAGES, records)
                context = fold(CONTEXT, records)
                fold_rates.append(total / (time.perf_counter() - start))
            fold_rate = max(fold_rates)
            print(
                f"fold messages + context from scratch: {fold_rate:,.0f} events/s "
                f"({len(messages.messages()):,} messages, {len(context.as_list()):,} in context)"
            )
            start = time.perf_counter()
            fold_states(initial_states(), records)
            set_rate = total / (time.perf_counter() - start)
            print(f"fold the whole projection set: {set_rate:,.0f} events/s")

            start = time.perf_counter()
            await catch_up_snapshots(store, SESSION, every=every)
            build_s = time.perf_counter() - start
            size_query = select(func.sum(func.length(snapshots_table.c.payload)))
            async with store.engine.connect() as conn:
                size = await conn.scalar(size_query)
            print(
                f"snapshots: built in {build_s:.2f} s, one every {every:,} events, "
                f"{(size or 0) / 1e6:.1f} MB"
            )

            open_ms = []
            for _ in range(10):
                start = time.perf_counter()
                state = await load_messages(store, SESSION, every=every)
                body = msgspec.json.encode(state.messages())
                open_ms.append((time.perf_counter() - start) * 1000)
            print(
                f"open (GET /sessions/{{id}} messages, {len(body) / 1e6:.1f} MB): "
                f"median {median(open_ms):.1f} ms, max {max(open_ms):.1f} ms"
            )

            rng = random.Random(10)
            at_ms = []
            for _ in range(30):
                seq = rng.randint(1, total)
                start = time.perf_counter()
                inspected = await state_at(store, SESSION, seq, every=every)
                msgspec.json.encode(inspected)
                at_ms.append((time.perf_counter() - start) * 1000)
            print(
                f"state?at=<random seq>: median {median(at_ms):.1f} ms, "
                f"p95 {percentile(at_ms, 95):.1f} ms"
            )

    report(
        {
            "bench": "replay",
            "events": total,
            "decode_events_per_s": round(decode_rate),
            "sqlite_read_events_per_s": round(read_rate),
            "fold_events_per_s": round(fold_rate),
            "fold_all_projections_events_per_s": round(set_rate),
            "snapshot_build_s": build_s,
            "snapshot_mb": (size or 0) / 1e6,
            "open_ms_median": median(open_ms),
            "state_at_ms_median": median(at_ms),
            "state_at_ms_p95": percentile(at_ms, 95),
        }
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=1000)
    args = parser.parse_args()
    anyio.run(main, args.events, args.every)
