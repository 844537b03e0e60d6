"""The parsers under fuzz (hypothesis): a progress event and Spark's ``offsets/N``,
``commits/N`` and ``metadata`` files, with hostile text in every place a name goes and
garbage everywhere else. Each parser either returns what it read, every name in it valid
by ``core.names``, or raises its one refusal (``InvalidEvent``, ``UnreadableCheckpoint``)
with words that can be answered and logged; nothing else."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from harness.machine import ROOT
from spark_offset_sidecar.core import names
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.core.spark.checkpoint_log import (
    parse_commit_log,
    parse_metadata,
    parse_offset_log,
)
from spark_offset_sidecar.core.spark.progress import parse_progress
from spark_offset_sidecar.errors import InvalidEvent, UnreadableCheckpoint
from tests.support.fuzz import (
    FUZZ_EXAMPLES,
    FUZZ_SEED,
    HOSTILE_TEXT,
    JSON_VALUES,
    KAFKA_OFFSETS,
    NAMES,
)

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES * 2, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
T = TypeVar("T")
E = TypeVar("E", bound=Exception)
REAL_FILES = sorted((ROOT / "tests" / "fixtures" / "spark-checkpoints").glob("*/*/offsets/*"))


def read_or_refused(read: Callable[[], T], refusal: type[E]) -> T | E:
    """What ``read`` returns, or its refusal, whose words can be answered and logged."""
    try:
        return read()
    except refusal as refused:
        str(refused).encode("utf-8")
        return refused


def _all_valid(offsets: dict[TopicPartition, int]) -> None:
    for tp, offset in offsets.items():
        assert names.TOPIC.is_valid(tp.topic), tp
        assert 0 <= tp.partition < 2**31
        assert 0 <= offset < 2**63


@st.composite
def progress_events(draw: st.DrawFn) -> Any:
    """A Spark-shaped progress (sometimes) with hostile names, or any JSON object."""
    if draw(st.booleans()):
        return draw(st.dictionaries(NAMES, JSON_VALUES, max_size=6))
    offsets = draw(KAFKA_OFFSETS)
    end = json.dumps(offsets) if draw(st.booleans()) else offsets  # the listener's form
    progress = {"id": draw(NAMES), "batchId": draw(st.integers(-1, 2**63))}
    progress["sources"] = [{"endOffset": end}, {"endOffset": draw(JSON_VALUES)}]
    if draw(st.booleans()):
        progress["runId"] = draw(NAMES)
    return progress


@seed(FUZZ_SEED)
@FUZZ
@given(progress_events())
def test_a_progress_event_is_read_or_refused_in_words(progress: Any) -> None:
    report = read_or_refused(lambda: parse_progress(progress), InvalidEvent)
    if isinstance(report, InvalidEvent):
        return
    assert names.QUERY_ID.is_valid(report.query_id)
    assert report.run_id is None or names.RUN_ID.is_valid(report.run_id)
    _all_valid(report.offsets)


def _offset_log(version: int, sources: list[Any]) -> str:
    lines = [f"v{version}", '{"batchWatermarkMs":0,"batchTimestampMs":1}']
    for index, source in enumerate(sources):
        text = source if isinstance(source, str) else json.dumps(source)
        lines.append(f"{index}:{text}" if version == 2 else text)
    return "\n".join(lines)


@seed(FUZZ_SEED)
@FUZZ
@given(
    st.sampled_from([1, 2]),
    st.lists(st.one_of(KAFKA_OFFSETS, JSON_VALUES, HOSTILE_TEXT, st.just("-")), max_size=4),
)
def test_an_offset_log_is_read_or_refused_naming_file_and_line(
    version: int, sources: list[Any]
) -> None:
    text = _offset_log(version, sources)
    entry = read_or_refused(lambda: parse_offset_log(text, "offsets/7"), UnreadableCheckpoint)
    if isinstance(entry, UnreadableCheckpoint):
        assert entry.path == "offsets/7"
        return
    _all_valid(entry.offsets)


@pytest.mark.skipif(not REAL_FILES, reason="no recorded Spark checkpoints")
@seed(FUZZ_SEED)
@FUZZ
@given(st.sampled_from(REAL_FILES or [Path()]), st.data())
def test_a_real_spark_file_with_hostile_text_spliced_in(path: Path, data: st.DataObject) -> None:
    """A file Spark wrote, one character run replaced by hostile text (a topic name, a
    partition, the version, the metadata): read with valid names only, or refused."""
    text = path.read_text()
    start = data.draw(st.integers(0, len(text)), label="start")
    end = data.draw(st.integers(start, min(len(text), start + 20)), label="end")
    spliced = text[:start] + data.draw(HOSTILE_TEXT, label="hostile") + text[end:]
    entry = read_or_refused(lambda: parse_offset_log(spliced, "offsets/1"), UnreadableCheckpoint)
    if not isinstance(entry, UnreadableCheckpoint):
        _all_valid(entry.offsets)


@seed(FUZZ_SEED)
@FUZZ
@given(st.one_of(HOSTILE_TEXT, st.builds(lambda v: f'{{"id": {json.dumps(v)}}}', NAMES)))
def test_metadata_and_commit_files_are_read_or_refused(text: str) -> None:
    read_or_refused(lambda: parse_commit_log(text, "f"), UnreadableCheckpoint)
    query_id = read_or_refused(lambda: parse_metadata(text, "f"), UnreadableCheckpoint)
    if isinstance(query_id, str):
        assert names.QUERY_ID.is_valid(query_id)
