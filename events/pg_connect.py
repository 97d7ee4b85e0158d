"""Connecting to PostgreSQL: the URLs of SQLAlchemy and asyncpg, and which errors say
the connection broke (worth a retry on a fresh one)."""

from __future__ import annotations

import asyncpg
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError


def asyncpg_dsn(url: str) -> str:
    """``postgresql+asyncpg://...`` (SQLAlchemy) → ``postgresql://...`` (asyncpg)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def is_disconnect(exc: BaseException) -> bool:
    """True when ``exc`` says the connection to PostgreSQL broke or the server is not
    accepting connections (a restart): worth retrying on a fresh connection."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, asyncpg.QueryCanceledError):
            return False  # a timeout (class 57 too): the connection is fine
        if isinstance(
            current,
            OSError
            | TimeoutError
            | asyncpg.PostgresConnectionError
            | asyncpg.exceptions.OperatorInterventionError,
        ):
            return True
        if isinstance(current, asyncpg.InterfaceError) and "closed" in str(current):
            return True
        if isinstance(current, asyncpg.exceptions.InternalClientError):
            return True  # the protocol lost track on a dying connection: use a fresh one
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        orig = getattr(current, "orig", None)
        current = (
            orig if isinstance(orig, BaseException) else (current.__cause__ or current.__context__)
        )
    return False


def sqlalchemy_url(url: str) -> str:
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)
