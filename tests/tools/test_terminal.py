from __future__ import annotations

import shutil
from pathlib import Path

import msgspec
import pytest

from tools import ToolContext, ToolRegistry, ToolResult
from tools.builtin.command_args import ArgumentRefused, check_arguments
from tools.builtin.command_line import CommandRefused, resolve_executable, split_command
from tools.sandbox import sandbox_status

pytestmark = pytest.mark.anyio
PATH = "/usr/local/bin:/usr/bin:/bin"


def allow(ctx: ToolContext, *commands: str) -> ToolContext:
    settings = msgspec.structs.replace(ctx.settings, terminal_allowed_commands=commands)
    return ToolContext.standalone(ctx.session_id, ctx.files_dir, settings=settings)


async def run(registry: ToolRegistry, ctx: ToolContext, command: str) -> ToolResult:
    return await registry.execute("terminal", {"command": command}, ctx)


async def test_an_allowed_command_runs_in_the_files_dir(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "hello.txt").write_text("hi there\n")
    result = await run(registry, ctx, "cat hello.txt")
    assert result.success
    assert result.output == "exit code: 0\nhi there\n"
    listing = await run(registry, ctx, "ls")
    assert "hello.txt" in listing.output


async def test_quoted_arguments_are_literal(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await run(registry, ctx, "echo 'a|b; c && $(rm -rf x) `id` > f' \"plain text\"")
    assert result.output == "exit code: 0\na|b; c && $(rm -rf x) `id` > f plain text\n"


async def test_nonzero_exit_is_a_failed_call_with_output(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    result = await run(registry, ctx, "ls does-not-exist")
    assert not result.success
    assert result.error == "exit code 2"
    assert "does-not-exist" in result.output


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("echo hi; rm -rf /", "';' (command chaining)"),
        ("echo hi && rm -rf /", "'&' (background or '&&' chaining)"),
        ("echo hi || rm x", "'|' (pipes or '||')"),
        ("cat /etc/passwd | grep root", "'|' (pipes or '||')"),
        ("echo $(rm -rf /)", "'$' (variable expansion or $(...) substitution)"),
        ('echo "$(rm -rf /)"', "'$' (variable expansion or $(...) substitution)"),
        ("echo `rm -rf /`", "backticks (command substitution)"),
        ('echo "`rm -rf /`"', "backticks (command substitution)"),
        ("echo pwned > file.txt", "'>' (redirection)"),
        ("cat < /etc/passwd", "'<' (redirection)"),
        ("echo hi >> f", "'>' (redirection)"),
        ("echo $HOME", "'$' (variable expansion"),
        ("echo hi &", "'&' (background"),
        ("echo hi\nrm -rf /", "a newline (command separator)"),
        ("(rm -rf /)", "'(' (subshells)"),
        ("ls *.txt", "'*' (wildcards are not expanded"),
        ("echo {a,b}", "'{' (brace expansion)"),
        ("echo 'unbalanced", "unbalanced ' quote"),
    ],
)
async def test_shell_syntax_is_refused_with_a_clear_message(
    registry: ToolRegistry, ctx: ToolContext, command: str, reason: str
) -> None:
    result = await run(registry, ctx, command)
    assert not result.success
    assert reason in (result.error or "")
    if "quote" not in reason:
        assert "No shell is used" in (result.error or "")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("rm -rf /", "command 'rm' is not allowed. Allowed commands: cat"),
        ("PATH=/tmp ls", "environment assignments like 'PATH=/tmp' are not allowed"),
        ("LD_PRELOAD=/x.so ls", "environment assignments like 'LD_PRELOAD=/x.so'"),
        ("env rm -rf /", "command 'env' is not allowed"),
        ("/usr/bin/../bin/rm -rf /", "command '/usr/bin/../bin/rm' (rm) is not allowed"),
        ("/bin/sh -c id", "(sh) is not allowed"),
        ("sudo ls", "command 'sudo' is not allowed"),
        ("", "argument 'command': must have at least 1 character(s)"),
        ("   ", "the command is empty"),
    ],
)
async def test_the_allowlist_holds(
    registry: ToolRegistry, ctx: ToolContext, command: str, message: str
) -> None:
    result = await run(registry, ctx, command)
    assert not result.success
    assert message in (result.error or ""), result.error


async def test_a_lookalike_executable_is_not_the_allowed_one(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    fake = files_dir / "ls"
    fake.write_text("#!/bin/sh\necho pwned\n")
    fake.chmod(0o755)
    result = await run(registry, ctx, "./ls")
    assert not result.success
    assert "is not the allowed 'ls'" in (result.error or "")
    real_ls = shutil.which("ls", path=PATH)
    assert real_ls is not None
    by_path = await run(registry, ctx, real_ls)
    assert by_path.success


async def test_the_child_does_not_see_server_secrets(
    registry: ToolRegistry, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = await run(registry, allow(ctx, "env"), "env")
    assert result.success
    assert "sk-secret" not in result.output
    assert "PATH=" in result.output


async def test_allow_all_still_uses_no_shell(registry: ToolRegistry, ctx: ToolContext) -> None:
    anything = allow(ctx, "*")
    assert (await run(registry, anything, "printf ok")).output == "exit code: 0\nok"
    refused = await run(registry, anything, "printf ok; rm -rf /")
    assert "No shell is used" in (refused.error or "")
    missing = await run(registry, anything, "no-such-program-xyz")
    assert missing.error == "command not found: no-such-program-xyz"


async def test_timeout_kills_the_command(registry: ToolRegistry, ctx: ToolContext) -> None:
    result = await registry.execute(
        "terminal", {"command": "sleep 30", "timeout_s": 1}, allow(ctx, "sleep")
    )
    assert not result.success
    assert result.failure_reason == "timeout"
    assert "timed out after 1s; the process tree was killed" in result.output


def test_split_command_and_resolution_units() -> None:
    assert split_command("grep -n 'a b' \"c d\" e\\ f") == ["grep", "-n", "a b", "c d", "e f"]
    with pytest.raises(CommandRefused):
        split_command("a\\\nb; c")
    ls = resolve_executable("ls", ["ls"], PATH)
    assert Path(ls).name == "ls"
    with pytest.raises(CommandRefused, match="not allowed"):
        resolve_executable("rm", ["ls"], PATH)
    with pytest.raises(CommandRefused, match="not allowed"):
        resolve_executable("/usr/bin/./rm", ["ls"], PATH)


@pytest.mark.parametrize(
    "command",
    [
        "sort --compress-program=python3 -S 4K -T . notes.txt",
        "sort --compress=python3 notes.txt",
        "sort -o out.txt notes.txt",
        "sort -uo out.txt notes.txt",
        "sort -oout.txt notes.txt",
        "sort --output out.txt notes.txt",
        "sort -T . notes.txt",
        "sort --temporary-directory=. notes.txt",
        "uniq notes.txt out.txt",
        "uniq -c notes.txt out.txt",
        "date -s 2001-01-01",
        "date --set=2001-01-01",
        "date -us 2001-01-01",
        "date 0101000001",
        "hostname pwned",
        "hostname -F name.txt",
        "hostname -b",
        "file -C -m magic",
        "file -z archive.gz",
        "diff -l a b",
        "ps e",
        "ps auxeww",
    ],
)
def test_read_only_commands_refuse_options_that_write_or_run(command: str) -> None:
    argv = split_command(command)
    with pytest.raises(ArgumentRefused):
        check_arguments(argv[0], argv[1:])


@pytest.mark.parametrize(
    "command",
    [
        "sort -k 2 -t , -n notes.txt",
        "sort -t o notes.txt",
        "sort -S 4K -r notes.txt",
        "uniq -c notes.txt",
        "uniq -f 1 notes.txt",
        "uniq --skip-fields 1 notes.txt",
        "date +%s",
        "date -u -d yesterday +%F",
        "date -Iseconds",
        "hostname -f",
        "file -b notes.txt",
        "diff -u a b",
        "ps aux",
        "ps -ef",
        "ps -C sleep -o pid",
        "grep -rn --exclude=x pattern .",
        "ls -la --sort=size",
        "git -c alias.x=y x",  # no rule: only the sandbox holds it
    ],
)
def test_read_only_commands_keep_their_ordinary_options(command: str) -> None:
    argv = split_command(command)
    check_arguments(argv[0], argv[1:])


async def test_refused_arguments_never_run(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "notes.txt").write_text("b\na\n")
    result = await run(registry, ctx, "sort -o sorted.txt notes.txt")
    assert not result.success
    assert "'sort -o' is not allowed: it writes a file" in (result.error or "")
    assert not (files_dir / "sorted.txt").exists()


async def test_without_bubblewrap_the_terminal_refuses_and_says_how_to_install_it(
    registry: ToolRegistry, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no bwrap on it
    sandbox_status.cache_clear()
    try:
        result = await run(registry, ctx, "ls")
    finally:
        monkeypatch.undo()
        sandbox_status.cache_clear()
    assert not result.success
    assert "apt-get install bubblewrap" in (result.error or "")
    assert "NAVI_UNSANDBOXED_TOOLS=1" in (result.error or "")


async def test_unsandboxed_the_terminal_still_refuses_process_files(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    settings = msgspec.structs.replace(ctx.settings, unsandboxed_tools=True)
    unsandboxed = ToolContext.standalone(ctx.session_id, ctx.files_dir, settings=settings)
    result = await run(registry, unsandboxed, "cat /proc/1/environ")
    assert "names a process's files in /proc" in (result.error or "")
    assert (await run(registry, unsandboxed, "echo plain")).output == "exit code: 0\nplain\n"


async def test_the_rules_follow_the_program_under_another_name(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    real_sort = shutil.which("sort", path=PATH)
    assert real_sort is not None
    (files_dir / "mysort").symlink_to(real_sort)
    (files_dir / "notes.txt").write_text("b\na\n")
    command = f"{files_dir / 'mysort'} -o out.txt notes.txt"
    result = await run(registry, allow(ctx, "*"), command)
    assert "'sort -o' is not allowed" in (result.error or ""), result.error
    assert not (files_dir / "out.txt").exists()
