"""Several Kafka clusters: one lag monitor per cluster, read as one (docs/run/clusters.md).

Invariants
  - A group is watched by exactly one monitor, its cluster's (ledger R14); a group whose
    cluster the settings no longer name is watched by none.
  - ``read_at`` and ``evaluated_at`` are the oldest of the monitors' (None while one has
    none): what is shown as of then is at least that fresh.
"""

from __future__ import annotations

import asyncio
from collections import ChainMap
from collections.abc import Iterable, Mapping

from spark_offset_sidecar.core.lag.figures import GroupLag, JobRates
from spark_offset_sidecar.core.lag.report import GroupReport
from spark_offset_sidecar.core.lag.status import GroupStatus
from spark_offset_sidecar.core.ledger.rules import Ledger
from spark_offset_sidecar.core.ledger.state import GroupState
from spark_offset_sidecar.runtime.lag_monitor import Evaluation, LagMonitor


class LagMonitors:
    def __init__(self, by_cluster: Mapping[str | None, LagMonitor]) -> None:
        if None not in by_cluster:
            raise ValueError("the default cluster (None) needs a monitor")
        self.by_cluster = dict(by_cluster)
        self._default = self.by_cluster[None]

    # Built at each read: a monitor replaces its tables at each evaluation.
    @property
    def statuses(self) -> Mapping[str, GroupStatus]:
        return ChainMap(*(m.statuses for m in self.by_cluster.values()))

    @property
    def lags(self) -> Mapping[str, GroupLag]:
        return ChainMap(*(m.lags for m in self.by_cluster.values()))

    @property
    def evaluated_in(self) -> Mapping[str, int]:
        return ChainMap(*(m.evaluated_in for m in self.by_cluster.values()))

    @property
    def lost(self) -> Mapping[str, Mapping[str, int]]:
        return ChainMap(*(m.lost for m in self.by_cluster.values()))

    @property
    def rounds(self) -> int:
        """Grows whenever one of the monitors completes an evaluation."""
        return sum(m.rounds for m in self.by_cluster.values())

    def of(self, group: GroupState) -> LagMonitor:
        return self.by_cluster.get(group.cluster, self._default)

    @property
    def read_at(self) -> float | None:
        return _oldest(m.read_at for m in self.by_cluster.values())

    @property
    def evaluated_at(self) -> float | None:
        return _oldest(m.evaluated_at for m in self.by_cluster.values())

    def last_evaluation(self) -> Evaluation:
        return Evaluation(self.rounds, self.statuses, self.lags, self.evaluated_at, self.read_at)

    def publish_as(self, replica_id: str) -> None:
        for monitor in self.by_cluster.values():  # one board: set by the first
            monitor.publish_as(replica_id)

    def note_job(self, group_id: str, rates: JobRates) -> None:
        for monitor in self.by_cluster.values():  # kept only by the group's (forget_gone)
            monitor.note_job(group_id, rates)

    def report(
        self, status: GroupStatus, group: GroupState, ledger: Ledger, now: float
    ) -> GroupReport:
        return self.of(group).report(status, group, ledger, now)

    def report_now(self, group: GroupState, ledger: Ledger, now: float) -> GroupReport:
        return self.of(group).report_now(group, ledger, now)

    async def run(self) -> None:
        await asyncio.gather(*(m.run() for m in self.by_cluster.values()))

    def wake(self) -> None:
        for monitor in self.by_cluster.values():
            monitor.wake()


def _oldest(times: Iterable[float | None]) -> float | None:
    found = list(times)
    if not found or any(t is None for t in found):
        return None
    return min(t for t in found if t is not None)
