"""Sharing the GIL between the event loop and the worker threads.

Every store call runs in a worker thread (``runtime.durable_ledger``); SQLite frees the GIL
at each step and the thread must take it back before it goes on. While the event loop is
busy (a lag read at thousands of groups, back-to-back scrapes), CPython makes that thread
wait for the loop to give the GIL up at its switch interval, 5 ms by default, at every
step: a batch of events then waits tens of milliseconds for a few hundred microseconds
of work, and the events' p99 climbs (bench/RECORD.md, "The GIL's switch interval": at
5,000 groups scraped back to back, 200 ms with 5 ms, 61 ms with 0.5 ms, 47 ms with
0.2 ms). A short interval hands the GIL over within that long, at the price of more
hand-overs while both threads want it.

    share = GilShare(0.0002)
    share.install()     # for the life of the server
    ...
    share.uninstall()   # the interpreter's interval as it was

Standard library only.
"""

from __future__ import annotations

import sys

SWITCH_INTERVAL = 0.0002  # seconds; CPython's default is 0.005


class GilShare:
    def __init__(self, interval: float = SWITCH_INTERVAL) -> None:
        self.interval = interval
        self._previous: float | None = None

    def install(self) -> None:
        if self._previous is None:
            self._previous = sys.getswitchinterval()
            sys.setswitchinterval(self.interval)

    def uninstall(self) -> None:
        if self._previous is not None:
            sys.setswitchinterval(self._previous)
            self._previous = None
