"""What the ``navi`` subcommands share: settings from the environment and the
arguments, and how a refusal is written."""

from __future__ import annotations

import argparse
import sys

from navi.config import Settings, SettingsError
from navi.data_dir import database_url
from navi.environment import environment

PRIVATE_URLS_WARNING = (
    "NAVI_ALLOW_PRIVATE_URLS=1: http_request, web_view and image_view may reach this "
    "machine's services and private networks in every profile (never link-local, "
    "cloud-metadata addresses or Navi's own port)"
)


def settings_for(args: argparse.Namespace) -> tuple[Settings, dict[str, str]]:
    """The settings of the environment, with ``--db`` (a URL or a SQLite file's path),
    ``--host`` and ``--port``."""
    env = environment()
    if getattr(args, "db", None):
        try:  # a URL, or a plain file path for SQLite
            env["NAVI_DATABASE_URL"] = database_url(args.db)
        except ValueError as exc:
            raise SettingsError(f"--db: {exc}") from None
    if getattr(args, "host", None):
        env["NAVI_HOST"] = args.host
    if getattr(args, "port", None):
        env["NAVI_PORT"] = str(args.port)
    return Settings.from_env(env), env


def quiet_settings(args: argparse.Namespace) -> tuple[Settings, dict[str, str]]:
    """The settings, for a command that prints its own output: only warnings are logged."""
    from navi.logs import configure_logging

    settings, env = settings_for(args)
    configure_logging("WARNING")
    return settings, env


def fail(message: str, code: int = 1) -> int:
    """Say why on standard error; the command's exit code."""
    sys.stderr.write(f"navi: {message}\n")
    return code
