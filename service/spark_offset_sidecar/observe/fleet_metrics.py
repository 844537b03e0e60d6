"""The per-group series of ``/metrics``: what grows with the fleet, rendered by hand.

At 5,000 groups the per-group series are nearly all of a scrape. prometheus_client's
collectors build every sample as an object and format it at once, on the event loop:
seconds during which no event is answered. Here they are written straight to text,
handing the event loop back every few milliseconds (``turns``), and the text is kept
for ``max_age`` seconds: scrapes that come together (two Prometheus replicas, a
dashboard) share one build, and a scrape that finds a build under way waits for it
instead of starting another.

What is exported per group (docs/operate/metrics.md lists every series):
  - ``granularity`` ``topic`` (default): lag figures per group and topic; ``partition``
    adds the partition label and the committed offset of each partition; ``group`` keeps
    only the group label.
  - ``groups`` / ``exclude_groups`` and ``topics`` / ``exclude_topics``: shell patterns
    of what is exported at all (a group excluded is in no per-group series; a topic
    excluded in no per-topic one).
  - No series that would be zero for the group: a counter appears with its first count
    (the failure reasons and event outcomes a group has seen), a gauge of something
    pending, held or in flight while it is so, a figure while it is known. Absent means
    zero (or unknown), as kafka_exporter leaves out what it cannot read.
  - Statuses are one series per group, the current one, at 1 (``status`` label).

Invariants
  - The text is as of one build: groups that appear or go during a build are in it or
    not, never half.
  - A family's samples stand together under its one HELP and TYPE, in group order.
"""

from __future__ import annotations

import asyncio
import gzip
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from spark_offset_sidecar.core.lag_figures import max_lag_seconds
from spark_offset_sidecar.core.ledger import Ledger, checkpoints_behind
from spark_offset_sidecar.core.patterns import matcher
from spark_offset_sidecar.turns import Turns

if TYPE_CHECKING:
    from spark_offset_sidecar.core.group_status import GroupStatus, PartitionStatus
    from spark_offset_sidecar.core.lag_figures import GroupLag, PartitionLag


class FleetView(Protocol):
    """What the lag monitor keeps that the per-group series read."""

    @property
    def statuses(self) -> Mapping[str, GroupStatus]: ...
    @property
    def lags(self) -> Mapping[str, GroupLag]: ...
    @property
    def lost(self) -> Mapping[str, Mapping[str, int]]: ...


@dataclass(frozen=True)
class FleetOptions:
    granularity: str = "topic"  # group, topic or partition
    groups: tuple[str, ...] = ("*",)
    exclude_groups: tuple[str, ...] = ()
    topics: tuple[str, ...] = ("*",)
    exclude_topics: tuple[str, ...] = ()
    export_kafka_lag: bool = False  # kafka_exporter's own series too
    max_age: float = 1.0

    # Set in __post_init__ from the patterns, compiled once.
    group_shown: Callable[[str], bool] = field(init=False, repr=False, compare=False)
    topic_shown: Callable[[str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keep_g, drop_g = matcher(self.groups), matcher(self.exclude_groups)
        keep_t, drop_t = matcher(self.topics), matcher(self.exclude_topics)
        object.__setattr__(self, "group_shown", lambda g: keep_g(g) and not drop_g(g))
        object.__setattr__(self, "topic_shown", lambda t: keep_t(t) and not drop_t(t))


def escape(value: str) -> str:
    """A label value as the text format writes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isfinite(value):
        return repr(value)
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


class Family:
    """One metric family's text: HELP, TYPE, then its samples as they are added."""

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.sample_name = name + "_total" if kind == "counter" else name
        self.head = f"# HELP {self.sample_name} {help_text}\n# TYPE {self.sample_name} {kind}\n"
        self.lines: list[str] = []

    def add(self, labels: str, value: float) -> None:
        self.lines.append(f"{self.sample_name}{{{labels}}} {number(value)}\n")

    def text(self) -> str:
        return self.head + "".join(self.lines)


class FleetExposition:
    def __init__(
        self,
        ledger: Callable[[], Ledger],
        monitor: Callable[[], FleetView | None],
        options: FleetOptions,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        head: Callable[[], bytes] = bytes,
    ) -> None:
        """``head``: text to put before the per-group series in each build (the
        registry's process-wide series)."""
        self._head = head
        self._ledger = ledger
        self._monitor = monitor
        self.options = options
        self._monotonic = monotonic
        self._text = self._gzip = b""
        self._built_at = -math.inf
        self._building: asyncio.Future[tuple[bytes, bytes]] | None = None
        self.builds = 0
        self.clock = clock

    async def render(self) -> bytes:
        """``head`` and the per-group series, built at most ``max_age`` seconds ago."""
        return (await self.rendered())[0]

    async def rendered(self) -> tuple[bytes, bytes]:
        """``head`` and the per-group series as text and gzip-compressed, built at most
        ``max_age`` seconds ago."""
        if self._monotonic() - self._built_at < self.options.max_age:
            return self._text, self._gzip
        if self._building is None:
            self._building = asyncio.ensure_future(self._build())
        building = self._building
        try:
            return await asyncio.shield(building)
        finally:
            if self._building is building and building.done():
                self._building = None

    async def _build(self) -> tuple[bytes, bytes]:
        started = self._monotonic()
        families = _families(self.options)
        ledger = self._ledger()
        monitor = self._monitor()
        for outcome, count in sorted(ledger.unattributed.items()):
            if count:
                families["events"].add(f'consumergroup="",outcome="{outcome}"', count)
        group_ids = sorted(g for g in ledger.groups if self.options.group_shown(g))
        now = self.clock()
        turns = Turns()
        for group_id in group_ids:
            self._group(families, ledger, monitor, group_id, now)
            if await turns.take():
                ledger, monitor = self._ledger(), self._monitor()
        parts = [self._head()]
        for family in families.values():
            if family.lines:
                parts.append(family.text().encode())
                family.lines.clear()
                await turns.take()
        text = b"".join(parts)
        packed = await asyncio.to_thread(gzip.compress, text, 1)  # zlib frees the GIL
        self._text, self._gzip, self._built_at = text, packed, started
        self.builds += 1
        return text, packed

    def _group(
        self,
        f: dict[str, Family],
        ledger: Ledger,
        monitor: FleetView | None,
        group_id: str,
        now: float,
    ) -> None:
        group = ledger.groups.get(group_id)
        if group is None:
            return  # gone since the build started
        g = f'consumergroup="{escape(group_id)}"'
        counters = group.counters
        f["succeeded"].add(g, counters.succeeded)
        for reason, count in sorted(counters.failed.items()):
            if count:
                f["failed"].add(f'{g},reason="{escape(reason)}"', count)
        for outcome, count in sorted(counters.events.items()):
            if count:
                f["events"].add(f'{g},outcome="{outcome}"', count)
        for key, count in (
            ("skipped", counters.skipped),
            ("dropped", counters.pending_dropped),
            ("held_back", counters.held_back),
            ("refreshed", counters.refreshed),
        ):
            if count:
                f[key].add(g, count)
        if not ledger.commits(group_id):  # another replica reports the group's state
            return
        query = ledger.queries.get(group.query_id or "")
        for key, value in (
            ("pending", len(query.pending) if query else 0),
            ("in_flight", 1 if group.in_flight else 0),
            ("behind", checkpoints_behind(group)),
            ("behind_seconds", max(0.0, now - group.slot.created_at) if group.slot else 0),
        ):
            if value:
                f[key].add(g, value)
        committed = group.committed
        if committed is not None:
            f["last_success"].add(g, committed.at)
            if self.options.granularity == "partition":
                for tp, offset in sorted(committed.offsets.items()):
                    if self.options.topic_shown(tp.topic):
                        f["committed"].add(
                            f'{g},topic="{escape(tp.topic)}",partition="{tp.partition}"', offset
                        )
        if monitor is None:
            return
        status = monitor.statuses.get(group_id)
        if status is not None:
            f["status"].add(f'{g},status="{status.status.value}"', 1)
            if self.options.export_kafka_lag:
                self._kafka_exporter(f, g, status.partitions)
        lag = monitor.lags.get(group_id)
        if lag is not None:
            self._lag(f, g, lag, monitor.lost.get(group_id, {}))

    def _lag(self, f: dict[str, Family], g: str, lag: GroupLag, lost: Mapping[str, int]) -> None:
        f["data_status"].add(f'{g},status="{lag.data_status.value}"', 1)
        if lag.catch_up.eta_seconds is not None:
            f["catchup"].add(g, lag.catch_up.eta_seconds)
        granularity = self.options.granularity
        shown = [p for p in lag.partitions if self.options.topic_shown(p.topic)]
        for labels, parts in _by_level(g, shown, granularity):
            records = [p.lag for p in parts if p.lag is not None]
            if len(records) == len(parts):
                f["lag"].add(labels, sum(records))
            seconds = max_lag_seconds(parts)
            if seconds is not None:
                f["lag_seconds"].add(labels, seconds)
            margins = [p.margin_seconds for p in parts if p.margin_seconds is not None]
            if margins:
                f["margin_seconds"].add(labels, min(margins))
        if granularity == "group":
            total = sum(lost.values())
            if total:
                f["lost"].add(g, total)
        else:
            for topic, count in sorted(lost.items()):
                if count and self.options.topic_shown(topic):
                    f["lost"].add(f'{g},topic="{escape(topic)}"', count)

    def _kafka_exporter(
        self, f: dict[str, Family], g: str, partitions: Iterable[PartitionStatus]
    ) -> None:
        lags: dict[str, int] = {}
        offsets: dict[str, int] = {}
        for p in partitions:
            labels = f'{g},topic="{escape(p.topic)}",partition="{p.partition}"'
            f["kafka_offset"].add(labels, p.offset)
            offsets[p.topic] = offsets.get(p.topic, 0) + p.offset
            if p.current_lag is not None:
                f["kafka_lag"].add(labels, p.current_lag)
                lags[p.topic] = lags.get(p.topic, 0) + p.current_lag
        for topic, total in offsets.items():
            f["kafka_offset_sum"].add(f'{g},topic="{escape(topic)}"', total)
        for topic, total in lags.items():
            f["kafka_lag_sum"].add(f'{g},topic="{escape(topic)}"', total)


def _by_level(
    g: str, partitions: list[PartitionLag], granularity: str
) -> list[tuple[str, list[PartitionLag]]]:
    """The group's partitions in the series of ``granularity``, with their labels."""
    if granularity == "group":
        return [(g, partitions)] if partitions else []
    if granularity == "partition":
        return [
            (f'{g},topic="{escape(p.topic)}",partition="{p.partition}"', [p]) for p in partitions
        ]
    topics: dict[str, list[PartitionLag]] = {}
    for p in partitions:
        topics.setdefault(p.topic, []).append(p)
    return [(f'{g},topic="{escape(t)}"', parts) for t, parts in topics.items()]


def _families(options: FleetOptions) -> dict[str, Family]:
    """Every per-group family, in the order they are written."""
    families = {
        "succeeded": Family(
            "sidecar_commits_succeeded", "counter", "Offset commits Kafka accepted."
        ),
        "failed": Family(
            "sidecar_commits_failed", "counter", "Offset commits that failed, by reason."
        ),
        "skipped": Family(
            "sidecar_commits_skipped",
            "counter",
            "Completed checkpoints replaced in the slot by a newer one before being committed.",
        ),
        "events": Family("sidecar_events", "counter", "Checkpoint events by outcome."),
        "dropped": Family(
            "sidecar_pending_dropped",
            "counter",
            "Pending checkpoints dropped because the queue was full.",
        ),
        "held_back": Family(
            "sidecar_partitions_held_back",
            "counter",
            "Partitions kept at their committed offset instead of moving backwards.",
        ),
        "refreshed": Family(
            "sidecar_commits_refreshed",
            "counter",
            "Commits of an idle group's unchanged offsets, before Kafka's retention drops them.",
        ),
        "pending": Family(
            "sidecar_pending_checkpoints",
            "gauge",
            "Checkpoints waiting for completion (absent: none).",
        ),
        "in_flight": Family(
            "sidecar_commit_in_flight", "gauge", "1 while a commit of the group is in flight."
        ),
        "behind": Family(
            "sidecar_commit_behind_checkpoints",
            "gauge",
            "Completed checkpoints the committed offsets trail the newest by (a commit "
            "interval, or commits failing; absent: none).",
        ),
        "behind_seconds": Family(
            "sidecar_commit_behind_seconds",
            "gauge",
            "How long the newest completed checkpoint has waited uncommitted (absent: none waits).",
        ),
        "last_success": Family(
            "sidecar_last_successful_commit_timestamp_seconds",
            "gauge",
            "Unix time of the group's last successful commit.",
        ),
        "committed": Family(
            "sidecar_committed_offset",
            "gauge",
            "Offset last committed (the next offset the query reads); with granularity partition.",
        ),
        "status": Family(
            "sidecar_consumergroup_status",
            "gauge",
            "The group's status (Burrow's evaluator: OK, WARN, STALL, STOP, REWIND, ERR) as of "
            "the last read of the log ends: one series, the current status, at 1.",
        ),
        "data_status": Family(
            "sidecar_consumergroup_data_status",
            "gauge",
            "Whether unprocessed records are deleted (LOST), about to be (AT_RISK) or not "
            "(OK): one series, the current status, at 1.",
        ),
        "lag": Family(
            "sidecar_consumergroup_lag",
            "gauge",
            "Records between the committed offsets and the log ends (summed).",
        ),
        "lag_seconds": Family(
            "sidecar_consumergroup_lag_seconds",
            "gauge",
            "Age of the oldest record the job has not processed (now - its timestamp; 0 "
            "caught up; the max over partitions; absent: not known yet).",
        ),
        "margin_seconds": Family(
            "sidecar_consumergroup_retention_margin_seconds",
            "gauge",
            "Estimated time until the oldest unprocessed record is deleted by retention (the "
            "min over partitions; absent: the log start is not moving, or no lag).",
        ),
        "lost": Family(
            "sidecar_consumergroup_messages_lost",
            "counter",
            "Records deleted before the job read them (the committed offset was below the "
            "log start), each counted once.",
        ),
        "catchup": Family(
            "sidecar_consumergroup_catchup_seconds",
            "gauge",
            "Estimated time until the lag is 0, at the job's consume rate and the producers' "
            "rate over the last reads (absent: caught up, falling behind, or unknown).",
        ),
    }
    if options.export_kafka_lag:
        families |= {
            "kafka_lag": Family(
                "kafka_consumergroup_lag",
                "gauge",
                "Current approximate lag of a consumer group at topic/partition",
            ),
            "kafka_lag_sum": Family(
                "kafka_consumergroup_lag_sum",
                "gauge",
                "Current approximate lag of a consumer group for a topic",
            ),
            "kafka_offset": Family(
                "kafka_consumergroup_current_offset",
                "gauge",
                "Current offset of a consumer group at topic/partition",
            ),
            "kafka_offset_sum": Family(
                "kafka_consumergroup_current_offset_sum",
                "gauge",
                "Current offset of a consumer group for a topic",
            ),
        }
    return families


class MetricsPage:
    """What ``GET /metrics`` answers: the last build of ``FleetExposition`` (the
    registry's process-wide series, then the per-group ones), gzip-compressed when the
    scraper accepts it (Prometheus does; compressed once per build).

    Scrapes are answered at most ``max_per_second`` a second, in the order they come:
    the answer changes only once per ``max_age`` anyway, and a client scraping back to
    back would otherwise take the event loop from the jobs' events.
    """

    def __init__(
        self,
        fleet: FleetExposition,
        max_per_second: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fleet = fleet
        self._spacing = 1.0 / max_per_second if max_per_second > 0 else 0.0
        self._monotonic = monotonic
        self._next = -math.inf

    async def answer(self, *, accepts_gzip: bool) -> tuple[bytes, dict[str, str]]:
        now = self._monotonic()
        turn = max(now, self._next)
        self._next = turn + self._spacing
        if turn > now:
            await asyncio.sleep(turn - now)
        text, packed = await self.fleet.rendered()
        if accepts_gzip:
            return packed, {"Content-Encoding": "gzip"}
        return text, {}
