from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.actors.support import Inbox


@pytest.fixture
def box() -> Iterator[Inbox]:
    inbox = Inbox()
    yield inbox
    inbox.close()
