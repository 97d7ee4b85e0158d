"""Users, roles and grants (navi/accounts.py) and WebSocket tickets (navi/server/auth.py)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from navi.accounts import (
    LOCAL_USER,
    RESTRICTED_TOOLS,
    AuthConfigError,
    User,
    Users,
    add_user,
    read_users_file,
)
from navi.server.auth import WsTickets

TOKEN = "a-token-of-enough-length"


def _file(tmp_path: Path, users: list[dict[str, object]]) -> Path:
    path = tmp_path / "users.json"
    path.write_text(json.dumps(users))
    return path


def test_a_role_user_may_not_act_on_the_machine_unless_granted() -> None:
    plain = User(id="bob", token=TOKEN)
    assert plain.role == "user"
    assert all(not plain.may_use(tool) for tool in RESTRICTED_TOOLS)
    assert plain.may_use("web_search")
    granted = User(id="erin", token=TOKEN, tools=("code_exec",))
    assert granted.may_use("code_exec") and not granted.may_use("web_search")
    assert all(User(id="a", role="admin", token=TOKEN).may_use(t) for t in RESTRICTED_TOOLS)


def test_refusals_name_the_user_and_the_tool() -> None:
    users = Users([User(id="bob", token=TOKEN)], open_access=False)
    assert users.refusal("bob", "web_search") is None
    assert "user bob may not use tool terminal" in (users.refusal("bob", "terminal") or "")
    assert "not a user of this server" in (users.refusal("mallory", "todo") or "")
    # ``local`` is the machine's operator (the CLI) unless the file names one.
    assert users.get("local") is LOCAL_USER
    assert Users([], open_access=True).get("bob") is None


def test_tokens_are_checked_by_hash_and_a_hash_is_no_token(tmp_path: Path) -> None:
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    users = Users.load(
        api_token="", users_file=str(_file(tmp_path, [{"id": "c", "token_sha256": digest}]))
    )
    found = users.authenticate(TOKEN)
    assert found is not None and found.id == "c"
    assert users.authenticate(digest) is None and users.authenticate("") is None


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ([{"id": "a", "token": "short"}], "at least 16"),
        ([{"id": "a", "token_sha256": "xyz"}], "64 hex"),
        ([{"id": "a", "token": TOKEN, "token_sha256": "0" * 64}], "keep one"),
        ([{"id": "a", "token": TOKEN}, {"id": "a", "token": TOKEN + "x"}], "twice"),
        ([{"id": "a", "token": TOKEN, "role": "admin", "tools": ["todo"]}], "admin"),
        ([{"id": "../x", "token": TOKEN}], "cannot read"),
    ],
)
def test_a_bad_users_file_is_refused_with_the_reason(
    tmp_path: Path, entries: list[dict[str, object]], problem: str
) -> None:
    with pytest.raises(AuthConfigError, match=problem):
        read_users_file(_file(tmp_path, entries))


def test_the_users_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = _file(tmp_path, [{"id": "a", "token": TOKEN}])
    users = Users.load(api_token="", users_file=str(path))
    token = add_user(path, "b", tools=("todo",))
    assert token not in path.read_text() and os.stat(path).st_mode & 0o077 == 0
    users._checked = 0.0  # past the once-a-second check
    found = users.authenticate(token)
    assert found is not None and found.id == "b" and found.tools == ("todo",)
    path.write_text("not json")  # a broken file keeps the users as they were
    users._checked = 0.0
    assert users.authenticate(token) is not None
    with pytest.raises(AuthConfigError, match="already has"):
        add_user(_file(tmp_path, [{"id": "b", "token": TOKEN}]), "b")


def test_a_ticket_opens_once_before_it_expires() -> None:
    now = [1000.0]
    alice = User(id="alice", role="admin", token=TOKEN)
    users = Users([alice], open_access=False)
    tickets = WsTickets(users, secret="s", clock=lambda: now[0])
    ticket = tickets.issue(alice)
    assert tickets.redeem(ticket) == alice
    assert tickets.redeem(ticket) is None  # used
    late = tickets.issue(alice)
    now[0] += 30
    assert tickets.redeem(late) is None  # expired
    # Another node with the same secret accepts it; one with another key does not.
    fresh = tickets.issue(alice)
    assert WsTickets(users, secret="other", clock=lambda: now[0]).redeem(fresh) is None
    assert WsTickets(users, secret="s", clock=lambda: now[0]).redeem(fresh) == alice
    body, _, mac = fresh.partition(".")
    assert tickets.redeem(body + "." + mac[::-1]) is None
    # A user removed from the file loses the tickets they had.
    gone = tickets.issue(User(id="bob", token=TOKEN))
    assert tickets.redeem(gone) is None
