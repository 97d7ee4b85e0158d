"""What the quota costs a tool call (navi/quota.py): the check before it (the user's
running total, ``BlobStore.astorage``) and, after a call of a tool that uses the
session folder, the folder's measure and the new total (``ameasure_folder``), for
folders of 10, 1,000 and 10,000 files. The user has 1,000 images and 200 other folders
counted. Microseconds per call, medians.

    .venv/bin/python bench/storage.py [--calls 300]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio

from _common import median, report
from navi.blobs import BlobStore

USER = "alice"


def fill(blobs: BlobStore, root: Path) -> None:
    for i in range(1000):
        blobs.put_images(
            [b"\x89PNG\r\n\x1a\n" + i.to_bytes(4, "big")], user_id=USER, session_id="s"
        )
    for i in range(200):
        folder = root / f"other-{i}"
        folder.mkdir()
        (folder / "a.txt").write_bytes(b"a" * 100)
        blobs.measure_folder(folder, user_id=USER, session_id=folder.name)


async def timed(calls: int, action) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await action()
        times.append((time.perf_counter() - t0) * 1e6)
    return median(times)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    figures: dict[str, object] = {"bench": "storage"}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        blobs = BlobStore(root / "blobs", quota_bytes=1 << 40)
        fill(blobs, root)
        figures["check_cached_us"] = await timed(args.calls, lambda: blobs.astorage(USER))

        async def uncached() -> None:
            blobs._used.clear()  # what the first check after a change costs
            await blobs.astorage(USER)

        figures["check_summed_us"] = await timed(args.calls, uncached)
        for files in (10, 1000, 10_000):
            folder = root / f"session-{files}"
            (folder / "sub").mkdir(parents=True)
            for i in range(files):
                (folder / ("sub" if i % 2 else ".") / f"f{i}").write_bytes(b"x" * 10)
            calls = max(10, args.calls // max(1, files // 100))

            async def measure(folder: Path = folder) -> None:
                await blobs.ameasure_folder(folder, user_id=USER, session_id=folder.name)

            figures[f"measure_{files}_files_us"] = await timed(calls, measure)
        blobs.close()
    for key, value in figures.items():
        if key != "bench":
            print(f"{key}: {value:.0f}")
    report(figures)


if __name__ == "__main__":
    anyio.run(main)
