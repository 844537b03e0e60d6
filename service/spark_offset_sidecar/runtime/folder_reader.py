"""One poll of one Spark checkpoint folder: what is new since the last poll
(docs/attach/checkpoint-folder.md, "How it reads"; docs/decisions.md, "A quiet poll is one
request").

Between listings only the next batch ids are probed: Spark's ids are consecutive and it
never deletes the newest, so a quiet poll costs one request, and k new batches about
2 log2(k) probes (gallop, then bisect) and 3 reads. Blocking (the storage port is): the
follower runs it in a worker thread. A batch is reported complete only if ``commits/N``
is a whole commit-log entry and ``offsets/N`` a readable offset log.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_offset_sidecar.core.spark.checkpoint_log import (
    OffsetLogEntry,
    parse_commit_log,
    parse_metadata,
    parse_offset_log,
)
from spark_offset_sidecar.errors import CheckpointFileMissing
from spark_offset_sidecar.ports.checkpoints import CheckpointStorage


@dataclass
class ReadPosition:
    """Where this replica's reading of a folder stands (memory only: after a restart the
    folder is listed again and the ledger answers ``duplicate`` for what it had)."""

    query_id: str | None = None
    completed: int | None = None  # newest batch reported complete and recorded
    pending: int | None = None  # newest batch reported as planned and recorded
    polls_since_listing: int = 0


@dataclass(frozen=True)
class FolderNews:
    query_id: str
    newest_committed: int | None  # the newest ``commits/N`` in the folder
    completed: tuple[int, OffsetLogEntry] | None  # newest completed batch, to record
    planned: tuple[int, OffsetLogEntry] | None  # the batch after it, planned, not done
    query_changed: bool  # metadata names another query than the position did
    listed: bool = False  # this poll listed the folder


def read_news(
    storage: CheckpointStorage, path: str, at: ReadPosition, *, relist_every: int
) -> FolderNews:
    """What ``path`` holds beyond ``at`` (``at`` is not changed: the caller moves it once
    the news is recorded)."""
    if at.query_id is None or at.completed is None or at.polls_since_listing >= relist_every:
        return _listed(storage, path, at)
    last = at.completed
    planned = None
    if at.pending != last + 1:
        planned = _offsets(storage, path, last + 1)
        if planned is None:
            return FolderNews(at.query_id, last, None, None, False)  # idle: 1 request
    elif not storage.exists(f"{path}/commits/{last + 1}"):
        return FolderNews(at.query_id, last, None, None, False)  # running: 1 request
    # Something new: whose is it? (A re-created checkpoint starts over at batch 0.)
    if _query_id(storage, path) != at.query_id:
        return _listed(storage, path, at)
    if planned is not None and not storage.exists(f"{path}/commits/{last + 1}"):
        return FolderNews(at.query_id, last, None, (last + 1, planned), False)
    newest = _newest_from(storage, path, last + 1)
    return _news(storage, path, at.query_id, newest, at, False)


def _query_id(storage: CheckpointStorage, path: str) -> str:
    metadata = storage.read_text(f"{path}/metadata")
    if metadata is None:
        raise CheckpointFileMissing(f"{path}/metadata", 1, "does not exist (no checkpoint yet)")
    return parse_metadata(metadata, f"{path}/metadata")


def _listed(storage: CheckpointStorage, path: str, at: ReadPosition) -> FolderNews:
    query_id = _query_id(storage, path)
    changed = at.query_id is not None and at.query_id != query_id
    return _from_listing(storage, path, query_id, ReadPosition() if changed else at, changed)


def _from_listing(
    storage: CheckpointStorage, path: str, query_id: str, at: ReadPosition, changed: bool
) -> FolderNews:
    committed = storage.batch_ids(f"{path}/commits")
    if not committed:
        planned_ids = storage.batch_ids(f"{path}/offsets")
        if not planned_ids:
            return FolderNews(query_id, None, None, None, changed, listed=True)
        first = max(planned_ids)
        entry = _offsets(storage, path, first)
        planned = (first, entry) if entry else None
        return FolderNews(query_id, None, None, planned, changed, listed=True)
    return _news(storage, path, query_id, max(committed), at, changed, listed=True)


def _news(
    storage: CheckpointStorage,
    path: str,
    query_id: str,
    newest: int,
    at: ReadPosition,
    changed: bool,
    *,
    listed: bool = False,
) -> FolderNews:
    completed = None
    if newest != at.completed:
        commit = storage.read_text(f"{path}/commits/{newest}")
        if commit is None:  # purged between the listing and now: the next poll lists again
            raise CheckpointFileMissing(f"{path}/commits/{newest}", 1, "vanished while read")
        parse_commit_log(commit, f"{path}/commits/{newest}")
        entry = _offsets(storage, path, newest)
        if entry is None:
            raise CheckpointFileMissing(
                f"{path}/offsets/{newest}", 1, f"does not exist, but commits/{newest} does"
            )
        completed = (newest, entry)
    planned = None
    if at.pending != newest + 1:
        following = _offsets(storage, path, newest + 1)
        planned = (newest + 1, following) if following is not None else None
    return FolderNews(query_id, newest, completed, planned, changed, listed)


def _offsets(storage: CheckpointStorage, path: str, batch: int) -> OffsetLogEntry | None:
    text = storage.read_text(f"{path}/offsets/{batch}")
    return None if text is None else parse_offset_log(text, f"{path}/offsets/{batch}")


def _newest_from(storage: CheckpointStorage, path: str, present: int) -> int:
    """The newest ``commits/N``, knowing ``commits/{present}`` exists and ids are
    consecutive: gallop forward until one is missing, then bisect."""
    low, step = present, 1
    while storage.exists(f"{path}/commits/{low + step}"):
        low, step = low + step, step * 2
    high = low + step  # missing
    while high - low > 1:
        middle = (low + high) // 2
        if storage.exists(f"{path}/commits/{middle}"):
            low = middle
        else:
            high = middle
    return low
