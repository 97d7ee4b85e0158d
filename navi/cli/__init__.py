"""The ``navi`` command. One module per group of subcommands, each with its
``add_commands``; what they share (settings from the arguments, error lines) is in
``navi.cli.common``:

- ``serve``: ``serve``, ``state-diagram``;
- ``client``: ``sessions``, ``reextract``, ``doctor`` (Navi in-process) and ``chat``,
  a client of the running server (``chat``: the turn, ``chat_view``: how it is shown,
  ``interactive``: the prompt, ``remote``: REST and WebSocket);
- ``replay``: ``replay``, ``inspect``, ``events``, ``export``, ``import``, ``verify``,
  ``recompress`` (printing.py shows a run's events in the terminal);
- ``approvals``: ``approvals`` (list and decide the calls that wait), and the question
  ``navi chat`` asks;
- ``users``: ``users add``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from navi.accounts import AuthConfigError
from navi.cli import approvals, client, replay, serve, users
from navi.cli.chat import one_line
from navi.cli.remote import CliError
from navi.cli.serve import freeze_startup_objects
from navi.config import SettingsError

__all__ = ["freeze_startup_objects", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="navi", description="Navi, a local-first AI agent.")
    parser.add_argument("--version", action="version", version=f"navi {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for commands in (serve, client, approvals, replay, users):
        commands.add_commands(sub)

    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except (SettingsError, AuthConfigError) as exc:  # a users file that does not read
        sys.stderr.write(f"navi: {exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130
    except (CliError, BaseExceptionGroup) as exc:
        # A client command's failure, possibly raised inside an anyio task group (which
        # wraps it in an exception group): one line, not a traceback.
        if isinstance(exc, BaseExceptionGroup) and not _only_cli_errors(exc):
            raise
        sys.stderr.write(f"navi: {one_line(exc)}\n")
        return 1
    return code


def _only_cli_errors(group: BaseExceptionGroup[BaseException]) -> bool:
    return all(
        _only_cli_errors(e) if isinstance(e, BaseExceptionGroup) else isinstance(e, CliError)
        for e in group.exceptions
    )


def _version() -> str:
    try:
        return version("navi")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
