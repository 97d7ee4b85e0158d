"""Errors of the profile loader. Each names the file (or the id) it is about."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class ProfileError(Exception):
    """A profile folder (or the persona) that cannot be used, and why."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class UnknownProfile(LookupError):
    def __init__(self, profile_id: str, available: Iterable[str]) -> None:
        self.profile_id = profile_id
        self.available = sorted(available)
        known = ", ".join(self.available) or "none"
        super().__init__(f"unknown profile {profile_id!r} (available: {known})")

    def __str__(self) -> str:  # LookupError would show the repr of the message
        return str(self.args[0])
