"""Images recorded inline (base64) before the blob store, read as references."""

from __future__ import annotations

import base64
import hashlib

from events import codec
from events.types import ImageRef, UserMessage
from events.upcasting import upcast_inline_image

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
PNG_B64 = base64.b64encode(PNG).decode()
JPEG_B64 = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\x01" * 20).decode()


def test_an_inline_image_becomes_a_reference_that_keeps_its_bytes() -> None:
    ref = upcast_inline_image(PNG_B64)
    assert ref == ImageRef(
        sha256=hashlib.sha256(PNG).hexdigest(), size=len(PNG), media_type="image/png", data=PNG_B64
    )


def test_a_data_url_gives_its_media_type_and_loses_its_prefix() -> None:
    ref = upcast_inline_image(f"data:image/jpeg;base64,{JPEG_B64}")
    assert (ref.media_type, ref.data) == ("image/jpeg", JPEG_B64)


def test_a_reference_stays_as_it_is() -> None:
    ref = ImageRef(sha256="a" * 64, size=3, media_type="image/gif")
    assert upcast_inline_image(ref) is ref


def test_upcasting_is_pure() -> None:
    assert upcast_inline_image(PNG_B64) == upcast_inline_image(PNG_B64)


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
