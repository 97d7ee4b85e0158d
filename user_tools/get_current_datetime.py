"""User tool (module format): the current date and time."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

name = "get_current_datetime"
description = (
    "Get the current date, time and weekday. Give an IANA timezone like 'Europe/Paris' for "
    "local time there; without one the server's local time is used."
)
parameters = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": "string",
            "description": "IANA timezone name, e.g. 'America/New_York' or 'UTC'.",
        },
    },
    "required": [],
}
idempotent = True


async def execute(params: dict) -> str:
    zone_name = params.get("timezone")
    if zone_name:
        try:
            now = datetime.now(ZoneInfo(zone_name))
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown timezone {zone_name!r}; use an IANA name like 'UTC'"
            ) from None
    else:
        now = datetime.now().astimezone()
    iso = now.isoformat(timespec="seconds")
    return f"{now:%A %d %B %Y, %H:%M:%S} ({now.tzname()}); ISO 8601: {iso}"
