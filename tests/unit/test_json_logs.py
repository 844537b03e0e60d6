"""Structured logs (observe.logs): the fields of a JSON line, the context a line about
a query or group carries, and uvicorn's lines routed through the same handler."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from spark_offset_sidecar.observe.logs import JsonFormatter, about, configure_logging


def record(message: str, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord(
        "spark_offset_sidecar.runtime.commit_loop", logging.WARNING, __file__, 1, message, (), None
    )
    made.__dict__.update(extra)
    return made


def test_a_line_about_a_commit_carries_query_group_and_checkpoint() -> None:
    context = about(query_id="q-1", group_id="orders", checkpoint_id=42, attempt=None)
    line = json.loads(JsonFormatter().format(record("commit failed: timeout", **context)))
    assert line["message"] == "commit failed: timeout"
    assert (line["level"], line["logger"]) == (
        "WARNING",
        "spark_offset_sidecar.runtime.commit_loop",
    )
    assert (line["query_id"], line["group_id"], line["checkpoint_id"]) == ("q-1", "orders", 42)
    assert "attempt" not in line  # None is left out, not written as null
    assert line["time"].endswith("+00:00")


def test_exceptions_are_one_field_and_the_line_stays_one_line() -> None:
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        made = logging.LogRecord("x", logging.ERROR, __file__, 1, "crashed", (), sys.exc_info())
    text = JsonFormatter().format(made)
    assert "\n" not in text
    assert "ValueError: bad" in json.loads(text)["exception"]


def test_unknown_context_fields_are_refused() -> None:
    with pytest.raises(ValueError, match="groupid"):
        about(groupid="orders")


def test_uvicorn_lines_go_through_the_json_handler(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("INFO", "json")
        logging.getLogger("uvicorn.error").info("Application startup complete.")
        err = capsys.readouterr().err.strip().splitlines()
        assert json.loads(err[-1])["logger"] == "uvicorn.error"
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_a_line_quoting_odd_input_is_still_utf8_json() -> None:
    """A message or context field holding a lone surrogate (input no rule let in, quoted
    by an error) is written as its escape: the line encodes, and reads back as text."""
    text = JsonFormatter().format(record("refused 'evil-\ud800'", group_id="g-\udc80"))
    line = json.loads(text.encode("utf-8"))
    assert line["message"] == "refused 'evil-\\ud800'"
    assert line["group_id"] == "g-\\udc80"


def aiokafka_line(message: str, created: float) -> logging.LogRecord:
    made = logging.LogRecord(
        "aiokafka.client",
        logging.ERROR,
        __file__,
        1,
        "Unable connect to node with id %s: %s",
        (2, message),
        None,
    )
    made.created = created
    return made


def test_a_library_line_repeated_every_attempt_is_said_once_a_minute() -> None:
    from spark_offset_sidecar.observe.logs import RepeatedLines

    lines = RepeatedLines(window=60)
    said = [lines.filter(aiokafka_line("refused", 100 + i / 10)) for i in range(100)]
    assert said == [True] + [False] * 99, "the first is said, the 99 repeats are not"
    assert lines.filter(aiokafka_line("timed out", 105)), "another message is another line"
    later = aiokafka_line("refused", 161)
    assert lines.filter(later)
    assert later.getMessage().endswith("(said 99 more times in the last 60 s)")
    ours = record("commit failed: timeout")
    assert all(lines.filter(ours) for _ in range(3)), "the service's own lines are never dropped"


def test_a_watchers_lines_say_which_process_wrote_them() -> None:
    """A child watcher writes to its service's output: its lines carry ``process``."""
    watcher = json.loads(JsonFormatter("watcher").format(record("reading log ends failed")))
    service = json.loads(JsonFormatter().format(record("reading log ends failed")))
    assert (watcher.get("process"), service.get("process")) == ("watcher", None)


def test_a_watchers_text_lines_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("INFO", "text", "watcher")
        logging.getLogger("spark_offset_sidecar.test").info("reading log ends")
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert " [watcher] INFO spark_offset_sidecar.test: reading log ends" in line
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
