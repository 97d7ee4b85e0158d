"""Uploaded files: ``POST /sessions/{id}/files`` and their clean-up after the TTL.

Files live in ``SESSION_FILES_DIR/<session_id>/``. An upload is refused with 413 as
soon as it passes ``SESSION_FILES_MAX_SIZE_MB`` — by its Content-Length before reading
anything, or while it streams — and it is spooled to disk, never held in memory.
A session's files are removed ``SESSION_FILES_TTL_HOURS`` after its last activity.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import structlog
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message

from navi.ids import session_folder
from navi.server.http import HTTPError, json_response, user_of

if TYPE_CHECKING:
    from navi.server.views import SessionsView

log = structlog.get_logger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")
CLEAN_INTERVAL_S = 600.0


def safe_name(name: str) -> str:
    base = Path(name.replace("\\", "/")).name
    cleaned = _UNSAFE.sub("_", base).strip(" .") or "upload"
    return cleaned[:150]


class TooLarge(Exception):
    pass


class FileStore:
    def __init__(self, root: Path, *, ttl_hours: float) -> None:
        self.root = root
        self.ttl_s = ttl_hours * 3600

    def directory(self, session_id: str) -> Path:
        """The session's folder (raises ``InvalidId`` for an id that is not a UUID)."""
        return session_folder(self.root, session_id)

    def place(self, session_id: str, name: str) -> Path:
        folder = self.directory(session_id)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / safe_name(name)
        stem, suffix, n = target.stem, target.suffix, 1
        while target.exists():
            target = folder / f"{stem}-{n}{suffix}"
            n += 1
        return target

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
    from navi.server.app import ServerState

    server: ServerState = request.app.state.navi_server
    session_id = request.path_params["session_id"]
    await server.sessions.get(session_id, user_of(request))
    limit: int = request.app.state.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit + 64 * 1024:
        raise HTTPError(413, f"the file is larger than the limit of {limit // (1024 * 1024)} MB")
    counted = Request(request.scope, _counting(request.receive, limit + 64 * 1024))
    try:
        form = await counted.form(max_files=1, max_fields=10)
    except TooLarge:
        raise HTTPError(
            413, f"the file is larger than the limit of {limit // (1024 * 1024)} MB"
        ) from None
    except Exception as exc:
        raise HTTPError(400, f"not a multipart upload: {exc}") from None
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
        target = server.files.place(session_id, upload.filename or "upload")
        await upload.seek(0)
        with target.open("wb") as out:
            while chunk := await upload.read(1024 * 1024):
                out.write(chunk)
    finally:
        await form.close()
    return json_response(
        {
            "name": target.name,
            "path": str(target.resolve()),
            "size": size,
            "content_type": upload.content_type or "application/octet-stream",
        },
        201,
    )


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
