"""Brokers that coordinate groups but cannot be reached: one clear reason for a dead
broker, logged once when it enters and once when no group waits on it any more, instead
of one error per commit attempt; ``problem`` says it for ``/readyz`` and ``/ui``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger("spark_offset_sidecar.adapters.kafka.committer")


@dataclass
class _Down:
    address: str
    since: float
    waiting: set[str] = field(default_factory=set)  # groups whose coordinator it was

    def named(self, node: int) -> str:
        return f"broker {node} ({self.address})" if self.address else f"broker {node}"


class UnreachableBrokers:
    """Invariant: a broker is listed iff at least one group's last attempt could not reach
    it and that group has not committed since."""

    def __init__(self) -> None:
        self._down: dict[int, _Down] = {}
        self._waits_on: dict[str, int] = {}  # group -> the broker it waits on

    def missed(self, group: str, node: int, address: str, now: float) -> None:
        """A commit of ``group`` could not reach ``node``, its coordinator."""
        previous = self._waits_on.get(group)
        if previous is not None and previous != node:
            self._forget(group, now)
        down = self._down.get(node)
        if down is None:
            down = self._down[node] = _Down(address, now)
            log.warning(
                "Kafka %s cannot be reached: the groups it coordinates wait until Kafka moves "
                "them (it fences a dead broker after broker.session.timeout.ms, 9 s by "
                "default); said once",
                down.named(node),
            )
        down.waiting.add(group)
        self._waits_on[group] = node

    def reached(self, group: str, node: int, now: float) -> None:
        """A commit of ``group`` succeeded, through ``node``."""
        if group in self._waits_on:
            self._forget(group, now)
        down = self._down.get(node)
        if down is not None:  # the broker is back: its other groups will reach it too
            for waiting in list(down.waiting):
                self._forget(waiting, now)

    def _forget(self, group: str, now: float) -> None:
        node = self._waits_on.pop(group)
        down = self._down[node]
        down.waiting.discard(group)
        if not down.waiting:
            del self._down[node]
            log.info(
                "Kafka broker %d: no group waits on it any more, %.1f s after it could "
                "not be reached",
                node,
                now - down.since,
            )

    def nodes(self) -> list[int]:
        return sorted(self._down)

    def waiting_on(self, group: str, now: float) -> str | None:
        """Why ``group``'s commit waits, when its coordinator is a broker listed here."""
        node = self._waits_on.get(group)
        if node is None:
            return None
        down = self._down[node]
        return (
            f"its coordinator, {down.named(node)}, cannot be reached for "
            f"{now - down.since:.0f} s: Kafka names a new coordinator once it fences the "
            "broker (broker.session.timeout.ms, 9 s by default)"
        )

    def problem(self, now: float) -> str | None:
        if not self._down:
            return None
        return "; ".join(
            f"{down.named(node)} cannot be reached for {now - down.since:.0f} s: "
            f"{len(down.waiting)} group(s) it coordinated wait for Kafka to name a new "
            "coordinator (it fences a dead broker after broker.session.timeout.ms)"
            for node, down in sorted(self._down.items())
        )
