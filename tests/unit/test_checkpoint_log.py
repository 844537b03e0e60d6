"""Spark's checkpoint files read as Spark writes them (``core.spark.checkpoint_log``).

The folders under ``tests/fixtures/spark-checkpoints/<pyspark version>/`` were written by
real Spark queries (``scripts/record-spark-checkpoints.py``): a Kafka source on two topics
unioned with a file source and restarted on the same checkpoint, and two Kafka sources.
Their ``expected.json`` holds Spark's own ``lastProgress`` of each run: the reader must
find exactly those end offsets in ``offsets/<batchId>``.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.machine import ROOT
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.core.spark.checkpoint_log import (
    batch_id_of,
    parse_commit_log,
    parse_metadata,
    parse_offset_log,
)
from spark_offset_sidecar.core.spark.progress import parse_progress
from spark_offset_sidecar.errors import UnreadableCheckpoint
from tests.support.checkpoints import BATCH_METADATA as META
from tests.support.checkpoints import COMMIT_LOG

FIXTURES = ROOT / "tests" / "fixtures" / "spark-checkpoints"
FOLDERS = sorted(p for p in FIXTURES.glob("*/*") if (p / "metadata").exists())


def test_fixtures_exist_for_at_least_one_spark() -> None:
    assert FOLDERS, f"no recorded checkpoints under {FIXTURES}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_offset_log_holds_what_spark_reported_for_the_batch(folder: Path) -> None:
    for run in json.loads((folder / "expected.json").read_text()):
        assert parse_metadata((folder / "metadata").read_text(), "metadata") == run["id"]
        reported = parse_progress(run)
        entry = parse_offset_log((folder / "offsets" / str(run["batchId"])).read_text(), "offsets")
        assert entry.offsets == reported.offsets
        assert entry.kafka_sources == reported.kafka_sources
        assert entry.sources == len(run["sources"])


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_batch_spark_wrote_reads_and_offsets_never_go_backwards(folder: Path) -> None:
    batches = sorted(int(p.name) for p in (folder / "offsets").iterdir())
    assert batches == list(range(batches[0], batches[-1] + 1))
    before: dict[TopicPartition, int] = {}
    for batch in batches:
        entry = parse_offset_log((folder / "offsets" / str(batch)).read_text(), str(batch))
        assert entry.offsets, batch
        assert all(entry.offsets[tp] >= offset for tp, offset in before.items())
        before = entry.offsets
        parse_commit_log((folder / "commits" / str(batch)).read_text(), str(batch))


def test_a_kafka_source_and_a_file_source_are_told_apart_by_content() -> None:
    text = f'v1\n{META}\n{{"logOffset":3}}\n{{"orders":{{"0":42,"1":7}}}}\n-\n17'
    entry = parse_offset_log(text, "offsets/3")
    assert entry.offsets == {TopicPartition("orders", 0): 42, TopicPartition("orders", 1): 7}
    assert (entry.kafka_sources, entry.sources) == (1, 4)


def test_two_kafka_sources_on_one_partition_keep_the_smaller_offset() -> None:
    text = f'v1\n{META}\n{{"a":{{"0":50}}}}\n{{"a":{{"0":40}},"b":{{"0":1}}}}'
    entry = parse_offset_log(text, "offsets/0")
    assert entry.offsets == {TopicPartition("a", 0): 40, TopicPartition("b", 0): 1}


def test_offset_log_v2_source_id_lines() -> None:
    text = f'v2\n{META}\n0:{{"orders":{{"0":9}}}}\n1:-\n2:{{"logOffset":1}}'
    entry = parse_offset_log(text, "offsets/5")
    assert entry.offsets == {TopicPartition("orders", 0): 9}
    assert entry.version == 2


def test_offsets_beyond_32_bits_are_kept_exactly() -> None:
    text = f'v1\n{META}\n{{"t":{{"0":9007199254740993}}}}'
    assert parse_offset_log(text, "x").offsets == {TopicPartition("t", 0): 9007199254740993}


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("", 1, "empty"),
        ("v9\n{}\n", 1, "v9"),
        ("hello\n{}", 1, "not a version"),
        ("v1", 2, "no batch metadata"),
        ('v1\n{"batchWatermarkMs":0', 2, "not JSON"),
        ("v1\n[1]\n", 2, "not a JSON object"),
        (f'v1\n{META}\n{{"orders":{{"0":42}}', 3, "not JSON"),
        (f'v1\n{META}\n{{"orders":{{"0":"42"}}}}', 3, "looks like a Kafka source"),
        (f'v1\n{META}\n{{"orders":{{"x":1}}}}', 3, "looks like a Kafka source"),
        (f'v1\n{META}\n{{"orders":{{"0":1}},"n":2}}', 3, "not clearly a Kafka source"),
        (f'v1\n{META}\n{{"0":{{"value":5,"runTimeMs":9}}}}', 3, "looks like a Kafka"),
        (f"v1\n{META}\n", 3, "not JSON"),
        (f'v2\n{META}\n{{"orders":{{"0":1}}}}', 3, "sourceId:offset"),
    ],
)
def test_a_file_that_is_not_what_spark_writes_is_refused_naming_file_and_line(
    text: str, line: int, words: str
) -> None:
    with pytest.raises(UnreadableCheckpoint) as refused:
        parse_offset_log(text, "s3://b/ckpt/offsets/7")
    assert refused.value.line == line
    assert words in str(refused.value)
    assert str(refused.value).startswith(f"s3://b/ckpt/offsets/7, line {line}:")


@pytest.mark.parametrize("folder", FOLDERS[:1], ids=lambda p: p.name)
def test_every_prefix_of_a_real_file_is_refused_or_claims_nothing_spark_did_not_write(
    folder: Path,
) -> None:
    """A half-written copy (a sync tool mid-upload) never yields an offset the whole file
    does not hold."""
    last = max(int(p.name) for p in (folder / "offsets").iterdir())
    text = (folder / "offsets" / str(last)).read_text()
    whole = parse_offset_log(text, "whole").offsets
    for cut in range(len(text)):
        try:
            part = parse_offset_log(text[:cut], "part").offsets
        except UnreadableCheckpoint:
            continue
        assert part.items() <= whole.items(), cut


@given(st.text(max_size=200))
def test_garbage_never_raises_anything_but_unreadable(text: str) -> None:
    for parse in (parse_offset_log, parse_commit_log, parse_metadata):
        with contextlib.suppress(UnreadableCheckpoint):
            parse(text, "f")


def test_commit_log_must_be_whole() -> None:
    parse_commit_log(COMMIT_LOG, "commits/0")
    parse_commit_log('v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{}}', "commits/0")
    for text in ("", "v1", "v1\n", 'v1\n{"nextBatch', "v3\n{}"):
        with pytest.raises(UnreadableCheckpoint):
            parse_commit_log(text, "commits/0")


def test_metadata_names_the_query() -> None:
    assert parse_metadata('{"id":"5b028b11-7861"}\n', "m") == "5b028b11-7861"
    for text in ("", "{}", '{"id": 5}', '{"id": "a b"}', "[1]"):
        with pytest.raises(UnreadableCheckpoint):
            parse_metadata(text, "m")


def test_only_batch_files_count() -> None:
    assert [batch_id_of(n) for n in ("0", "17", ".17.crc", "017", "17.tmp", "-1", "")] == [
        0,
        17,
        None,
        None,
        None,
        None,
        None,
    ]
