"""Sharing the event loop: work that grows with the fleet (an evaluation of every group, a
build of ``/metrics``) hands the loop back every few milliseconds, so that a job's event
never waits behind it for longer than that.

    turns = Turns()
    for group in groups:
        ...
        await turns.take()  # yields when BUDGET has passed since the last yield

Time, not a count of items, decides: a group of 32 lagging partitions costs thirty times
one caught-up partition, and a fixed count would be either too coarse or too fine.

Readers that may ask back to back (a scraper, a page left reloading, a script) are let in
at most so many a second, in the order they come (``Pace``): a reader on the same event
loop as the jobs' events takes whatever share of it it is left, however cheap each read.

    pace = Pace(per_second=10)
    await pace.turn()  # waits for this caller's turn
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

BUDGET = 0.002  # seconds of work between two turns of the event loop
PAUSE = 0.001  # seconds the loop is left to others at each turn


class Turns:
    def __init__(
        self,
        budget: float = BUDGET,
        pause: float = PAUSE,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.budget = budget
        self.pause = pause
        self._clock = clock
        self._since = clock()
        self.yielded = 0

    async def take(self) -> bool:
        """Let the event loop run if this work has held it for ``budget`` seconds; True
        when it did (what was read before may have changed)."""
        if self._clock() - self._since < self.budget:
            return False
        # Not sleep(0): with nothing else ready the loop would go on at once, holding the
        # GIL, and the database's and Kafka's worker threads would wait for Python's
        # switch interval at every step (events stall for hundreds of ms). A pause
        # lets the loop go idle for a moment, and them run. Measured in a child watcher
        # too: events' p99 1.8-3.7x higher with sleep(0) (docs/decisions.md,
        # "Long passes take turns").
        await asyncio.sleep(self.pause)
        self.yielded += 1
        self._since = self._clock()
        return True

    async def drain(self, table: dict[Any, Any]) -> None:
        """Empty ``table`` a little at a time: freeing the objects of thousands of groups
        at once (a dict replaced by its new version) holds the loop for milliseconds."""
        while table:
            table.popitem()
            await self.take()


class Pace:
    """At most ``per_second`` callers a second, in turn (0: no limit). A caller that comes
    when its turn is past goes at once; the next turn is then ``1 / per_second`` later.
    Kept with the watcher a child too, whose readers pass through the events' process:
    unpaced, events' p99 under back-to-back scrapes was 3.4x (docs/decisions.md,
    "Scrapes and pages paced")."""

    def __init__(self, per_second: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._spacing = 1.0 / per_second if per_second > 0 else 0.0
        self._clock = clock
        self._next = -math.inf

    async def turn(self) -> None:
        now = self._clock()
        turn = max(now, self._next)
        self._next = turn + self._spacing
        if turn > now:
            await asyncio.sleep(turn - now)
