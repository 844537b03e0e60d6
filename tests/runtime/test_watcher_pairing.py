"""The pairing keeper of a watcher run on its own (``runtime.watcher_pairing``) against a
scripted pairing: each change of replica reported once and in order, a step that cannot
reach the database changes nothing. On PostgreSQL: ``tests/adapters/test_watcher_pairs.py``;
whole processes: ``tests/e2e/test_replicas.py`` (``paired``)."""

from __future__ import annotations

import asyncio

from spark_offset_sidecar.runtime.watcher_pairing import PairingKeeper


class ScriptedPairing:
    def __init__(self, *answers: str | Exception | None) -> None:
        self.answers = list(answers)
        self.left = 0

    def pair(self) -> str | None:
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def leave(self) -> None:
        self.left += 1


def test_each_change_of_replica_is_reported_once_and_a_failed_step_changes_nothing() -> None:
    pairing = ScriptedPairing(
        None, "r1", "r1", ConnectionError("database away"), "r1", None, "r2", "r2"
    )
    changes: list[str | None] = []
    keeper = PairingKeeper(pairing, interval=60, on_change=changes.append)

    async def steps() -> None:
        for _ in range(8):
            await keeper.step()
        await keeper.leave()

    asyncio.run(steps())
    assert changes == ["r1", None, "r2"]  # None at first is no change: it held none
    assert keeper.replica == "r2"
    assert pairing.left == 1
