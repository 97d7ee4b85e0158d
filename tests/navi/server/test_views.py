"""The sessions list's ``owned``: a socket's way in, answered from the list as it is."""

from __future__ import annotations

import uuid

import pytest

from events.in_memory import InMemoryEventStore
from events.types import SessionCreated
from navi.accounts import User
from navi.server.views import SessionsView
from navi.session.errors import SessionNotFound

pytestmark = pytest.mark.anyio

ALICE, BOB = User(id="alice"), User(id="bob")


async def test_a_listed_session_is_answered_without_reading_the_log_again() -> None:
    async with InMemoryEventStore() as store:
        view = SessionsView(store)
        sid = str(uuid.uuid4())
        await store.append(sid, [SessionCreated(profile_id="p", user_id="alice")], expected_seq=0)
        assert (await view.owned(sid, ALICE)).session_id == sid  # not listed yet: read
        reads = 0
        refresh = view.refresh

        async def counted() -> object:
            nonlocal reads
            reads += 1
            return await refresh()

        view.refresh = counted  # type: ignore[method-assign]
        for _ in range(3):
            assert (await view.owned(sid, ALICE)).session_id == sid
        with pytest.raises(SessionNotFound):
            await view.owned(sid, BOB)  # an owner never changes: no read either
        assert reads == 0
        with pytest.raises(SessionNotFound):
            await view.owned(str(uuid.uuid4()), ALICE)  # unknown: read once, then no
        assert reads == 1
        with pytest.raises(SessionNotFound):
            await view.owned("../not-a-uuid", ALICE)
        assert reads == 1
