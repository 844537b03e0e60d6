"""Several Kafka clusters behind one service: which cluster a group's offsets go to
(ledger R14; docs/run/clusters.md). The ledger stores the default cluster as None, so
that every group registered before there were clusters is on it whatever its name."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterOf:
    """R14: the Kafka cluster of an event's group (None: the service's default one).
    ``named``: the job named it, and a group on another cluster refuses the event; else
    it is only the cluster of a group not known yet (the settings' choice for it)."""

    name: str | None = None
    named: bool = False


DEFAULT_CLUSTER = ClusterOf()


class UnknownCluster(ValueError):
    pass


@dataclass(frozen=True)
class Clusters:
    """The service's clusters: ``default`` (its name) first, then the others; and the
    (pattern, cluster) pairs that choose one for a group whose job names none."""

    default: str = "default"
    others: tuple[str, ...] = ()
    by_group: tuple[tuple[str, str], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.default, *self.others)

    def of(self, group_id: str, named: str | None = None) -> ClusterOf:
        """The cluster of ``group_id``'s event, whose job named ``named`` (None: none).
        Raises ``UnknownCluster`` for a name that is not one of the service's."""
        if named is not None:
            if named not in self.names:
                raise UnknownCluster(
                    f"no Kafka cluster is named {named!r}; this service has "
                    f"{', '.join(repr(n) for n in self.names)}"
                )
            return ClusterOf(self.stored(named), named=True)
        for pattern, name in self.by_group:
            if fnmatch.fnmatchcase(group_id, pattern):
                return ClusterOf(self.stored(name))
        return DEFAULT_CLUSTER

    def stored(self, name: str) -> str | None:
        """``name`` as the ledger keeps it (None: the default cluster)."""
        return None if name == self.default else name

    def name_of(self, stored: str | None) -> str:
        """The name of a group's cluster as the ledger keeps it."""
        return self.default if stored is None else stored
