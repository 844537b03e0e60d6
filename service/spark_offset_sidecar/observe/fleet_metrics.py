"""The per-group series of ``/metrics``, written straight to text by the watcher: at fleet
scale they are nearly all of a scrape (docs/operate/metrics.md lists them; docs/decisions.md,
"/metrics built in slices, renderings kept", says why by hand).

A build hands the event loop back every few milliseconds (``turns``) and is kept
``max_age`` seconds for every scrape meanwhile. A group's series are kept from one build
to the next until what the process taking events told of it is told anew (its memory) or
an evaluation computes the group again (``LagMonitor.evaluated_in``).

Invariants
  - The text is as of one build: groups that appear or go during a build are in it or
    not, never half.
  - A build that keeps renderings writes byte for byte what a build from nothing would.
  - A family's samples stand together under its one HELP and TYPE, in group order.
  - A group's series of its memory are written once told and from what was told alone:
    never from a watcher's defaults (counters never go back to 0 when it starts again).
"""

from __future__ import annotations

import asyncio
import gzip
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from spark_offset_sidecar.core.lag.figures import Figures, figures_of, max_lag_seconds
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.patterns import matcher
from spark_offset_sidecar.turns import Pace, Turns

if TYPE_CHECKING:
    from spark_offset_sidecar.core.lag.figures import GroupLag
    from spark_offset_sidecar.core.lag.group_memory import GroupMemory
    from spark_offset_sidecar.core.lag.status import GroupStatus, PartitionStatus


class FleetView(Protocol):
    """What the lag monitor keeps that the per-group series read."""

    @property
    def statuses(self) -> Mapping[str, GroupStatus]: ...
    @property
    def lags(self) -> Mapping[str, GroupLag]: ...
    @property
    def lost(self) -> Mapping[str, Mapping[str, int]]: ...
    @property
    def evaluated_in(self) -> Mapping[str, int]: ...


class Told(Protocol):
    """What the process taking events told of its memory (``runtime.watcher_memory``):
    each group's, a snapshot replaced when told anew, never changed in place."""

    @property
    def groups(self) -> Mapping[str, GroupMemory]: ...
    @property
    def unattributed(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class _Tables:
    """A ``FleetView``'s tables, read once per turn of a build (with several Kafka
    clusters each read merges the clusters' monitors: once per turn, not per group)."""

    statuses: Mapping[str, GroupStatus]
    lags: Mapping[str, GroupLag]
    lost: Mapping[str, Mapping[str, int]]
    evaluated_in: Mapping[str, int]


def _tables(view: FleetView | None) -> _Tables | None:
    return None if view is None else _Tables(view.statuses, view.lags, view.lost, view.evaluated_in)


@dataclass(frozen=True)
class FleetOptions:
    granularity: str = "topic"  # group, topic or partition
    groups: tuple[str, ...] = ("*",)
    exclude_groups: tuple[str, ...] = ()
    topics: tuple[str, ...] = ("*",)
    exclude_topics: tuple[str, ...] = ()
    export_kafka_lag: bool = False  # kafka_exporter's own series too
    max_age: float = 1.0
    # A group's cluster's name, for the ``cluster_name`` label (not ``cluster``, which
    # Kubernetes set-ups often give each scrape target); None: one cluster, no label.
    cluster_names: Callable[[str | None], str] | None = None

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
    """A sample's value: counts as integers; seconds (every float here is seconds or a Unix
    time) to the millisecond, which is all a scrape every few seconds can tell apart."""
    if isinstance(value, int):
        return str(value)
    if math.isfinite(value):
        return repr(round(value, 3))
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


class Family:
    """One metric family's text: HELP, TYPE, then its samples as they are added."""

    def __init__(self, spec: FamilySpec) -> None:
        self.sample_name = name = spec.sample_name
        self.head = f"# HELP {name} {spec.help}\n# TYPE {name} {spec.kind}\n"
        self.lines: list[str] = []

    def add(self, labels: str, value: float) -> None:
        self.lines.append(f"{self.sample_name}{{{labels}}} {number(value)}\n")

    def text(self) -> str:
        return self.head + "".join(self.lines)


_NONE_LOST: Mapping[str, int] = {}


# A group's series of one evaluation: (its number, its labels, (family key, lines) ...);
# atomic values only, which the cyclic collector stops scanning.
_Rendered = tuple[int | None, str, tuple[tuple[str, str], ...]]
# A group's series of its told memory: ((that memory, its labels, committed here), (family
# key, lines) ...); the memory is kept by identity (told anew: another object).
_Remembered = tuple[tuple[object, str, bool], tuple[tuple[str, str], ...]]


class Kept:
    """Text built at most every ``max_age`` seconds, and gzip-compressed: one build shared
    by the scrapes that come while it is built, kept for those that come after until it
    is ``max_age`` old or ``stale``."""

    def __init__(self, max_age: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.max_age = max_age
        self._monotonic = monotonic
        self._text = self._gzip = b""
        self._built_at = -math.inf
        self._building: asyncio.Future[tuple[bytes, bytes]] | None = None
        self._changes = 0  # calls of ``stale``
        self.builds = 0

    def stale(self) -> None:
        """What the text shows changed (a memory update told): the next scrape builds it
        anew, so that what was told reaches ``/metrics`` within the relay's interval."""
        self._changes += 1
        self._built_at = -math.inf

    async def rendered(self) -> tuple[bytes, bytes]:
        """The text and its gzip, built at most ``max_age`` seconds ago."""
        if self._monotonic() - self._built_at < self.max_age:
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
        started, changes = self._monotonic(), self._changes
        text = await self.text()
        # One gzip member (some clients read only the first of several); zlib frees the GIL.
        packed = await asyncio.to_thread(gzip.compress, text, 1)
        self._text, self._gzip = text, packed
        self._built_at = started if changes == self._changes else -math.inf
        self.builds += 1
        return text, packed

    async def text(self) -> bytes:
        raise NotImplementedError


class Relayed(Kept):
    """The process taking events' ``/metrics``: its own series (``head``), then its
    watcher's share, every per-group series (``share``: gzip-compressed, empty while the
    watcher does not answer), inflated off the event loop."""

    def __init__(
        self,
        head: Callable[[], bytes],
        share: Callable[[], Awaitable[bytes]],
        max_age: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(max_age, monotonic)
        self._head, self._share = head, share

    async def text(self) -> bytes:
        head = self._head()
        share = await self._share()
        return head + await asyncio.to_thread(gzip.decompress, share) if share else head


class FleetExposition(Kept):
    def __init__(
        self,
        ledger: Callable[[], Ledger],
        monitor: Callable[[], FleetView | None],
        told: Told,
        options: FleetOptions,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        head: Callable[[], bytes] = bytes,
    ) -> None:
        """``told``: the memory of the process taking events, as told; ``head``: text to
        put before the per-group series in each build (the registry's process-wide
        series)."""
        super().__init__(options.max_age, monotonic)
        self._head = head
        self._ledger = ledger
        self._monitor = monitor
        self._told = told
        self.options = options
        # By group, its series of the lag monitor's evaluation as the last build rendered
        # them, and as this build does (the groups gone since are left behind).
        self._rendered: dict[str, _Rendered] = {}
        self._rendering: dict[str, _Rendered] = {}
        # The same for its series of its told memory.
        self._remembered_then: dict[str, _Remembered] = {}
        self._remembered_now: dict[str, _Remembered] = {}
        self._scratch = _families(options)  # where one group's are rendered
        self.renders = 0  # groups whose evaluated series were rendered (not kept)
        self.memory_renders = 0  # groups whose series of their told memory were rendered
        self.clock = clock

    async def text(self) -> bytes:
        families = _families(self.options)
        ledger, told = self._ledger(), self._told
        monitor = _tables(self._monitor())
        for outcome, count in sorted(told.unattributed.items()):
            if count:
                families["events"].add(f'consumergroup="",outcome="{outcome}"', count)
        shown = self.options.group_shown
        group_ids = sorted(g for g in ledger.groups.keys() | told.groups.keys() if shown(g))
        now = self.clock()
        turns = Turns()
        for group_id in group_ids:
            self._group(families, ledger, monitor, group_id, now)
            if await turns.take():
                ledger, monitor = self._ledger(), _tables(self._monitor())
        parts = [self._head()]
        for family in families.values():
            if family.lines:
                parts.append(family.text().encode())
                family.lines.clear()
                await turns.take()
        self._rendered, self._rendering = self._rendering, {}
        self._remembered_then, self._remembered_now = self._remembered_now, {}
        return b"".join(parts)

    def _group(
        self,
        f: dict[str, Family],
        ledger: Ledger,
        monitor: FleetView | None,
        group_id: str,
        now: float,
    ) -> None:
        group, memory = ledger.groups.get(group_id), self._told.groups.get(group_id)
        if group is None and memory is None:
            return  # gone since the build started
        cluster = group.cluster if group is not None else memory.cluster if memory else None
        g = f'consumergroup="{escape(group_id)}"'
        if self.options.cluster_names is not None:  # names are [a-z0-9-]: nothing to escape
            g += f',cluster_name="{self.options.cluster_names(cluster)}"'
        commits = ledger.commits(group_id)  # else another replica reports its commits
        if memory is not None:  # with replicas, also the groups it does not commit
            for key, lines in self._remembered(g, group_id, memory, commits):
                f[key].lines.append(lines)
            since = memory.waiting_since
            if commits and since is not None and now > since:
                f["behind_seconds"].add(g, now - since)  # the clock's: not kept
        if not commits or group is None:
            return
        query = ledger.queries.get(group.query_id or "")  # the store's: no commit changes it
        f["pending"].add(g, len(query.pending) if query else 0)
        if monitor is not None:
            for key, lines in self._evaluated(g, monitor, group_id):
                f[key].lines.append(lines)

    def _remembered(
        self, g: str, group_id: str, memory: GroupMemory, commits: bool
    ) -> tuple[tuple[str, str], ...]:
        """The group's series of its told memory: rendered again only when told anew or
        their labels changed, kept otherwise."""
        shown = (memory, g, commits)
        kept = self._remembered_then.get(group_id)
        if kept is None or kept[0][0] is not memory or kept[0][1:] != shown[1:]:
            self.memory_renders += 1
            self._memory(self._scratch, g, memory, commits)
            kept = (shown, self._scratched())
        self._remembered_now[group_id] = kept
        return kept[1]

    def _memory(self, f: dict[str, Family], g: str, memory: GroupMemory, commits: bool) -> None:
        """Its counters, a commit in flight, and the commits of the groups it commits."""
        counters = memory.counters
        f["succeeded"].add(g, counters.succeeded)
        f["failed"].add(g, sum(counters.failed.values()))
        f["skipped"].add(g, counters.skipped)
        for reason, count in sorted(counters.failed.items()):
            if count:
                f["failed_by_reason"].add(f'{g},reason="{escape(reason)}"', count)
        for outcome, count in sorted(counters.events.items()):
            if count:
                f["events"].add(f'{g},outcome="{outcome}"', count)
        for key, count in (
            ("dropped", counters.pending_dropped),
            ("held_back", counters.held_back),
            ("refreshed", counters.refreshed),
        ):
            if count:
                f[key].add(g, count)
        if memory.in_flight:
            f["in_flight"].add(g, 1)
        if commits:
            self._commits(f, g, memory)

    def _commits(self, f: dict[str, Family], g: str, memory: GroupMemory) -> None:
        """The group's last commit and how far it trails the newest checkpoint."""
        if memory.behind:
            f["behind"].add(g, memory.behind)
        committed = memory.committed
        if committed is None:
            return
        f["last_success"].add(g, committed.at)
        if self.options.granularity == "partition":
            for tp, offset in sorted(committed.offsets.items()):
                if self.options.topic_shown(tp.topic):
                    f["committed"].add(
                        f'{g},topic="{escape(tp.topic)}",partition="{tp.partition}"', offset
                    )

    def _evaluated(self, g: str, monitor: FleetView, group_id: str) -> tuple[tuple[str, str], ...]:
        """The group's series of the lag monitor's evaluation: rendered again only when an
        evaluation computed it again (``evaluated_in``) or its labels changed."""
        evaluation = monitor.evaluated_in.get(group_id)
        kept = self._rendered.get(group_id)
        if kept is None or kept[0] != evaluation or kept[1] != g:
            self.renders += 1
            f = self._scratch
            status, lag = monitor.statuses.get(group_id), monitor.lags.get(group_id)
            if status is not None:
                f["status"].add(f'{g},status="{status.status.value}"', 1)
                if self.options.export_kafka_lag:
                    self._kafka_exporter(f, g, status.partitions)
            if lag is not None:
                self._lag(f, g, lag, monitor.lost.get(group_id, _NONE_LOST))
            kept = (evaluation, g, self._scratched())
        self._rendering[group_id] = kept
        return kept[2]

    def _scratched(self) -> tuple[tuple[str, str], ...]:
        """What was rendered into the scratch families, by family, taken out of them."""
        rendered = []
        for key, family in self._scratch.items():  # every family: none is left behind
            if family.lines:
                rendered.append((key, "".join(family.lines)))
                family.lines.clear()
        return tuple(rendered)

    def _lag(self, f: dict[str, Family], g: str, lag: GroupLag, lost: Mapping[str, int]) -> None:
        f["data_status"].add(f'{g},status="{lag.data_status.value}"', 1)
        if lag.catch_up.eta_seconds is not None:
            f["catchup"].add(g, lag.catch_up.eta_seconds)
        granularity = self.options.granularity
        shown = [p for p in figures_of(lag.partitions) if self.options.topic_shown(p.topic)]
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
        # At 0 for every topic read (and the group, with granularity group), as the other
        # counters: the first lost records are then a step that increase() sees.
        if granularity == "group":
            f["lost"].add(g, sum(lost.values()))
        else:
            topics = {p.topic for p in shown} | {t for t in lost if self.options.topic_shown(t)}
            for topic in sorted(topics):
                f["lost"].add(f'{g},topic="{escape(topic)}"', lost.get(topic, 0))

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
    g: str, partitions: list[Figures], granularity: str
) -> list[tuple[str, list[Figures]]]:
    """The group's partitions in the series of ``granularity``, with their labels."""
    if granularity == "group":
        return [(g, partitions)] if partitions else []
    if granularity == "partition":
        return [
            (f'{g},topic="{escape(p.topic)}",partition="{p.partition}"', [p]) for p in partitions
        ]
    topics: dict[str, list[Figures]] = {}
    for p in partitions:
        topics.setdefault(p.topic, []).append(p)
    return [(f'{g},topic="{escape(t)}"', parts) for t, parts in topics.items()]


@dataclass(frozen=True)
class FamilySpec:
    """One per-group family as the reference documents it (``observe.reference``).

    ``labels``: the labels at granularity ``topic`` (the default); ``by_level`` families
    also take ``partition`` at granularity ``partition`` and drop ``topic`` at ``group``.
    ``absent``: when a group has no sample of it ("" for never, once the group has one),
    and so what an alert or a panel that reads it must survive."""

    key: str
    name: str
    kind: str  # counter or gauge
    help: str
    labels: tuple[str, ...] = ("consumergroup",)
    absent: str = ""
    by_level: bool = False
    kafka_exporter: bool = False  # with SIDECAR_EXPORT_KAFKA_LAG only

    @property
    def sample_name(self) -> str:
        return self.name + "_total" if self.kind == "counter" else self.name


G, GT, GTP = ("consumergroup",), ("consumergroup", "topic"), ("consumergroup", "topic", "partition")
REPLICA = "on replicas that do not commit the group (the one holding its lease exports it)"
UNREAD = "until the group's log ends are first read"

# Every per-group family, in the order they are written.
FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec("succeeded", "sidecar_commits_succeeded", "counter",
               "Offset commits Kafka accepted (at 0 from the group's first event)."),
    FamilySpec("failed", "sidecar_commits_failed", "counter",
               "Offset commits that failed, every reason (at 0 from the group's first event)."),
    FamilySpec("skipped", "sidecar_commits_skipped", "counter",
               "Completed checkpoints replaced in the slot by a newer one before being "
               "committed (at 0 from the group's first event)."),
    FamilySpec("failed_by_reason", "sidecar_commits_failed_by_reason", "counter",
               "sidecar_commits_failed_total by reason (a reason appears with its first "
               "failure).", (*G, "reason"),
               absent="until the group's first failure of that reason"),
    FamilySpec("events", "sidecar_events", "counter", "Checkpoint events by outcome.",
               (*G, "outcome"), absent="until the group's first event of that outcome"),
    FamilySpec("dropped", "sidecar_pending_dropped", "counter",
               "Pending checkpoints dropped because the queue was full.",
               absent="until the first one (a queue that fills is a job that never completes)"),
    FamilySpec("held_back", "sidecar_partitions_held_back", "counter",
               "Partitions kept at their committed offset instead of moving backwards.",
               absent="until the first one"),
    FamilySpec("refreshed", "sidecar_commits_refreshed", "counter",
               "Commits of an idle group's unchanged offsets, before Kafka's retention drops "
               "them.", absent="until the first one"),
    FamilySpec("pending", "sidecar_pending_checkpoints", "gauge",
               "Checkpoints waiting for completion.", absent=REPLICA),
    FamilySpec("in_flight", "sidecar_commit_in_flight", "gauge",
               "1 while a commit of the group is in flight.", absent="while none is (0)"),
    FamilySpec("behind", "sidecar_commit_behind_checkpoints", "gauge",
               "Completed checkpoints the committed offsets trail the newest by (a commit "
               "interval, or commits failing).", absent="while none trails (0)"),
    FamilySpec("behind_seconds", "sidecar_commit_behind_seconds", "gauge",
               "How long the newest completed checkpoint has waited uncommitted.",
               absent="while none waits (0)"),
    FamilySpec("last_success", "sidecar_last_successful_commit_timestamp_seconds", "gauge",
               "Unix time of the group's last successful commit.",
               absent="until its first successful commit; " + REPLICA),
    FamilySpec("committed", "sidecar_committed_offset", "gauge",
               "Offset last committed (the next offset the query reads).", GTP,
               absent="unless SIDECAR_METRICS_GRANULARITY=partition; until the first commit"),
    FamilySpec("status", "sidecar_consumergroup_status", "gauge",
               "The group's status (Burrow's evaluator: OK, WARN, STALL, STOP, REWIND, ERR) as "
               "of the last read of the log ends: one series, the current status, at 1.",
               (*G, "status"), absent=UNREAD),
    FamilySpec("data_status", "sidecar_consumergroup_data_status", "gauge",
               "Whether unprocessed records are deleted (LOST), about to be (AT_RISK) or not "
               "(OK): one series, the current status, at 1.", (*G, "status"), absent=UNREAD),
    FamilySpec("lag", "sidecar_consumergroup_lag", "gauge",
               "Records between the committed offsets and the log ends (summed).", GT,
               absent=UNREAD, by_level=True),
    FamilySpec("lag_seconds", "sidecar_consumergroup_lag_seconds", "gauge",
               "Age of the oldest record the job has not processed (now - its timestamp; 0 "
               "caught up; the max over partitions).", GT,
               absent="while not known (never NaN): " + UNREAD + ", or an unread record time",
               by_level=True),
    FamilySpec("margin_seconds", "sidecar_consumergroup_retention_margin_seconds", "gauge",
               "Estimated time until the oldest unprocessed record is deleted by retention "
               "(the min over partitions).", GT,
               absent="while it has no value: the log start has not moved between reads "
               "(nothing is being deleted), or it is not known yet",
               by_level=True),
    FamilySpec("lost", "sidecar_consumergroup_messages_lost", "counter",
               "Records deleted before the job read them (the committed offset was below the "
               "log start), each counted once; at 0 from the first read of the topic's log "
               "ends.", GT, absent=UNREAD),
    FamilySpec("catchup", "sidecar_consumergroup_catchup_seconds", "gauge",
               "Estimated time until the lag is 0, at the job's consume rate and the "
               "producers' rate over the last reads.",
               absent="while it has no value: caught up (no lag), falling behind or stalled "
               "(never at these rates), or fewer than two reads"),
    FamilySpec("kafka_lag", "kafka_consumergroup_lag", "gauge",
               "Current approximate lag of a consumer group at topic/partition", GTP,
               absent=UNREAD, kafka_exporter=True),
    FamilySpec("kafka_lag_sum", "kafka_consumergroup_lag_sum", "gauge",
               "Current approximate lag of a consumer group for a topic", GT,
               absent=UNREAD, kafka_exporter=True),
    FamilySpec("kafka_offset", "kafka_consumergroup_current_offset", "gauge",
               "Current offset of a consumer group at topic/partition", GTP,
               absent=UNREAD, kafka_exporter=True),
    FamilySpec("kafka_offset_sum", "kafka_consumergroup_current_offset_sum", "gauge",
               "Current offset of a consumer group for a topic", GT,
               absent=UNREAD, kafka_exporter=True),
)  # fmt: skip


def _families(options: FleetOptions) -> dict[str, Family]:
    """Every per-group family of ``options``, in the order they are written."""
    return {
        spec.key: Family(spec)
        for spec in FAMILIES
        if options.export_kafka_lag or not spec.kafka_exporter
    }


class MetricsPage:
    """What ``GET /metrics`` answers: the last build of ``page``, gzip-compressed
    when the scraper accepts it, at most ``max_per_second`` a second (a client scraping
    back to back would otherwise take the event loop from the jobs' events)."""

    def __init__(
        self,
        page: Kept,
        max_per_second: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.page = page
        self._pace = Pace(max_per_second, monotonic)

    async def answer(self, *, accepts_gzip: bool) -> tuple[bytes, dict[str, str]]:
        await self._pace.turn()
        text, packed = await self.page.rendered()
        if accepts_gzip:
            return packed, {"Content-Encoding": "gzip"}
        return text, {}
