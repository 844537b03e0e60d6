"""How late the event loop runs what is due: every event waits for what holds the loop.

A ticker asks to be woken every ``interval`` seconds and counts how much later than that
it was woken: the time the loop was held by other work (a lag read's turn, a scrape's
build, a collection of the cyclic collector) or kept from the GIL by another thread. An
event that arrives meanwhile waits as long before it is read. Its distribution is
``sidecar_event_loop_lag_seconds``; the benchmarks read it beside the events' latency to
tell a loop held from a write waited on.

Invariants
  - One observation per tick, never negative; the ticker never ends on its own (cancel it).
  - It costs ``1 / interval`` wake-ups a second (20 at the default), nothing per event.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

INTERVAL = 0.05  # seconds between two ticks


class LoopLag:
    def __init__(
        self,
        observe: Callable[[float], None],
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.observe = observe
        self.interval = interval
        self.clock = clock

    async def run(self) -> None:
        while True:
            due = self.clock() + self.interval
            await asyncio.sleep(self.interval)
            self.observe(max(0.0, self.clock() - due))
