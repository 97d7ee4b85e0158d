"""How projection states are stored in snapshots, and which snapshots are still valid.

A state is stored as msgpack (msgspec, typed: decoding gives back exactly the state's
types). ``Vec`` is stored as a list. Each projection has a **schema version**: a number
set by hand (bump it when a state's shape or meaning changes) combined with a
fingerprint of the source of the modules the projection's fold depends on. Any change
to that code makes its old snapshots invalid: they are ignored and rebuilt by the next
fold, so a snapshot never hides a change in the projection code.

A projection whose state holds a long, growing list (``messages``, ``context``,
``llm_requests``: its ``log_field``) is stored as a **delta** when it can be: the
snapshot names an earlier one (``base_seq``), how many of its items it keeps
(``prefix``), and holds only the new items (and the rest of the state). Without that,
the snapshots of a long session would hold its history over and over (quadratic).
A payload starts with ``F`` (full) or ``D`` (delta, then base seq and prefix); for a
projection with a log field, the items come next (their length first), then the rest of
the state.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import struct
import typing
import zlib
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec.structs import replace

from navi.replay.projection_set import LLMRequestsState, RunStateInfo
from projections.context import ContextState
from projections.messages import MessagesState
from projections.tool_state import ActiveProfile, ScratchpadState, TodoState
from projections.vec import Vec

FULL = b"F"
DELTA = b"D"
_DELTA_HEADER = struct.Struct(">qq")  # base seq, prefix length
_PART_LENGTH = struct.Struct(">I")  # length of the items part
_EMPTY: Vec[Any] = Vec()


class BrokenSnapshotError(Exception):
    """A payload that cannot be read, or a delta whose base is missing or invalid."""


@dataclass(frozen=True)
class Stored:
    """A payload read back: the state (for a delta, holding only the new items of its
    log field) and, for a delta, its base seq and how many base items it keeps."""

    state: Any
    base_seq: int | None = None
    prefix: int = 0


@dataclass(frozen=True)
class StateCodec:
    name: str
    state_type: Any
    version: int  # set by hand: bump on a change of the stored shape or its meaning
    modules: tuple[str, ...]  # the code the projection's fold depends on
    log_field: str | None = None  # a growing Vec field, stored as a delta when it can be

    @functools.cached_property
    def schema_version(self) -> int:
        """``version`` in the high 32 bits, the modules' source fingerprint in the low."""
        return (self.version << 32) | source_fingerprint(self.modules)

    @functools.cached_property
    def _decoder(self) -> msgspec.msgpack.Decoder[Any]:
        return msgspec.msgpack.Decoder(self.state_type, dec_hook=_dec_hook)

    def encode(self, state: Any) -> bytes:
        """The state's canonical encoding (what ``verify`` compares)."""
        return _encoder.encode(state)

    def decode(self, encoded: bytes | memoryview) -> Any:
        return self._decoder.decode(encoded)

    def log_items(self, state: Any) -> list[Any] | None:
        if self.log_field is None:
            return None
        items: list[Any] = getattr(state, self.log_field).to_list()
        return items

    @functools.cached_property
    def _items_decoder(self) -> msgspec.msgpack.Decoder[Any]:
        vec_type = typing.get_type_hints(self.state_type)[self.log_field or ""]
        (item,) = typing.get_args(vec_type)
        return msgspec.msgpack.Decoder(list[item])  # type: ignore[valid-type]

    def _parts(self, state: Any, prefix: int = 0) -> bytes:
        """The log field's items after ``prefix``, then the rest of the state: the items
        decode through a typed decoder (fast), not through the ``Vec`` hook."""
        assert self.log_field is not None
        items = _encoder.encode(getattr(state, self.log_field).to_list()[prefix:])
        rest = _encoder.encode(replace(state, **{self.log_field: _EMPTY}))
        return _PART_LENGTH.pack(len(items)) + items + rest

    def _from_parts(self, body: memoryview) -> Any:
        assert self.log_field is not None
        (length,) = _PART_LENGTH.unpack_from(body)
        start = _PART_LENGTH.size
        items = self._items_decoder.decode(body[start : start + length])
        rest = self._decoder.decode(body[start + length :])
        return replace(rest, **{self.log_field: Vec(items)})

    def full_payload(self, state: Any) -> bytes:
        if self.log_field is None:
            return FULL + self.encode(state)
        return FULL + self._parts(state)

    def delta_payload(self, state: Any, base_seq: int, prefix: int) -> bytes:
        return DELTA + _DELTA_HEADER.pack(base_seq, prefix) + self._parts(state, prefix)

    def read(self, payload: bytes) -> Stored:
        body = memoryview(payload)
        kind = payload[:1]
        try:
            if kind == FULL:
                if self.log_field is None:
                    return Stored(self.decode(body[1:]))
                return Stored(self._from_parts(body[1:]))
            if kind == DELTA and self.log_field is not None:
                base_seq, prefix = _DELTA_HEADER.unpack_from(body, 1)
                state = self._from_parts(body[1 + _DELTA_HEADER.size :])
                return Stored(state, base_seq, prefix)
        except (msgspec.DecodeError, msgspec.ValidationError, struct.error) as exc:
            raise BrokenSnapshotError(f"{self.name}: {exc}") from exc
        raise BrokenSnapshotError(f"{self.name}: unknown payload kind {kind!r}")

    def rebase(self, stored: Stored, base: Any) -> Any:
        """The whole state of a delta, given the state of its base."""
        assert self.log_field is not None
        items = getattr(base, self.log_field).to_list()
        if len(items) < stored.prefix:
            raise BrokenSnapshotError(
                f"{self.name}: the delta keeps {stored.prefix} items of a base that has "
                f"{len(items)}"
            )
        tail = getattr(stored.state, self.log_field).to_list()
        return replace(stored.state, **{self.log_field: Vec(items[: stored.prefix] + tail)})


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, Vec):
        return obj.to_list()
    raise NotImplementedError(f"cannot store a {type(obj).__name__} in a snapshot")


def _dec_hook(tp: Any, obj: Any) -> Any:
    if typing.get_origin(tp) is Vec:
        (item,) = typing.get_args(tp)
        return Vec(msgspec.convert(obj, list[item]))  # type: ignore[valid-type]
    raise NotImplementedError(f"cannot read a {tp} from a snapshot")


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)


def source_fingerprint(modules: tuple[str, ...]) -> int:
    """CRC-32 of the modules' source (0 when a source is not available)."""
    return _fingerprint(modules)


@functools.cache
def _fingerprint(modules: tuple[str, ...]) -> int:
    crc = 0
    for name in modules:
        try:
            source = inspect.getsource(importlib.import_module(name))
        except (OSError, TypeError):
            return 0
        crc = zlib.crc32(source.encode(), crc)
    return crc


# Event types evolve additively (a new field or type changes no existing fold), so
# events/types.py is not part of the fingerprint.
_TYPES = ("projections.types", "projections.vec", __name__)
_RESULTS = ("projections.tool_results",)

CODECS: dict[str, StateCodec] = {
    codec.name: codec
    for codec in (
        StateCodec(
            "messages",
            MessagesState,
            1,
            ("projections.messages", *_RESULTS, *_TYPES),
            log_field="finished",
        ),
        StateCodec(
            "context",
            ContextState,
            1,
            ("projections.context", "projections.compression", *_RESULTS, *_TYPES),
            log_field="messages",
        ),
        StateCodec("todo", TodoState, 1, ("projections.tool_state", *_TYPES)),
        StateCodec("scratchpad", ScratchpadState, 1, ("projections.tool_state", *_TYPES)),
        StateCodec("active_profile", ActiveProfile, 1, ("projections.tool_state", *_TYPES)),
        StateCodec(
            "run_state",
            RunStateInfo,
            1,
            ("navi.run.state", "navi.replay.projection_set", *_TYPES),
        ),
        StateCodec(
            "llm_requests",
            LLMRequestsState,
            1,
            ("navi.replay.projection_set", *_TYPES),
            log_field="requests",
        ),
    )
}
