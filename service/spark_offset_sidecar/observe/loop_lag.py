"""How late the event loop runs what is due (``sidecar_event_loop_lag_seconds``): a ticker
asks to be woken every ``interval`` seconds and observes how much later it was woken, the
time an event arriving then waits before it is read. One observation per tick, never
negative; it never ends on its own (cancel it).
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
