"""Try again (``POST /sessions/{id}/try-again``, the WebSocket's ``try_again``) as an
attacker meets it: only for the owner's session, only while its run waits for the
model's server; anything else gets a clear error and changes nothing."""

from __future__ import annotations

import json

from websockets.sync.client import connect

from tests.security.conftest import StartNavi, ws_frames
from tests.support.fake_llm_script import Reply

ALICE = {"id": "alice", "token": "alice-token-3b9e-77d1c0", "role": "user"}
BOB = {"id": "bob", "token": "bob-token-08fa-5c2e91", "role": "user"}


def test_try_again_for_another_user_or_a_run_that_does_not_wait_changes_nothing(
    start_navi: StartNavi,
) -> None:
    server = start_navi(users=[ALICE, BOB], canary_row=False)
    sid = server.create_session("secretary", token=ALICE["token"])
    server.llm.script(Reply(text="Hello."))
    assert server.send(sid, "hi", token=ALICE["token"]).status_code == 200

    def log() -> list[str]:
        with server.client(token=ALICE["token"]) as alice:
            response = alice.get(f"/sessions/{sid}/events")
        assert response.status_code == 200, response.text
        return [line for line in response.text.splitlines() if line]

    before = log()
    assert json.loads(before[-1])["type"] == "run.completed"
    with server.client(token=BOB["token"]) as bob:
        refused = bob.post(f"/sessions/{sid}/try-again")
        assert refused.status_code == 404, refused.text
    with server.client(token="") as anonymous:
        assert anonymous.post(f"/sessions/{sid}/try-again").status_code == 401
    with server.client(token=ALICE["token"]) as alice:
        idle = alice.post(f"/sessions/{sid}/try-again")
        assert idle.status_code == 409, idle.text
        assert "waits for the model's server" in idle.text
        assert alice.post("/sessions/no-such-session/try-again").status_code == 404
    headers = {"authorization": f"Bearer {ALICE['token']}"}
    url = f"{server.ws_url}/ws/sessions/{sid}"
    with connect(url, open_timeout=10, additional_headers=headers) as ws:
        ws.send(json.dumps({"type": "try_again"}))
        frames = ws_frames(ws)  # and the connection lives on
    errors = [f for f in frames if f["type"] == "error"]
    assert errors and "waits for the model's server" in errors[0]["message"], frames
    assert log() == before
    assert server.session(sid, token=ALICE["token"])["run_state"] == "done"
