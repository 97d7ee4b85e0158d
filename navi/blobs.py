"""The blob store: images sent with messages (and those tools return), stored once by
content (sha256).

The log keeps only a reference (``events.types.ImageRef``: hash, size, media type); the
bytes live in a folder of their own (``NAVI_BLOBS_DIR``; by default ``blobs/`` beside a
SQLite database, else beside the session files folder), one file per hash:
``<root>/<first two hex digits>/<sha256>``. A small SQLite index there
(``index.sqlite3``) says which session of which user refers to which blob, and which
uploads each session holds: deleting a session frees the blobs nothing else refers
to. It also keeps what counts against a user's quota (``NAVI_USER_QUOTA_MB``,
navi/quota.py): their images, the measured size of each of their session folders
(uploads included) and the bytes of the logs they imported. The index is bookkeeping
beside the log, never read by a projection: replay stays pure.

Every change goes through one lock, so a blob another session is storing at the same
moment is never freed under it. The calls are blocking (file and SQLite I/O): callers
on the event loop run them in a worker thread (the ``a*`` wrappers, or
``anyio.to_thread``); only ``read``, a plain file read when the LLM's context is built,
is called in place.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import sqlite3
import tempfile
import threading
from pathlib import Path

import anyio
import msgspec
import structlog

from events.types import ImageRef
from navi.quota import StorageUse, folder_bytes
from navi.session.errors import QuotaExceeded
from tools import ToolResult, fail
from tools.image_types import sniff_image_type

log = structlog.get_logger(__name__)

SHA256 = re.compile(r"[0-9a-f]{64}")
MB = 1024 * 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS refs (
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,      -- 'image' (key: its sha256) or 'upload' (key: its file name)
    key TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (session_id, kind, key)
);
CREATE INDEX IF NOT EXISTS refs_by_user ON refs (user_id, kind);
CREATE INDEX IF NOT EXISTS refs_by_blob ON refs (kind, key);
-- A session folder's bytes as last measured (navi/quota.py), and an imported log's.
CREATE TABLE IF NOT EXISTS folders (
    session_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS folders_by_user ON folders (user_id);
CREATE TABLE IF NOT EXISTS imports (
    session_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS imports_by_user ON imports (user_id);
"""


def is_sha256(value: str) -> bool:
    """64 lowercase hex digits: the only strings that ever become a blob's path."""
    return SHA256.fullmatch(value) is not None


def quota_message(limit: int) -> str:
    return (
        f"storage quota exceeded: your images, files and imported sessions may use at most "
        f"{limit // MB} MB (NAVI_USER_QUOTA_MB); delete files or sessions you no longer "
        "need to free space"
    )


class BlobStore:
    def __init__(self, root: Path, *, quota_bytes: int) -> None:
        self.root = root
        self.quota_bytes = quota_bytes
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        # Each user's usage, as last summed (dropped when something of theirs changes).
        self._used: dict[str, int] = {}

    # ------------------------------------------------------------------ set-up

    def _index(self) -> sqlite3.Connection:
        if self._db is None:
            self.root.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.root / "index.sqlite3", check_same_thread=False)
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # ------------------------------------------------------------------ blobs

    def path(self, sha256: str) -> Path:
        if not is_sha256(sha256):
            raise ValueError("not a sha256 hex digest")
        return self.root / sha256[:2] / sha256

    def read(self, sha256: str) -> bytes | None:
        try:
            return self.path(sha256).read_bytes()
        except (OSError, ValueError):
            return None

    def read_held(self, user_id: str, sha256: str) -> bytes | None:
        """The blob's bytes if ``user_id`` stored it (``held_by``), else None."""
        return self.read(sha256) if is_sha256(sha256) and self.held_by(user_id, sha256) else None

    def put_images(
        self, images: list[bytes], *, user_id: str, session_id: str
    ) -> tuple[ImageRef, ...]:
        """Store the images of one message (each once) for ``session_id``. Raises
        ``QuotaExceeded``, storing none of them, when the user's usage would pass the
        quota; an image the user already has costs nothing more."""
        refs = tuple(
            ImageRef(
                sha256=hashlib.sha256(data).hexdigest(),
                size=len(data),
                media_type=sniff_image_type(data) or "application/octet-stream",
            )
            for data in images
        )
        with self._lock:
            db = self._index()
            new = {}
            for ref in refs:
                owned = db.execute(
                    "SELECT 1 FROM refs WHERE user_id = ? AND kind = 'image' AND key = ?",
                    (user_id, ref.sha256),
                ).fetchone()
                if owned is None:
                    new[ref.sha256] = ref.size
            if new:
                self._check_quota(db, user_id, sum(new.values()))
            for ref, data in zip(refs, images, strict=True):
                self._write(ref.sha256, data)
            with db:
                db.executemany(
                    "INSERT OR IGNORE INTO refs VALUES (?, ?, 'image', ?, ?, ?)",
                    [(session_id, user_id, r.sha256, r.size, r.sha256) for r in refs],
                )
            self._used.pop(user_id, None)
        return refs

    def _write(self, sha: str, data: bytes) -> None:
        target = self.path(sha)
        if target.is_file() and target.stat().st_size == len(data):
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temp, target)  # whole or not at all: a reader never sees half
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise

    def held_by(self, user_id: str, sha256: str) -> bool:
        """The user stored this image themselves (in any of their sessions). A log can
        name any hash (an imported one too): naming it is not having it."""
        with self._lock:
            row = (
                self._index()
                .execute(
                    "SELECT 1 FROM refs WHERE user_id = ? AND kind = 'image' AND key = ? LIMIT 1",
                    (user_id, sha256),
                )
                .fetchone()
            )
        return row is not None

    # ------------------------------------------------------------------ uploads

    def check_room(self, user_id: str, size: int) -> None:
        """Raise ``QuotaExceeded`` if ``size`` more bytes would pass the user's quota."""
        with self._lock:
            self._check_quota(self._index(), user_id, size)

    def add_upload(self, upload: Path, *, user_id: str, session_id: str, sha256: str) -> str | None:
        """Count the file ``upload`` (just written to the session's folder) against the
        user's quota: the folder is measured with it (``QuotaExceeded`` past the quota,
        nothing counted). If the folder still holds an earlier upload with the same
        content, that one's name is returned (the caller keeps it and drops the new
        copy) and nothing more is counted."""
        name, size = upload.name, upload.stat().st_size
        measured = folder_bytes(upload.parent)
        with self._lock:
            db = self._index()
            same = db.execute(
                "SELECT key FROM refs WHERE session_id = ? AND kind = 'upload' AND sha256 = ?"
                " AND size = ?",
                (session_id, sha256, size),
            ).fetchall()
            for (existing,) in same:
                earlier = upload.parent / existing
                if existing != name and earlier.is_file() and earlier.stat().st_size == size:
                    return str(existing)
            self._used.pop(user_id, None)
            with db:  # rolled back, counting nothing, past the quota
                db.execute(
                    "INSERT OR REPLACE INTO refs VALUES (?, ?, 'upload', ?, ?, ?)",
                    (session_id, user_id, name, size, sha256),
                )
                db.execute(
                    "INSERT OR REPLACE INTO folders VALUES (?, ?, ?)",
                    (session_id, user_id, measured),
                )
                if self._sum(db, user_id) > self.quota_bytes:
                    raise QuotaExceeded(quota_message(self.quota_bytes))
            return None

    def forget_uploads(self, session_id: str) -> None:
        """The session's upload folder is gone (TTL clean-up): its uploads and the rest
        of its folder count no more."""
        with self._lock:
            db = self._index()
            with db:
                db.execute(
                    "DELETE FROM refs WHERE session_id = ? AND kind = 'upload'", (session_id,)
                )
                db.execute("DELETE FROM folders WHERE session_id = ?", (session_id,))
            self._used.clear()

    # ------------------------------------------------------------------ session folders, imports

    def measure_folder(self, folder: Path, *, user_id: str, session_id: str) -> StorageUse:
        """Measure the session's folder (a tool may have written it) and count it; the
        user's usage after."""
        measured = folder_bytes(folder)
        with self._lock:
            db = self._index()
            row = db.execute(
                "SELECT user_id, size FROM folders WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row != (user_id, measured):  # most calls change nothing: no write then
                with db:
                    db.execute(
                        "INSERT OR REPLACE INTO folders VALUES (?, ?, ?)",
                        (session_id, user_id, measured),
                    )
                used = self._used.get(user_id)
                if row is not None and row[0] == user_id and used is not None:
                    self._used[user_id] = used - row[1] + measured  # the running total
                else:
                    self._used.pop(user_id, None)
            return StorageUse(used=self._usage(db, user_id), quota=self.quota_bytes)

    def add_import(self, session_id: str, *, user_id: str, size: int) -> None:
        """Count an imported log of ``size`` bytes (the file's) against its user."""
        with self._lock:
            db = self._index()
            with db:
                db.execute(
                    "INSERT OR REPLACE INTO imports VALUES (?, ?, ?)", (session_id, user_id, size)
                )
            self._used.pop(user_id, None)

    # ------------------------------------------------------------------ usage and release

    def usage(self, user_id: str) -> int:
        with self._lock:
            return self._usage(self._index(), user_id)

    def storage(self, user_id: str) -> StorageUse:
        """What the user stores, against their quota (navi/quota.py)."""
        return StorageUse(used=self.usage(user_id), quota=self.quota_bytes)

    def _usage(self, db: sqlite3.Connection, user_id: str) -> int:
        """The user's running total (summed again after a change of theirs)."""
        used = self._used.get(user_id)
        if used is None:
            used = self._used[user_id] = self._sum(db, user_id)
        return used

    def _sum(self, db: sqlite3.Connection, user_id: str) -> int:
        # An image in several of a user's sessions is stored, and counted, once.
        images = db.execute(
            "SELECT COALESCE(SUM(size), 0) FROM (SELECT MAX(size) AS size FROM refs"
            " WHERE user_id = ? AND kind = 'image' GROUP BY key)",
            (user_id,),
        ).fetchone()[0]
        folders = db.execute(
            "SELECT COALESCE(SUM(size), 0) FROM folders WHERE user_id = ?", (user_id,)
        ).fetchone()[0]
        # Uploads of a folder never measured (an index from before folders were).
        uploads = db.execute(
            "SELECT COALESCE(SUM(size), 0) FROM refs WHERE user_id = ? AND kind = 'upload'"
            " AND session_id NOT IN (SELECT session_id FROM folders)",
            (user_id,),
        ).fetchone()[0]
        imports = db.execute(
            "SELECT COALESCE(SUM(size), 0) FROM imports WHERE user_id = ?", (user_id,)
        ).fetchone()[0]
        return int(images) + int(folders) + int(uploads) + int(imports)

    def _check_quota(self, db: sqlite3.Connection, user_id: str, more: int) -> None:
        if self._usage(db, user_id) + more > self.quota_bytes:
            raise QuotaExceeded(quota_message(self.quota_bytes))

    def release(self, session_id: str) -> list[str]:
        """Drop the session's references; delete the blobs no session refers to any
        more. Returns the hashes freed."""
        freed = []
        with self._lock:
            db = self._index()
            keys = [
                k
                for (k,) in db.execute(
                    "SELECT key FROM refs WHERE session_id = ? AND kind = 'image'", (session_id,)
                )
            ]
            with db:
                for table in ("refs", "folders", "imports"):
                    db.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            self._used.clear()
            for sha in keys:
                still = db.execute(
                    "SELECT 1 FROM refs WHERE kind = 'image' AND key = ? LIMIT 1", (sha,)
                ).fetchone()
                if still is None and is_sha256(sha):
                    self.path(sha).unlink(missing_ok=True)
                    freed.append(sha)
        if freed:
            log.info("blobs.freed", session_id=session_id, count=len(freed))
        return freed

    # ------------------------------------------------------------------ async wrappers

    async def aput_images(
        self, images: list[bytes], *, user_id: str, session_id: str
    ) -> tuple[ImageRef, ...]:
        return await anyio.to_thread.run_sync(
            lambda: self.put_images(images, user_id=user_id, session_id=session_id)
        )

    async def arelease(self, session_id: str) -> list[str]:
        return await anyio.to_thread.run_sync(self.release, session_id)

    async def astorage(self, user_id: str) -> StorageUse:
        """``storage``: from the running total at once, else summed in a worker thread."""
        used = self._used.get(user_id)
        if used is not None:
            return StorageUse(used=used, quota=self.quota_bytes)
        return await anyio.to_thread.run_sync(self.storage, user_id)

    async def ameasure_folder(self, folder: Path, *, user_id: str, session_id: str) -> StorageUse:
        return await anyio.to_thread.run_sync(
            lambda: self.measure_folder(folder, user_id=user_id, session_id=session_id)
        )


# ---------------------------------------------------------------- tools' images


async def keep_tool_image(
    blobs: BlobStore | None, result: ToolResult, *, user_id: str, session_id: str
) -> ToolResult:
    """An image a tool returned (``metadata`` with ``is_image`` and ``base64``, as
    ``image_view`` gives it) goes to the blob store like a user's, before its result is
    recorded: the result keeps ``metadata.image`` (hash, size, media type) instead of
    the base64. Past the user's quota, the call fails and says so."""
    metadata = result.metadata
    image = metadata.get("base64") if metadata.get("is_image") else None
    if blobs is None or not result.success or not isinstance(image, str):
        return result
    try:
        raw = base64.b64decode(image, validate=True)
    except (binascii.Error, ValueError):
        return result  # not ours to judge: it stays as the tool gave it
    try:
        (ref,) = await blobs.aput_images([raw], user_id=user_id, session_id=session_id)
    except QuotaExceeded as exc:
        return fail(exc.message)
    kept = {k: v for k, v in metadata.items() if k != "base64"}
    kept["image"] = msgspec.to_builtins(ref)
    return msgspec.structs.replace(result, metadata=kept)
