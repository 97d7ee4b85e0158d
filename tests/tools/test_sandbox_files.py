"""The folders of a sandboxed call: handed to the sandbox user, opened to it read-only,
measured (tools/sandbox_files.py). Real files, real chown and ACLs (as root)."""

from __future__ import annotations

import os
import shutil
import stat
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.sandbox_files import folder_usage, grant_read, grant_write, hand_over
from tools.sandbox_user import SandboxUser

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root gives files away")
SANDBOX = SandboxUser(uid=64123, gid=64124)


def _owner(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_uid, info.st_gid


@as_root
def test_hand_over_gives_folders_and_files_never_what_a_link_names(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("server's")
    other_dir = tmp_path / "server-folder"
    other_dir.mkdir()
    folder = tmp_path / "session"
    (folder / "sub").mkdir(parents=True)
    (folder / "upload.csv").write_text("a,b")
    (folder / "sub" / "deep.txt").write_text("x")
    (folder / "link").symlink_to(outside)
    (folder / "dir-link").symlink_to(other_dir)
    os.link(outside, folder / "second-name")  # a name of a file that lives elsewhere too
    os.mkfifo(folder / "fifo")
    hand_over([folder], SANDBOX)
    for given in (folder, folder / "sub", folder / "upload.csv", folder / "sub" / "deep.txt"):
        assert _owner(given) == (SANDBOX.uid, SANDBOX.gid), given
    for kept in (outside, other_dir, folder / "second-name", folder / "fifo", folder / "link"):
        assert _owner(kept) == (0, 0), kept


@as_root
def test_hand_over_leaves_other_owners_alone(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    folder.mkdir()
    theirs = folder / "theirs.txt"
    theirs.write_text("x")
    os.chown(theirs, 4242, 4242)
    hand_over([folder], SANDBOX)
    assert _owner(theirs) == (4242, 4242)


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary folder every user may enter (pytest's own are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="navi-acl-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@as_root
def test_grant_read_adds_one_acl_entry_where_the_mode_does_not_let_it_read(
    open_tmp: Path,
) -> None:
    tmp_path = open_tmp
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    public = tmp_path / "public"
    public.mkdir()
    public.chmod(0o755)
    before = os.getxattr(public, "system.posix_acl_access") if _has_acl(public) else None
    grant_read([private, public], SANDBOX)
    assert not _has_acl(public) and before is None  # readable already: untouched
    mode = stat.S_IMODE(os.stat(private).st_mode)
    assert mode & 0o007 == 0  # others still get nothing
    # The sandbox user now lists and enters it, no one else does.
    probe = ["setpriv", f"--reuid={SANDBOX.uid}", f"--regid={SANDBOX.gid}", "--clear-groups"]
    listed = subprocess.run([*probe, "ls", str(private)], capture_output=True, check=False)
    assert listed.returncode == 0, listed.stderr
    other = ["setpriv", "--reuid=64999", "--regid=64999", "--clear-groups", "ls", str(private)]
    assert subprocess.run(other, capture_output=True, check=False).returncode != 0


@as_root
def test_grant_read_never_widens_another_named_entry(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o700)
    folder.chmod(0o700)
    # An ACL with bob (uid 4242) at rwx but a mask of r-x: bob may not write.
    entries = [(0x01, 7, 0xFFFFFFFF), (0x02, 7, 4242), (0x04, 0, 0xFFFFFFFF)]
    entries += [(0x10, 5, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]
    raw = struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)
    os.setxattr(folder, "system.posix_acl_access", raw)
    grant_read([folder], SANDBOX)
    after = os.getxattr(folder, "system.posix_acl_access")
    parsed = list(struct.iter_unpack("<HHI", after[4:]))
    assert (0x10, 5, 0xFFFFFFFF) in parsed  # the mask as it was
    assert (0x02, 5, SANDBOX.uid) in parsed and (0x02, 7, 4242) in parsed


def _has_acl(path: Path) -> bool:
    try:
        return bool(os.getxattr(path, "system.posix_acl_access"))
    except OSError:
        return False


def test_usage_counts_each_inode_once_and_every_entry(tmp_path: Path) -> None:
    empty = folder_usage([tmp_path])
    (tmp_path / "a.bin").write_bytes(b"x" * 100_000)
    os.link(tmp_path / "a.bin", tmp_path / "b.bin")
    (tmp_path / "link").symlink_to("/usr")  # counted as an entry, never followed
    one_file = folder_usage([tmp_path])
    assert 100_000 <= one_file - empty < 100_000 + 3 * 8192
    for n in range(100):  # empty files are not free
        (tmp_path / f"e{n}").touch()
    assert folder_usage([tmp_path]) - one_file >= 100 * 4096


def test_usage_sees_into_a_folder_the_code_locked(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "big.bin").write_bytes(b"x" * 200_000)
    locked.chmod(0)
    try:
        assert folder_usage([tmp_path]) >= 200_000
    finally:
        locked.chmod(0o700)


@as_root
def test_grant_write_lets_it_make_files_in_a_private_folder_and_changes_nothing_in_it(
    open_tmp: Path,
) -> None:
    folder = open_tmp / "operator"
    folder.mkdir()
    folder.chmod(0o700)
    (folder / "theirs.txt").write_text("x")
    (folder / "theirs.txt").chmod(0o600)
    grant_write([folder], SANDBOX)
    probe = ["setpriv", f"--reuid={SANDBOX.uid}", f"--regid={SANDBOX.gid}", "--clear-groups"]
    made = subprocess.run([*probe, "touch", str(folder / "new.txt")], capture_output=True)
    assert made.returncode == 0, made.stderr
    read = subprocess.run([*probe, "cat", str(folder / "theirs.txt")], capture_output=True)
    assert read.returncode != 0  # what was there stays as it was
    assert _owner(folder / "theirs.txt") == (0, 0) and _owner(folder) == (0, 0)
