"""Several real service processes on one PostgreSQL, and what their logs say they
committed (for tests and ``bench/replicas.py``)."""

from __future__ import annotations

import json
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
    """``size`` replicas, each ``offset-sidecar serve`` (its watcher and writer its
    children), on one PostgreSQL: this checkout's, or the one ``python``'s virtualenv has
    (another release, ``harness.releases``); ``replace`` puts another in one's place."""

    def __init__(
        self,
        root: Path,
        bootstrap: str,
        database_url: str,
        size: int,
        python: Path | str | None = None,
        **settings: Any,
    ) -> None:
        self.database_url = database_url
        self.root, self.bootstrap = root, bootstrap
        self.settings = {"database_url": database_url, "replicated": "true", **settings}
        self.replicas: dict[str, ServiceProcess] = {}
        self.retired: list[tuple[str, ServiceProcess]] = []  # replaced, their logs kept
        for index in range(size):
            self.replicas[f"r{index}"] = self._replica(f"r{index}", python)

    def _replica(self, name: str, python: Path | str | None) -> ServiceProcess:
        workdir = self.root / (f"{name}.{len(self.retired)}" if self.retired else name)
        workdir.mkdir(parents=True, exist_ok=True)
        return ServiceProcess(workdir, self.bootstrap, python=python, **self.settings)

    def replace(self, name: str, python: Path | str | None = None) -> ServiceProcess:
        """A rolling upgrade's step: replica ``name`` stopped (SIGTERM: it hands its groups
        back), and another started in its place on the same database, run by ``python``
        (another release's virtualenv; this checkout's by default), once it is ready."""
        self.replicas[name].stop()
        self.retired.append((name, self.replicas[name]))
        self.replicas[name] = self._replica(name, python)
        return self.replicas[name].start()

    def start(self) -> ReplicaCluster:
        """Every replica, one after the other; if one cannot start, those started are
        stopped (none is left writing to the database behind the failure)."""
        try:
            for replica in self.replicas.values():
                replica.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for process in self.replicas.values():
            process.stop()

    def kill(self, name: str) -> None:
        """SIGKILL replica ``name`` (its children end with it)."""
        self.replicas[name].kill()

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
        for name, replica in [*self.retired, *self.replicas.items()]:
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
