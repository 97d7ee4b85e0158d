from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_profile(
    root: Path,
    profile_id: str,
    *,
    prompt: str | None = "You help.",
    config: dict[str, Any] | None = None,
    raw_config: str | None = None,
) -> Path:
    """Create ``root/<id>/`` with a config.json (from ``config`` merged over a minimal
    one, or ``raw_config`` verbatim) and a system_prompt.txt (unless ``prompt`` is None)."""
    folder = root / profile_id
    folder.mkdir(parents=True, exist_ok=True)
    if raw_config is None:
        data = {"id": profile_id, "name": profile_id.title()} | (config or {})
        raw_config = json.dumps(data, indent=2)
    (folder / "config.json").write_text(raw_config, encoding="utf-8")
    if prompt is not None:
        (folder / "system_prompt.txt").write_text(prompt, encoding="utf-8")
    return folder
