"""structlog set-up: readable on a terminal, JSON lines otherwise, for every logger.

Navi's own lines go straight through structlog (bound context — session, run and step
ids — merged from contextvars). Every other library's stdlib logging (uvicorn's access
and error logs, httpx, asyncssh, …) reaches one handler on the root logger whose
``ProcessorFormatter`` runs the same processors and renderer, so a log collector sees
one format. Both chains redact query-string values and URL passwords
(:mod:`navi.log_redaction`): a WebSocket ticket or a token never reaches a log.
"""

from __future__ import annotations

import contextlib
import logging
import sys

import structlog

from navi.log_redaction import redact_event


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is at the time (tests swap it), not the one
    that was there when logging was configured. A line the stream refuses (stderr sent
    to a file on a full disk: ENOSPC) is dropped: logging must never raise into the code
    that logs, or the recovery loops that log their failures would die of it."""

    def write(self, text: str) -> int:
        try:
            return sys.stderr.write(text)
        except OSError:
            return 0

    def flush(self) -> None:
        with contextlib.suppress(OSError):
            sys.stderr.flush()


class _NaviHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler :func:`configure_logging` installs (and replaces when called again)."""


def configure_logging(level: str = "INFO", *, json: bool | None = None) -> None:
    json = (not sys.stderr.isatty()) if json is None else json
    numeric = getattr(logging, level.upper(), logging.INFO)
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso"),
    ]
    # Redaction last before rendering: a traceback's text (an HTTP error quoting its
    # URL) is redacted too once format_exc_info has made it text.
    rendering: list[structlog.types.Processor] = (
        [structlog.processors.format_exc_info, redact_event, structlog.processors.JSONRenderer()]
        if json
        else [redact_event, structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    )
    _route_stdlib_logging(
        numeric,
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        ),
    )
    structlog.configure(
        processors=[*shared, *rendering],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        # Straight to stderr, not through stdlib logging: no logger-name lookup and no
        # LogRecord per line on the hot paths.
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        # No caching: a later configure (tests, reloads) must reach loggers used before.
        cache_logger_on_first_use=False,
    )


def _route_stdlib_logging(level: int, formatter: logging.Formatter) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _NaviHandler):
            root.removeHandler(handler)
    handler = _NaviHandler(_CurrentStderr())
    handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(level)
    # uvicorn's own logging config (used when something else started a server in this
    # process) gives its loggers handlers and levels of their own and stops them
    # propagating: they come back to the one handler and level here.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        library = logging.getLogger(name)
        library.handlers.clear()
        library.setLevel(logging.NOTSET)
        library.propagate = True
        library.disabled = False
    # httpx writes an INFO line per request ("HTTP Request: POST …"): every LLM call's, a
    # detail for DEBUG, not a line per call at INFO.
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(
            logging.DEBUG if level <= logging.DEBUG else logging.WARNING
        )
