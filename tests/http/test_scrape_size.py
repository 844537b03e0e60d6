"""The scrape's budget (docs/operate/metrics.md): at the default granularity each group adds
at most about 900 bytes to ``/metrics`` in the text format, and what goes over the wire
with gzip, which Prometheus always asks for, is a small fraction of that. Measured as
``python -m bench scrape_size`` measures it (every group lagging and falling behind, with
a time lag, its counters at 0 from its first event), at a fleet small enough for the inner
loop."""

from __future__ import annotations

import asyncio

from bench.scrape_size import measure

BUDGET = 900  # bytes a group adds in the text format, default granularity
GROUPS = 100


def test_a_group_adds_at_most_the_budget_and_gzip_sends_a_fraction_of_it() -> None:
    empty = asyncio.run(measure(0, 8))
    fleet = asyncio.run(measure(GROUPS, 8))
    assert fleet.series - empty.series >= 11 * GROUPS, "11 series a group with one topic"
    per_group = (fleet.text_bytes - empty.text_bytes) / GROUPS
    assert per_group <= BUDGET, f"{per_group:.0f} bytes a group"
    assert fleet.gzip_bytes <= fleet.text_bytes / 8, (
        f"gzip sends {fleet.gzip_bytes} of {fleet.text_bytes} bytes"
    )
