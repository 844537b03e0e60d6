"""Per-partition figures kept as columns (``core.lag.packed_rows``) read back as the rows they
were packed from, and the lag monitor keeps a group's figures in one object the cyclic
collector tracks whatever its partitions (what it scans between two reads)."""

from __future__ import annotations

import asyncio
import copy
import gc
import pickle
import random

import pytest

from spark_offset_sidecar.core import offsets
from spark_offset_sidecar.core.lag.figures import PackedLags, PartitionLag, figures_of
from spark_offset_sidecar.core.lag.packed_rows import NO_INT
from spark_offset_sidecar.core.lag.status import PackedStatuses, PartitionStatus, Status
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import CommittedOffsets, GroupState
from spark_offset_sidecar.core.offsets import TopicPartition, from_json, shared_partition
from spark_offset_sidecar.core.spark.progress import kafka_offsets
from spark_offset_sidecar.runtime.lag_monitor import LagMonitor
from spark_offset_sidecar.testing import InMemoryLogEnds, InMemoryRecordTimes


def some_lags(rng: random.Random, n: int) -> tuple[PartitionLag, ...]:
    def maybe(value: int) -> int | None:
        return None if rng.random() < 0.3 else value

    def maybe_real(value: float) -> float | None:
        return None if rng.random() < 0.3 else value

    return tuple(
        PartitionLag(
            rng.choice(["orders", "payments", "ü-topic"]),
            p,
            rng.randrange(0, 2**63 - 1),
            maybe(rng.randrange(0, 2**40)),
            maybe(2**63 - 1),
            maybe(rng.randrange(0, 10)),
            maybe_real(rng.choice([0.0, 1e-9, 3.5, 1e12])),
            rng.randrange(0, 5),
            maybe(0),
            maybe_real(rng.random() * 1000),
        )
        for p in range(n)
    )


@pytest.mark.parametrize("seed", range(20))
def test_packed_lags_read_back_as_the_rows_packed(seed: int) -> None:
    rows = some_lags(random.Random(seed), seed)
    packed = PackedLags(rows)
    assert tuple(packed) == rows
    assert packed == rows
    assert rows == packed
    assert len(packed) == len(rows)
    assert [packed[i] for i in range(len(rows))] == list(rows)
    assert packed[1:-1] == rows[1:-1]
    if rows:
        assert packed[-1] == rows[-1]
    assert hash(packed) == hash(rows)
    assert packed == PackedLags(rows)
    if rows:
        assert packed != PackedLags(rows[:-1])


@pytest.mark.parametrize("seed", range(10))
def test_the_figures_a_scrape_reads_are_the_rows_figures(seed: int) -> None:
    rows = some_lags(random.Random(seed), seed)
    from_rows = list(figures_of(rows))
    assert list(figures_of(PackedLags(rows))) == from_rows
    assert [(f.topic, f.partition, f.lag, f.lag_seconds, f.margin_seconds) for f in from_rows] == [
        (p.topic, p.partition, p.lag, p.lag_seconds, p.margin_seconds) for p in rows
    ]


def test_none_and_zero_are_kept_apart() -> None:
    rows = (
        PartitionLag("t", 0, 0, None, 0, None, 0.0, 0, None, None),
        PartitionLag("t", 1, 0, 0, None, 0, None, 0, 0, 0.0),
    )
    assert tuple(PackedLags(rows)) == rows
    assert PackedLags(rows[:1]) != PackedLags(rows[1:])


def test_an_index_out_of_range_is_refused() -> None:
    packed = PackedLags(some_lags(random.Random(1), 3))
    with pytest.raises(IndexError):
        packed[3]
    with pytest.raises(IndexError):
        packed[-4]


def test_packed_statuses_keep_every_status() -> None:
    rows = tuple(
        PartitionStatus("t", p, status, 2**62 + p, None if p % 2 else 9, None if p % 3 else p, p)
        for p, status in enumerate(list(Status) * 2)
    )
    packed = PackedStatuses(rows)
    assert tuple(packed) == rows
    assert packed == rows


def test_the_none_of_whole_numbers_is_below_every_offset() -> None:
    assert NO_INT < 0  # offsets, lags and counts are >= 0 (core.offsets)


def test_a_partition_is_one_object_however_often_it_is_read() -> None:
    nested = {"orders": {"0": 5, "1": 7}}
    first, second = from_json(nested), kafka_offsets(nested, "endOffset")
    assert [id(tp) for tp in first] == [id(tp) for tp in second]
    assert shared_partition("orders", 0) is next(iter(first))
    assert shared_partition("orders", 0) == TopicPartition("orders", 0)


def test_past_the_bound_partitions_are_made_equal_and_not_shared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offsets, "_shared", {})
    monkeypatch.setattr(offsets, "SHARED_MAX", 2)
    first, second = shared_partition("a", 0), shared_partition("a", 1)
    assert shared_partition("a", 0) is first
    assert shared_partition("a", 1) is second
    third = shared_partition("a", 2)
    assert third == TopicPartition("a", 2)
    assert shared_partition("a", 2) is not third  # the bound holds: not kept
    assert len(offsets._shared) == 2


def tracked_below(root: object) -> int:
    """The objects the cyclic collector tracks that ``root`` reaches (itself included),
    not counting the partitions' keys and names, which the ledger holds anyway."""
    gc.collect()  # tuples of untracked items are untracked at a collection
    seen: set[int] = set()
    stack = [root]
    while stack:
        item = stack.pop()
        if (
            id(item) in seen
            or not gc.is_tracked(item)
            or isinstance(item, (type, TopicPartition))  # a row's class is not its figures
        ):
            continue
        seen.add(id(item))
        stack.extend(gc.get_referents(item))
    return len(seen)


@pytest.mark.parametrize("partitions", [4, 64])
def test_the_monitor_keeps_a_group_in_a_fixed_number_of_objects(partitions: int) -> None:
    tps = [shared_partition("t", p) for p in range(partitions)]
    group = GroupState("g", "q", committed=CommittedOffsets("q", 1, dict.fromkeys(tps, 10), at=1.0))
    monitor = LagMonitor(
        lambda: Ledger(groups=[group]),
        InMemoryLogEnds(dict.fromkeys(tps, 50)),
        interval=5,
        err_after_failures=3,
        clock=lambda: 100.0,
        record_times=InMemoryRecordTimes(),
    )
    asyncio.run(monitor.poll())
    status, lag = monitor.statuses["g"], monitor.lags["g"]
    assert len(status.partitions) == len(lag.partitions) == partitions
    # A named tuple per partition would make these grow with ``partitions`` (4 or 64);
    # columns in arrays would be three objects. The packed rows are the only one.
    assert tracked_below(status.partitions) == 1
    assert tracked_below(lag.partitions) == 1


def test_a_partition_unpickled_is_its_process_shared_one() -> None:
    """What crosses to a child (a memory update, a batch) holds the child's shared
    partitions, not a copy of each per group."""
    made = TopicPartition("unpickled", 3)  # equal, not the shared one
    shared = shared_partition("unpickled", 3)
    assert made is not shared
    read = pickle.loads(pickle.dumps({made: 7, shared: 8}))
    assert read == {shared: 8}
    assert next(iter(read)) is shared
    assert copy.deepcopy(made) is shared
