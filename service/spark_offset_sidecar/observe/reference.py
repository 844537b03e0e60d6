"""Every series ``/metrics`` can export, read from the code that exports it, for the
manual's metrics reference (``scripts/references.py``) and the tests of the chart's queries."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from spark_offset_sidecar.observe.fleet_metrics import FAMILIES
from spark_offset_sidecar.observe.metrics import FolderFigures, SidecarMetrics

PER_GROUP = "per group"
PROCESS = "process"


@dataclass(frozen=True)
class SeriesDoc:
    name: str  # as a query names it (counters with _total; a histogram's base name)
    kind: str  # counter, gauge, histogram
    labels: tuple[str, ...]
    help: str
    scope: str  # PER_GROUP or PROCESS
    absent: str  # when there is no sample ("" for never)
    by_level: bool = False  # topic/partition labels follow SIDECAR_METRICS_GRANULARITY
    kafka_exporter: bool = False  # only with SIDECAR_EXPORT_KAFKA_LAG=true


class _Reads:
    succeeded = failed = record_reads = record_partitions = record_failures = 0


class _Lag:
    read_at = None
    counters = _Reads()


class _Pauses:
    seconds = longest = 0.0


class _Heap:
    pauses: Sequence[_Pauses] = (_Pauses(),)


_ABSENT = {
    "sidecar_followed_folder_newest_batch": "until the folder holds a commits/N",
    "sidecar_followed_folder_last_batch": "until a batch of the folder is recorded",
    "sidecar_store_step_cpu_seconds_total": "without replicas (SIDECAR_REPLICATED=true)",
}


def _process_series() -> Iterator[SeriesDoc]:
    registry = CollectorRegistry()
    metrics = SidecarMetrics(registry)
    metrics.watch_lag({None: _Lag()})
    metrics.watch_resent({None: lambda: 0})
    metrics.watch_heap(_Heap())
    folder = FolderFigures("s3://bucket/checkpoint", "group", 1, 1, 0.0, {}, 1)
    metrics.watch_folders(lambda: [folder], lambda: 0, ("reason",))
    metrics.store_step_cpu.labels("write")
    for family in registry.collect():
        name = family.name + "_total" if family.type == "counter" else family.name
        labels: list[str] = []
        for sample in family.samples:
            labels += [k for k in sample.labels if k not in labels and k != "le"]
        per_folder = "folder" in labels
        absent = _ABSENT.get(name, "")
        yield SeriesDoc(
            name, family.type, tuple(labels), family.documentation,
            "per followed folder" if per_folder else PROCESS, absent,
        )  # fmt: skip


def series() -> list[SeriesDoc]:
    """Every series, per-group ones first, each family once."""
    per_group = [
        SeriesDoc(
            name=spec.sample_name,
            kind=spec.kind,
            labels=spec.labels,
            help=spec.help,
            scope=PER_GROUP,
            absent=spec.absent,
            by_level=spec.by_level,
            kafka_exporter=spec.kafka_exporter,
        )
        for spec in FAMILIES
    ]
    return per_group + sorted(_process_series(), key=lambda s: (s.scope, s.name))
