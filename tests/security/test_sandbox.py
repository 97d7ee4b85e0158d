"""code_exec, terminal and write_tool cannot escape their session: each escape of issue 19
is driven through the real agent loop (the fake LLM calls the tool with the arguments an
attacker would pick) against a real ``navi serve`` with canary secrets in its
environment, a canary file outside every allowed folder, a canary SSH key in its home
folder and a canary row in its database.

All of this needs bubblewrap; where it is missing or cannot make namespaces, the tests
skip and say why (CI installs it: .ci/run). The network of a ``tool_network`` sandbox
needs slirp4netns too; its tests skip without it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.security.conftest import NaviServerProcess, StartNavi, fresh
from tests.support.fake_llm_script import FakeToolCall, Reply
from tests.support.helpers import answering_http, interface_address
from tools.base import ToolError
from tools.cgroups import cgroup_support
from tools.sandbox import SandboxLimits, SandboxSpec, run_sandboxed, sandbox_env, sandbox_status
from tools.sandbox_net import NO_NETWORK_NOTE, find_slirp4netns

_status = sandbox_status()
pytestmark = pytest.mark.skipif(
    not _status.available, reason=f"no bubblewrap sandbox here: {_status.reason}"
)

ALL_TOOLS = ["code_exec", "terminal", "write_tool", "reload_tools", "list_tools"]


def _profile(root: Path, profile_id: str, *, network: bool) -> None:
    folder = root / profile_id
    folder.mkdir(parents=True)
    config = {
        "id": profile_id,
        "name": profile_id,
        "enabled_tools": ALL_TOOLS,
        "tool_network": network,
        "planning_enabled": False,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "system_prompt.txt").write_text("You test the sandbox.")


def _profiles(root: Path) -> Path:
    """Two profiles with every tool these tests call: one without network, one with."""
    _profile(root, "sandboxed", network=False)
    _profile(root, "networked", network=True)
    return root


@pytest.fixture
def profiles_dir(tmp_path: Path) -> Path:
    return _profiles(tmp_path / "profiles")


@pytest.fixture(scope="module")
def _server(
    start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory
) -> NaviServerProcess:
    profiles = _profiles(tmp_path_factory.mktemp("sandbox") / "profiles")
    return start_module_navi(env={"PROFILES_DIR": str(profiles)})


@pytest.fixture
def server(_server: NaviServerProcess) -> NaviServerProcess:
    """The sandbox profiles' server, shared by the tests that run tools in sessions of
    their own (each test's marks and files are its own)."""
    return fresh(_server)


def run_tools(
    server: NaviServerProcess, *calls: FakeToolCall, profile: str = "sandboxed"
) -> list[dict[str, Any]]:
    """One turn in which the model makes ``calls``; the tool messages the session shows."""
    server.llm.script(Reply(tool_calls=list(calls)), Reply(text="done"))
    session = server.create_session(profile)
    response = server.send(session, "go")
    assert response.status_code == 200, response.text
    messages = server.tool_messages(session)
    assert len(messages) == len(calls), messages
    return messages


def code(source: str, **values: object) -> FakeToolCall:
    text = textwrap.dedent(source)
    for key, value in values.items():
        text = text.replace(f"__{key}__", repr(value))
    return FakeToolCall(name="code_exec", arguments={"code": text, "timeout_s": 60})


def terminal(command: str) -> FakeToolCall:
    return FakeToolCall(name="terminal", arguments={"command": command})


def running_with(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


READ_SECRETS = """
    import glob, os
    targets = [f"/proc/{__pid__}/environ", *glob.glob("/proc/*/environ"),
               __users__, __db__, __canary__, __ssh_key__]
    for path in targets:
        try:
            with open(path, "rb") as f:
                print(path, "READ", f.read().decode(errors="replace"))
        except OSError as exc:
            print(path, "REFUSED", type(exc).__name__)
    for folder in (__data__, __home__, __outside__, os.path.dirname(__db__)):
        print(folder, "EXISTS" if os.path.exists(folder) else "ABSENT")
    print("ENV", dict(os.environ))
"""


def test_code_exec_cannot_read_the_servers_secrets_database_users_or_home(
    start_navi: StartNavi, profiles_dir: Path
) -> None:
    server = start_navi(
        env={"PROFILES_DIR": str(profiles_dir)},
        users=[{"id": "local", "token": "users-file-token-canary-77e1", "role": "admin"}],
    )
    users_file = server.root / "data" / "users.json"
    [message] = run_tools(
        server,
        code(
            READ_SECRETS,
            pid=server.pid,
            users=str(users_file),
            db=str(server.database),
            canary=str(server.canary_file),
            ssh_key=str(server.home / ".ssh" / "id_ed25519"),
            data=str(server.root / "data"),
            home=str(server.home),
            outside=str(server.root / "outside"),
        ),
    )
    output = message["content"]
    assert "exit code: 0" in output, output
    assert server.leaked(output) == [], output
    assert "users-file-token-canary-77e1" not in output
    assert f"/proc/{server.pid}/environ REFUSED FileNotFoundError" in output
    for path in (users_file, server.database, server.canary_file):
        assert f"{path} REFUSED FileNotFoundError" in output, output
    assert f"{server.root / 'data'} ABSENT" in output
    assert f"{server.home} ABSENT" in output


WRITE_OUTSIDE = """
    import os
    for path in __targets__:
        try:
            with open(path, "w") as f:
                f.write("escaped")
            print(path, "WRITTEN")
        except OSError as exc:
            print(path, "REFUSED", type(exc).__name__)
    with open(os.path.join(os.environ["NAVI_FILES_DIR"], "inside.txt"), "w") as f:
        f.write("fine")
"""


def test_code_exec_writes_only_its_own_folders(server: NaviServerProcess) -> None:
    mark = uuid.uuid4().hex
    other_session = server.root / "files" / server.canary_session
    other_session.mkdir(parents=True, exist_ok=True)
    targets = [
        server.root / "outside" / f"written-{mark}",
        server.root / "data" / f"written-{mark}",
        server.root / "user_tools" / f"written_{mark}.py",
        other_session / f"written-{mark}",
        Path("/tmp") / f"written-{mark}",  # the sandbox's private /tmp: gone with it
        Path("/usr") / f"written-{mark}",
    ]
    [message] = run_tools(server, code(WRITE_OUTSIDE, targets=[str(t) for t in targets]))
    output = message["content"]
    assert "exit code: 0" in output, output
    for target in targets:
        assert not target.exists(), f"{target} was written:\n{output}"
    assert list((server.root / "files").glob("*/inside.txt")), "the files folder is writable"


CALL_NAVI = """
    import urllib.request
    try:
        with urllib.request.urlopen(__url__ + "/health", timeout=5) as response:
            print("REACHED", response.status)
    except OSError as exc:
        print("UNREACHABLE", exc)
"""


def test_code_exec_has_no_network_unless_the_profile_grants_it(
    server: NaviServerProcess,
) -> None:
    [message] = run_tools(server, code(CALL_NAVI, url=server.url))
    assert "UNREACHABLE" in message["content"], message["content"]
    assert "REACHED" not in message["content"]
    # Granted or not, Navi on 127.0.0.1 is out of reach: in open access, a request
    # without Origin is the admin's, and could make write_tool auto-approved.
    [granted] = run_tools(server, code(CALL_NAVI, url=server.url), profile="networked")
    assert "UNREACHABLE" in granted["content"], granted["content"]
    assert "REACHED" not in granted["content"]


needs_slirp = pytest.mark.skipif(
    find_slirp4netns() is None, reason="slirp4netns is not installed (the sandbox's network)"
)


CALL_URLS = """
    import urllib.request
    for url in __urls__:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                print(url, "REACHED", response.status)
        except OSError as exc:
            print(url, "UNREACHABLE", exc)
"""


@needs_slirp
def test_a_networked_sandbox_reaches_the_lan_but_never_this_machines_loopback(
    server: NaviServerProcess,
) -> None:
    address = interface_address()
    if address is None:
        pytest.skip("this machine has no address but loopback to reach the network by")
    with (
        answering_http("127.0.0.1") as (local, local_asked),
        answering_http("0.0.0.0") as (
            lan,
            lan_asked,
        ),
    ):
        urls = [
            f"http://127.0.0.1:{local}/loopback",
            f"http://10.0.2.2:{local}/gateway",  # slirp4netns's way to the host's loopback
            f"http://10.0.2.2:{lan}/gateway",
            f"http://{address}:{lan}/interface",  # as another machine on the LAN would
        ]
        [message] = run_tools(server, code(CALL_URLS, urls=urls), profile="networked")
    output = message["content"]
    for url in urls[:3]:
        assert f"{url} UNREACHABLE" in output, output
    assert f"{urls[3]} REACHED 200" in output, output  # the network works
    assert local_asked == [] and lan_asked == ["/interface"], (local_asked, lan_asked)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _argv0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return ""


def _slirp4netns_serving(pids: set[int]) -> list[int]:
    """Live slirp4netns processes attached to one of ``pids`` (their next-to-last arg)."""
    found = []
    for pid in running_with("slirp4netns"):
        with contextlib.suppress(OSError):
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            target = args[-3] if len(args) > 2 else ""
            if "slirp4netns" in args[0] and target.isdigit() and int(target) in pids:
                found.append(pid)
    return found


@needs_slirp
@pytest.mark.anyio
@pytest.mark.parametrize("ending", ["exit", "timeout", "stop"])
async def test_a_networked_call_leaves_no_process_behind(tmp_path: Path, ending: str) -> None:
    # The unique duration names the call's sleep on the host (it runs in a PID namespace).
    marker = f"{'1' if ending == 'exit' else '300'}.{uuid.uuid4().int % 10**9:09d}"
    stop = anyio.Event()
    seen: list[int] = []  # the host pids of the sandbox's tree and of its slirp4netns

    async def watch() -> None:
        # The sleep itself (bwrap's command line names the marker too): it starts only
        # once the network is up.
        while not (sleepers := [p for p in running_with(marker) if _argv0(p) == "sleep"]):
            await anyio.sleep(0.02)
        tree = set(sleepers)
        for pid in sleepers:
            while (pid := _parent(pid)) not in (0, 1, os.getpid()):  # up to bwrap
                tree.add(pid)
        seen.extend(tree | set(_slirp4netns_serving(tree)))
        assert _slirp4netns_serving(tree), "the call's network is not slirp4netns"
        if ending == "stop":
            stop.set()

    spec = SandboxSpec(workdir=tmp_path, network=True, env=sandbox_env(home=tmp_path))
    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        outcome = await run_sandboxed(
            ["sleep", marker],
            spec=spec,
            limits=SandboxLimits(256 * 1024 * 1024, 32),
            timeout_s=3 if ending == "timeout" else 60,
            stop=stop,
            output_limit_bytes=10_000,
            kill_grace_s=0.5,
        )
    assert outcome.ended_by == ending, outcome
    assert seen
    for _ in range(100):
        if not (left := [pid for pid in running_with("") if pid in seen]):
            break
        await anyio.sleep(0.05)
    assert left == [], "a process of the call outlived it"


SETSID_CHILD = """
    import subprocess
    subprocess.Popen(["setsid", "sleep", __duration__], start_new_session=True)
    subprocess.Popen(["sleep", __duration__ + "1"], start_new_session=True)
    print("started")
"""


def test_setsid_children_end_with_the_call(server: NaviServerProcess) -> None:
    duration = f"300.{uuid.uuid4().int % 10**9:09d}"
    [message] = run_tools(server, code(SETSID_CHILD, duration=duration))
    assert "started" in message["content"], message["content"]
    deadline = time.monotonic() + 5
    while running_with(duration) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running_with(duration) == [], "a setsid child outlived the call"


# Each of the three children started together holds its 300 MB for 6 s: they overlap
# even when a busy machine starts one of them seconds after the others. The one alone
# need not hold it: it only shows that 300 MB fit.
HOLD_MEMORY = """
    import subprocess, sys
    hold = ("import sys, time; x = b'x' * (300 * 1024 * 1024); print('held', flush=True); "
            "time.sleep(float(sys.argv[1]))")
    solo = subprocess.run([sys.executable, "-c", hold, "0"], capture_output=True, text=True)
    print("solo", solo.stdout.strip() or solo.returncode)
    children = [subprocess.Popen([sys.executable, "-c", hold, "6"], stdout=subprocess.PIPE,
                                 text=True)
                for _ in range(3)]
    held = sum(child.communicate()[0].count("held") for child in children)
    print("together", held)
"""


def test_memory_is_limited_for_the_whole_tree(server: NaviServerProcess) -> None:
    support = cgroup_support()
    if not support.available:
        pytest.skip(f"no cgroup for a whole-tree memory limit here: {support.reason}")
    [message] = run_tools(server, code(HOLD_MEMORY))
    output = message["content"]
    assert "solo held" in output, output  # one 300 MB child fits in 512 MB
    together = int(output.rsplit("together", 1)[1].split()[0])
    cgroup_lines = [line for line in server.logs().splitlines() if "cgroup" in line]
    assert together < 3, (output, cgroup_lines)  # three do not: the limit is on the tree


FORK_MANY = """
    import os, time
    forked = 0
    try:
        while forked < 400:
            if os.fork() == 0:
                time.sleep(5)
                os._exit(0)
            forked += 1
        print("NO LIMIT", forked)
    except OSError as exc:
        print("REFUSED AFTER", forked, type(exc).__name__)
"""


def test_the_process_count_is_limited_and_the_server_carries_on(
    server: NaviServerProcess,
) -> None:
    support = cgroup_support()
    if not support.available:
        pytest.skip(f"no cgroup for a process-count limit here: {support.reason}")
    [message] = run_tools(server, code(FORK_MANY))
    output = message["content"]
    assert "REFUSED AFTER" in output, output
    assert int(output.split("REFUSED AFTER")[1].split()[0]) < 200
    assert httpx.get(server.url + "/health", timeout=10).status_code == 200
    [after] = run_tools(server, code("print('still fine')"))
    assert "still fine" in after["content"]


async def test_a_network_that_never_gets_ready_fails_the_call_and_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"300.{uuid.uuid4().int % 10**9:09d}"
    stuck = tmp_path / "slirp4netns"
    stuck.write_text(f"#!/bin/sh\nexec sleep {marker}\n")
    stuck.chmod(0o755)
    monkeypatch.setattr("tools.sandbox.find_slirp4netns", lambda: str(stuck))
    monkeypatch.setattr("tools.sandbox_net.READY_TIMEOUT_S", 1.0)
    spec = SandboxSpec(workdir=tmp_path, network=True, env=sandbox_env(home=tmp_path))
    with pytest.raises(ToolError, match="network did not start: not ready within 1s"):
        await run_sandboxed(
            ["sleep", f"{marker}1"],
            spec=spec,
            limits=SandboxLimits(256 * 1024 * 1024, 32),
            timeout_s=60,
            stop=anyio.Event(),
            output_limit_bytes=10_000,
            kill_grace_s=0.5,
        )
    for _ in range(100):
        if not running_with(marker):
            break
        await anyio.sleep(0.05)
    assert running_with(marker) == [], "the stuck slirp4netns or the sandbox outlived the call"


def test_terminal_defaults_are_read_only(server: NaviServerProcess) -> None:
    files = server.root / "files"
    hostname = socket.gethostname()
    # The setters set what is already there: run by code without these rules (as root,
    # unsandboxed), they must not leave the test machine with a wrong clock or name.
    commands = [
        "sort --compress-program=python3 -S 4K -T . notes.txt",
        "sort -o sorted.txt notes.txt",
        "sort --out=sorted.txt notes.txt",
        "uniq notes.txt uniq-out.txt",
        "date -s now",
        "date --set=now",
        f"hostname {hostname}",
        f"grep -a OPENAI /proc/{server.pid}/environ",
    ]
    messages = run_tools(server, *(terminal(c) for c in commands))
    by_command = dict(zip(commands, (m["content"] for m in messages), strict=True))
    for command in commands[:-1]:
        assert "not allowed" in by_command[command] or "refused" in by_command[command], (
            command,
            by_command[command],
        )
    grep = by_command[commands[-1]]
    assert server.leaked(grep) == [] and "No such file" in grep, grep
    assert not list(files.glob("*/sorted.txt")) and not list(files.glob("*/uniq-out.txt"))
    assert socket.gethostname() == hostname


def test_operator_allowed_git_and_find_run_harmlessly_in_the_sandbox(
    start_navi: StartNavi, profiles_dir: Path
) -> None:
    server = start_navi(
        env={"PROFILES_DIR": str(profiles_dir), "TERMINAL_ALLOWED_COMMANDS": "git,find,ls"}
    )
    outside = server.root / "outside"
    script = (
        f"cat /proc/{server.pid}/environ {server.canary_file} {server.database}; "
        f"echo pwned > {outside}/via-TOOL"
    )
    messages = run_tools(
        server,
        terminal(f"find . -maxdepth 0 -exec sh -c '{script.replace('TOOL', 'find')}' \\;"),
        terminal(f"git -c alias.x='!sh -c \"{script.replace('TOOL', 'git')}\"' x"),
    )
    for message in messages:
        assert server.leaked(message["content"]) == [], message["content"]
        assert "No such file" in message["content"], message["content"]
    assert not (outside / "via-find").exists()
    assert not (outside / "via-git").exists()


def test_write_tool_never_runs_the_code_it_checks_in_the_server(
    server: NaviServerProcess,
) -> None:
    canary = server.root / "outside" / "write-tool-canary"
    module = (
        f"open({str(canary)!r}, 'w').write('module code ran')\n"
        "name = 'evil'\ndescription = 'd'\nparameters = {'type': 'object', 'properties': {}}\n"
        "async def execute(params):\n    return 'x'\n"
    )
    broken = f"open({str(canary)!r} + '-2', 'w').write('ran')\nraise RuntimeError('rejected')\n"
    # /tmp exists in the sandbox's view too: the write fails there only because nothing
    # is writable where the check runs.
    in_tmp = Path("/tmp") / f"navi-write-tool-canary-{uuid.uuid4().hex}"
    writes_tmp = module.replace(str(canary), str(in_tmp)).replace("'evil'", "'evil_three'")
    messages = run_tools(
        server,
        FakeToolCall(name="write_tool", arguments={"name": "evil", "code": module}),
        FakeToolCall(name="write_tool", arguments={"name": "evil_two", "code": broken}),
        FakeToolCall(name="write_tool", arguments={"name": "evil_three", "code": writes_tmp}),
    )
    for message in messages:
        assert "the tool was rejected" in message["content"], message["content"]
    assert not canary.exists()
    assert not Path(f"{canary}-2").exists()
    assert not in_tmp.exists()
    assert not (server.root / "user_tools" / "evil.py").exists()
    assert not (server.root / "user_tools" / "evil_two.py").exists()
    assert not (server.root / "user_tools" / "evil_three.py").exists()


def test_without_bubblewrap_code_exec_and_terminal_refuse_and_say_how_to_install_it(
    start_navi: StartNavi, profiles_dir: Path, tmp_path: Path
) -> None:
    no_bwrap = tmp_path / "bin-without-bwrap"
    no_bwrap.mkdir()
    server = start_navi(env={"PROFILES_DIR": str(profiles_dir), "PATH": str(no_bwrap)})
    messages = run_tools(server, code(READ_SECRETS.replace("__pid__", "1")), terminal("ls"))
    for message in messages:
        assert "apt-get install bubblewrap" in message["content"], message["content"]
        assert server.leaked(message["content"]) == []
    assert "bubblewrap (bwrap) is not installed" in server.logs()


def test_without_slirp4netns_a_networked_call_runs_without_network_and_says_so(
    start_navi: StartNavi, profiles_dir: Path, tmp_path: Path
) -> None:
    bwrap = sandbox_status().bwrap
    assert bwrap is not None
    only_bwrap = tmp_path / "bin-without-slirp4netns"
    only_bwrap.mkdir()
    for name, target in (("bwrap", bwrap), ("true", shutil.which("true"))):
        (only_bwrap / name).symlink_to(str(target))  # true: the start-up probe runs it
    server = start_navi(env={"PROFILES_DIR": str(profiles_dir), "PATH": str(only_bwrap)})
    address = interface_address() or "192.0.2.1"
    with answering_http("0.0.0.0") as (port, asked):
        [message] = run_tools(
            server, code(CALL_URLS, urls=[f"http://{address}:{port}/x"]), profile="networked"
        )
    output = message["content"]
    assert NO_NETWORK_NOTE in output and "UNREACHABLE" in output, output
    assert asked == []
    # Said at start-up too, as a warning (only profiles with tool_network need it).
    assert "slirp4netns is not installed" in server.logs()
    # A call without the grant says nothing of it.
    [plain] = run_tools(server, code("print('plain')"))
    assert "plain" in plain["content"] and "slirp4netns" not in plain["content"]


def test_the_operators_escape_hatch_is_a_warning_at_start_up(
    start_navi: StartNavi, profiles_dir: Path
) -> None:
    server = start_navi(
        env={"PROFILES_DIR": str(profiles_dir), "NAVI_UNSANDBOXED_TOOLS": "1"}, canary_row=False
    )
    [message] = run_tools(server, code("print('ran unsandboxed')"))
    assert "ran unsandboxed" in message["content"]
    warnings = [
        json.loads(line)
        for line in server.logs().splitlines()
        if line.startswith("{") and '"tools.sandbox"' in line
    ]
    assert [w["level"] for w in warnings] == ["warning"], server.logs()
    assert "WITHOUT the sandbox" in warnings[0]["status"]
