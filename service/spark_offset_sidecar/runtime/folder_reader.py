"""One poll of one Spark checkpoint folder: what is new since the last poll.

Cheap as the checkpoint grows: a folder is listed (and its ``metadata`` read) only when
its reader starts, after a failed poll, and every ``relist_every`` polls (Spark's purge of
old batches, ``minBatchesToRetain``, may then have passed the reader). Between listings
the reader only probes the next batch ids: Spark's batch ids are consecutive and it never
deletes the newest ones, so

- a poll with nothing new costs 1 request: ``offsets/{last + 1}`` (absent: no batch is
  planned, so none can be committed either);
- a batch running costs 1: ``commits/{last + 1}`` (absent);
- anything new is first checked against ``metadata`` (is it still the same query? a
  re-created checkpoint is listed anew), then k new completed batches cost about
  2 log2(k) existence probes (gallop, then bisect) and 2 reads (the newest batch's
  ``offsets/N`` and ``commits/N``), plus one read of the next planned batch.

A re-created checkpoint is noticed when its batches reach the reader's next batch id, or
at the next listing, whichever comes first; no batch of it is ever taken for the old
query's.

Only the newest completed batch is reported: older ones would be replaced in the group's
slot before any commit anyway (Flink's rule; the ledger would count them as skipped).

Blocking (the storage port is); the follower runs it in a worker thread.
Invariant: a batch is reported complete only if ``commits/N`` is a whole commit-log entry
and ``offsets/N`` a readable offset log; anything else raises and reports nothing.
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
