"""The ``navi`` command. One module per group of subcommands, each with its
``add_commands``; what they share (settings from the arguments, error lines) is in
``navi.cli.common``:

- ``serve``: ``serve``, ``state-diagram``;
- ``client``: ``chat``, ``sessions``, ``reextract``, ``doctor`` (Navi in-process);
- ``replay``: ``replay``, ``inspect``, ``events``, ``export``, ``import``, ``verify``,
  ``recompress`` (printing.py shows a run's events in the terminal);
- ``users``: ``users add``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from navi.accounts import AuthConfigError
from navi.cli import client, replay, serve, users
from navi.cli.serve import freeze_startup_objects
from navi.config import SettingsError

__all__ = ["freeze_startup_objects", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="navi", description="Navi, a local-first AI agent.")
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (serve, client, replay, users):
        commands.add_commands(sub)

    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except (SettingsError, AuthConfigError) as exc:  # a users file that does not read
        sys.stderr.write(f"navi: {exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    return code
