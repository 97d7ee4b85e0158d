from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from tools import ToolContext, ToolRegistry, ToolSettings

pytestmark = pytest.mark.anyio


def with_settings(ctx: ToolContext, **changes: object) -> ToolContext:
    settings = msgspec.structs.replace(ctx.settings, **changes)
    return ToolContext.standalone(ctx.session_id, ctx.files_dir, settings=settings)


def text_of(path: Path) -> str:
    return path.read_text()


async def fs(registry: ToolRegistry, ctx: ToolContext, **args: object) -> tuple[bool, str]:
    result = await registry.execute("filesystem", dict(args), ctx)
    return result.success, result.output


async def test_write_read_list_mkdir_delete(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    assert await fs(registry, ctx, action="write", path="notes/a.txt", content="hello") == (
        True,
        "Wrote 5 characters to notes/a.txt",
    )
    assert (files_dir / "notes" / "a.txt").read_text() == "hello"
    await fs(registry, ctx, action="write", path="notes/a.txt", content=" world", append=True)
    assert await fs(registry, ctx, action="read", path="notes/a.txt") == (True, "hello world")
    assert await fs(registry, ctx, action="mkdir", path="notes/sub") == (
        True,
        "Directory ready: notes/sub",
    )
    ok, listing = await fs(registry, ctx, action="list", path="notes")
    assert ok and listing == "notes:\n  sub/\n  a.txt  (11 bytes)"
    ok, message = await fs(registry, ctx, action="delete", path="notes")
    assert not ok and "not empty; pass recursive=true" in message
    assert await fs(registry, ctx, action="delete", path="notes/a.txt") == (
        True,
        "Deleted notes/a.txt",
    )
    assert await fs(registry, ctx, action="delete", path="notes", recursive=True) == (
        True,
        "Deleted directory notes",
    )
    assert not (files_dir / "notes").exists()


async def test_clear_errors_for_bad_requests(registry: ToolRegistry, ctx: ToolContext) -> None:
    assert await fs(registry, ctx, action="read", path="missing.txt") == (
        False,
        "Error: no such file: missing.txt",
    )
    ok, message = await fs(registry, ctx, action="write", path="x.txt")
    assert not ok and "needs 'content'" in message
    ok, message = await fs(registry, ctx, action="read")
    assert not ok and "needs a 'path'" in message
    ok, message = await fs(registry, ctx, action="delete", path=".")
    assert not ok and "refusing to delete" in message


async def test_binary_and_large_files(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    (files_dir / "blob.bin").write_bytes(b"\x00\x01\x02")
    ok, message = await fs(registry, ctx, action="read", path="blob.bin")
    assert not ok and "binary file" in message
    (files_dir / "big.txt").write_text("z" * 30_000)
    ok, text = await fs(registry, ctx, action="read", path="big.txt")
    assert ok and text.startswith("z" * 20_000)
    assert text.endswith("[... output truncated: 10000 more characters]")


# ---------------------------------------------------------------- security


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("top secret")
    return secret


@pytest.mark.parametrize(
    "path",
    [
        "../../outside/secret.txt",
        "notes/../../../outside/secret.txt",
        "/etc/passwd",
        "~/.bashrc",
        "..",
    ],
)
async def test_escapes_are_refused(registry: ToolRegistry, ctx: ToolContext, path: str) -> None:
    for action in ("read", "list", "write", "delete"):
        ok, message = await fs(registry, ctx, action=action, path=path, content="x")
        assert not ok
        assert "access denied" in message and "outside the allowed paths" in message


async def test_absolute_path_to_the_secret_is_refused(
    registry: ToolRegistry, ctx: ToolContext, outside: Path
) -> None:
    ok, message = await fs(registry, ctx, action="read", path=str(outside))
    assert not ok and "access denied" in message
    ok, _ = await fs(registry, ctx, action="write", path=str(outside), content="pwned")
    assert not ok
    assert text_of(outside) == "top secret"


async def test_symlinks_out_are_refused(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path, outside: Path
) -> None:
    (files_dir / "link.txt").symlink_to(outside)
    (files_dir / "linkdir").symlink_to(outside.parent, target_is_directory=True)
    (files_dir / "dangling").symlink_to(outside.parent / "new.txt")
    for action, path in [
        ("read", "link.txt"),
        ("write", "link.txt"),
        ("read", "linkdir/secret.txt"),
        ("list", "linkdir"),
        ("write", "linkdir/new.txt"),
        ("write", "dangling"),
        ("delete", "link.txt"),
    ]:
        ok, message = await fs(registry, ctx, action=action, path=path, content="pwned")
        assert not ok, (action, path)
        assert "symbolic link; the filesystem tool does not follow links" in message
    assert text_of(outside) == "top secret"
    assert not (outside.parent / "new.txt").exists()


async def test_symlinks_inside_the_root_are_not_followed_either(
    registry: ToolRegistry, ctx: ToolContext, files_dir: Path
) -> None:
    # A link that points inside today may point outside a moment later: none is followed.
    (files_dir / "real.txt").write_text("ok")
    (files_dir / "alias.txt").symlink_to(files_dir / "real.txt")
    ok, message = await fs(registry, ctx, action="read", path="alias.txt")
    assert not ok and "does not follow links" in message
    assert await fs(registry, ctx, action="read", path="real.txt") == (True, "ok")
    ok, listing = await fs(registry, ctx, action="list")
    assert ok and "alias.txt -> (symlink)" in listing


@pytest.mark.parametrize(
    "path",
    ["..%2f..%2foutside%2fsecret.txt", "%2e%2e/%2e%2e/outside/secret.txt", "..%5c..%5csecret"],
)
async def test_encoded_names_are_refused(
    registry: ToolRegistry, ctx: ToolContext, path: str
) -> None:
    ok, message = await fs(registry, ctx, action="read", path=path)
    assert not ok and "percent-encoded" in message


async def test_nul_byte_is_refused(registry: ToolRegistry, ctx: ToolContext) -> None:
    ok, message = await fs(registry, ctx, action="read", path="a\x00b")
    assert not ok and "NUL byte" in message


async def test_extra_allowed_roots_and_no_limit(
    registry: ToolRegistry, ctx: ToolContext, outside: Path
) -> None:
    allowed = with_settings(ctx, fs_allowed_paths=(str(outside.parent),))
    assert await fs(registry, allowed, action="read", path=str(outside)) == (True, "top secret")
    ok, _ = await fs(registry, allowed, action="read", path="/etc/hostname")
    assert not ok
    # A prefix is not a parent: /x/outside-other is not inside /x/outside.
    sibling = outside.parent.with_name("outside-other")
    sibling.mkdir()
    ok, message = await fs(registry, allowed, action="list", path=str(sibling))
    assert not ok and "access denied" in message
    unlimited = with_settings(ctx, fs_allowed_paths=("*",))
    assert (await fs(registry, unlimited, action="read", path=str(outside)))[0]


def test_settings_from_env_parse_the_allowlist(tmp_path: Path) -> None:
    settings = ToolSettings.from_env({"FS_ALLOWED_PATHS": f"{tmp_path}, /srv/data ,"})
    assert settings.fs_allowed_paths == (str(tmp_path), "/srv/data")
    assert ToolSettings.from_env({}).fs_allowed_paths is None
    assert os.sep in str(tmp_path)
