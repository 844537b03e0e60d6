"""What runs where: decided here alone (``Topology.resolve``), once, by the service at
start (``app.root``: from its settings and its parts), logged, shown on ``GET
/v1/service``, and handed to its watcher with its settings (``app.watcher_brief``). Every
part reads what runs from the ``Topology`` it is given; none decides it again.

The service runs as processes (``offset-sidecar serve``, and every app ``create_app``
builds):

  - the process taking events (HTTP, the ledger, the commits), which answers every route
    on its port, passing the readers' routes (``/v1/status``, ``/ui``) to its watcher;
  - the watcher, its child: reads the log ends, evaluates every group (with replicas:
    the groups this replica holds the leases of), exports their series on ``/metrics``;
  - the writer, its child: writes the events' batches to the database (not with
    replicas: a replica's batch is one transaction around the ledger's decision, in a
    thread of the process taking events; nor on a store handed in, a test's double).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Topology:
    watcher: Literal["child"]  # always: a process of its own
    writer: Literal["child", "thread"]
    replicated: bool
    database: str  # the URL's scheme: sqlite, postgresql, or "given" (a store handed in)

    @classmethod
    def resolve(cls, *, replicated: bool, database: str | None) -> Topology:
        """``database``: the SQL URL, or None when a store is handed in."""
        kind = "given" if database is None else database.split(":", 1)[0].split("+", 1)[0]
        writes_in_child = not replicated and database is not None
        return cls(
            watcher="child",
            writer="child" if writes_in_child else "thread",
            replicated=replicated,
            database=kind,
        )

    def describe(self) -> str:
        """One line for the log: "watcher: child, writer: child, alone, sqlite"."""
        replicas = "replicated" if self.replicated else "alone"
        return f"watcher: {self.watcher}, writer: {self.writer}, {replicas}, {self.database}"
