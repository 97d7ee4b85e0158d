from __future__ import annotations

from pathlib import Path

from events.types import EVENT_TYPES

DOC = Path(__file__).resolve().parents[2] / "docs" / "events.md"


def test_every_event_type_is_documented() -> None:
    text = DOC.read_text()
    missing = [tag for tag in EVENT_TYPES if f"| `{tag}` |" not in text]
    assert not missing, f"document these event types in docs/events.md: {missing}"
