"""A test helper's loop in a thread of its own, for the time of a ``with`` block."""

from __future__ import annotations

import threading
from typing import Self


class InThread:
    """Runs ``_loop`` in a daemon thread from ``__enter__``; ``__exit__`` sets ``_stop``
    (the loop's signal to end) and waits up to ``JOIN_SECONDS`` for it."""

    JOIN_SECONDS = 30.0

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(self.JOIN_SECONDS)

    def _loop(self) -> None:
        raise NotImplementedError
