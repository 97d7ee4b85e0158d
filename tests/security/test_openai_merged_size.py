"""``/v1`` checks the message size limit after merging (issue 29, point 5), against a
real ``navi serve``: consecutive messages of one role become one message of the
session, which has the limit every message has (200,000 characters), so forty user
messages of 199,000 characters are refused (400, OpenAI's shape) and nothing is made.

Before: each message was checked alone, and the forty became one 7.96M-character
message in a new session's history, sent to the LLM (as the last message, a session was
made before the message was refused).
"""

from __future__ import annotations

from navi.session.input import MAX_TEXT_CHARS
from tests.security.conftest import NaviServerProcess


def test_merged_messages_are_held_to_the_message_limit(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    part = "w" * (MAX_TEXT_CHARS - 1_000)
    forty = [{"role": "user", "content": part} for _ in range(40)]
    answered = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]
    with server.client() as http:
        before = http.get("/sessions").json()
        seen = len(server.llm.requests)
        # In the history (the session seeded with it), as in the last message.
        for messages in (forty + answered, forty):
            response = http.post(
                "/v1/chat/completions", json={"model": "navi/secretary", "messages": messages}
            )
            assert response.status_code == 400, response.text[:500]
            error = response.json()["error"]
            assert error["type"] == "invalid_request_error" and error["param"] == "messages"
            assert f"the limit is {MAX_TEXT_CHARS}" in error["message"]
            assert str(40 * len(part) + 39 * 2) in error["message"]  # joined by blank lines
        assert http.get("/sessions").json() == before  # no session was made
        assert len(server.llm.requests) == seen
        # The same through system notes before a user message: merged into it.
        notes = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yes"}]
        notes += [{"role": "system", "content": part}] * 2 + [{"role": "user", "content": "x"}]
        again = http.post(
            "/v1/chat/completions", json={"model": "navi/secretary", "messages": notes}
        )
        assert again.status_code == 400, again.text[:500]
        # One message at the limit is fine.
        server.llm.script()
        fits = http.post(
            "/v1/chat/completions",
            json={"model": "navi/secretary", "messages": [{"role": "user", "content": part}]},
        )
        assert fits.status_code == 200, fits.text[:500]
