"""Logging set-up: one JSON object a line (``SIDECAR_LOG_FORMAT=json``, the default) or
plain text, for the service's own loggers and uvicorn's alike. Context fields come from
``extra=about(...)``; a line is UTF-8 whatever a message quotes (``errors.shown``).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from spark_offset_sidecar.errors import shown

CONTEXT = (
    "query_id",
    "group_id",
    "checkpoint_id",
    "run_id",
    "attempt",
    "replica_id",
    "owner_epoch",
    "commit_started_at",
    "folder",  # a followed checkpoint folder
    "reason",  # why it failed (a bounded word, as in the metrics)
)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries that log every attempt of what they retry (aiokafka: one ERROR a connection
# attempt to a dead broker, several a second): a line they repeat is said once a minute.
QUIETED = ("aiokafka",)
REPEAT_WINDOW_SECONDS = 60.0


def about(**fields: Any) -> dict[str, Any]:
    """``extra=`` for a log call: the given context fields that are not None."""
    unknown = fields.keys() - set(CONTEXT)
    if unknown:
        raise ValueError(f"not a log context field: {', '.join(sorted(unknown))}")
    return {key: value for key, value in fields.items() if value is not None}


class JsonFormatter(logging.Formatter):
    def __init__(self, process: str | None = None) -> None:
        super().__init__()
        self.process = process  # which process wrote the line (None: the service)

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": shown(record.getMessage()),
        }
        if self.process is not None:
            line["process"] = self.process
        for key in CONTEXT:
            value = record.__dict__.get(key)
            if value is not None:
                line[key] = shown(value) if isinstance(value, str) else value
        if record.exc_info:
            line["exception"] = shown(self.formatException(record.exc_info))
        return json.dumps(line, default=str, ensure_ascii=False)


class RepeatedLines(logging.Filter):
    """Lets the first of identical lines (logger, level, message) from a ``QUIETED``
    library through, drops the repeats for ``window`` seconds, and says how many it
    dropped on the next one it lets through."""

    def __init__(self, window: float = REPEAT_WINDOW_SECONDS) -> None:
        super().__init__()
        self.window = window
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # -> (said at, dropped)

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(QUIETED):
            return True
        key = (record.name, record.levelno, record.getMessage())
        said_at, dropped = self._seen.get(key, (None, 0))
        if said_at is not None and record.created - said_at < self.window:
            self._seen[key] = (said_at, dropped + 1)
            return False
        if len(self._seen) > 1000:  # bounded: messages name brokers, not groups
            self._seen.clear()
        self._seen[key] = (record.created, 0)
        if dropped:
            record.msg = f"{record.msg} (said {dropped} more times in the last {self.window:g} s)"
        return True


def configure_logging(level: str, log_format: str, process: str | None = None) -> None:
    """One handler on the root logger, on stderr; uvicorn's loggers are routed to it (run
    uvicorn with ``log_config=None``). ``process``: named in each line (a watcher)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter(process))
    else:
        named = f"[{process}] %(levelname)s" if process is not None else "%(levelname)s"
        handler.setFormatter(logging.Formatter(TEXT_FORMAT.replace("%(levelname)s", named)))
    handler.addFilter(RepeatedLines())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers.clear()
        uvicorn_logger.propagate = True
    logging.getLogger("alembic").setLevel(logging.WARNING)
