"""GET /sessions?q=: the text of every message of the caller's own chats, with the
words found; never another user's chat."""

from __future__ import annotations

from pathlib import Path

import httpx

from navi.server.auth import User, Users
from navi.server.search import SNIPPET_CHARS, snippet
from tests.support.fake_llm import Reply
from tests.support.navi_server import navi_server_for


def test_search_reads_every_message_of_ones_own_chats_only(tmp_path: Path) -> None:
    users = Users(
        [User(id="alice", token="a" * 20), User(id="bob", token="b" * 20)], open_access=False
    )
    with navi_server_for(tmp_path, users=users) as server:
        server.fake_llm.script(Reply(text="Your locker code is 4711, noted."), Reply(text="Sunny."))
        alice = httpx.Client(
            base_url=server.url, headers={"Authorization": "Bearer " + "a" * 20}, timeout=30
        )
        bob = httpx.Client(
            base_url=server.url, headers={"Authorization": "Bearer " + "b" * 20}, timeout=30
        )
        with alice, bob:
            sid = alice.post("/sessions", json={"title": "Gym"}).json()["session_id"]
            for text in ("Remember my locker code", "Weather tomorrow?"):
                alice.post(f"/sessions/{sid}/messages", json={"content": text}).raise_for_status()
            # Not in the title nor the preview (the last answer): in an earlier message.
            found = alice.get("/sessions", params={"q": "locker code is 4711"}).json()
            assert [s["session_id"] for s in found] == [sid]
            assert found[0]["match"] == "Your locker code is 4711, noted."
            assert alice.get("/sessions", params={"q": "gym"}).json()[0]["match"] == "Gym"
            assert alice.get("/sessions", params={"q": "nowhere"}).json() == []
            assert bob.get("/sessions", params={"q": "4711"}).json() == []
            assert bob.get("/sessions", params={"q": "gym"}).json() == []


def test_a_snippet_is_the_found_words_in_context() -> None:
    text = "word " * 100 + "NEEDLE here " + "tail " * 100
    cut = snippet(text, "needle")
    assert "NEEDLE here" in cut
    assert cut.startswith("…") and cut.endswith("…")
    assert len(cut) <= SNIPPET_CHARS + 2
    assert snippet("short  text\nhere", "text") == "short text here"
