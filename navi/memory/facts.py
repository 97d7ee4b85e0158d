"""Names of memory things: streams, categories, keys and fact ids."""

from __future__ import annotations

import hashlib
import re
from typing import Literal, get_args

Category = Literal["preference", "project", "environment", "personal", "other"]
CATEGORIES: tuple[str, ...] = get_args(Category)

STREAM_PREFIX = "memory:"
LOCAL_USER = "local"

_NOT_KEY = re.compile(r"[^\w]+|_+")


def memory_stream_id(user_id: str) -> str:
    """The one memory stream of a user."""
    return f"{STREAM_PREFIX}{user_id}"


def user_of_stream(stream_id: str) -> str | None:
    """The user of a memory stream; None for any other stream."""
    return stream_id[len(STREAM_PREFIX) :] if stream_id.startswith(STREAM_PREFIX) else None


def normalize_key(key: str) -> str:
    """``"Favorite  Editor"`` → ``"favorite_editor"``: case, spaces and punctuation do
    not make a different fact."""
    return _NOT_KEY.sub("_", key.casefold()).strip("_")


def fact_id(category: str, key: str) -> str:
    """Derived from category and key, so a new value for a key keeps the fact's identity."""
    digest = hashlib.sha256(f"{category}\n{normalize_key(key)}".encode()).hexdigest()
    return f"f_{digest[:16]}"
