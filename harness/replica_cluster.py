"""Several real service processes on one PostgreSQL, and what their logs say they
committed (for tests and ``bench/replicas.py``)."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.service_process import ServiceProcess


@dataclass(frozen=True)
class LoggedCommit:
    """One successful commit, from a replica's JSON log."""

    replica: str  # the process's name in the cluster
    group_id: str
    checkpoint_id: int
    owner_epoch: int
    started_at: float  # unix time the commit was taken
    ended_at: float  # unix time of the log line (after Kafka answered)


class ReplicaCluster:
    """``size`` replicas; with ``watcher="separate"``, each beside a watcher of its own
    that it tells (``SIDECAR_WATCHER_URL``), as the chart's pods with a watcher container;
    with ``watcher="paired"``, ``size`` watchers as in pods of their own, each listening on
    this machine's outer address (``outer``), pairing itself through the database with a
    replica that tells it there with the watcher's token. ``readers`` are then the
    watchers."""

    def __init__(
        self,
        root: Path,
        bootstrap: str,
        database_url: str,
        size: int,
        outer: str | None = None,
        **settings: Any,
    ) -> None:
        self.database_url = database_url
        self.replicas: dict[str, ServiceProcess] = {}
        self.watchers: dict[str, ServiceProcess] = {}
        self.paired = settings.get("watcher") == "paired"
        if self.paired:
            token = root / "watcher-token"
            token.write_text(f"{secrets.token_urlsafe(24)}\n")
            settings = {**settings, "watcher_token_file": token}
        for index in range(size):
            name = f"r{index}"
            workdir = root / name
            workdir.mkdir(parents=True, exist_ok=True)
            own = {"database_url": database_url, "replicated": "true", **settings}
            if settings.get("watcher") == "separate":
                watcher = ServiceProcess(workdir, bootstrap, command="watch", **own)
                watcher.env["SIDECAR_WATCHER_URL"] = own["watcher_url"] = watcher.url
                self.watchers[name] = watcher
            elif self.paired:
                if outer is None:
                    raise ValueError("paired watchers listen on an outer address: give one")
                # Reached from outside, readers unauthenticated (as the tests read).
                beyond = {"host": "0.0.0.0", "allow_unauthenticated": "true"}
                watcher = ServiceProcess(workdir, bootstrap, command="watch", **own, **beyond)
                advertised = f"http://{outer}:{watcher.port}"
                watcher.env["SIDECAR_WATCHER_ADVERTISED_URL"] = advertised
                self.watchers[name] = watcher
            self.replicas[name] = ServiceProcess(workdir, bootstrap, **own)

    def start(self) -> ReplicaCluster:
        for replica in self.replicas.values():
            replica.start()  # migrates the database before any watcher reads it
        for watcher in self.watchers.values():
            watcher.start()
        return self

    def stop(self) -> None:
        for process in (*self.watchers.values(), *self.replicas.values()):
            process.stop()

    def kill(self, name: str) -> None:
        """SIGKILL replica ``name`` and the watcher beside it (its pod is gone); a paired
        watcher lives on in its own pod."""
        self.replicas[name].kill()
        if name in self.watchers and not self.paired:
            self.watchers[name].kill()

    def readers(self) -> dict[str, ServiceProcess]:
        """Who answers ``/v1/status`` and ``/ui`` for each replica alive: the replica, or
        its watcher (paired: the one the database pairs it with, once paired)."""
        alive = self.alive()
        if self.paired:
            paired = self.paired_watchers()
            return {name: paired.get(name, self.watchers[name]) for name in alive}
        return {name: self.watchers.get(name, r) for name, r in alive.items()}

    def paired_watchers(self) -> dict[str, ServiceProcess]:
        """Each replica's paired watcher, by the replica's name, as the database has it."""
        from sqlalchemy import create_engine, select

        from spark_offset_sidecar.adapters.sql.schema import replicas

        by_url = {w.env["SIDECAR_WATCHER_ADVERTISED_URL"]: w for w in self.watchers.values()}
        engine = create_engine(self.database_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    select(replicas.c.replica_id, replicas.c.watcher_url).where(
                        replicas.c.watcher_url.is_not(None)
                    )
                ).all()
        finally:
            engine.dispose()
        found = {}
        for replica_id, url in rows:
            name = self._name_of(replica_id)
            if name is not None and url in by_url:
                found[name] = by_url[url]
        return found

    def _name_of(self, replica_id: str | None) -> str | None:
        """The name of the running replica whose id ``replica_id`` is (``host-pid-random``)."""
        for name, replica in self.replicas.items():
            if (
                replica_id
                and replica.process is not None
                and f"-{replica.process.pid}-" in replica_id
            ):
                return name
        return None

    def alive(self) -> dict[str, ServiceProcess]:
        return {
            name: r
            for name, r in self.replicas.items()
            if r.process is not None and r.process.poll() is None
        }

    def owner_of(self, group_id: str) -> str | None:
        """The name of the replica that holds ``group_id``'s lease, from the database
        (a replica's id carries its process id: ``host-pid-random``)."""
        from sqlalchemy import create_engine, select

        from spark_offset_sidecar.adapters.sql.schema import consumer_groups

        engine = create_engine(self.database_url)
        try:
            with engine.connect() as conn:
                owner = conn.scalar(
                    select(consumer_groups.c.owner_id).where(consumer_groups.c.group_id == group_id)
                )
        finally:
            engine.dispose()
        return self._name_of(owner)

    def commits(self) -> list[LoggedCommit]:
        found: list[LoggedCommit] = []
        for name, replica in self.replicas.items():
            if not replica.log.exists():
                continue
            for line in replica.log.read_text().splitlines():
                if '"commit_started_at"' not in line or " committed checkpoint " not in line:
                    continue
                entry = json.loads(line)
                found.append(
                    LoggedCommit(
                        name,
                        entry["group_id"],
                        entry["checkpoint_id"],
                        entry["owner_epoch"],
                        entry["commit_started_at"],
                        datetime.fromisoformat(entry["time"]).timestamp(),
                    )
                )
        return sorted(found, key=lambda c: c.started_at)


def overlapping_owners(commits: list[LoggedCommit]) -> list[tuple[LoggedCommit, LoggedCommit]]:
    """Pairs of commits of one group by two replicas whose times overlap."""
    clashes = []
    by_group: dict[str, list[LoggedCommit]] = {}
    for commit in commits:
        by_group.setdefault(commit.group_id, []).append(commit)
    for group_commits in by_group.values():
        for i, a in enumerate(group_commits):
            for b in group_commits[i + 1 :]:
                if a.replica != b.replica and b.started_at < a.ended_at:
                    clashes.append((a, b))
    return clashes
