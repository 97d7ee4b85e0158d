"""The tables of the SQL event stores (SQLAlchemy Core, shared by SQLite and PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    UniqueConstraint,
)

# v2: payloads are stored without their type tag (the ``type`` column holds it). v1 rows
# read the same, so upgrading only records the new version; a Navi that knows only v1
# refuses the database instead of failing on rows it cannot read.
SCHEMA_VERSION = 2

metadata = MetaData()

# On SQLite an INTEGER PRIMARY KEY is the rowid itself: no second index to maintain.
_position = BigInteger().with_variant(Integer(), "sqlite")

events_table = Table(
    "navi_events",
    metadata,
    Column("position", _position, primary_key=True, autoincrement=False),
    Column("stream_id", String(200), nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("event_id", String(64), nullable=False),
    Column("type", String(64), nullable=False),
    Column("version", SmallInteger, nullable=False),
    Column("timestamp", Float(precision=53), nullable=False),
    Column("run_id", String(64)),
    Column("causation_id", String(64)),
    Column("payload", LargeBinary, nullable=False),
    # The optimistic-concurrency check: one writer per (stream, seq).
    UniqueConstraint("stream_id", "seq", name="uq_navi_events_stream_seq"),
)

idempotency_table = Table(
    "navi_idempotency",
    metadata,
    Column("stream_id", String(200), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("first_seq", BigInteger, nullable=False),
    Column("last_seq", BigInteger, nullable=False),
)

schema_version_table = Table(
    "navi_schema_version",
    metadata,
    Column("component", String(64), primary_key=True),
    Column("version", Integer, nullable=False),
)
