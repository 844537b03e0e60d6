"""Kafka's own view of groups' commits, from a client that is not the service's: Kafka's
Java Admin client (``harness/java/OffsetWitness.java``, compiled by javac on the broker's
jars at first use) reads every group's committed offsets every ``interval`` s, each
group's answer taken as it arrives (a group whose coordinator is dead delays no other
group's reads), and optionally plain Java consumers commit for control groups: what Kafka
alone does for a commit, whoever sends it.

Times are Unix seconds (``time.time()``), as the service's metrics and status give them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from harness.machine import ROOT, file_lock, refuse_in_inner_loop

SOURCE = ROOT / "harness" / "java" / "OffsetWitness.java"
Offsets = dict[str, dict[str, int]]


def broker_jars() -> Path:
    """The broker's jars (``scripts/fetch-jars.sh kafka``: Kafka's Java clients too)."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "fetch-jars.sh"), "kafka"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(done.stdout.strip())


def compiled(jars: Path) -> Path:
    """The witness's classes, compiled once per source (a folder keyed by its hash)."""
    key = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    folder = ROOT / ".local" / "java" / f"offset-witness-{key}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(folder.parent / f"offset-witness-{key}.lock"):
        if not (folder / "OffsetWitness.class").exists():
            partial = folder.with_suffix(".partial")
            partial.mkdir(exist_ok=True)
            subprocess.run(
                ["javac", "-d", str(partial), "-cp", f"{jars}/*", str(SOURCE)],
                check=True,
                capture_output=True,
            )
            partial.rename(folder)
    return folder


@dataclass(frozen=True)
class PlainCommit:
    """One commitSync of a plain Java consumer: sent at ``sent``, answered at ``at``
    (``error``: how it failed, else None)."""

    offset: int
    sent: float
    at: float
    error: str | None = None


class OffsetWitness:
    """``changes[group]``: (time, offsets) each time Kafka's answer for the group changed;
    ``plain[group]``: the control groups' commits (``plain_groups``: group -> topic, whose
    partition 0 they commit every ``plain_every`` s); ``unread[group]``: (from, to) spans
    in which the group's reads failed (to: None while they still do)."""

    def __init__(
        self,
        bootstrap: str,
        groups: Iterable[str],
        *,
        plain_groups: Mapping[str, str] | None = None,
        plain_every: float = 0.5,
        interval: float = 0.3,
        timeout: float = 3.0,
        log: Path | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.plain_groups = dict(plain_groups or {})
        self.groups = [*groups, *self.plain_groups]
        self.plain_every, self.interval, self.timeout = plain_every, interval, timeout
        self.log = log  # every line the witness printed, kept for a person to read
        self.changes: dict[str, list[tuple[float, Offsets]]] = {g: [] for g in self.groups}
        self.plain: dict[str, list[PlainCommit]] = {g: [] for g in self.plain_groups}
        self.unread: dict[str, list[tuple[float, float | None]]] = {g: [] for g in self.groups}
        self.ready = threading.Event()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stderr: IO[str] | None = None

    def __enter__(self) -> OffsetWitness:
        refuse_in_inner_loop("starts Kafka's Java Admin client")
        jars = broker_jars()
        classes = compiled(jars)
        args = ["java", "-Xmx128m", "-cp", f"{jars}/*:{classes}", "OffsetWitness"]
        args += [self.bootstrap, str(int(self.interval * 1000)), str(int(self.timeout * 1000))]
        for group, topic in self.plain_groups.items():
            args += ["--plain", group, topic, str(int(self.plain_every * 1000))]
        args += ["--", *(g for g in self.groups if g not in self.plain_groups)]
        stderr = (self.log.with_suffix(".stderr") if self.log else Path("/dev/null")).open("w")
        self._stderr = stderr
        self._process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        self._reader = threading.Thread(target=self._read, name="offset witness", daemon=True)
        self._reader.start()
        if not self.ready.wait(60):
            self.__exit__()
            raise RuntimeError("Kafka's Java Admin client did not start within 60 s")
        return self

    def __exit__(self, *_exc: object) -> None:
        process = self._process
        if process is not None and process.stdin is not None:
            process.stdin.close()  # its end of stdin: it stops
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join(10)
        if self._stderr is not None:
            self._stderr.close()

    def _read(self) -> None:
        assert self._process is not None
        assert self._process.stdout is not None
        out = self.log.open("w") if self.log else None
        try:
            for line in self._process.stdout:
                if out is not None:
                    out.write(line)
                if line.startswith("{"):
                    self._take(json.loads(line))
        finally:
            if out is not None:
                out.close()

    def _take(self, said: dict[str, Any]) -> None:
        event, at, group = said["event"], float(said["at"]), str(said.get("group"))
        with self._lock:
            if event == "ready":
                self.ready.set()
            elif event == "offsets":
                shown = said["offsets"]
                offsets = {t: {p: int(o) for p, o in ps.items()} for t, ps in shown.items()}
                self.changes[group].append((at, offsets))
            elif event == "unread":
                self.unread[group].append((at, None))
            elif event == "read" and self.unread[group]:
                self.unread[group][-1] = (self.unread[group][-1][0], at)
            elif event in ("plain", "plain_failed"):
                offset, sent, error = int(said["offset"]), float(said["sent"]), said.get("error")
                self.plain[group].append(PlainCommit(offset, sent, at, error))

    @staticmethod
    def now() -> float:
        """The witness's clock (Unix seconds, as in ``changes``)."""
        return time.time()

    def batch(self, group: str) -> int:
        """The group's committed offset, when every partition has the same one (a batch
        number, as the tests' checkpoints commit); 0 before any or while they differ."""
        with self._lock:
            if not self.changes[group]:
                return 0
            offsets = self.changes[group][-1][1]
        return _batch(offsets)

    def commit_times(self, group: str) -> list[float]:
        """When Kafka's answer for the group changed (its commits as Kafka shows them)."""
        with self._lock:
            return [at for at, _ in self.changes[group]]

    def committed_between(self, group: str, start: float, end: float) -> int:
        return sum(1 for at in self.commit_times(group) if start <= at <= end)

    def longest_without_commit(self, group: str, start: float, end: float) -> float:
        """The longest time within [start, end] in which Kafka showed no new commit."""
        times = [start, *(at for at in self.commit_times(group) if start < at < end), end]
        return max(b - a for a, b in itertools.pairwise(times))

    def last_commit_at(self, group: str, moment: float) -> float | None:
        """When Kafka last showed the group's commit move, as of ``moment``."""
        before = [at for at in self.commit_times(group) if at <= moment]
        return before[-1] if before else None

    def batches(self, group: str) -> list[tuple[float, int]]:
        """(time, batch) of each change, where every partition has one committed offset (a
        batch number, as the tests' checkpoints commit; 0 where they differ)."""
        with self._lock:
            changes = list(self.changes[group])
        return [(at, _batch(offsets)) for at, offsets in changes]

    def shown_beyond(self, group: str, batch: int) -> float | None:
        """When Kafka first showed the group committed beyond ``batch`` (None: not yet)."""
        return next((at for at, shown in self.batches(group) if shown > batch), None)

    def plain_back(self, group: str, since: float) -> float | None:
        """When Kafka answered the control group's first commit sent after ``since``
        (None: none answered yet): from then on Kafka takes that group's commits."""
        with self._lock:
            done = [c.at for c in self.plain[group] if c.error is None and c.sent >= since]
        return min(done, default=None)

    def plain_longest(self, group: str, start: float, end: float) -> float:
        """The longest time within [start, end] without an answered plain commit."""
        with self._lock:
            done = [c.at for c in self.plain[group] if c.error is None and start < c.at < end]
        return max(b - a for a, b in itertools.pairwise([start, *done, end]))

    def blind(self, start: float, end: float) -> float:
        """The longest span within [start, end] in which some group's reads failed: what
        this witness cannot resolve there."""
        longest = 0.0
        with self._lock:
            spans = [s for spans in self.unread.values() for s in spans]
        for since, until in spans:
            a, b = max(start, since), min(end, until if until is not None else end)
            longest = max(longest, b - a)
        return longest

    def wait_for_newest(self, newest: Mapping[str, int]) -> None:
        """Until Kafka shows every group of ``newest`` committed at its batch there."""
        self.wait_for(
            lambda: all(self.batch(g) == batch for g, batch in newest.items()),
            timeout=60,
            what="every group's newest checkpoint committed",
        )

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"the offset witness exited ({self._process.returncode})")
            time.sleep(0.1)


def _batch(offsets: Offsets) -> int:
    values = {o for partitions in offsets.values() for o in partitions.values()}
    return values.pop() if len(values) == 1 else 0
