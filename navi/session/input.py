"""Checks on what a user sends, shared by every entry point; where images enter."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from events.types import FileRef, ImageRef
from navi.session.errors import BadInput

if TYPE_CHECKING:
    from navi.blobs import BlobStore

MAX_IMAGES = 10
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_TEXT_CHARS = 200_000
# A message's JSON body (REST) with all its images in base64: what it may weigh.
MESSAGE_BODY_BYTES = MAX_IMAGES * MAX_IMAGE_BYTES * 4 // 3 + 1024 * 1024


def clean_images(images: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Strip ``data:…;base64,`` prefixes and check count, encoding and size."""
    return tuple(data for data, _ in _checked(images))


def decode_images(images: tuple[str, ...] | list[str]) -> list[bytes]:
    """The images' bytes, checked as ``clean_images`` checks them."""
    return [raw for _, raw in _checked(images)]


async def store_images(
    blobs: BlobStore | None, images: list[bytes], *, user_id: str, session_id: str
) -> tuple[str | ImageRef, ...]:
    """A message's images (decoded) as references to the blob store, where each is
    kept once (``QuotaExceeded`` past the user's quota). Without a blob store (a session
    built by hand in a test), base64 in the log, as it was recorded before."""
    if not images:
        return ()
    if blobs is None:
        return tuple(base64.b64encode(raw).decode("ascii") for raw in images)
    return await blobs.aput_images(images, user_id=user_id, session_id=session_id)


def _checked(images: tuple[str, ...] | list[str]) -> list[tuple[str, bytes]]:
    if len(images) > MAX_IMAGES:
        raise BadInput(f"at most {MAX_IMAGES} images per message, got {len(images)}")
    out = []
    for i, image in enumerate(images, 1):
        if not isinstance(image, str):
            raise BadInput(f"image {i} must be a base64 string")
        data = image.split(",", 1)[1] if image.startswith("data:") and "," in image else image
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise BadInput(f"image {i} is not valid base64") from None
        if len(raw) > MAX_IMAGE_BYTES:
            raise BadInput(
                f"image {i} is {len(raw) // 1024} KB; the limit is {MAX_IMAGE_BYTES // 1024} KB"
            )
        out.append((data, raw))
    return out


def check_text(text: str, images: tuple[object, ...]) -> str:
    if not isinstance(text, str):
        raise BadInput("message content must be a string")
    if not text.strip() and not images:
        raise BadInput("message content must not be empty")
    if len(text) > MAX_TEXT_CHARS:
        raise BadInput(f"message is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    return text


def check_files(files: tuple[FileRef, ...]) -> tuple[FileRef, ...]:
    for f in files:
        if not f.name or not f.path:
            raise BadInput("each file needs a name and a path")
    return files
