"""Prometheus metrics on an injected registry: the process-wide ones (the per-group ones
are ``observe.fleet_metrics``'s; ``/metrics`` serves this registry's text, then those)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from spark_offset_sidecar import __version__
from spark_offset_sidecar.core.clusters import Clusters


def package_version() -> str:
    """The release this is: the API schema's version and ``sidecar_build_info``'s."""
    return __version__


class LagReads(Protocol):
    """How many reads of the log ends and of record timestamps succeeded and failed."""

    succeeded: int
    failed: int
    record_reads: int
    record_partitions: int
    record_failures: int


class LagView(Protocol):
    """What the lag metrics read at scrape time (``runtime.lag_monitor.LagMonitor`` is one)."""

    @property
    def read_at(self) -> float | None: ...
    @property
    def counters(self) -> LagReads: ...


class GenerationPauses(Protocol):
    seconds: float
    longest: float


class HeapView(Protocol):
    """The garbage collector's pauses as ``heap.HeapKeeper`` counts them."""

    @property
    def pauses(self) -> Sequence[GenerationPauses]: ...


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


# Why an event is refused before the ledger: every reason stands at 0 from the start.
INVALID_REASONS = ("validation", "too_large", "unauthenticated", "forbidden", "rate_limited")


class SidecarMetrics:
    """Metrics updated where things happen (the rest are read at scrape time)."""

    def __init__(self, registry: CollectorRegistry, clusters: Clusters | None = None) -> None:
        """``clusters``: with several Kafka clusters, the commits' durations are by cluster
        (``cluster_name``, each cluster's at 0 from the start); None: one, no label."""
        self.registry = registry
        self._names: Callable[[str | None], str] | None = clusters.name_of if clusters else None
        counter = partial(Counter, registry=registry)
        gauge = partial(Gauge, registry=registry)
        histogram = partial(Histogram, registry=registry)
        # Not by group: 15 series a group would be most of a scrape at fleet scale.
        self.commit_duration = histogram(
            "sidecar_commit_duration_seconds",
            "Time of one offset commit to Kafka, failed ones included (all groups).",
            ["cluster_name"] if clusters is not None else (),
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        for name in clusters.names if clusters is not None else ():
            self.commit_duration.labels(name)
        self.invalid_events = counter(
            "sidecar_events_invalid",
            "Events refused before reaching the ledger (malformed, too large).",
            ["reason"],
        )
        for reason in INVALID_REASONS:
            self.invalid_events.labels(reason)
        self.store_batch_items = histogram(
            "sidecar_store_batch_items",
            "Events and commit results written in one database transaction (group commit).",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
        )
        self.store_write_duration = histogram(
            "sidecar_store_write_duration_seconds",
            "Time of one database transaction of the ledger, failed ones included.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5),
        )
        self.store_step_cpu = counter(
            "sidecar_store_step_cpu_seconds",
            "With replicas: CPU of the store's thread in each step of its batches (reach, "
            "lock, load, fence, write, notify, commit); waiting for the database not counted.",
            ["step"],
        )
        self.store_unavailable = counter(
            "sidecar_store_unavailable",
            "Events answered 503 because the database could not take the write.",
        )
        self.store_writer_lost = counter(
            "sidecar_store_writer_lost",
            "Times the batches' writer process ended unasked (a batch's events then answered "
            "503 and its rows read back; a new writer started); 0 where a thread writes.",
        )
        self.commits_fenced = counter(
            "sidecar_commits_fenced",
            "Successful commits not recorded because another replica owns the group now.",
        )
        self.takeover_mismatches = counter(
            "sidecar_takeover_mismatches",
            "Groups this replica took whose offsets in Kafka differed from the store's last "
            "commit (a late commit of the old owner); each is committed again.",
        )
        self.loop_lag = histogram(
            "sidecar_event_loop_lag_seconds",
            "How much later than due the event loop woke a ticker (every 50 ms): the time "
            "an event arriving then waits before it is read.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.groups_owned = gauge(
            "sidecar_groups_owned",
            "Groups this replica holds the lease of and commits (with replicas).",
        )
        build = gauge(
            "sidecar_build_info",
            "Build of the running service; always 1.",
            ["version"],
        )
        build.labels(package_version()).set(1)

    def watch_lag(
        self, monitors: Mapping[str | None, LagView], also: CollectorRegistry | None = None
    ) -> None:
        """Each Kafka cluster's lag monitor's reads (keyed as the ledger keeps clusters).
        ``also``: a registry that exports them too (a watcher's share of ``/metrics``)."""
        collector = Collected(lambda: _lag_families(monitors, self._names))
        self.registry.register(collector)
        if also is not None:
            also.register(collector)

    def commit_took(self, cluster: str | None, seconds: float) -> None:
        """One commit's duration, to ``cluster`` (as the ledger keeps it)."""
        if self._names is None:
            self.commit_duration.observe(seconds)
        else:
            self.commit_duration.labels(self._names(cluster)).observe(seconds)

    def watch_resent(self, resent: Mapping[str | None, Callable[[], int]]) -> None:
        """Requests sent again after the broker closed their connection, by cluster."""
        self.registry.register(Collected(lambda: _resent_families(resent, self._names)))

    def watch_heap(self, heap: HeapView) -> None:
        self.registry.register(Collected(lambda: _heap_families(heap)))

    def watch_folders(
        self,
        folders: Callable[[], Iterable[FolderFigures]],
        requests: Callable[[], int],
        reasons: Iterable[str],
    ) -> None:
        known = tuple(reasons)
        self.registry.register(Collected(lambda: _folder_families(folders(), requests(), known)))


class Collected(Collector):
    """The families ``collect`` makes at each scrape."""

    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()


def _lag_families(
    monitors: Mapping[str | None, LagView], names: Callable[[str | None], str] | None
) -> Iterator[Metric]:
    """The lag monitor's own reads (per Kafka cluster when there are several)."""
    cluster = ["cluster_name"] if names is not None else []
    reads = CounterMetricFamily(
        "sidecar_log_end_reads",
        "Reads of the brokers' log-end (and log-start) offsets, by result.",
        labels=[*cluster, "result"],
    )
    read_at = GaugeMetricFamily(
        "sidecar_log_end_read_timestamp_seconds",
        "Unix time of the last successful read of the log-end offsets (0: none yet).",
        labels=cluster,
    )
    record_reads = CounterMetricFamily(
        "sidecar_record_time_reads",
        "Reads of record timestamps from Kafka (for the time lag of partitions whose "
        "oldest unprocessed record is older than the log-end history), by result.",
        labels=[*cluster, "result"],
    )
    record_partitions = CounterMetricFamily(
        "sidecar_record_time_partitions",
        "Partitions whose record timestamp was read from Kafka (one fetch each).",
        labels=cluster,
    )
    for key, monitor in monitors.items():
        at = [names(key)] if names is not None else []
        counters = monitor.counters
        reads.add_metric([*at, "succeeded"], counters.succeeded)
        reads.add_metric([*at, "failed"], counters.failed)
        read_at.add_metric(at, monitor.read_at or 0.0)
        succeeded = counters.record_reads - counters.record_failures
        record_reads.add_metric([*at, "succeeded"], succeeded)
        record_reads.add_metric([*at, "failed"], counters.record_failures)
        record_partitions.add_metric(at, counters.record_partitions)
    yield from (reads, read_at, record_reads, record_partitions)


def _resent_families(
    resent: Mapping[str | None, Callable[[], int]], names: Callable[[str | None], str] | None
) -> Iterator[Metric]:
    family = CounterMetricFamily(
        "sidecar_kafka_requests_resent",
        "Commits and log-end reads sent again on a new connection after the broker "
        "closed theirs under them (with OAUTHBEARER: a token that expired); not failures.",
        labels=["cluster_name"] if names is not None else None,
        value=None if names is not None else sum(n() for n in resent.values()),
    )
    if names is not None:
        for cluster, count in resent.items():
            family.add_metric([names(cluster)], count())
    yield family


def _heap_families(heap: HeapView) -> Iterator[Metric]:
    """The cyclic garbage collector's pauses: every event waits while one runs."""
    seconds = CounterMetricFamily(
        "sidecar_gc_pause_seconds",
        "Time the process stood in cyclic garbage collections, by generation (2: full).",
        labels=["generation"],
    )
    longest = GaugeMetricFamily(
        "sidecar_gc_pause_longest_seconds",
        "The longest garbage collection since start, by generation.",
        labels=["generation"],
    )
    for generation, pauses in enumerate(heap.pauses):
        seconds.add_metric([str(generation)], pauses.seconds)
        longest.add_metric([str(generation)], pauses.longest)
    yield from (seconds, longest)


def _folder_families(
    folders: Iterable[FolderFigures], requests: int, reasons: tuple[str, ...]
) -> Iterator[Metric]:
    """Followed checkpoint folders (``runtime.checkpoint_follower``), by path (``folder``)."""
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
    calls = CounterMetricFamily(
        "sidecar_checkpoint_storage_requests",
        "Calls to the checkpoint storage (a listing, a read, an existence check: one each).",
        value=requests,
    )
    for folder in folders:
        key = [folder.path, folder.group_id]
        if folder.newest_in_folder is not None:
            newest.add_metric(key, folder.newest_in_folder)
        if folder.last_recorded is not None:
            recorded.add_metric(key, folder.last_recorded)
        behind.add_metric(key, folder.behind_seconds)
        polls.add_metric(key, folder.polls)
        for reason in reasons:
            errors.add_metric([*key, reason], folder.errors.get(reason, 0))
    yield from (newest, recorded, behind, errors, polls, calls)
