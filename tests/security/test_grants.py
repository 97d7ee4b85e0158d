"""Reach is granted to accounts, not picked with a profile (issue 30, item 5), against a
real ``navi serve`` with a users file.

Before the change a role ``user`` account with no grants created a ``smart_home``
session (``POST /sessions``, a ``/v1`` chat), switched a session into it, let its LLM
``switch_profile`` and ``spawn_agent`` into it, and its ``http_request`` in such a
session reached private (LAN) addresses with no one asked; a ``server_admin`` session
gave its sandboxed code the network. Now ``smart_home`` needs the grant ``lan``,
``server_admin`` the grant ``tool_network``: without it, 403 or a failed tool call, and
in a session that is in such a profile anyway (made before the grant was withdrawn, or
imported) the calls are refused where they run.

The private address the tools try is a multicast one (239.255.0.1): the outbound policy
takes it for a LAN address as it does 10.x, but a TCP connection to it fails inside this
machine's kernel, so a test never sends a packet to a network that is not ours.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from navi.accounts import AuthConfigError, Users
from navi.grants import GRANTS, granted_profile
from profiles import ProfileRegistry
from tests.security.conftest import NaviServerProcess, StartNavi, fresh
from tests.support.fake_llm_script import FakeToolCall, Reply
from tools.sandbox import sandbox_status
from tools.sandbox_net import find_slirp4netns

TOOLS = ["http_request", "web_view", "image_view", "switch_profile", "spawn_agent", "code_exec"]
ALICE = {"id": "alice", "token": "alice-token-0123456789abcdef", "role": "admin"}
BOB = {"id": "bob", "token": "bob-token-0123456789abcdef", "role": "user", "tools": TOOLS}
ERIN = {
    "id": "erin",
    "token": "erin-token-0123456789abcdef",
    "role": "user",
    "tools": TOOLS,
    "grants": ["lan"],
}
LAN_URL = "http://239.255.0.1/relay?on=1"
NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def _server(start_module_navi: StartNavi) -> NaviServerProcess:
    return start_module_navi(users=[ALICE, BOB, ERIN], canary_row=False)


@pytest.fixture
def server(_server: NaviServerProcess) -> NaviServerProcess:
    """Alice (admin), Bob (user, no grants), Erin (user, ``lan``): shared by the tests
    that use sessions of their own and leave the users file as it is."""
    return fresh(_server)


def _create(server: NaviServerProcess, profile: str, token: str) -> httpx.Response:
    with server.client(token=token) as http:
        return http.post("/sessions", json={"profile_id": profile})


def _listed(server: NaviServerProcess, token: str) -> list[str]:
    with server.client(token=token) as http:
        return [s["profile_id"] for s in http.get("/sessions").json()]


def _event_types(server: NaviServerProcess, sid: str, token: str) -> list[str]:
    with server.client(token=token) as http:
        response = http.get(f"/sessions/{sid}/events")
        assert response.status_code == 200, response.text
    return [json.loads(line)["type"] for line in response.text.splitlines()]


def _turn(
    server: NaviServerProcess, sid: str, token: str, *steps: list[FakeToolCall]
) -> list[dict[str, Any]]:
    """A turn whose LLM makes ``steps`` (one list of calls each), then answers; the
    tool messages of this turn."""
    before = len(server.tool_messages(sid, token=token))
    server.llm.script(*(Reply(tool_calls=calls) for calls in steps), Reply(text="done"))
    response = server.send(sid, "go", token=token)
    assert response.status_code == 200, response.text
    return server.tool_messages(sid, token=token)[before:]


def _lan_calls() -> list[FakeToolCall]:
    return [
        FakeToolCall(name="http_request", arguments={"url": LAN_URL}),
        FakeToolCall(name="web_view", arguments={"url": LAN_URL}),
        FakeToolCall(name="image_view", arguments={"source": "http://239.255.0.1/cam.png"}),
    ]


def _write_users(server: NaviServerProcess, users: list[dict[str, Any]]) -> None:
    (server.root / "data" / "users.json").write_text(json.dumps(users))


def _wait_until_refused(server: NaviServerProcess, profile: str, token: str) -> None:
    """Until the server has read the new users file (within a second or two): a new
    session in ``profile`` is refused."""
    deadline = time.monotonic() + 15
    while (response := _create(server, profile, token)).status_code != 403:
        assert response.status_code == 201, response.text
        assert time.monotonic() < deadline, "the server did not take the users file's change"
        time.sleep(0.2)


# ---------------------------------------------------------------- entering a profile


def test_a_user_without_the_grant_cannot_open_a_session_in_a_profile_that_widens_reach(
    server: NaviServerProcess,
) -> None:
    bob, erin, alice = BOB["token"], ERIN["token"], ALICE["token"]
    refused = _create(server, "smart_home", bob)
    assert refused.status_code == 403, refused.text
    message = refused.json()["error"]
    assert "user bob may not use profile smart_home" in message
    assert "'lan'" in message and '"grants": ["lan"]' in message
    no_network = _create(server, "server_admin", bob)
    assert no_network.status_code == 403 and "'tool_network'" in no_network.json()["error"]
    assert _create(server, "secretary", bob).status_code == 201
    assert _listed(server, bob) == ["secretary"]  # nothing was created by the refusals
    # The grant is what opens it; one grant opens only its own reach.
    assert _create(server, "smart_home", erin).status_code == 201
    assert _create(server, "server_admin", erin).status_code == 403
    for profile in ("smart_home", "server_admin"):
        assert _create(server, profile, alice).status_code == 201  # an admin has them all


def test_the_profiles_list_says_which_profiles_an_account_may_use(
    server: NaviServerProcess,
) -> None:
    def listed(token: str) -> dict[str, tuple[bool, list[str]]]:
        with server.client(token=token) as http:
            profiles = http.get("/agents/profiles").json()
        return {p["id"]: (p["usable"], p["missing_grants"]) for p in profiles}

    bob, erin, alice = listed(BOB["token"]), listed(ERIN["token"]), listed(ALICE["token"])
    assert bob["smart_home"] == (False, ["lan"]) and bob["secretary"] == (True, [])
    assert bob["server_admin"][0] is False and "tool_network" in bob["server_admin"][1]
    assert erin["smart_home"] == (True, []) and erin["server_admin"][0] is False
    assert all(usable for usable, _ in alice.values())


def test_switching_a_session_into_it_is_refused(server: NaviServerProcess) -> None:
    bob, erin = BOB["token"], ERIN["token"]
    sid = server.create_session("secretary", token=bob)
    with server.client(token=bob) as http:
        refused = http.patch(f"/sessions/{sid}/profile", json={"profile_id": "smart_home"})
        assert refused.status_code == 403, refused.text
        assert "'lan'" in refused.json()["error"]
        assert http.get(f"/sessions/{sid}").json()["profile_id"] == "secretary"
    assert "profile.switched" not in _event_types(server, sid, bob)
    granted = server.create_session("secretary", token=erin)
    with server.client(token=erin) as http:
        switched = http.patch(f"/sessions/{granted}/profile", json={"profile_id": "smart_home"})
        assert switched.status_code == 200, switched.text
        assert http.get(f"/sessions/{granted}").json()["profile_id"] == "smart_home"


def test_the_openai_api_neither_lists_nor_opens_it(server: NaviServerProcess) -> None:
    body = {"model": "navi/smart_home", "messages": [{"role": "user", "content": "lights on"}]}
    with server.client(token=BOB["token"]) as bob:
        models = [m["id"] for m in bob.get("/v1/models").json()["data"]]
        assert "navi/secretary" in models
        assert "navi/smart_home" not in models and "navi/server_admin" not in models
        refused = bob.post("/v1/chat/completions", json=body)
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert error["code"] == "grant_required" and "'lan'" in error["message"]
        assert bob.get("/v1/models/navi/smart_home").status_code == 403
    assert "smart_home" not in _listed(server, BOB["token"])
    with server.client(token=ERIN["token"]) as erin:
        models = [m["id"] for m in erin.get("/v1/models").json()["data"]]
        assert "navi/smart_home" in models and "navi/server_admin" not in models


def test_the_llm_cannot_switch_or_spawn_into_it(server: NaviServerProcess) -> None:
    bob = BOB["token"]
    sid = server.create_session("secretary", token=bob)
    switch = FakeToolCall(name="switch_profile", arguments={"profile_id": "smart_home"})
    spawn = FakeToolCall(
        name="spawn_agent", arguments={"task": "turn the relay on", "profile_id": "smart_home"}
    )
    switched, spawned = _turn(server, sid, bob, [switch], [spawn])
    for tool in (switched, spawned):
        assert tool["success"] is False, tool  # a failed tool call the model reads
        assert "user bob may not use profile smart_home" in tool["content"]
        assert "'lan'" in tool["content"] and "an admin can grant it" in tool["content"]
    assert server.session(sid, token=bob)["profile_id"] == "secretary"
    types = _event_types(server, sid, bob)
    assert "profile.switched" not in types and "subagent.spawned" not in types
    assert "tool.approval_requested" not in types  # refused at once, never put to anyone
    # With the grant the same call switches.
    erin = ERIN["token"]
    granted = server.create_session("secretary", token=erin)
    [tool] = _turn(server, granted, erin, [switch])
    assert tool["success"] is True, tool
    assert server.session(granted, token=erin)["profile_id"] == "smart_home"


# ---------------------------------------------------------------- where tools run


def _forged_import(server: NaviServerProcess, token: str, profile: str) -> str:
    """The caller's own empty session, exported, its ``session.created`` set to
    ``profile``, imported as a new session: an import keeps the profile the file says."""
    own = server.create_session("secretary", token=token)
    with server.client(token=token) as http:
        exported = http.get(f"/sessions/{own}/export").text.splitlines()
        lines = [json.loads(line) for line in exported]
        for line in lines[1:]:
            if line["type"] == "session.created":
                line["payload"]["profile_id"] = profile
        body = "\n".join(json.dumps(line) for line in lines) + "\n"
        response = http.post("/sessions/import?as_new=true", content=body, headers=NDJSON)
        assert response.status_code == 201, response.text
    session_id: str = response.json()["session_id"]
    assert server.session(session_id, token=token)["profile_id"] == profile
    return session_id


FRANK = {"id": "frank", "token": "frank-token-0123456789abcdef", "role": "user", "tools": TOOLS}


class _Withdrawing:
    """A server whose users file the tests below change, each withdrawing the grant of a
    user of its own (Bob's ``lan``, Frank's ``tool_network``): one ``navi serve`` for both
    (a start costs seconds), the users file always the two tests' changes so far."""

    def __init__(self, start: StartNavi) -> None:
        self.users = {
            "alice": ALICE,
            "bob": {**BOB, "grants": ["lan"]},
            "frank": {**FRANK, "grants": ["tool_network"]},
        }
        self.server = start(users=list(self.users.values()), canary_row=False)

    def withdraw(self, user: dict[str, Any]) -> None:
        self.users[user["id"]] = user
        _write_users(self.server, list(self.users.values()))


@pytest.fixture(scope="module")
def _withdrawing(start_module_navi: StartNavi) -> _Withdrawing:
    return _Withdrawing(start_module_navi)


@pytest.fixture
def withdrawing(_withdrawing: _Withdrawing) -> _Withdrawing:
    fresh(_withdrawing.server)
    return _withdrawing


def test_without_the_grant_no_lan_address_is_reached_even_in_a_smart_home_session(
    withdrawing: _Withdrawing,
) -> None:
    server = withdrawing.server
    bob = BOB["token"]
    earlier = server.create_session("smart_home", token=bob)
    # With the grant, the policy lets the call go: it fails on the connection itself.
    for tool in _turn(server, earlier, bob, _lan_calls()):
        assert "refused" not in tool["content"] and "failed" in tool["content"], tool
    withdrawing.withdraw(BOB)  # the grant withdrawn
    _wait_until_refused(server, "smart_home", bob)
    imported = _forged_import(server, bob, "smart_home")
    for sid in (earlier, imported):
        results = _turn(server, sid, bob, _lan_calls())
        assert len(results) == 3
        for tool in results:
            assert tool["success"] is False
            assert "refused to connect to 239.255.0.1" in tool["content"], tool
            assert "private-network address" in tool["content"]
            assert "'lan' grant" in tool["content"]


_sandbox = sandbox_status()


@pytest.mark.skipif(not _sandbox.available, reason=f"no bubblewrap here: {_sandbox.reason}")
@pytest.mark.skipif(find_slirp4netns() is None, reason="slirp4netns is not installed")
def test_without_the_grant_a_sandboxed_call_has_no_network_even_in_server_admin(
    withdrawing: _Withdrawing,
) -> None:
    server = withdrawing.server
    frank = FRANK["token"]
    interfaces = FakeToolCall(
        name="code_exec",
        arguments={"code": "import socket\nprint(sorted(n for _, n in socket.if_nameindex()))"},
    )
    earlier = server.create_session("server_admin", token=frank)
    [granted] = _turn(server, earlier, frank, [interfaces])
    assert "'tap0'" in granted["content"], granted  # slirp4netns's interface: a network
    withdrawing.withdraw(FRANK)
    _wait_until_refused(server, "server_admin", frank)
    imported = _forged_import(server, frank, "server_admin")
    for sid in (earlier, imported):
        [tool] = _turn(server, sid, frank, [interfaces])
        assert tool["success"] is True, tool
        assert "['lo']" in tool["content"] and "tap0" not in tool["content"], tool


# ---------------------------------------------------------------- the users file


def _users_file(tmp_path: Path, entries: list[dict[str, Any]]) -> str:
    path = tmp_path / "users.json"
    path.write_text(json.dumps(entries))
    return str(path)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"grants": ["lan", "root"]}, "unknown grant 'root'"),
        ({"grants": ["LAN"]}, "unknown grant 'LAN'"),
        ({"grants": "lan"}, "Expected `array`"),
        ({"grants": [1]}, "Expected `str`"),
        ({"role": "admin", "grants": ["lan"]}, "an admin, who has every grant"),
    ],
)
def test_a_users_file_with_a_bad_grant_does_not_load(
    tmp_path: Path, entry: dict[str, Any], says: str
) -> None:
    user = {"id": "bob", "token": BOB["token"], "role": "user", **entry}
    with pytest.raises(AuthConfigError) as refused:
        Users.load(api_token="", users_file=_users_file(tmp_path, [user]))
    assert says in str(refused.value)
    if "unknown" in says:
        assert all(repr(name) in str(refused.value) for name in GRANTS)


def test_an_old_users_file_still_loads_and_grants_nothing(tmp_path: Path) -> None:
    users = Users.load(api_token="", users_file=_users_file(tmp_path, [BOB, ALICE]))
    bob, alice = users.get("bob"), users.get("alice")
    assert bob is not None and alice is not None
    assert bob.grants == () and not any(bob.has_grant(g) for g in GRANTS)
    assert all(alice.has_grant(g) for g in GRANTS)


def test_navi_users_add_writes_the_grants_and_refuses_unknown_ones(tmp_path: Path) -> None:
    users_file = tmp_path / "users.json"

    def add(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "navi.cli", "users", "add", *args, "--file", str(users_file)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    done = add("dora", "--grant", "lan", "--grant", "tool_network")
    assert done.returncode == 0, done.stderr
    [entry] = json.loads(users_file.read_text())
    assert entry["grants"] == ["lan", "tool_network"] and entry["role"] == "user"
    for bad in (["eve", "--grant", "everything"], ["root2", "--role", "admin", "--grant", "lan"]):
        refused = add(*bad)
        assert refused.returncode == 2 and (
            "unknown grant" in refused.stderr or "admin" in refused.stderr
        )
    assert len(json.loads(users_file.read_text())) == 1  # nothing written by a refusal


def test_every_widening_of_a_profile_needs_a_known_grant_and_is_turned_off_without_it(
    tmp_path: Path,
) -> None:
    profiles = ProfileRegistry.from_environ({})
    users = Users.load(api_token="", users_file=_users_file(tmp_path, [BOB, ERIN]))
    bob, erin = users.get("bob"), users.get("erin")
    for profile in profiles.all():
        assert set(profile.needed_grants) <= set(GRANTS)
        assert profile.loosens_safety == bool(profile.needed_grants)
        plain = granted_profile(profile, bob)
        assert not plain.loosens_safety, profile.id
        assert plain.enabled_tools == profile.enabled_tools
    smart_home = profiles.get("smart_home")
    assert granted_profile(smart_home, erin) is smart_home
    unattended = msgspec.structs.replace(
        profiles.get("secretary"), tool_policy={"code_exec": "auto", "filesystem": "ask"}
    )
    assert unattended.needed_grants == ("auto_approval",)
    assert granted_profile(unattended, bob).tool_policy == {"filesystem": "ask"}
    assert granted_profile(unattended, erin).tool_policy == {"filesystem": "ask"}
    assert granted_profile(smart_home, None).allow_private_urls is False  # an unknown user
