"""An upload never writes through a symbolic link planted in the session's folder.

A sandboxed ``code_exec`` may write the session's folder, so it can leave a link there,
dangling or not (``report.py -> <data>/user_tools/report.py``); when the user later
uploads ``report.py``, the upload must not land where the link points (the user tools'
folder is hot-reloaded into the server). The links are planted here as such a tool
would leave them, and the same names are uploaded over the real HTTP API.

Before the change, ``while target.exists()`` took a dangling link's name as free and
``target.open("wb")`` wrote through it (and through a link to an existing file).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from navi.server.files import FileStore
from tests.security.conftest import CANARY_FILE_TEXT, NaviServerProcess

SESSION = "00000000-0000-4000-8000-00000000000a"


def session_folder(server: NaviServerProcess, session: str) -> Path:
    folder = server.root / "files" / session
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def snapshot(*folders: Path) -> dict[str, bytes]:
    """Every file below ``folders`` with its content (the places a link may lead)."""
    seen = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                seen[str(path)] = path.read_bytes()
    return seen


def upload(server: NaviServerProcess, session: str, name: str, content: bytes) -> dict[str, str]:
    with server.client() as http:
        response = http.post(f"/sessions/{session}/files", files={"file": (name, content)})
    assert response.status_code == 201, response.text
    info: dict[str, str] = response.json()
    return info


def test_a_dangling_link_is_not_written_through(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    sid = server.create_session()
    folder = session_folder(server, sid)
    tool = server.root / "user_tools" / "report.py"
    (folder / "report.py").symlink_to(tool)
    before = snapshot(server.root / "user_tools", server.root / "outside")

    info = upload(server, sid, "report.py", b"# the user's upload\nname = 'x'\n")

    assert not os.path.lexists(tool)
    assert snapshot(server.root / "user_tools", server.root / "outside") == before
    assert info["name"] == info["path"] == "report-1.py"
    assert (folder / "report-1.py").read_bytes() == b"# the user's upload\nname = 'x'\n"
    assert not (folder / "report-1.py").is_symlink()
    assert os.readlink(folder / "report.py") == str(tool)  # the link is left as it was


def test_a_link_to_an_outside_file_is_not_written_through(
    shared_navi: NaviServerProcess,
) -> None:
    server = shared_navi
    sid = server.create_session()
    folder = session_folder(server, sid)
    (folder / "canary.txt").symlink_to(server.canary_file)
    (folder / "canary-1.txt").symlink_to(server.root / "outside" / "not-yet.txt")

    info = upload(server, sid, "canary.txt", b"overwritten")

    assert server.canary_file.read_text() == CANARY_FILE_TEXT
    assert not os.path.lexists(server.root / "outside" / "not-yet.txt")
    assert info["name"] == "canary-2.txt"
    assert (folder / "canary-2.txt").read_bytes() == b"overwritten"


def test_a_linked_subfolder_is_not_written_into(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    sid = server.create_session()
    folder = session_folder(server, sid)
    outside = server.root / "outside"
    (folder / "docs").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)

    # A folder in the name is dropped (the upload lands in the session's folder itself),
    # and the link's own name is taken.
    nested = upload(server, sid, "docs/canary.txt", b"through the folder")
    same = upload(server, sid, "docs", b"over the link")

    assert snapshot(outside) == before
    assert nested["name"] == "canary.txt" and same["name"] == "docs-1"
    assert (folder / "canary.txt").read_bytes() == b"through the folder"
    assert (folder / "docs-1").read_bytes() == b"over the link"


def test_a_session_folder_that_is_a_link_takes_no_upload(shared_navi: NaviServerProcess) -> None:
    server = shared_navi
    sid = server.create_session()
    folder = server.root / "files" / sid
    if folder.exists():
        folder.rmdir()
    folder.symlink_to(server.root / "outside", target_is_directory=True)
    before = snapshot(server.root / "outside")
    try:
        with server.client() as http:
            response = http.post(f"/sessions/{sid}/files", files={"file": ("a.txt", b"x")})
        assert response.status_code == 409, response.text
        assert "not a folder" in response.json()["error"]
        assert snapshot(server.root / "outside") == before
    finally:
        folder.unlink()


@pytest.mark.parametrize("walk", [False, True], ids=["openat2", "component-walk"])
def test_every_taken_name_is_skipped_in_process(
    tmp_path: Path, walk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways ``tools.beneath`` opens (openat2, and the walk where it is missing)."""
    from tools import beneath

    if walk:
        monkeypatch.setattr(beneath, "_openat2", None)
    elif not beneath.has_openat2():
        pytest.skip("no openat2 here")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("kept")
    files = FileStore(tmp_path / "files", ttl_hours=1)
    folder = files.directory(SESSION)
    folder.mkdir(parents=True)
    (folder / "a.txt").symlink_to(outside / "new.txt")  # dangling
    (folder / "a-1.txt").symlink_to(outside / "kept.txt")
    (folder / "a-2.txt").mkdir()
    (folder / "a-3.txt").write_text("mine")

    path, out = files.create(SESSION, "a.txt")
    with out:
        out.write(b"upload")

    assert path == folder / "a-4.txt" and path.read_bytes() == b"upload"
    assert sorted(p.name for p in outside.iterdir()) == ["kept.txt"]
    assert (outside / "kept.txt").read_text() == "kept"
    assert (folder / "a-3.txt").read_text() == "mine"
