"""The sandbox's command line and its refusals (the escapes themselves are driven
through a real server in tests/security/test_sandbox.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tools.sandbox import (
    SandboxSpec,
    SandboxUnavailable,
    bwrap_command,
    python_install,
    sandbox_status,
)


def spec(tmp_path: Path, **kw: object) -> SandboxSpec:
    return SandboxSpec(workdir=tmp_path, env={"PATH": "/usr/bin"}, **kw)  # type: ignore[arg-type]


def test_no_network_unless_granted(tmp_path: Path) -> None:
    assert "--unshare-net" in bwrap_command("bwrap", ["true"], spec(tmp_path))
    granted = bwrap_command("bwrap", ["true"], spec(tmp_path, network=True))
    assert "--unshare-net" not in granted  # the host's: only an operator's MCP server


def test_a_user_mode_network_is_a_namespace_of_its_own(tmp_path: Path) -> None:
    options = ["--info-fd", "5", "--block-fd", "6", "--ro-bind-data", "7", "/etc/resolv.conf"]
    command = bwrap_command("bwrap", ["true"], spec(tmp_path, network=True), user_network=options)
    assert "--unshare-net" in command
    start = command.index("--info-fd")
    assert command[start : start + len(options)] == options
    # Its resolv.conf (naming slirp4netns's DNS) goes over the host's, bound before it.
    assert command.index("/etc/resolv.conf") < start


def test_only_system_folders_and_the_call_s_own_are_mounted(tmp_path: Path) -> None:
    files = tmp_path / "files"
    command = bwrap_command("bwrap", ["true"], spec(tmp_path, writable=(files,)))
    sources = {command[i + 1] for i, arg in enumerate(command) if arg.endswith("bind")}
    assert str(files) in sources and str(tmp_path) in sources
    for private in ("/", "/root", "/home", "/tmp", "/work", os.getcwd(), os.path.expanduser("~")):
        assert private not in sources
    assert {"--clearenv", "--die-with-parent", "--unshare-pid", "--proc"} <= set(command)
    assert command[command.index("--tmpfs") + 1] == "/tmp"


def test_a_read_only_call_has_nothing_writable(tmp_path: Path) -> None:
    command = bwrap_command("bwrap", ["true"], spec(tmp_path, writable_workdir=False))
    assert "--bind" not in command
    assert command[-2:] == ["--", "true"]
    remounts = [command[i + 1] for i, arg in enumerate(command) if arg == "--remount-ro"]
    assert remounts == ["/tmp", "/dev/shm", "/"]


def test_python_install_is_mounted_but_never_a_folder_holding_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Path(sys.base_prefix) in python_install(sys.executable) or Path(
        os.path.realpath(sys.executable)
    ).parent.parent in python_install(sys.executable)
    fake_home = tmp_path / "home"
    # A venv in tmp_path, which holds the home folder: the sandbox will not mount it.
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    with pytest.raises(SandboxUnavailable, match="Set CODE_EXEC_PYTHON"):
        python_install(str(python))


as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root switches to the sandbox user")


def _tree(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "file.txt").write_text("x")
    (root / "sub" / "deep.txt").write_text("y")
    return root


def _owners(root: Path) -> set[int]:
    return {os.lstat(p).st_uid for p in (root, *root.rglob("*"))}


@as_root
def test_a_read_only_working_directory_is_never_given_away(tmp_path: Path) -> None:
    # The user-tool check shows the project's own tree this way.
    tree = _tree(tmp_path / "project")
    bwrap_command("bwrap", ["true"], spec(tree, writable_workdir=False))
    assert _owners(tree) == {0}


@as_root
def test_an_operators_writable_folder_gets_an_acl_entry_and_keeps_its_content(
    tmp_path: Path,
) -> None:
    theirs = _tree(tmp_path / "operator")
    theirs.chmod(0o700)
    bwrap_command("bwrap", ["true"], spec(tmp_path / "work", writable=(theirs,)))
    assert _owners(theirs) == {0}
    assert os.getxattr(theirs, "system.posix_acl_access")  # the sandbox user may write


@as_root
def test_navis_own_folders_are_handed_to_the_sandbox_user(tmp_path: Path) -> None:
    work, files = (tmp_path / "work"), _tree(tmp_path / "files")
    work.mkdir()
    bwrap_command("bwrap", ["true"], spec(work, owned=(files,)))
    status = sandbox_status()
    assert status.drop is not None
    assert _owners(files) == {status.drop.user.uid} and _owners(work) == {status.drop.user.uid}


@pytest.mark.anyio
async def test_a_call_whose_sandbox_failed_to_start_is_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap 0.8 now and then fails to bring up loopback before the command runs:
    that call is started again (a few times at most); a command that failed on its own
    is not."""
    import anyio

    import tools.sandbox as sandbox
    from tools.processes import ProcessOutcome

    failed = ProcessOutcome(1, "bwrap: loopback: Failed RTM_NEWADDR: No child processes\n", "exit")
    ran = ProcessOutcome(0, "hello\n", "exit")
    own = ProcessOutcome(1, "Traceback …\nbwrap: loopback: Failed RTM_NEWADDR: x\n", "exit")

    async def call(outcomes: list[ProcessOutcome]) -> tuple[ProcessOutcome, int]:
        left = list(outcomes)

        async def fake_run(*args: object, **kw: object) -> ProcessOutcome:
            return left.pop(0)

        monkeypatch.setattr(sandbox, "_run", fake_run)
        monkeypatch.setattr(sandbox, "require_sandbox", _bwrap)
        limits = sandbox.SandboxLimits(memory_bytes=1 << 28, max_processes=64)
        outcome = await sandbox.run_sandboxed(
            ["true"], spec=spec(tmp_path), limits=limits, timeout_s=5, stop=anyio.Event(),
            output_limit_bytes=1000, kill_grace_s=1,
        )  # fmt: skip
        return outcome, len(outcomes) - len(left)

    assert await call([failed, ran]) == (ran, 2)
    assert await call([failed, failed, ran]) == (ran, 3)  # seen twice in a row under load
    attempts = sandbox.LOOPBACK_ATTEMPTS
    assert await call([failed] * attempts) == (failed, attempts)  # then it is the answer
    assert await call([own, ran]) == (own, 1)
    assert await call([ran]) == (ran, 1)
    # An MCP server's stderr tail, on one line (navi/mcp/client.py), is recognised too.
    assert sandbox.loopback_failed("bwrap: loopback: Failed RTM_NEWADDR: No child processes")
    assert not sandbox.loopback_failed("x bwrap: loopback: Failed RTM_NEWADDR: y")


async def _bwrap() -> str:
    return "/usr/bin/bwrap"
