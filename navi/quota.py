"""What one user stores, against ``NAVI_USER_QUOTA_MB``: the images of their messages
and of tools' results (blobs, each once), their session folders (uploads and whatever
tools write there) and the logs they imported (the file's bytes).

The blob store's index keeps the counts (navi/blobs.py): images and imports as they
are stored, a session folder as last measured (``folder_bytes``: after an upload, and
after each call of a tool that uses the folder). ``BlobStore.storage(user)`` answers
from a running total per user, so asking before every tool call costs a dict lookup
(bench/storage.py measures it, and a folder's measure).

A tool call that leaves its user over the quota fails (``counted_writes``): the LLM and
the user read why, what it wrote stays in the folder for the user to sort out, and the
session goes on. A call that frees space (a delete) or writes nothing passes, over the
quota or not: the way back under it must stay open. ``StorageUse.remaining`` is what a
sandboxed call may still write (``ToolContext.storage_left``).
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import structlog

from tools import ToolResult, fail

log = structlog.get_logger(__name__)

if TYPE_CHECKING:
    from navi.blobs import BlobStore

MB = 1024 * 1024


class StorageUse(msgspec.Struct, frozen=True, kw_only=True):
    """A user's storage: ``used`` bytes of ``quota``."""

    used: int
    quota: int

    @property
    def remaining(self) -> int:
        """Bytes the user may still store (0 at or over the quota)."""
        return max(0, self.quota - self.used)

    @property
    def over(self) -> bool:
        return self.used > self.quota


def folder_bytes(root: Path) -> int:
    """The bytes of the regular files under ``root``: each file once (hard links are one
    file), links not followed, other file systems (mounts) not entered; 0 when ``root``
    is not a folder (missing, or a link a tool left in its place)."""
    try:
        top = os.lstat(root)
    except OSError:
        return 0
    if not stat.S_ISDIR(top.st_mode):
        return 0
    total = 0
    seen: set[int] = set()
    folders = [os.fspath(root)]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:  # removed meanwhile, or not readable: nothing to count there
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if info.st_dev == top.st_dev:
                    folders.append(entry.path)
            elif stat.S_ISREG(info.st_mode) and info.st_ino not in seen:
                seen.add(info.st_ino)
                total += info.st_size
    return total


def over_quota_message(use: StorageUse) -> str:
    return (
        f"storage quota exceeded: this call left your files, images and imported sessions "
        f"at {use.used / MB:.1f} MB, over your quota of {use.quota // MB} MB "
        "(NAVI_USER_QUOTA_MB). What it wrote is still in the session's folder: delete "
        "files you no longer need (or whole sessions), then try again"
    )


async def counted_writes(
    blobs: BlobStore | None,
    result: ToolResult,
    *,
    before: StorageUse | None,
    folder: Path,
    user_id: str,
) -> ToolResult:
    """Measure the session folder a tool call could write (``folder``, named by its
    session's id) and count it; the call fails if it left the user over the quota
    with more than before it ran."""
    if blobs is None or before is None:
        return result
    try:
        after = await blobs.ameasure_folder(folder, user_id=user_id, session_id=folder.name)
    except (OSError, sqlite3.Error) as exc:
        # A full disk refuses the count's own write: the call's result stands (the folder
        # is measured again at its next call), and the run goes on to pause at its own
        # next write as any write does, instead of crashing here.
        log.warning("quota.measure_failed", error=str(exc))
        return result
    if after.over and after.used > before.used:
        return fail(over_quota_message(after))
    return result
