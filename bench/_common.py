"""Helpers shared by the benchmark scripts (not a benchmark itself)."""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def postgres_url() -> str | None:
    return os.environ.get("NAVI_BENCH_POSTGRES_URL") or os.environ.get("NAVI_TEST_POSTGRES_URL")


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(figures: dict[str, Any]) -> None:
    """The last line of every benchmark: one JSON object, comparable across commits."""
    print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in figures.items()}))
