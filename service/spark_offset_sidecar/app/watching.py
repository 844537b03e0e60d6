"""Tasks in the background of a lifespan, which the process taking events (``app.start``)
and its watcher (``app.watch``) both start: the watcher imports this, not ``app.start``."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from typing import Any


def run_in_background(
    stack: AsyncExitStack, work: Coroutine[Any, Any, None], name: str
) -> asyncio.Task[None]:
    """``work`` as a task, cancelled (and awaited) when ``stack`` closes."""
    task = asyncio.create_task(work, name=name)
    stack.push_async_callback(cancel, task)
    return task


async def cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
