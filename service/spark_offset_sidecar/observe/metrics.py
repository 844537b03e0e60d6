"""Prometheus metrics on an injected registry.

Per-group series come from ``LedgerCollector``, which reads the ledger at scrape time:
they exist (at zero) from the moment a group appears and vanish with nothing to leak.
Labels are ``consumergroup``, ``topic``, ``partition`` (kafka_exporter's names), and the
bounded ``reason``, ``outcome`` and ``status`` sets; never a batch or run id.

``LagCollector`` exports each group's status as of the lag monitor's last read and, when
``SIDECAR_EXPORT_KAFKA_LAG`` is on, kafka_exporter's own series for the groups we commit
(``kafka_consumergroup_lag``, ``..._current_offset`` and their per-topic ``_sum``), so that
dashboards built for kafka_exporter work unchanged. It is off by default: where
kafka_exporter already runs, it reports these groups too and the sums would double.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from spark_offset_sidecar.core.changes import Outcome
from spark_offset_sidecar.core.group_status import SEVERITY, GroupStatus
from spark_offset_sidecar.core.ledger import Ledger, checkpoints_behind
from spark_offset_sidecar.errors import COMMIT_FAILURE_REASONS

OUTCOMES = [o.value for o in Outcome]
FAILURE_REASONS = sorted(COMMIT_FAILURE_REASONS | {"internal_error"})


def package_version() -> str:
    try:
        return version("spark-offset-sidecar")
    except PackageNotFoundError:
        return "unknown"


class LagReads(Protocol):
    """How many reads of the log ends succeeded and failed."""

    @property
    def succeeded(self) -> int: ...
    @property
    def failed(self) -> int: ...


class LagView(Protocol):
    """What the lag metrics read at scrape time (``runtime.lag_monitor.LagMonitor`` is
    one): observe sees the runtime's state through this, never the runtime's modules."""

    @property
    def statuses(self) -> Mapping[str, GroupStatus]: ...
    @property
    def read_at(self) -> float | None: ...
    @property
    def counters(self) -> LagReads: ...


@dataclass(frozen=True)
class FolderFigures:
    """One followed checkpoint folder, as the follower sees it at scrape time."""

    path: str
    group_id: str
    newest_in_folder: int | None
    last_recorded: int | None
    behind_seconds: float
    errors: Mapping[str, int]
    polls: int


class SidecarMetrics:
    """Metrics updated where things happen (the rest come from ``LedgerCollector``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.commit_duration = Histogram(
            "sidecar_commit_duration_seconds",
            "Time of one offset commit to Kafka, failed ones included.",
            ["consumergroup"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.invalid_events = Counter(
            "sidecar_events_invalid",
            "Events refused before reaching the ledger (malformed, too large).",
            ["reason"],
            registry=registry,
        )
        self.store_batch_items = Histogram(
            "sidecar_store_batch_items",
            "Events and commit results written in one database transaction (group commit).",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
            registry=registry,
        )
        self.store_write_duration = Histogram(
            "sidecar_store_write_duration_seconds",
            "Time of one database transaction of the ledger, failed ones included.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
            registry=registry,
        )
        self.store_step_cpu = Counter(
            "sidecar_store_step_cpu_seconds",
            "With replicas: CPU of the store's thread in each step of its batches (reach, "
            "lock, load, fence, write, notify, commit); waiting for the database not counted.",
            ["step"],
            registry=registry,
        )
        self.store_unavailable = Counter(
            "sidecar_store_unavailable",
            "Events answered 503 because the database could not take the write.",
            registry=registry,
        )
        self.commits_fenced = Counter(
            "sidecar_commits_fenced",
            "Successful commits not recorded because another replica owns the group now.",
            registry=registry,
        )
        self.takeover_mismatches = Counter(
            "sidecar_takeover_mismatches",
            "Groups this replica took whose offsets in Kafka differed from the store's last "
            "commit (a late commit of the old owner); each is committed again.",
            registry=registry,
        )
        self.groups_owned = Gauge(
            "sidecar_groups_owned",
            "Groups this replica holds the lease of and commits (with replicas).",
            registry=registry,
        )
        build = Gauge(
            "sidecar_build_info",
            "Build of the running service; always 1.",
            ["version"],
            registry=registry,
        )
        build.labels(package_version()).set(1)

    def watch(self, ledger: Callable[[], Ledger], clock: Callable[[], float] = time.time) -> None:
        self.registry.register(LedgerCollector(ledger, clock))

    def watch_lag(self, monitor: LagView, *, export_kafka_lag: bool) -> None:
        self.registry.register(LagCollector(monitor, export_kafka_lag=export_kafka_lag))

    def watch_folders(
        self,
        folders: Callable[[], Iterable[FolderFigures]],
        requests: Callable[[], int],
        reasons: Iterable[str],
    ) -> None:
        self.registry.register(FolderCollector(folders, requests, tuple(reasons)))


class LedgerCollector(Collector):
    def __init__(self, ledger: Callable[[], Ledger], clock: Callable[[], float]) -> None:
        self._ledger = ledger
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        ledger = self._ledger()
        group_label = ["consumergroup"]
        succeeded = CounterMetricFamily(
            "sidecar_commits_succeeded", "Offset commits Kafka accepted.", labels=group_label
        )
        failed = CounterMetricFamily(
            "sidecar_commits_failed",
            "Offset commits that failed, by reason.",
            labels=["consumergroup", "reason"],
        )
        skipped = CounterMetricFamily(
            "sidecar_commits_skipped",
            "Completed checkpoints replaced in the slot by a newer one before being committed.",
            labels=group_label,
        )
        events = CounterMetricFamily(
            "sidecar_events",
            "Checkpoint events by outcome.",
            labels=["consumergroup", "outcome"],
        )
        dropped = CounterMetricFamily(
            "sidecar_pending_dropped",
            "Pending checkpoints dropped because the queue was full.",
            labels=group_label,
        )
        refreshed = CounterMetricFamily(
            "sidecar_commits_refreshed",
            "Commits of an idle group's unchanged offsets, before Kafka's retention drops them.",
            labels=group_label,
        )
        held_back = CounterMetricFamily(
            "sidecar_partitions_held_back",
            "Partitions kept at their committed offset instead of moving backwards.",
            labels=group_label,
        )
        pending = GaugeMetricFamily(
            "sidecar_pending_checkpoints", "Checkpoints waiting for completion.", labels=group_label
        )
        in_flight = GaugeMetricFamily(
            "sidecar_commit_in_flight",
            "1 while a commit of the group is in flight.",
            labels=group_label,
        )
        last_success = GaugeMetricFamily(
            "sidecar_last_successful_commit_timestamp_seconds",
            "Unix time of the group's last successful commit.",
            labels=group_label,
        )
        committed = GaugeMetricFamily(
            "sidecar_committed_offset",
            "Offset last committed (the next offset the query reads).",
            labels=["consumergroup", "topic", "partition"],
        )
        behind = GaugeMetricFamily(
            "sidecar_commit_behind_checkpoints",
            "Completed checkpoints the committed offsets trail the newest by (a commit "
            "interval, or commits failing).",
            labels=group_label,
        )
        behind_seconds = GaugeMetricFamily(
            "sidecar_commit_behind_seconds",
            "How long the newest completed checkpoint has waited uncommitted (0: none waits).",
            labels=group_label,
        )
        now = self._clock()
        for outcome, count in ledger.unattributed.items():
            events.add_metric(["", outcome], count)
        for group in ledger.groups.values():
            g = group.group_id
            counters = group.counters
            succeeded.add_metric([g], counters.succeeded)
            skipped.add_metric([g], counters.skipped)
            dropped.add_metric([g], counters.pending_dropped)
            held_back.add_metric([g], counters.held_back)
            refreshed.add_metric([g], counters.refreshed)
            for reason in FAILURE_REASONS:
                failed.add_metric([g, reason], counters.failed[reason])
            for outcome in OUTCOMES:
                events.add_metric([g, outcome], counters.events[outcome])
            if not ledger.commits(g):  # another replica reports the group's state
                continue
            query = ledger.queries.get(group.query_id or "")
            pending.add_metric([g], len(query.pending) if query else 0)
            in_flight.add_metric([g], 1 if group.in_flight else 0)
            behind.add_metric([g], checkpoints_behind(group))
            behind_seconds.add_metric(
                [g], max(0.0, now - group.slot.created_at) if group.slot else 0
            )
            if group.committed is not None:
                last_success.add_metric([g], group.committed.at)
                for tp, offset in sorted(group.committed.offsets.items()):
                    committed.add_metric([g, tp.topic, str(tp.partition)], offset)
        yield from (succeeded, failed, skipped, events, dropped, held_back, refreshed)
        yield from (pending, in_flight, last_success, committed, behind, behind_seconds)


class LagCollector(Collector):
    def __init__(self, monitor: LagView, *, export_kafka_lag: bool) -> None:
        self._monitor = monitor
        self._export_kafka_lag = export_kafka_lag

    def collect(self) -> Iterator[Metric]:
        monitor = self._monitor
        status = GaugeMetricFamily(
            "sidecar_consumergroup_status",
            "1 for the group's status (Burrow's evaluator: OK, WARN, STALL, STOP, REWIND, ERR) "
            "as of the last read of the log ends, 0 for the others.",
            labels=["consumergroup", "status"],
        )
        reads = CounterMetricFamily(
            "sidecar_log_end_reads",
            "Reads of the brokers' log-end offsets, by result.",
            labels=["result"],
        )
        reads.add_metric(["succeeded"], monitor.counters.succeeded)
        reads.add_metric(["failed"], monitor.counters.failed)
        read_at = GaugeMetricFamily(
            "sidecar_log_end_read_timestamp_seconds",
            "Unix time of the last successful read of the log-end offsets (0: none yet).",
            value=monitor.read_at or 0.0,
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "Current approximate lag of a consumer group at topic/partition",
            labels=["consumergroup", "topic", "partition"],
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Current approximate lag of a consumer group for a topic",
            labels=["consumergroup", "topic"],
        )
        offset = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Current offset of a consumer group at topic/partition",
            labels=["consumergroup", "topic", "partition"],
        )
        offset_sum = GaugeMetricFamily(
            "kafka_consumergroup_current_offset_sum",
            "Current offset of a consumer group for a topic",
            labels=["consumergroup", "topic"],
        )
        for group_id, evaluated in monitor.statuses.items():
            for each in SEVERITY:
                status.add_metric([group_id, each.value], 1 if each is evaluated.status else 0)
            if not self._export_kafka_lag:
                continue
            lags: dict[str, int] = {}
            offsets: dict[str, int] = {}
            for p in evaluated.partitions:
                offset.add_metric([group_id, p.topic, str(p.partition)], p.offset)
                offsets[p.topic] = offsets.get(p.topic, 0) + p.offset
                if p.current_lag is not None:
                    lag.add_metric([group_id, p.topic, str(p.partition)], p.current_lag)
                    lags[p.topic] = lags.get(p.topic, 0) + p.current_lag
            for topic, total in offsets.items():
                offset_sum.add_metric([group_id, topic], total)
            for topic, total in lags.items():
                lag_sum.add_metric([group_id, topic], total)
        yield from (status, reads, read_at)
        if self._export_kafka_lag:
            yield from (lag, lag_sum, offset, offset_sum)


class FolderCollector(Collector):
    """Followed checkpoint folders (``runtime.checkpoint_follower``); the label ``folder``
    is the folder's path (one series per followed folder, like one per group)."""

    def __init__(
        self,
        folders: Callable[[], Iterable[FolderFigures]],
        requests: Callable[[], int],
        reasons: tuple[str, ...],
    ) -> None:
        self._folders = folders
        self._requests = requests
        self._reasons = reasons

    def collect(self) -> Iterator[Metric]:
        labels = ["folder", "consumergroup"]
        newest = GaugeMetricFamily(
            "sidecar_followed_folder_newest_batch",
            "The newest commits/N seen in the checkpoint folder.",
            labels=labels,
        )
        recorded = GaugeMetricFamily(
            "sidecar_followed_folder_last_batch",
            "The newest completed batch of the folder handed to the ledger.",
            labels=labels,
        )
        behind = GaugeMetricFamily(
            "sidecar_followed_folder_behind_seconds",
            "How long a completed batch of the folder has waited to be recorded (0: none).",
            labels=labels,
        )
        errors = CounterMetricFamily(
            "sidecar_followed_folder_errors",
            "Failed polls of the folder, by reason.",
            labels=[*labels, "reason"],
        )
        polls = CounterMetricFamily(
            "sidecar_followed_folder_polls",
            "Polls of the folder by this replica, failed ones included.",
            labels=labels,
        )
        requests = CounterMetricFamily(
            "sidecar_checkpoint_storage_requests",
            "Calls to the checkpoint storage (a listing, a read, an existence check: one each).",
            value=self._requests(),
        )
        for folder in self._folders():
            key = [folder.path, folder.group_id]
            if folder.newest_in_folder is not None:
                newest.add_metric(key, folder.newest_in_folder)
            if folder.last_recorded is not None:
                recorded.add_metric(key, folder.last_recorded)
            behind.add_metric(key, folder.behind_seconds)
            polls.add_metric(key, folder.polls)
            for reason in self._reasons:
                errors.add_metric([*key, reason], folder.errors.get(reason, 0))
        yield from (newest, recorded, behind, errors, polls, requests)
