"""Images recorded inline (base64) before the blob store read as they were."""

from __future__ import annotations

import base64

from events import codec
from events.types import ImageRef, UserMessage

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
PNG_B64 = base64.b64encode(PNG).decode()


def test_old_inline_messages_decode_and_encode_byte_for_byte() -> None:
    """The widened field reads a v2 row written before the blob store as it was."""
    stored = b'{"text":"look","images":["%s"],"files":[]}' % PNG_B64.encode()
    event = codec.decode("user.message", 2, stored)
    assert isinstance(event, UserMessage) and event.images == (PNG_B64,)
    assert codec.encode_stored(event) == stored


def test_a_reference_is_stored_without_the_inline_fallback() -> None:
    ref = ImageRef(sha256="b" * 64, size=10, media_type="image/png")
    stored = codec.encode_stored(UserMessage(text="x", images=(ref,)))
    assert stored == (
        b'{"text":"x","images":[{"sha256":"' + b"b" * 64 + b'","size":10,'
        b'"media_type":"image/png"}],"files":[]}'
    )
    assert codec.decode("user.message", 2, stored) == UserMessage(text="x", images=(ref,))
