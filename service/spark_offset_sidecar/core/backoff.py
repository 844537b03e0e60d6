"""How long to wait before trying again, the one rule every retry of the service uses."""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    """The wait after ``attempt`` failures in a row: ``initial * factor**(attempt - 1)``,
    at most ``cap``, less up to ``jitter`` of it at random (``random``, injected): waits of
    processes that failed together spread out, and the cap still bounds them."""

    initial: float
    cap: float
    factor: float = 2.0
    jitter: float = 0.0  # 0 (none) to 1 (anything from 0 to the whole wait)
    random: Callable[[], float] = field(default=_random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not (0 < self.initial <= self.cap and self.factor >= 1 and 0 <= self.jitter <= 1):
            raise ValueError(f"not a backoff: {self}")

    def delay(self, attempt: int) -> float:
        """The wait after ``attempt`` (1 for the first) failures in a row."""
        try:
            wait = min(self.cap, self.initial * self.factor ** max(0, attempt - 1))
        except OverflowError:  # 2.0**1024: hours of failures at a short cap
            wait = self.cap
        if self.jitter:
            wait -= wait * self.jitter * self.random()
        return float(wait)
