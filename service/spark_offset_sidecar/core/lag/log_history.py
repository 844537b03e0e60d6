"""What the lag monitor has seen of each partition's log: (read time, log start, log end)
samples. A read at ``t`` finding log end ``e`` means every record below ``e`` was in the
log by ``t``, so a record's append time is interpolated between the two reads around it
(docs/operate/lag-in-time.md); one older than the history, or in a gap wider than
``max_gap``, is not estimated (the caller reads its timestamp from Kafka).

Invariants
  - Samples are kept in read order, at most ``capacity`` (the oldest dropped); a sample
    is stored only when the start or end changed, preceded by the previous read's values
    when those were not stored yet, so that every bracket is as narrow as the reads were.
  - Offsets never go backwards in a history: a log whose end moved back (a topic deleted
    and created again) starts a new history.
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass, field

CAPACITY = 64  # samples per partition: ~1.5 KB; at one read per 10 s, >= 10 min of changes


@dataclass
class PartitionHistory:
    """One partition's samples: ``times[i]``, ``starts[i]``, ``ends[i]``."""

    capacity: int = CAPACITY
    times: array[float] = field(default_factory=lambda: array("d"))
    starts: array[int] = field(default_factory=lambda: array("q"))
    ends: array[int] = field(default_factory=lambda: array("q"))
    # The last read, whether stored or not: stored before the next change.
    last: tuple[float, int, int] | None = None

    def observe(self, at: float, start: int, end: int) -> None:
        """Record a read at ``at`` that found the log from ``start`` to ``end``."""
        last = self.last
        if last is not None and (end < last[2] or start < last[1]):
            self.clear()  # the log went backwards: not the same log any more
            last = None
        if last is None or (start, end) != last[1:]:
            if last is not None and (not self.times or self.times[-1] < last[0]):
                self._append(*last)
            self._append(at, start, end)
        self.last = (at, start, end)

    def clear(self) -> None:
        del self.times[:], self.starts[:], self.ends[:]
        self.last = None

    def _append(self, at: float, start: int, end: int) -> None:
        if len(self.times) >= self.capacity:
            del self.times[0], self.starts[0], self.ends[0]
        self.times.append(at)
        self.starts.append(start)
        self.ends.append(end)

    def appended_at(self, offset: int, max_gap: float) -> float | None:
        """When the record at ``offset`` reached the log, interpolated between the two
        reads around it; None when it is older than the history, not in the log yet, or
        between two reads more than ``max_gap`` seconds apart."""
        ends = self.ends
        i = bisect.bisect_right(ends, offset)  # first sample whose end is > offset
        if i == 0 or i == len(ends):
            return None
        before, after = self.times[i - 1], self.times[i]
        if after - before > max_gap:
            return None
        share = (offset - ends[i - 1] + 0.5) / (ends[i] - ends[i - 1])
        return before + share * (after - before)

    def start_rate(self) -> float | None:
        """Records per second by which the log start advanced over the history (retention
        or DeleteRecords at work); None when it has not moved in the history."""
        if len(self.times) < 2 or self.starts[-1] == self.starts[0]:
            return None
        span = (self.times[-1] if self.last is None else self.last[0]) - self.times[0]
        return (self.starts[-1] - self.starts[0]) / span if span > 0 else None
