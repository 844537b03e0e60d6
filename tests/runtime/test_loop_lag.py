"""The event loop's lag (``observe.loop_lag``): a hold of the loop shows as a tick woken that
much late, alone and in the running service's ``/metrics``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from fastapi.testclient import TestClient

from spark_offset_sidecar.app.root import create_app
from spark_offset_sidecar.observe.loop_lag import LoopLag
from tests.support.app import doubles, settings_for
from tests.support.service import metric, wait_for

HOLD = 0.3  # seconds the tests hold the loop (time.sleep: at least that long)


def hold_the_loop(seconds: float) -> None:
    """What a long synchronous step does to the loop that runs it."""
    time.sleep(seconds)


def test_a_hold_of_the_loop_is_seen_as_late_as_it_held() -> None:
    seen: list[float] = []

    async def scenario() -> None:
        ticked = asyncio.Event()

        def observe(late: float) -> None:
            seen.append(late)
            ticked.set()

        probe = LoopLag(observe, interval=0.01)
        task = asyncio.create_task(probe.run())
        await ticked.wait()
        ticked.clear()
        before = len(seen)
        hold_the_loop(HOLD)  # no tick can run meanwhile
        await ticked.wait()
        task.cancel()
        assert min(seen) >= 0.0
        # The tick due within 0.01 s of the hold's start ran after its end.
        assert seen[before] >= HOLD - 0.01

    asyncio.run(scenario())


def test_the_service_exports_the_loops_lag(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    app = create_app(settings, doubles(settings))
    with TestClient(app) as client:
        name = "sidecar_event_loop_lag_seconds"

        def late_ticks() -> float:
            text = client.get("/metrics").text
            within = metric(text, f"{name}_bucket", le="0.25") or 0.0
            return (metric(text, f"{name}_count") or 0.0) - within

        assert wait_for(lambda: metric(client.get("/metrics").text, f"{name}_count"), what="a tick")
        held = late_ticks()
        assert client.portal is not None
        # On the service's event loop: the tick due within 0.05 s of its start is >= 0.35 s late.
        client.portal.call(hold_the_loop, HOLD + 0.1)
        wait_for(lambda: late_ticks() > held, what="the hold seen as a tick 0.25 s late")
