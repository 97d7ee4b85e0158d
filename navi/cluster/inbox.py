"""The durable inbox: requests for a session whose actor runs on another node.

A node that does not own a session writes the request as a row of ``navi_inbox`` and
``NOTIFY navi_inbox`` (the payload only wakes: ``new:<session id>``); the owner reads
its sessions' pending rows and hands each to the actor. A row is

- *accepted* when the actor took it (a queued message: it will run after the current
  run); the sender answers its client then;
- *done* when nothing is left to do: a message's run is in the log, a stop or another
  request was answered (``result``), or the session refused it (``result.error``).

Delivery is at least once; a message is recognised when delivered again because its
run's id is the row's id (``Send.run_id``) and the log is asked first. A row that is
not done survives the owner's death: the node taking the session over delivers it.
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg
import msgspec

from events.types import TERMINAL_RUN_EVENTS
from navi.cluster.ownership import INBOX_CHANNEL

RUN_BOUNDS = ("run.started", *sorted(TERMINAL_RUN_EVENTS))
_IN_BOUNDS = ", ".join(f"'{t}'" for t in RUN_BOUNDS)

# Guards the schema creation below against two nodes starting at once.
SCHEMA_LOCK_KEY = 0x6E617669_0000_0001

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS navi_inbox (
        id text PRIMARY KEY,
        session_id text NOT NULL,
        kind text NOT NULL,
        payload jsonb NOT NULL,
        created_at double precision NOT NULL,
        accepted_at double precision,
        done_at double precision,
        result jsonb,
        node text NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS navi_inbox_pending ON navi_inbox (session_id, created_at) "
    "WHERE done_at IS NULL",
    # The sweep asks which sessions have an unfinished run: only run starts and ends
    # matter, a small part of the log.
    f"CREATE INDEX IF NOT EXISTS navi_events_run_bounds ON navi_events (stream_id, seq) "
    f"WHERE type IN ({_IN_BOUNDS})",
)

_json = msgspec.json.Encoder()


class InboxRow(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    session_id: str
    kind: str  # "send" | "stop" | "ask"
    payload: dict[str, Any]
    created_at: float
    accepted_at: float | None = None
    done_at: float | None = None
    result: Any = None

    @property
    def error(self) -> dict[str, Any] | None:
        if isinstance(self.result, dict) and "error" in self.result:
            return self.result
        return None


_COLUMNS = "id, session_id, kind, payload, created_at, accepted_at, done_at, result"


def _row(record: asyncpg.Record) -> InboxRow:
    return InboxRow(
        id=record[0],
        session_id=record[1],
        kind=record[2],
        payload=msgspec.json.decode(record[3]),
        created_at=record[4],
        accepted_at=record[5],
        done_at=record[6],
        result=None if record[7] is None else msgspec.json.decode(record[7]),
    )


class Inbox:
    def __init__(self, pool: asyncpg.Pool, *, node_id: str) -> None:
        self.pool = pool
        self.node_id = node_id

    async def create_schema(self) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK_KEY)
            for statement in SCHEMA:
                await conn.execute(statement)

    async def put(self, row_id: str, session_id: str, kind: str, payload: dict[str, Any]) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO navi_inbox (id, session_id, kind, payload, created_at, node) "
                "VALUES ($1, $2, $3, $4::jsonb, $5, $6)",
                row_id,
                session_id,
                kind,
                _json.encode(payload).decode(),
                time.time(),
                self.node_id,
            )
            await conn.execute("SELECT pg_notify($1, $2)", INBOX_CHANNEL, f"new:{session_id}")

    async def get(self, row_id: str) -> InboxRow | None:
        async with self.pool.acquire() as conn:
            record = await conn.fetchrow(f"SELECT {_COLUMNS} FROM navi_inbox WHERE id = $1", row_id)
        return None if record is None else _row(record)

    async def pending(self, session_ids: list[str]) -> list[InboxRow]:
        """The rows not done of these sessions, oldest first."""
        if not session_ids:
            return []
        async with self.pool.acquire() as conn:
            records = await conn.fetch(
                f"SELECT {_COLUMNS} FROM navi_inbox "
                "WHERE done_at IS NULL AND session_id = ANY($1::text[]) ORDER BY created_at, id",
                session_ids,
            )
        return [_row(r) for r in records]

    async def waiting_sessions(self, older_than_s: float) -> set[str]:
        """Sessions with a row that has waited longer than ``older_than_s`` (their
        owner may be gone)."""
        async with self.pool.acquire() as conn:
            records = await conn.fetch(
                "SELECT DISTINCT session_id FROM navi_inbox "
                "WHERE done_at IS NULL AND created_at < $1",
                time.time() - older_than_s,
            )
        return {r[0] for r in records}

    async def accept(self, row_id: str, result: Any) -> None:
        await self._mark(
            row_id, "accepted_at = coalesce(accepted_at, $2), result = $3::jsonb", result
        )

    async def finish(self, row_id: str, result: Any) -> None:
        await self._mark(
            row_id,
            "done_at = $2, accepted_at = coalesce(accepted_at, $2), "
            "result = coalesce($3::jsonb, result)",
            result,
        )

    async def _mark(self, row_id: str, assignments: str, result: Any) -> None:
        encoded = None if result is None else _json.encode(result).decode()
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute(
                f"UPDATE navi_inbox SET {assignments} WHERE id = $1", row_id, time.time(), encoded
            )
            await conn.execute("SELECT pg_notify($1, $2)", INBOX_CHANNEL, f"done:{row_id}")

    async def prune(self, keep_s: float) -> int:
        async with self.pool.acquire() as conn:
            status: str = await conn.execute(
                "DELETE FROM navi_inbox WHERE done_at IS NOT NULL AND done_at < $1",
                time.time() - keep_s,
            )
        return int(status.rsplit(" ", 1)[-1])


class RunIndex:
    """What the log says about runs, asked in SQL (the sweep and the inbox need it
    without folding a session)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def open_runs(self) -> dict[str, str]:
        """Session id → run id of every session whose last run has not ended."""
        async with self.pool.acquire() as conn:
            records = await conn.fetch(
                "SELECT stream_id, type, run_id FROM ("
                "  SELECT DISTINCT ON (stream_id) stream_id, type, run_id FROM navi_events"
                f"  WHERE type IN ({_IN_BOUNDS}) ORDER BY stream_id, seq DESC"
                ") AS last WHERE type = 'run.started'"
            )
        return {r[0]: r[2] or "" for r in records if ":" not in r[0]}

    async def active_run(self, session_id: str) -> str | None:
        """The id of the session's unfinished run, if it has one."""
        async with self.pool.acquire() as conn:
            record = await conn.fetchrow(
                f"SELECT type, run_id FROM navi_events WHERE stream_id = $1 AND type IN ({_IN_BOUNDS}) "
                "ORDER BY seq DESC LIMIT 1",
                session_id,
            )
        if record is None or record[0] != "run.started":
            return None
        return str(record[1] or "")

    async def first_seq_of_run(self, session_id: str, run_id: str) -> int | None:
        """The seq of the run's first event (its user message), if it is in the log."""
        async with self.pool.acquire() as conn:
            found = await conn.fetchval(
                "SELECT min(seq) FROM navi_events WHERE stream_id = $1 AND run_id = $2 "
                "AND type IN ('user.message', 'run.started')",
                session_id,
                run_id,
            )
        return None if found is None else int(found)

    async def run_ended(self, session_id: str, run_id: str) -> bool:
        async with self.pool.acquire() as conn:
            found = await conn.fetchval(
                "SELECT 1 FROM navi_events WHERE stream_id = $1 AND run_id = $2 "
                f"AND type IN ({', '.join(repr(t) for t in sorted(TERMINAL_RUN_EVENTS))}) LIMIT 1",
                session_id,
                run_id,
            )
        return found is not None

    async def last_seq(self, session_id: str) -> int:
        async with self.pool.acquire() as conn:
            value = await conn.fetchval(
                "SELECT coalesce(max(seq), 0) FROM navi_events WHERE stream_id = $1", session_id
            )
        return int(value)
