"""py-spy on a running process for the load benchmarks (not a benchmark itself): record
while the load runs, then the functions that took the most samples, inclusive and own."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path


def start(pid: int, out: Path) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of ``pid`` (raw stacks to ``out``); None without py-spy."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(exe).exists():
        print("py-spy not installed: no profile (pip install py-spy)")
        return None
    return subprocess.Popen(
        [exe, "record", "-p", str(pid), "-r", "100", "-f", "raw", "-o", str(out), "--nonblocking"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(spy: subprocess.Popen[bytes] | None) -> None:
    if spy is None:
        return
    spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
    try:
        spy.wait(30)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait()


def top(raw: Path, n: int = 25) -> list[str]:
    """The ``n`` frames in most samples (inclusive), then the ``n`` with most own samples."""
    if not raw.exists():
        return []
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[frame] += samples
        own[frames[-1]] += samples
    out = [f"py-spy: {total} samples; inclusive:"]
    out += [f"  {c / total * 100:5.1f}% {f[:140]}" for f, c in inclusive.most_common(n)]
    out.append("own:")
    out += [f"  {c / total * 100:5.1f}% {f[:140]}" for f, c in own.most_common(n)]
    return out
