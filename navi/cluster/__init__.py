"""Navi on several nodes: session ownership, the durable inbox, takeover and the sweeps
that keep runs going (docs/deployment.md).

``open_placement`` is what ``Navi.open`` uses: on PostgreSQL a ``ClusterNode`` (any
number of ``navi serve`` processes may share the database); on any other store a
single node, with nothing to place: its session actors are restarted by their
supervision, and their recovery continues an open run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from events.store import EventStore
from navi.cluster.node import ClusterNode
from navi.config import Settings
from navi.session.manager import SessionManager

__all__ = ["ClusterNode", "NodePlacement", "open_placement"]


class NodePlacement:
    """What ``Navi.open`` holds: the cluster node (PostgreSQL), or nothing (a single
    node)."""

    def __init__(self, node: ClusterNode | None) -> None:
        self.node = node

    def attach(self, manager: SessionManager) -> None:
        if self.node is not None:
            self.node.attach(manager)

    async def serve(self, *, background: bool) -> None:
        """Run until cancelled: the inbox delivery, and with ``background`` the sweeps."""
        if self.node is not None:
            await self.node.serve(background=background)
        else:
            await anyio.sleep_forever()


@asynccontextmanager
async def open_placement(store: EventStore, settings: Settings) -> AsyncIterator[NodePlacement]:
    from events.postgres import PostgresEventStore, asyncpg_dsn

    if not isinstance(store, PostgresEventStore):
        yield NodePlacement(None)
        return
    node = ClusterNode(
        store,
        asyncpg_dsn(store.url),
        sweep_s=settings.cluster_sweep_s,
        idle_release_s=settings.cluster_idle_release_s,
        db_timeout_s=store.wait_timeout_s,
    )
    async with node.open():
        yield NodePlacement(node)
