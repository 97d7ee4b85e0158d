"""The blob store: each image kept once, usage against the quota, freeing on release."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from navi.blobs import BlobStore, is_sha256, keep_tool_image
from navi.session.errors import QuotaExceeded
from tools import ok

PNG = b"\x89PNG\r\n\x1a\n" + b"\x01" * 1000
OTHER = b"\xff\xd8\xff\xe0" + b"\x02" * 2000


@pytest.fixture
def blobs(tmp_path: Path) -> Iterator[BlobStore]:
    store = BlobStore(tmp_path / "blobs", quota_bytes=10_000)
    yield store
    store.close()


def stored_files(blobs: BlobStore) -> list[Path]:
    return [p for p in blobs.root.glob("??/*") if p.is_file()]


def test_an_image_is_stored_once_by_its_hash(blobs: BlobStore) -> None:
    (ref,) = blobs.put_images([PNG], user_id="ann", session_id="s1")
    (again,) = blobs.put_images([PNG], user_id="ann", session_id="s2")
    assert ref == again
    assert ref.sha256 == hashlib.sha256(PNG).hexdigest()
    assert (ref.size, ref.media_type) == (len(PNG), "image/png")
    assert stored_files(blobs) == [blobs.path(ref.sha256)]
    assert blobs.read(ref.sha256) == PNG
    assert blobs.usage("ann") == len(PNG)  # counted once for the user


def test_a_blob_is_held_by_the_users_who_stored_it(blobs: BlobStore) -> None:
    (ref,) = blobs.put_images([PNG], user_id="ann", session_id="s1")
    assert blobs.held_by("ann", ref.sha256)
    assert not blobs.held_by("bob", ref.sha256)
    assert blobs.read_held("ann", ref.sha256) == PNG
    assert blobs.read_held("bob", ref.sha256) is None
    blobs.release("s1")
    assert not blobs.held_by("ann", ref.sha256)


def test_media_type_comes_from_the_bytes(blobs: BlobStore) -> None:
    (jpeg, unknown) = blobs.put_images([OTHER, b"plain text"], user_id="ann", session_id="s")
    assert jpeg.media_type == "image/jpeg"
    assert unknown.media_type == "application/octet-stream"


def test_releasing_frees_only_blobs_nothing_else_refers_to(blobs: BlobStore) -> None:
    (shared,) = blobs.put_images([PNG], user_id="ann", session_id="s1")
    (own,) = blobs.put_images([OTHER], user_id="ann", session_id="s1")
    blobs.put_images([PNG], user_id="bob", session_id="s2")
    assert blobs.release("s1") == [own.sha256]
    assert blobs.read(shared.sha256) == PNG
    assert blobs.read(own.sha256) is None
    assert blobs.usage("ann") == 0
    assert blobs.release("s2") == [shared.sha256]
    assert stored_files(blobs) == []


def test_over_the_quota_nothing_is_stored(blobs: BlobStore) -> None:
    big = b"\x00" * 6000
    blobs.put_images([big], user_id="ann", session_id="s1")
    with pytest.raises(QuotaExceeded, match="NAVI_USER_QUOTA_MB"):
        blobs.put_images([PNG, b"\x03" * 5000], user_id="ann", session_id="s1")
    assert len(stored_files(blobs)) == 1
    # An image the user already has costs nothing; another user has their own quota.
    blobs.put_images([big], user_id="ann", session_id="s2")
    blobs.put_images([b"\x03" * 5000], user_id="bob", session_id="s3")


def test_uploads_count_and_the_same_content_is_kept_once(blobs: BlobStore, tmp_path: Path) -> None:
    folder = tmp_path / "files" / "s1"
    folder.mkdir(parents=True)
    first, second = folder / "a.txt", folder / "b.txt"
    first.write_bytes(b"x" * 3000)
    sha = hashlib.sha256(b"x" * 3000).hexdigest()
    # Each upload is counted once written (the folder is measured with it).
    assert blobs.add_upload(first, user_id="ann", session_id="s1", sha256=sha) is None
    second.write_bytes(b"x" * 3000)
    assert blobs.add_upload(second, user_id="ann", session_id="s1", sha256=sha) == "a.txt"
    second.unlink()  # the caller keeps the earlier one
    assert blobs.usage("ann") == 3000
    big = folder / "big.bin"
    big.write_bytes(b"y" * 8000)
    with pytest.raises(QuotaExceeded):
        blobs.add_upload(big, user_id="ann", session_id="s1", sha256="0" * 64)
    with pytest.raises(QuotaExceeded):
        blobs.check_room("ann", 8000)
    blobs.forget_uploads("s1")
    assert blobs.usage("ann") == 0


def test_the_index_survives_a_restart(blobs: BlobStore) -> None:
    blobs.put_images([PNG], user_id="ann", session_id="s1")
    blobs.close()
    again = BlobStore(blobs.root, quota_bytes=10_000)
    try:
        assert again.usage("ann") == len(PNG)
        assert len(again.release("s1")) == 1
    finally:
        again.close()


@pytest.mark.parametrize(
    "value", ["", "../" + "a" * 61, "A" * 64, "a" * 63, "a" * 65, "g" * 64, "a" * 63 + "/"]
)
def test_only_64_lowercase_hex_digits_name_a_blob(blobs: BlobStore, value: str) -> None:
    assert not is_sha256(value)
    with pytest.raises(ValueError):
        blobs.path(value)
    assert blobs.read(value) is None


async def test_a_tools_image_becomes_a_reference_or_fails_past_the_quota(
    blobs: BlobStore,
) -> None:
    shown = ok("loaded", is_image=True, base64=base64.b64encode(PNG).decode(), mime_type="x")
    kept = await keep_tool_image(blobs, shown, user_id="ann", session_id="s1")
    assert kept.success and "base64" not in kept.metadata
    assert kept.metadata["image"] == {
        "sha256": hashlib.sha256(PNG).hexdigest(),
        "size": len(PNG),
        "media_type": "image/png",
    }
    assert blobs.read(hashlib.sha256(PNG).hexdigest()) == PNG
    huge = ok("loaded", is_image=True, base64=base64.b64encode(b"\x00" * 20_000).decode())
    refused = await keep_tool_image(blobs, huge, user_id="ann", session_id="s1")
    assert not refused.success and "quota" in refused.output
    # Nothing else is touched.
    plain = ok("text")
    assert await keep_tool_image(blobs, plain, user_id="ann", session_id="s1") is plain


def test_session_folders_and_imports_count_against_the_quota(
    blobs: BlobStore, tmp_path: Path
) -> None:
    folder = tmp_path / "files" / "s1"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "out.bin").write_bytes(b"z" * 4000)
    os.link(folder / "sub" / "out.bin", folder / "same.bin")  # one file, counted once
    (folder / "elsewhere").symlink_to(tmp_path)  # not followed
    use = blobs.measure_folder(folder, user_id="ann", session_id="s1")
    assert (use.used, use.remaining, use.over) == (4000, 10_000 - 4000, False)
    blobs.add_import("s2", user_id="ann", size=5000)
    assert blobs.storage("ann").used == 9000 and blobs.storage("bob").used == 0
    with pytest.raises(QuotaExceeded):
        blobs.check_room("ann", 2000)
    (folder / "more.bin").write_bytes(b"m" * 2000)
    over = blobs.measure_folder(folder, user_id="ann", session_id="s1")
    assert over.over and over.remaining == 0
    blobs.release("s2")  # a deleted session's import counts no more
    assert blobs.storage("ann").used == 6000
    blobs.forget_uploads("s1")  # its folder is gone (TTL)
    assert blobs.storage("ann").used == 0
