"""Keeps the jobs' token issuer's keys fresh in the background, so that a key rotation or
an issuer back after an outage is seen without a request (and /readyz clears by itself)."""

from __future__ import annotations

import asyncio

from spark_offset_sidecar.ports.identity import TokenVerifier


async def keep_keys_fresh(verifier: TokenVerifier, every: float, retry: float) -> None:
    while True:
        await asyncio.sleep(retry if verifier.problem else every)
        await verifier.refresh()
