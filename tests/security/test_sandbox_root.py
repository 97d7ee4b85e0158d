"""The sandbox never runs tool code as the host's root (issue 29): each attack is driven
through the real agent loop (the fake LLM calls ``code_exec`` with the code an attacker
would write) against a real ``navi serve`` started as root, as CI runs it.

Before the fix, bubblewrap run by root made no user namespace: the code was uid 0
without capabilities, and ``/proc/sys`` was writable. Writing ``|<script>`` into
``kernel.core_pattern`` and crashing a process had the kernel run the script as root on
the host, which read the server's environment, ``~/.ssh`` and the users file.

The limits of the same issue (point 4) are here too: the write limit of a call, the
bound on sandboxes running at once (per user and in all, a wait that Stop ends) and the
memory ceiling of all sandboxes together. The sandbox run by an ordinary user is checked
under uid 65534 (``setpriv``) at the end.

Nothing here may leave the host changed: every sysctl a test touches is read first and
written back afterwards, whatever the test's outcome (``host_sysctls``)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.conftest import NaviServerProcess, StartNavi, fresh
from tests.support.fake_llm_script import FakeToolCall, Reply
from tests.support.helpers import poll_until
from tools.cgroups import cgroup_support
from tools.sandbox import sandbox_status
from tools.sandbox_net import find_slirp4netns

_status = sandbox_status()
pytestmark = [
    pytest.mark.skipif(
        not _status.available, reason=f"no bubblewrap sandbox here: {_status.reason}"
    ),
]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the server must be started as root")

SYSCTLS = ("kernel/core_pattern", "kernel/pid_max", "vm/nr_hugepages", "fs/file-max")
USERS_TOKEN = "users-file-token-canary-5d02"
MB = 1024 * 1024


def _sysctl(name: str) -> Path:
    return Path("/proc/sys") / name


@pytest.fixture
def host_sysctls() -> Iterator[dict[str, str]]:
    """The host's values of SYSCTLS before the test, written back after it if anything
    changed them (a failing test included)."""
    before = {name: _sysctl(name).read_text() for name in SYSCTLS}
    try:
        yield before
    finally:
        for name, value in before.items():
            with contextlib.suppress(OSError):
                if _sysctl(name).read_text() != value:
                    _sysctl(name).write_text(value)


def _profiles(root: Path) -> Path:
    for name, network in (("sandboxed", False), ("networked", True)):
        folder = root / name
        folder.mkdir(parents=True)
        config = {
            "id": name,
            "name": name,
            "enabled_tools": ["code_exec", "terminal"],
            "tool_network": network,
            "planning_enabled": False,
        }
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "system_prompt.txt").write_text("You test the sandbox.")
    return root


def _start(start: StartNavi, root: Path, env: dict[str, str] | None = None, **kw: Any) -> Any:
    profiles = _profiles(root / "profiles")
    return start(env={"PROFILES_DIR": str(profiles), **(env or {})}, **kw)


@pytest.fixture(scope="module")
def _server(
    start_module_navi: StartNavi, tmp_path_factory: pytest.TempPathFactory
) -> NaviServerProcess:
    return _start(
        start_module_navi,
        tmp_path_factory.mktemp("sandbox-root"),
        users=[{"id": "alice", "token": USERS_TOKEN, "role": "admin"}],
    )


@pytest.fixture
def server(_server: NaviServerProcess) -> NaviServerProcess:
    return fresh(_server)


def code(source: str, **values: object) -> FakeToolCall:
    text = textwrap.dedent(source)
    for key, value in values.items():
        text = text.replace(f"__{key}__", repr(value))
    return FakeToolCall(name="code_exec", arguments={"code": text, "timeout_s": 120})


def run_code(
    server: NaviServerProcess,
    source: str,
    session: str | None = None,
    profile: str = "sandboxed",
    **values: object,
) -> tuple[str, str]:
    """One turn in which the model calls code_exec once: (the session, the tool's text)."""
    server.llm.script(Reply(tool_calls=[code(source, **values)]), Reply(text="done"))
    session = session or server.create_session(profile)
    response = server.send(session, "go")
    assert response.status_code == 200, response.text
    messages = server.tool_messages(session)
    return session, messages[-1]["content"]


def files_of(server: NaviServerProcess, session: str) -> Path:
    return server.root / "files" / session


# -- the kernel's knobs -------------------------------------------------------------------

WRITE_SYSCTLS = """
    # The value already there is written back: the write itself is the test, and the
    # host keeps its value even where it goes through.
    for name in __names__:
        path = "/proc/sys/" + name
        try:
            value = open(path).read()
            with open(path, "w") as f:
                f.write(value)
            print(name, "WRITTEN")
        except OSError as exc:
            print(name, "REFUSED", type(exc).__name__)
    for path in ("/proc/sysrq-trigger", "/proc/kcore"):  # opened, never written
        try:
            os_fd = __import__("os").open(path, __import__("os").O_WRONLY)
            __import__("os").close(os_fd)
            print(path, "OPENED")
        except OSError as exc:
            print(path, "REFUSED", type(exc).__name__)
    mounts = open("/proc/self/mountinfo").read().splitlines()
    sys_mount = [m for m in mounts if m.split()[4] == "/proc/sys"]
    print("PROC_SYS_MOUNT", sys_mount[0].split()[5] if sys_mount else "none")
"""


@as_root
def test_code_exec_cannot_write_the_kernels_knobs(
    server: NaviServerProcess, host_sysctls: dict[str, str]
) -> None:
    _, output = run_code(server, WRITE_SYSCTLS, names=list(SYSCTLS))
    assert "exit code: 0" in output, output
    for name in SYSCTLS:
        assert f"{name} REFUSED" in output, output
    assert "WRITTEN" not in output and "OPENED" not in output, output
    assert "PROC_SYS_MOUNT ro," in output, output  # read-only, whoever the code is
    for name, value in host_sysctls.items():
        assert _sysctl(name).read_text() == value


CORE_PATTERN_ESCAPE = """
    import os, pathlib, subprocess, sys, time
    files = pathlib.Path(os.environ["NAVI_FILES_DIR"])
    leak = files / "leak.txt"
    handler = files / "h.sh"
    # What the kernel would run as root on the host, in the host's namespaces.
    handler.write_text(
        "#!/bin/sh\\n"
        f"cat /proc/{__pid__}/environ {__users__} {__ssh_key__} > {leak} 2>&1\\n"
        f"chmod 644 {leak}\\n"
    )
    handler.chmod(0o755)
    try:
        with open("/proc/sys/kernel/core_pattern", "w") as f:
            f.write(f"|{handler}")
        print("PATTERN SET")
    except OSError as exc:
        print("PATTERN REFUSED", type(exc).__name__)
        sys.exit(0)
    subprocess.run([sys.executable, "-c", "import os; os.abort()"])
    for _ in range(200):
        if leak.exists() and leak.stat().st_size:
            break
        time.sleep(0.05)
    print("LEAK", leak.read_text(errors="replace") if leak.exists() else "none")
"""


@as_root
def test_the_core_pattern_escape_to_the_hosts_root_fails(
    server: NaviServerProcess, host_sysctls: dict[str, str]
) -> None:
    users_file = server.root / "data" / "users.json"
    assert USERS_TOKEN in users_file.read_text()
    session, output = run_code(
        server,
        CORE_PATTERN_ESCAPE,
        pid=server.pid,
        users=str(users_file),
        ssh_key=str(server.home / ".ssh" / "id_ed25519"),
    )
    assert _sysctl("kernel/core_pattern").read_text() == host_sysctls["kernel/core_pattern"]
    assert "PATTERN REFUSED" in output, output
    assert server.leaked(output) == [] and USERS_TOKEN not in output, output
    assert not (files_of(server, session) / "leak.txt").exists()


HOLD_UNTIL_RELEASED = """
    import os, pathlib, subprocess, sys
    files = pathlib.Path(os.environ["NAVI_FILES_DIR"])
    wait = "import os, sys, time\\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)"
    # The marker names the child on the host, where the test looks at it.
    subprocess.run([sys.executable, "-c", wait, str(files / "release"), __marker__])
    print("uid", os.getuid(), "gid", os.getgid())
"""


def _status_of(pid: int) -> dict[str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _pids_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and marker in (entry / "cmdline").read_text():
                found.append(int(entry.name))
    return found


@as_root
def test_sandboxed_code_is_an_unprivileged_host_user_in_a_user_namespace(
    server: NaviServerProcess,
) -> None:
    marker = f"navi-marker-{uuid.uuid4().hex}"
    server.llm.script(Reply(tool_calls=[code(HOLD_UNTIL_RELEASED, marker=marker)]))
    session = server.create_session("sandboxed")
    turn = server.send_in_background(session)
    try:
        poll_until(lambda: bool(_pids_with(marker)), "the sandboxed child runs", limit_s=90)
        [pid] = _pids_with(marker)
        parent = int(_status_of(pid)["PPid"])  # the code_exec Python itself
        for seen in (pid, parent):
            status = _status_of(seen)
            uids, gids = status["Uid"].split(), status["Gid"].split()
            assert "0" not in uids and "0" not in gids, (seen, uids, gids)
            assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
            assert status["NoNewPrivs"].strip() == "1"
            own_ns = os.stat(f"/proc/{seen}/ns/user").st_ino
            assert own_ns != os.stat("/proc/self/ns/user").st_ino, "no user namespace"
    finally:
        (files_of(server, session) / "release").touch()
        turn.join(120)
    output = server.tool_messages(session)[-1]["content"]
    assert "uid 0" not in output and "exit code: 0" in output, output


LEAVE_TRAPS = """
    import os, pathlib
    files = pathlib.Path(os.environ["NAVI_FILES_DIR"])
    # Names the server might follow: links to its users file and to a canary outside.
    os.symlink(__users__, files / "users-link")
    os.symlink(__canary__, files / "canary-link")
    (files / "deep").mkdir()
    os.symlink(__users__, files / "deep" / "users-link")
    (files / "suid").write_text("#!/bin/sh\\n")
    os.chmod(files / "suid", 0o6755)
    (files / "locked").mkdir()
    (files / "locked" / "inside.txt").write_text("x")
    os.chmod(files / "locked", 0)
    os.mkfifo(files / "fifo")
    try:
        os.link(__users__, files / "users-hardlink")
        print("HARDLINKED")
    except OSError as exc:
        print("NO HARDLINK", type(exc).__name__)
    print("left")
"""


@as_root
def test_files_the_code_leaves_never_hand_the_server_anything(
    server: NaviServerProcess,
) -> None:
    users_file = server.root / "data" / "users.json"
    watched = (users_file, server.canary_file, server.canary_file.parent)
    before = {path: os.lstat(path) for path in watched}
    session, output = run_code(
        server, LEAVE_TRAPS, users=str(users_file), canary=str(server.canary_file)
    )
    assert "left" in output and "NO HARDLINK" in output, output
    # The next call hands the folder over again (it walks what the first one left).
    _, again = run_code(server, "print(sorted(__import__('os').listdir('.')))", session)
    assert "exit code: 0" in again, again
    for path, stat in before.items():
        now = os.lstat(path)
        assert (now.st_uid, now.st_gid, now.st_mode) == (stat.st_uid, stat.st_gid, stat.st_mode)
    folder = files_of(server, session)
    assert (folder / "users-link").is_symlink()
    # The server deletes all of it, the locked folder and the fifo included.
    with server.client(token=USERS_TOKEN) as http:
        assert http.delete(f"/sessions/{session}").status_code in (200, 204)
    assert not folder.exists()


READ_SYSTEM_FILES = """
    for path in ("/etc/resolv.conf", "/etc/passwd", "/etc/ssl/certs"):
        try:
            open(path).read() if not path.endswith("certs") else __import__("os").listdir(path)
            print(path, "READABLE")
        except OSError as exc:
            print(path, "UNREADABLE", type(exc).__name__)
"""


@as_root
@pytest.mark.skipif(find_slirp4netns() is None, reason="slirp4netns is not installed")
def test_the_sandbox_user_reads_what_programs_need_networked_or_not(
    server: NaviServerProcess,
) -> None:
    # The sandbox's resolv.conf (naming slirp4netns's DNS) too: without it, no name
    # resolves for the sandbox user.
    for profile in ("sandboxed", "networked"):
        _, output = run_code(server, READ_SYSTEM_FILES, profile=profile)
        assert "UNREADABLE" not in output and output.count("READABLE") == 3, (profile, output)


# -- the write limit ----------------------------------------------------------------------

WRITE_A_LOT = """
    import os, pathlib, time
    files = pathlib.Path(os.environ["NAVI_FILES_DIR"])
    chunk = b"x" * (1024 * 1024)
    for n in range(200):  # 200 files of 1 MB: no one file is large
        (files / f"part-{n:03}.bin").write_bytes(chunk)
        time.sleep(0.005)  # it keeps writing: the watch's polls see it pass the limit
    print("WROTE ALL")
"""

FILL_TMP = """
    try:
        with open("/tmp/big", "wb") as f:
            for _ in range(64):
                f.write(b"x" * (1024 * 1024))
        print("TMP FILLED")
    except OSError as exc:
        print("TMP REFUSED", exc.strerror)
"""


@as_root
def test_a_call_that_writes_past_its_limit_is_ended_and_the_session_carries_on(
    start_navi: StartNavi, tmp_path: Path
) -> None:
    server = _start(start_navi, tmp_path, {"NAVI_SANDBOX_WRITE_LIMIT_MB": "16"})
    session, first = run_code(
        server, "import os; open(os.environ['NAVI_FILES_DIR'] + '/keep.txt', 'w').write('kept')"
    )
    assert "exit code: 0" in first, first
    _, output = run_code(server, WRITE_A_LOT, session)
    assert "WROTE ALL" not in output, output
    assert "limit of 16 MB" in output and "was stopped" in output, output
    folder = files_of(server, session)
    written = sum(p.stat().st_size for p in folder.glob("part-*.bin"))
    assert written < 200 * MB, written
    _, tmp = run_code(server, FILL_TMP, session)
    assert "TMP REFUSED" in tmp, tmp
    # The session works on, and what was there before is still there.
    _, after = run_code(
        server, "import os; print(open(os.environ['NAVI_FILES_DIR'] + '/keep.txt').read())", session
    )
    assert "exit code: 0" in after and "kept" in after, after
    assert (folder / "keep.txt").read_text() == "kept"


# -- sandboxes running at once ------------------------------------------------------------

RUN_UNTIL_RELEASED = """
    import os, pathlib, time
    files = pathlib.Path(os.environ["NAVI_FILES_DIR"])
    (files / "ran").write_text("1")
    while not (files / "release").exists():
        time.sleep(0.05)
    print("released")
"""
TOKENS = {name: f"{name}-token-{uuid.uuid4().hex[:16]}" for name in ("alice", "bob", "carol")}


def _waiting(server: NaviServerProcess, user: str, bound: str) -> bool:
    for line in server.logs().splitlines():
        if '"tools.sandbox_wait"' in line:
            entry = json.loads(line)
            if entry["user"] == user and bound in entry["busy"]:
                return True
    return False


class _Call:
    """A code_exec call of ``user`` in a session of its own, in a thread."""

    def __init__(self, server: NaviServerProcess, user: str) -> None:
        self.server, self.token = server, TOKENS[user]
        self.session = server.create_session("sandboxed", token=self.token)
        self.folder = files_of(server, self.session)
        before = server.llm.state["requests"]
        server.llm.script(Reply(tool_calls=[code(RUN_UNTIL_RELEASED)]))
        self.thread = server.send_in_background(self.session, token=self.token)
        # Its tool call is requested (the reply consumed) before the next is scripted.
        poll_until(
            lambda: server.llm.state["requests"] > before, f"{user}'s call is asked for", limit_s=90
        )

    @property
    def ran(self) -> bool:
        return (self.folder / "ran").exists()

    def release(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "release").touch()

    def result(self) -> str:
        self.thread.join(120)
        return str(self.server.tool_messages(self.session, token=self.token)[-1]["content"])


@as_root
def test_sandboxes_at_once_are_bounded_per_user_and_in_all_and_a_waiting_call_stops(
    start_navi: StartNavi, tmp_path: Path
) -> None:
    server = _start(
        start_navi,
        tmp_path,
        {"NAVI_MAX_SANDBOXES": "2", "NAVI_USER_MAX_SANDBOXES": "1"},
        users=[{"id": name, "token": token, "role": "admin"} for name, token in TOKENS.items()],
        canary_row=False,
    )
    calls: list[_Call] = []
    try:
        first = _Call(server, "alice")
        calls.append(first)
        poll_until(lambda: first.ran, "alice's first call runs", limit_s=90)
        second = _Call(server, "alice")  # alice's bound: it waits
        calls.append(second)
        poll_until(
            lambda: _waiting(server, "alice", "NAVI_USER_MAX_SANDBOXES"), "alice waits", limit_s=90
        )
        bob = _Call(server, "bob")  # another user: runs beside alice's
        calls.append(bob)
        poll_until(lambda: bob.ran, "bob's call runs", limit_s=90)
        carol = _Call(server, "carol")  # two run: the server's bound
        calls.append(carol)
        poll_until(
            lambda: _waiting(server, "carol", "NAVI_MAX_SANDBOXES"), "carol waits", limit_s=90
        )
        assert not second.ran and not carol.ran
        # Stop ends a waiting call: it never runs.
        with server.client(token=second.token) as http:
            assert http.post(f"/sessions/{second.session}/stop").status_code == 200
        assert "stopped" in second.result()
        assert not second.ran
        # A slot that frees goes to the call waiting for it.
        first.release()
        assert "released" in first.result()
        poll_until(lambda: carol.ran, "carol's call runs once alice's ends", limit_s=90)
    finally:
        for call in calls:
            call.release()
    for call in (bob, carol):
        assert "released" in call.result()
    assert not second.ran


HOLD_MEMORY = """
    import os, pathlib, time
    files = pathlib.Path(os.environ["NAVI_FILES_DIR"])
    block = bytearray(400 * 1024 * 1024)
    for i in range(0, len(block), 4096):  # touched: resident, counted
        block[i] = 1
    print("held", flush=True)
    (files / "held").write_text("1")
    while not (files / "release").exists():
        time.sleep(0.05)
    print("released")
"""


def _ceiling_file(kind: str) -> Path:
    """The memory limit of navi-tools, the parent of every call's cgroup: under the
    cgroup this test runs in, where the servers it starts begin too."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if kind == "v2" and not controllers:
            return Path("/sys/fs/cgroup") / path.lstrip("/") / "navi-tools" / "memory.max"
        if kind == "v1" and "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return base / "navi-tools" / "memory.limit_in_bytes"
    raise AssertionError("no memory cgroup")


@as_root
def test_all_sandboxes_together_stay_under_the_memory_ceiling(
    start_navi: StartNavi, tmp_path: Path
) -> None:
    support = cgroup_support()
    if not support.available:
        pytest.skip(f"no cgroup for a memory ceiling here: {support.reason}")
    limit_file = _ceiling_file(support.kind)
    before = limit_file.read_text() if limit_file.exists() else None
    server = _start(start_navi, tmp_path, {"NAVI_SANDBOXES_MEMORY_MB": "700"}, canary_row=False)
    sessions = [server.create_session("sandboxed") for _ in range(2)]
    threads: list[threading.Thread] = []
    try:
        for session in sessions:  # 2 x 400 MB, each under its own 512 MB limit
            requests = server.llm.state["requests"]
            server.llm.script(Reply(tool_calls=[code(HOLD_MEMORY)]))
            threads.append(server.send_in_background(session))
            poll_until(
                lambda r=requests: server.llm.state["requests"] > r, "the call is asked", limit_s=90
            )
            folder = files_of(server, session)
            thread = threads[-1]
            poll_until(
                lambda f=folder, t=thread: (f / "held").exists() or not t.is_alive(),
                "held",
                limit_s=90,
            )
        assert int(limit_file.read_text()) == 700 * MB
    finally:
        for session in sessions:
            folder = files_of(server, session)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "release").touch()
        for thread in threads:
            thread.join(120)
        # The host's cgroup as it was: the ceiling of other servers is theirs to set.
        # (v1: memory+swap is never below memory; written around it, one of the two
        # goes through whether the value rises or falls.)
        value = (before or ("max" if support.kind == "v2" else "-1")).strip()
        memsw = limit_file.parent / "memory.memsw.limit_in_bytes"
        for target in (memsw, limit_file, memsw) if support.kind == "v1" else (limit_file,):
            with contextlib.suppress(OSError):
                target.write_text(value)
    outputs = [server.tool_messages(s)[-1]["content"] for s in sessions]
    assert sum("released" in output for output in outputs) < 2, outputs


# -- run by an ordinary user --------------------------------------------------------------

AS_A_USER = """
import json, os, sys, tempfile
from pathlib import Path
import anyio
from tools.sandbox import SandboxLimits, SandboxSpec, run_sandboxed, sandbox_env, sandbox_status

PROBE = sys.argv[1]

async def run(code, limit=None):
    with tempfile.TemporaryDirectory() as work, tempfile.TemporaryDirectory() as files:
        spec = SandboxSpec(workdir=Path(work), writable=(Path(files),),
                           env=sandbox_env({"NAVI_FILES_DIR": files}, home=Path(work)),
                           write_limit_bytes=limit)
        outcome = await run_sandboxed(["/usr/bin/python3", "-c", code], spec=spec,
                                      limits=SandboxLimits(256 << 20, 64), timeout_s=60,
                                      stop=anyio.Event(), output_limit_bytes=100_000,
                                      kill_grace_s=0.5)
        return {"ended_by": outcome.ended_by, "output": outcome.output}

async def main():
    status = sandbox_status()
    probe = await run(PROBE)
    # A writer that keeps writing (a pause per file): the watch polls every 50 ms, and a
    # limit a watch keeps is passed by what is written between two polls (docs/tools.md).
    big = "import os, time\\nfor n in range(100): open(os.environ['NAVI_FILES_DIR'] + f'/{n}', 'wb').write(b'x' * (1 << 20)); time.sleep(0.005)\\nprint('WROTE ALL')"
    limited = await run(big, limit=8 << 20)
    print(json.dumps({"uid": os.getuid(), "available": status.available,
                      "reason": status.reason, "probe": probe, "limited": limited}))

anyio.run(main)
"""


def _python_for(uid: int) -> list[str] | None:
    """An interpreter ``uid`` can run with the project's packages, or None."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": _user_path()}
    for python in (sys.executable, "/usr/bin/python3"):
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", python]
        done = subprocess.run(
            [*argv, "-c", "import anyio, msgspec, structlog, tools.sandbox"],
            env=env,
            capture_output=True,
            check=False,
            cwd="/",
        )
        if done.returncode == 0:
            return argv
    return None


def _user_path() -> str:
    root = Path(__file__).resolve().parents[2]
    return os.pathsep.join([str(root), sysconfig.get_paths()["purelib"]])


@as_root
def test_the_sandbox_run_by_an_ordinary_user_holds_too() -> None:
    python = _python_for(65534)
    if python is None:
        pytest.skip("no Python that uid 65534 may run with the project's packages")
    with tempfile.TemporaryDirectory() as scripts:
        os.chmod(scripts, 0o755)
        script = Path(scripts) / "as_a_user.py"
        script.write_text(AS_A_USER)
        script.chmod(0o644)
        probe = textwrap.dedent(WRITE_SYSCTLS).replace("__names__", repr(list(SYSCTLS)))
        probe += "\nimport os\nprint('uid', os.getuid())\n"
        before = {name: _sysctl(name).read_text() for name in SYSCTLS}
        try:
            done = subprocess.run(
                [*python, str(script), probe],
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": _user_path(), "LANG": "C.UTF-8"},
                capture_output=True,
                text=True,
                check=False,
                cwd="/",
                timeout=300,
            )
        finally:
            for name, value in before.items():
                if _sysctl(name).read_text() != value:
                    _sysctl(name).write_text(value)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["uid"] == 65534 and result["available"], result
    probe_output = result["probe"]["output"]
    for name in SYSCTLS:
        assert f"{name} REFUSED" in probe_output, probe_output
    assert "PROC_SYS_MOUNT ro," in probe_output, probe_output
    assert "uid 65534" in probe_output, probe_output
    assert result["limited"]["ended_by"] == "write_limit", result["limited"]
    assert "WROTE ALL" not in result["limited"]["output"]


# -- where it cannot hold, it refuses ---------------------------------------------------

NO_USERNS = """#!/bin/sh
echo "unshare: unshare failed: Operation not permitted" >&2
exit 1
"""


def _refusals(server: NaviServerProcess) -> list[str]:
    server.llm.script(
        Reply(
            tool_calls=[
                code("print('ran')"),
                FakeToolCall(name="terminal", arguments={"command": "ls"}),
            ]
        ),
        Reply(text="done"),
    )
    session = server.create_session("sandboxed")
    assert server.send(session, "go").status_code == 200
    return [m["content"] for m in server.tool_messages(session)]


def _start_up_status(server: NaviServerProcess) -> dict[str, Any]:
    for line in server.logs().splitlines():
        if line.startswith("{") and '"tools.sandbox"' in line:
            entry: dict[str, Any] = json.loads(line)
            return entry
    raise AssertionError(f"no sandbox line at start-up:\n{server.logs()}")


@as_root
def test_without_user_namespaces_the_tools_refuse_and_say_how_to_allow_them(
    start_navi: StartNavi, tmp_path: Path
) -> None:
    # An unshare that fails as the kernel does where user namespaces are not allowed.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "unshare").write_text(NO_USERNS)
    (fake / "unshare").chmod(0o755)
    server = _start(
        start_navi, tmp_path, {"PATH": f"{fake}:{os.environ['PATH']}"}, canary_row=False
    )
    for message in _refusals(server):
        assert "ran" not in message.split("\n", 1)[-1] and "exit code" not in message, message
        assert "user namespaces must be allowed" in message, message
    status = _start_up_status(server)
    assert status["level"] == "error" and "user namespaces" in status["status"], status


@as_root
def test_a_sandbox_user_that_is_root_is_refused(start_navi: StartNavi, tmp_path: Path) -> None:
    server = _start(start_navi, tmp_path, {"NAVI_SANDBOX_USER": "0:0"}, canary_row=False)
    for message in _refusals(server):
        assert "never runs as root" in message and "exit code" not in message, message
    assert _start_up_status(server)["level"] == "error"
