"""Reading Spark progress: Kafka sources by content, every other source ignored."""

from __future__ import annotations

import json

import pytest

from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.core.spark.progress import parse_progress
from spark_offset_sidecar.errors import InvalidEvent

QUERY = "7d8c1a0e-1f7f-4a51-bb71-8f2c0b7d6b1e"


def progress(*sources: object, batch: object = 4) -> dict[str, object]:
    return {
        "id": QUERY,
        "runId": "c0f6b3d2-2f39-4a4f-8d7f-3f1e2d4c5b6a",
        "name": "enrich",
        "batchId": batch,
        "sources": [{"description": f"source {i}", "endOffset": s} for i, s in enumerate(sources)],
    }


def test_kafka_sources_found_by_content_whatever_their_position() -> None:
    report = parse_progress(
        progress(
            {"logOffset": 3},  # file source
            {"orders": {"0": 10, "1": 2**40}},
            5,  # rate source
            {"sourceVersion": 1, "reservoirVersion": 4, "index": -1},  # Delta
            {"payments": {"2": 7}},
        )
    )
    assert report.query_id == QUERY
    assert report.batch_id == 4
    assert report.kafka_sources == 2
    assert report.offsets == {
        TopicPartition("orders", 0): 10,
        TopicPartition("orders", 1): 2**40,
        TopicPartition("payments", 2): 7,
    }


def test_python_listener_form_json_string_and_none() -> None:
    report = parse_progress(progress(json.dumps({"t": {"0": 5}}), "None", None))
    assert report.offsets == {TopicPartition("t", 0): 5}


def test_same_partition_in_two_sources_keeps_the_smaller_offset() -> None:
    report = parse_progress(progress({"t": {"0": 50}}, {"t": {"0": 30}}))
    assert report.offsets == {TopicPartition("t", 0): 30}


def test_no_kafka_source_gives_no_offsets() -> None:
    assert parse_progress(progress({"logOffset": 1})).offsets == {}
    assert parse_progress({"id": QUERY, "batchId": 0}).offsets == {}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"batchId": 1}, "progress.id"),
        ({"id": "has space", "batchId": 1}, "progress.id"),
        ({"id": QUERY, "batchId": "1"}, "progress.batchId"),
        ({"id": QUERY, "batchId": True}, "progress.batchId"),
        ({"id": QUERY, "batchId": -1}, "progress.batchId"),
        ({"id": QUERY, "batchId": 1, "runId": 5}, "progress.runId"),
        ({"id": QUERY, "batchId": 1, "sources": {}}, "progress.sources"),
        ({"id": QUERY, "batchId": 1, "sources": [3]}, "progress.sources[0]"),
        (progress({"t": {"0": -1}}), "progress.sources[0].endOffset.t.0"),
        (progress({"t": {"0": 1.5}}), "progress.sources[0].endOffset.t.0"),
        (progress({"t": {"0": "5"}}), "progress.sources[0].endOffset.t.0"),
        (progress({"t": {"0": 2**63}}), "progress.sources[0].endOffset.t.0"),
        (progress({"t": {"-1": 5}}), "progress.sources[0].endOffset.t.-1"),
        (progress({"t": {"01": 5}}), "progress.sources[0].endOffset.t.01"),
        (progress({"bad topic": {"0": 5}}), "progress.sources[0].endOffset.bad topic"),
        (progress({"x" * 250: {"0": 5}}), "progress.sources[0].endOffset." + "x" * 250),
        (progress("{not json"), "progress.sources[0].endOffset"),
    ],
)
def test_invalid_progress_names_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidEvent) as caught:
        parse_progress(body)
    assert caught.value.field == field


def test_a_partition_id_is_read_alike_by_the_fast_path_and_the_rule() -> None:
    """The common ids come from a table; every id is what the rule says (a decimal
    string of 0..2**31-1 without a leading zero), whichever path reads it."""
    from spark_offset_sidecar.core.spark.progress import _PARTITION, _partition_number

    def rule(value: object) -> int | None:
        if not isinstance(value, str) or not _PARTITION.fullmatch(value):
            return None
        return int(value) if int(value) <= 2**31 - 1 else None

    candidates: list[object] = [str(n) for n in range(1500)]
    candidates += ["00", "007", "0x1", " 1", "1 ", "+1", "1.0", "", "\u0661", "2147483647"]
    candidates += ["2147483648", "99999999999", 1, True, None, b"1"]
    for value in candidates:
        assert _partition_number(value) == rule(value), value
    assert _partition_number("1023") == 1023
    assert _partition_number("1024") == 1024


def test_offsets_of_several_sources_do_not_reach_into_each_other() -> None:
    first, second = {"t": {"0": 50, "1": 7}}, {"t": {"0": 30}, "u": {"0": 1}}
    report = parse_progress(progress(first, second))
    assert report.offsets == {
        TopicPartition("t", 0): 30,
        TopicPartition("t", 1): 7,
        TopicPartition("u", 0): 1,
    }
    assert first == {"t": {"0": 50, "1": 7}}
    assert second == {"t": {"0": 30}, "u": {"0": 1}}
