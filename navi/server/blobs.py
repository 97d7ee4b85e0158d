"""``GET /sessions/{id}/blobs/{sha256}``: an image of a session (a user's, or one a tool
returned), from the blob store; and what deleting a session frees there.

A blob is served only to the session's owner (others get 404, as on every route), only
if that session's history refers to it (a fork's includes its origin's messages up to
the fork point; its subagents' tool results count too) and if the user stored that
image themselves (an imported log may name any hash: knowing another user's image's
hash must not give its bytes), with the media
type sniffed when it was stored (anything but a raster image is a download:
``application/octet-stream``, ``attachment``), ``nosniff`` and a sandboxing CSP. The
hash is checked to be 64 hex digits before it comes near a path.
"""

from __future__ import annotations

import anyio
import structlog
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from events.envelope import Recorded
from events.types import ImageRef, SessionCreated, SubagentSpawned, ToolCompleted, UserMessage
from navi.blobs import BlobStore, is_sha256
from navi.server.headers import STRICT_POLICY
from navi.server.http import HTTPError, user_of
from navi.server.state import ServerState, state_of
from projections.sessions import SessionsState
from projections.tool_results import shown_images

log = structlog.get_logger(__name__)

# Raster types only (never SVG, which can hold a script): anything else is served as
# bytes to download, not to render.
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})


def referenced_image(records: list[Recorded], sha256: str) -> ImageRef | None:
    """The reference to blob ``sha256`` in these records' user messages or tool results
    (an image a tool returned: ``image_view``'s, an MCP tool's), if any."""
    for record in records:
        event = record.event
        images: tuple[str | ImageRef, ...] = ()
        if isinstance(event, UserMessage):
            images = event.images
        elif isinstance(event, ToolCompleted):
            images = shown_images(event)
        for image in images:
            if isinstance(image, ImageRef) and not image.data and image.sha256 == sha256:
                return image
    return None


async def session_image(
    server: ServerState, session_id: str, sha256: str, *, user_id: str
) -> ImageRef | None:
    """The reference to blob ``sha256`` in the session's history or, failing that, in
    its subagents' streams (their tools' images are kept for the top-level session and
    shown in its page): each read once, and only a stream of ``user_id``'s own."""
    records = (await server.load(session_id)).records
    found = referenced_image(records, sha256)
    children = _spawned(records)
    seen: set[str] = set()
    while found is None and children:
        child = children.pop()
        if child in seen:
            continue
        seen.add(child)
        records = await server.navi.store.read(child)
        created = records[0].event if records else None
        if not isinstance(created, SessionCreated) or created.user_id != user_id:
            continue  # a log may name any stream: not a subagent of this user's
        found = referenced_image(records, sha256)
        children += _spawned(records)
    return found


def _spawned(records: list[Recorded]) -> list[str]:
    return [r.event.child_stream_id for r in records if isinstance(r.event, SubagentSpawned)]


async def get_blob(request: Request) -> Response:
    """One image of the session (``sha256`` as in its messages' ``images``)."""
    server = state_of(request)
    session_id = request.path_params["session_id"]
    user = user_of(request)
    await server.sessions.get(session_id, user)
    sha256 = request.path_params["sha256"]
    if not is_sha256(sha256):
        raise HTTPError(400, "a blob is named by its sha256: 64 lowercase hex digits")
    blobs = server.navi.blobs
    ref = await session_image(server, session_id, sha256, user_id=user.id)
    if blobs is None or ref is None:
        raise HTTPError(404, "no such image in this session")
    if not await anyio.to_thread.run_sync(blobs.held_by, user.id, sha256):
        raise HTTPError(404, "no such image in this session")
    path = blobs.path(sha256)
    if not path.is_file():
        raise HTTPError(404, "this image is no longer stored")
    headers = {
        "X-Content-Type-Options": "nosniff",
        # Content-addressed: the bytes behind this URL never change.
        "Cache-Control": "private, max-age=31536000, immutable",
        "Content-Security-Policy": STRICT_POLICY,
    }
    media_type = ref.media_type
    if media_type not in IMAGE_TYPES:
        # Not an image (what a tool called one: an SVG, HTML): bytes to save, never a page.
        media_type = "application/octet-stream"
        headers["Content-Disposition"] = "attachment"
    return FileResponse(path, media_type=media_type, headers=headers)


def sessions_to_release(state: SessionsState, session_id: str) -> list[str]:
    """The deleted sessions whose blobs may go now that ``session_id`` is deleted: itself,
    unless a live fork still shows its messages; then, up its ``forked_from`` chain, each
    deleted origin that no live fork needs any more."""
    out: list[str] = []
    current: str | None = session_id
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        summary = state.get(current)
        if summary is None or not summary.deleted:
            break
        if _has_live_fork(state, current):
            break
        out.append(current)
        current = summary.forked_from
    return out


def _has_live_fork(state: SessionsState, session_id: str) -> bool:
    """A session not deleted forks from it (directly, or through deleted forks)."""
    for entry in state.entries.values():
        summary = entry.summary
        if summary.forked_from != session_id:
            continue
        if not summary.deleted or _has_live_fork(state, summary.session_id):
            return True
    return False


async def release_deleted(server: ServerState, session_id: str, blobs: BlobStore) -> None:
    """After ``session_id`` was deleted: free the blobs and uploads it (and origins
    nothing needs any more) held."""
    await anyio.to_thread.run_sync(blobs.forget_uploads, session_id)  # its folder is gone
    state = await server.sessions.refresh()
    for sid in sessions_to_release(state, session_id):
        await blobs.arelease(sid)
