"""Spark's checkpoint files as Spark writes them (offset log v1, commit log v1), for tests
and benchmarks that write checkpoint folders themselves. That this is Spark's format is
checked on files written by real Spark in ``tests/unit/test_checkpoint_log.py``."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

BATCH_METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
COMMIT_LOG = 'v1\n{"nextBatchWatermarkMs":0}'


def offset_log(*sources: str) -> str:
    """``offsets/N``: one line per source, each a source's offset JSON or ``-``."""
    return "\n".join(["v1", BATCH_METADATA, *sources])


def write_batch(folder: Path, query: str, batch: int, *sources: str) -> None:
    """Batch ``batch`` of query ``query`` planned and completed in a local folder, each
    file written whole at once as Spark writes them (a temporary file renamed into place:
    a follower polling meanwhile never reads half a file)."""
    (folder / "offsets").mkdir(parents=True, exist_ok=True)
    (folder / "commits").mkdir(exist_ok=True)
    _write_whole(folder / "metadata", json.dumps({"id": query}))
    _write_whole(folder / "offsets" / str(batch), offset_log(*sources))
    _write_whole(folder / "commits" / str(batch), COMMIT_LOG)


def _write_whole(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
