"""Read Spark's checkpoint folder files (docs/attach/checkpoint-folder.md): ``offsets/N``
(``OffsetSeqLog``, batch N planned: the snapshot), ``commits/N`` (``CommitLog``, batch N
done: the completion) and ``metadata`` (the query id). The offset log::

    v1                              version: v1 (every Spark), v2 (OffsetMap, Spark 4.1+)
    {"batchWatermarkMs":0,...}      batch metadata (JSON object; may be empty)
    {"orders":{"0":42,"1":17}}      v1: one line per source, in source order
    -                               a source without offsets
    0:{"orders":{"0":42}}           v2: ``sourceId:offset`` per line

Kafka sources are recognised by content, as in progress events; a line that looks like
Kafka's map but is not a valid one is refused with its path and line number, never
guessed at. Pure functions of text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_offset_sidecar.core.names import QUERY_ID
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.core.spark.progress import kafka_offsets
from spark_offset_sidecar.errors import InvalidEvent, UnreadableCheckpoint

# The offset- and commit-log versions this reader understands (Spark 3.5 to 4.2 write
# v1; Spark 4.1+ may write an offset log v2 and a commit log v2 with state ids).
OFFSET_LOG_VERSIONS = frozenset({1, 2})
COMMIT_LOG_VERSIONS = frozenset({1, 2})
VOID_OFFSET = "-"
_BATCH_FILE = re.compile(r"0|[1-9][0-9]{0,18}")
_VERSION_LINE = re.compile(r"v([1-9][0-9]{0,3})")
_V2_SOURCE_ID = re.compile(r"[A-Za-z0-9_.-]+")  # 0, 1, ... or a named source


@dataclass(frozen=True)
class OffsetLogEntry:
    """``offsets/N`` read: the end offsets of every Kafka source of batch N (when two Kafka
    sources name one partition, the smaller offset, as for progress events)."""

    version: int
    offsets: dict[TopicPartition, int]
    kafka_sources: int
    sources: int


def batch_id_of(name: str) -> int | None:
    """The batch id a file of ``offsets/`` or ``commits/`` is named for; None for anything
    else in those folders (``.1.crc``, ``.1.<uuid>.tmp``, ``_spark_metadata``, ...)."""
    return int(name) if _BATCH_FILE.fullmatch(name) else None


def parse_metadata(text: str, where: str) -> str:
    """The query id of a checkpoint's ``metadata`` file (``{"id":"<uuid>"}``)."""
    line = text.split("\n", 1)[0]
    if not line.strip():
        raise UnreadableCheckpoint(where, 1, "is empty (half-written?)")
    document = _json(line, where, 1)
    if not isinstance(document, Mapping) or "id" not in document:
        raise UnreadableCheckpoint(where, 1, 'is not {"id": "<query id>"}')
    query_id = document["id"]
    if problem := QUERY_ID.problem(query_id):
        raise UnreadableCheckpoint(where, 1, problem)
    return str(query_id)


def parse_commit_log(text: str, where: str) -> None:
    """Check that ``commits/N`` is a whole commit-log entry (a half-written or foreign
    file must not complete a batch): a known version line and a JSON object."""
    lines = text.split("\n")
    _version(lines[0], where, COMMIT_LOG_VERSIONS)
    if len(lines) < 2 or not lines[1].strip():
        raise UnreadableCheckpoint(where, 2, "has no commit metadata (half-written?)")
    if not isinstance(_json(lines[1], where, 2), Mapping):
        raise UnreadableCheckpoint(where, 2, "commit metadata is not a JSON object")


def parse_offset_log(text: str, where: str) -> OffsetLogEntry:
    """Read ``offsets/N``; raises ``UnreadableCheckpoint`` naming ``where`` and the line."""
    lines = text.split("\n")
    version = _version(lines[0], where, OFFSET_LOG_VERSIONS)
    if len(lines) < 2:
        raise UnreadableCheckpoint(where, 2, "has no batch metadata line (half-written?)")
    if lines[1].strip() and not isinstance(_json(lines[1], where, 2), Mapping):
        raise UnreadableCheckpoint(where, 2, "batch metadata is not a JSON object")
    offsets: dict[TopicPartition, int] = {}
    kafka_sources = 0
    source_lines = lines[2:]
    for index, line in enumerate(source_lines, start=3):
        if version == 2:
            source_id, colon, line = line.partition(":")
            if not colon or not _V2_SOURCE_ID.fullmatch(source_id):
                raise UnreadableCheckpoint(where, index, "is not 'sourceId:offset' (log v2)")
        if line == VOID_OFFSET:
            continue
        found = _kafka_source(_json(line, where, index), where, index)
        if found is None:
            continue
        kafka_sources += 1
        for tp, offset in found.items():
            offsets[tp] = min(offset, offsets.get(tp, offset))
    return OffsetLogEntry(version, offsets, kafka_sources, len(source_lines))


def _kafka_source(offset: Any, where: str, line: int) -> dict[TopicPartition, int] | None:
    """A Kafka source's offsets; None for another kind of source."""
    if not isinstance(offset, Mapping) or not offset:
        return None  # a number (rate, socket), a list, or a source with no partitions yet
    nested = [isinstance(value, Mapping) for value in offset.values()]
    if not any(nested):
        return None  # {"logOffset": 3} (files), Delta's flat object, ...
    if not all(nested):
        raise UnreadableCheckpoint(
            where, line, "mixes topic maps with other values: not clearly a Kafka source"
        )
    try:
        return kafka_offsets(offset, "offset")
    except InvalidEvent as exc:
        raise UnreadableCheckpoint(
            where, line, f"looks like a Kafka source's offsets but {exc}"
        ) from None


def _version(line: str, where: str, known: frozenset[int]) -> int:
    if not line.strip():
        raise UnreadableCheckpoint(where, 1, "is empty (half-written?)")
    match = _VERSION_LINE.fullmatch(line.strip())
    if match is None:
        raise UnreadableCheckpoint(where, 1, f"starts with {line[:40]!r}, not a version 'vN'")
    version = int(match.group(1))
    if version not in known:
        raise UnreadableCheckpoint(
            where,
            1,
            f"is version v{version}; this reader knows "
            + ", ".join(f"v{v}" for v in sorted(known))
            + " (written by a newer Spark?)",
        )
    return version


def _json(line: str, where: str, number: int) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        raise UnreadableCheckpoint(where, number, "is not JSON (half-written?)") from None
