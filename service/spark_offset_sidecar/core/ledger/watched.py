"""Which groups' memory changed, for the watchers (ledger R15).

R15 memory  When followed (``changed`` not None), every group whose memory (counters,
            commit in flight, failures, retry time) may have changed is added to
            ``changed`` until its reader empties it: what a watcher is sent
            (``core.lag.group_memory``). Not followed: nothing is collected.
"""

from __future__ import annotations


class MemoryWatch:
    def __init__(self) -> None:
        self.changed: set[str] | None = None  # None until followed

    def follow(self) -> None:
        """Collect from now on the groups whose memory changes."""
        if self.changed is None:
            self.changed = set()

    def mark(self, group_id: str) -> None:
        """``group_id``'s memory may have changed (or it is gone): collected when followed."""
        if self.changed is not None:
            self.changed.add(group_id)

    def take(self) -> set[str]:
        """The groups whose memory may have changed since the last call (emptied); none
        while not followed (and it stays not followed)."""
        changed = self.changed
        if changed is None:
            return set()
        self.changed = set()
        return changed
