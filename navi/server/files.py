"""Uploaded files: ``POST /sessions/{id}/files`` and their clean-up after the TTL.

Files live in ``SESSION_FILES_DIR/<session_id>/``. An upload is refused with 413 as
soon as it passes ``SESSION_FILES_MAX_SIZE_MB`` — by its Content-Length before reading
anything, or while it streams — and it is spooled to disk, never held in memory.
A session's files are removed ``SESSION_FILES_TTL_HOURS`` after its last activity.

Uploads count against their user's quota (``NAVI_USER_QUOTA_MB``, with the images of
their messages: navi/blobs.py); past it, 413 and nothing is kept. The same content
uploaded again to a session is kept once: the answer names the file already there.
Uploads stay files of the session's folder, not shared blobs: they are the tools'
working copies, which a tool may change.

A tool may also leave symbolic links in that folder (``code_exec`` writes it): an upload
is made as a new file relative to the folder's descriptor (``O_CREAT | O_EXCL |
O_NOFOLLOW``, ``tools.beneath``), so it never writes through a link, and a name taken by
anything (a file, a folder or a link, dangling or not) is never reused.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import anyio
import structlog
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message

from navi.blobs import BlobStore
from navi.ids import InvalidId, session_folder
from navi.server.http import HTTPError, json_response, user_of
from navi.server.state import state_of
from navi.session.errors import QuotaExceeded
from tools.beneath import make_dirs_beneath, open_beneath

if TYPE_CHECKING:
    from navi.server.views import SessionsView

log = structlog.get_logger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")
CLEAN_INTERVAL_S = 600.0
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL  # open_beneath adds O_NOFOLLOW


def safe_name(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    cleaned = _UNSAFE.sub("_", base).strip(" .") or "upload"
    return cleaned[:150]


class TooLarge(Exception):
    pass


class FileStore:
    def __init__(self, root: Path, *, ttl_hours: float, blobs: BlobStore | None = None) -> None:
        self.root = root
        self.ttl_s = ttl_hours * 3600
        self.blobs = blobs  # counts uploads against the quota

    def directory(self, session_id: str) -> Path:
        """The session's folder (raises ``InvalidId`` for an id that is not a UUID)."""
        return session_folder(self.root, session_id)

    def create(self, session_id: str, name: str) -> tuple[Path, BinaryIO]:
        """A new, empty file in the session's folder (made if missing), open for writing:
        named ``name`` made safe, or ``stem-1.suffix``, ``stem-2.suffix``… while that is
        taken by anything, a symbolic link included (dangling or not). Nothing is opened
        through a link: not the folder, not the file (``InvalidId`` or ``OSError`` if the
        folder is one)."""
        folder = self.directory(session_id)
        self.root.mkdir(parents=True, exist_ok=True)
        root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            folder_fd = make_dirs_beneath(root_fd, [folder.name])
        finally:
            os.close(root_fd)
        try:
            wanted = Path(safe_name(name))
            stem, suffix, n = wanted.stem, wanted.suffix, 1
            candidate = wanted.name
            while True:
                try:  # 0o666 as open() would: the umask decides
                    fd = open_beneath(folder_fd, [candidate], _NEW_FILE, 0o666)
                except OSError as exc:
                    if exc.errno not in (errno.EEXIST, errno.ELOOP):
                        raise
                    candidate = f"{stem}-{n}{suffix}"
                    n += 1
                    continue
                return folder / candidate, os.fdopen(fd, "wb")
        finally:
            os.close(folder_fd)

    async def clean(self, sessions: SessionsView, now: float | None = None) -> list[str]:
        """Remove the folders of sessions idle past the TTL (or gone); returns their ids."""
        if not self.root.is_dir():
            return []
        now = time.time() if now is None else now
        state = await sessions.refresh()
        removed = []
        for folder in self.root.iterdir():
            if not folder.is_dir():
                continue
            entry = state.entries.get(folder.name)
            if entry is not None and not entry.summary.deleted:
                last = entry.last_active_ts
            else:
                last = folder.stat().st_mtime
            if now - last > self.ttl_s:
                shutil.rmtree(folder, ignore_errors=True)
                if self.blobs is not None:
                    await anyio.to_thread.run_sync(self.blobs.forget_uploads, folder.name)
                removed.append(folder.name)
        if removed:
            log.info("files.cleaned", sessions=removed)
        return removed

    async def clean_periodically(self, sessions: SessionsView) -> None:
        while True:
            try:
                await self.clean(sessions)
            except Exception as exc:
                log.warning("files.clean_failed", error=str(exc))
            await anyio.sleep(CLEAN_INTERVAL_S)


async def upload_file(request: Request) -> Response:
    """Upload a file (multipart/form-data, field ``file``) into the session's folder."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    user = user_of(request)
    await server.sessions.get(session_id, user)
    limit: int = request.app.state.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit + 64 * 1024:
        raise HTTPError(413, f"the file is larger than the limit of {limit // (1024 * 1024)} MB")
    blobs = server.files.blobs
    if blobs is not None and declared is not None and declared.isdigit():
        try:  # refused before it is read (the form's own bytes are not counted)
            await anyio.to_thread.run_sync(
                blobs.check_room, user.id, max(0, int(declared) - 64 * 1024)
            )
        except QuotaExceeded as exc:
            raise HTTPError(413, exc.message) from None
    counted = Request(request.scope, _counting(request.receive, limit + 64 * 1024))
    try:
        form = await counted.form(max_files=1, max_fields=10)
    except TooLarge:
        raise HTTPError(
            413, f"the file is larger than the limit of {limit // (1024 * 1024)} MB"
        ) from None
    except Exception as exc:
        log.info("files.bad_upload", error=str(exc))
        raise HTTPError(400, "not a valid multipart/form-data upload") from None
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        await form.close()
        raise HTTPError(422, "send the file in a multipart field named 'file'")
    try:
        size = upload.size or 0
        if size > limit:
            raise HTTPError(
                413, f"the file is larger than the limit of {limit // (1024 * 1024)} MB"
            )
        try:
            target, out = server.files.create(session_id, upload.filename or "upload")
        except (OSError, InvalidId) as exc:
            if isinstance(exc, OSError) and exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            # The session's folder is a symbolic link or a file (a tool put it there).
            log.warning("files.no_folder", session_id=session_id, error=str(exc))
            raise HTTPError(
                409, "the session's files folder is not a folder: the upload was not stored"
            ) from None
        digest = hashlib.sha256()
        await upload.seek(0)
        with out:
            while chunk := await upload.read(1024 * 1024):
                out.write(chunk)
                digest.update(chunk)
    finally:
        await form.close()
    if blobs is not None:
        target = await _counted(blobs, target, user.id, session_id, digest.hexdigest())
    return json_response(
        {
            "name": target.name,
            # Relative to the session's folder, where tools resolve it: the server's
            # own layout (its absolute paths) is not the client's business.
            "path": target.name,
            "size": size,
            "content_type": upload.content_type or "application/octet-stream",
        },
        201,
    )


async def _counted(
    blobs: BlobStore, target: Path, user_id: str, session_id: str, sha256: str
) -> Path:
    """Count the upload against the user's quota (413 and removed past it); the same
    content already uploaded to the session is kept once (the earlier file is answered)."""

    def count() -> Path:
        try:
            existing = blobs.add_upload(
                target, user_id=user_id, session_id=session_id, sha256=sha256
            )
        except QuotaExceeded:
            target.unlink(missing_ok=True)
            raise
        if existing is None:
            return target
        target.unlink(missing_ok=True)
        return target.parent / existing

    try:
        kept: Path = await anyio.to_thread.run_sync(count)
    except QuotaExceeded as exc:
        raise HTTPError(413, exc.message) from None
    return kept


def _counting(receive, limit: int):  # type: ignore[no-untyped-def]
    total = 0

    async def wrapped() -> Message:
        nonlocal total
        message: Message = await receive()
        if message["type"] == "http.request":
            total += len(message.get("body", b""))
            if total > limit:
                raise TooLarge()
        return message

    return wrapped
