"""Watch groups' committed offsets in Kafka from a thread, to catch any regression (and,
``GroupsWatch``, to time each group's commits)."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

from aiokafka.admin import AIOKafkaAdminClient

from tests.support.in_thread import InThread

Offsets = dict[tuple[str, int], int]


class _Polling(InThread):
    """Reads Kafka with one admin client every ``interval`` s (``_poll``) until stopped."""

    JOIN_SECONDS = 10.0

    def __init__(self, bootstrap: str, interval: float) -> None:
        self.bootstrap, self.interval = bootstrap, interval
        self.errors = 0  # failed reads
        super().__init__()

    def _loop(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=3000)
        await admin.start()
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                await self._poll(admin)
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))
        finally:
            await admin.close()

    async def _poll(self, admin: AIOKafkaAdminClient) -> None:
        raise NotImplementedError

    async def _read(self, admin: AIOKafkaAdminClient, group: str) -> Offsets | None:
        """``group``'s committed offsets, or None (counted in ``errors``) if the read failed."""
        try:
            found = await admin.list_consumer_group_offsets(group)
        except Exception:
            self.errors += 1
            return None
        return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()}


class OffsetWatch(_Polling):
    """Polls ``group`` every ``interval`` s; ``regressions`` lists every partition seen to
    move backwards, ``history`` every distinct observation."""

    def __init__(self, bootstrap: str, group: str, interval: float = 0.05) -> None:
        self.group = group
        self.latest: Offsets = {}
        self.history: list[Offsets] = []
        self.regressions: list[str] = []
        super().__init__(bootstrap, interval)

    async def _poll(self, admin: AIOKafkaAdminClient) -> None:
        now = await self._read(admin, self.group)
        if now is None:
            return
        self.regressions += moved_back(self.latest, now)
        if now and now != self.latest:
            self.history.append(now)
        self.latest.update(now)

    def wait_for(self, expected: dict[tuple[str, int], int], timeout: float) -> float:
        """Seconds until the watched offsets equal ``expected``."""
        started = time.monotonic()
        while self.latest != expected:
            if time.monotonic() - started > timeout:
                raise AssertionError(f"offsets {self.latest} != {expected} after {timeout} s")
            time.sleep(self.interval)
        return time.monotonic() - started


def moved_back(before: Offsets, now: Offsets) -> list[str]:
    """Every partition of ``now`` below where ``before`` had it."""
    return [
        f"{tp[0]}/{tp[1]}: {before[tp]} -> {offset}"
        for tp, offset in now.items()
        if tp in before and offset < before[tp]
    ]


@dataclass
class Timeline:
    """One group as the watch saw it: its offsets, when each change was first seen
    (``time.monotonic()``), and every partition seen to move backwards."""

    latest: Offsets = field(default_factory=dict)
    changed_at: list[float] = field(default_factory=list)
    regressions: list[str] = field(default_factory=list)

    def longest_without_change(self, start: float, end: float) -> float:
        """The longest stretch of [``start``, ``end``] with no change seen (to within the
        watch's interval)."""
        times = [start, *(t for t in self.changed_at if start < t < end), end]
        return max(b - a for a, b in itertools.pairwise(times))


class GroupsWatch(_Polling):
    """Polls every one of ``groups`` every ``interval`` s with one admin client, keeping a
    ``Timeline`` of each (``timelines``)."""

    def __init__(self, bootstrap: str, groups: list[str], interval: float = 0.2) -> None:
        self.timelines = {group: Timeline() for group in groups}
        super().__init__(bootstrap, interval)

    async def _poll(self, admin: AIOKafkaAdminClient) -> None:
        for group, timeline in self.timelines.items():
            now = await self._read(admin, group)
            if now is None:
                continue
            timeline.regressions += moved_back(timeline.latest, now)
            if now and now != timeline.latest:
                timeline.changed_at.append(time.monotonic())
                timeline.latest = {**timeline.latest, **now}
