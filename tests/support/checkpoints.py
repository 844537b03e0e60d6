"""Spark's checkpoint files as Spark writes them (offset log v1, commit log v1), for tests
and benchmarks that write checkpoint folders themselves. That this is Spark's format is
checked on files written by real Spark in ``tests/unit/test_checkpoint_log.py``."""

from __future__ import annotations

import json
from pathlib import Path

BATCH_METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'
COMMIT_LOG = 'v1\n{"nextBatchWatermarkMs":0}'


def offset_log(*sources: str) -> str:
    """``offsets/N``: one line per source, each a source's offset JSON or ``-``."""
    return "\n".join(["v1", BATCH_METADATA, *sources])


def write_batch(folder: Path, query: str, batch: int, *sources: str) -> None:
    """Batch ``batch`` of query ``query`` planned and completed in a local folder."""
    (folder / "offsets").mkdir(parents=True, exist_ok=True)
    (folder / "commits").mkdir(exist_ok=True)
    (folder / "metadata").write_text(json.dumps({"id": query}))
    (folder / "offsets" / str(batch)).write_text(offset_log(*sources))
    (folder / "commits" / str(batch)).write_text(COMMIT_LOG)
