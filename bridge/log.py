"""structlog set-up: JSON lines when stderr is not a TTY, a readable console otherwise.

Log lines are events with fields (`upstream`, `session_id`, `seq`), not sentences; bind them with
`log.bind(...)` where a component is created. A URL's `user:password@` part is masked in every string
field before rendering (`redact_credentials`), whichever component logged it.
"""

from __future__ import annotations

import logging
import re
import secrets
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")


def redact_credentials(_logger: object, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: `scheme://user:password@host` → `scheme://***@host` in every string field."""
    for key, value in event.items():
        if isinstance(value, str) and "@" in value:
            event[key] = _URL_CREDENTIALS.sub(r"\1***@", value)
    return event


def configure_logging(fmt: str = "auto", level: str = "info") -> None:
    lvl = getattr(logging, level.upper(), logging.INFO)
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    # Plain tracebacks on the console whatever is installed: with `rich` present (a dev dependency brings
    # it) structlog would print each logged exception with every frame's locals — seconds of CPU each.
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json
        else structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info if use_json else structlog.processors.StackInfoRenderer(),
            redact_credentials,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    # Libraries that use stdlib logging (alembic, aiohttp) go to stderr at warning level.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")


def get_logger(**bound: object) -> structlog.stdlib.BoundLogger:
    logger: structlog.stdlib.BoundLogger = structlog.get_logger("bridge").bind(**bound)
    return logger


def correlation_id() -> str:
    """An id put both in a client-facing error and in the log line holding its details (docs/security.md,
    "Errors"): the client learns nothing about the bridge's insides, the operator finds the line."""
    return secrets.token_hex(8)
