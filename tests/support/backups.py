"""The SQLite backup and restore of docs/run/upgrade.md as its tests run them: the page's
blocks that name a test, as bash scripts; a writer that keeps the service taking state
while a backup is taken; and what a copy holds."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import subprocess
import threading
from pathlib import Path
from types import TracebackType

import httpx

from harness.machine import ROOT
from tests.support.manual import shell_blocks

PAGE = ROOT / "docs" / "run" / "upgrade.md"


def page_blocks(test: str) -> list[list[str]]:
    """The commands of each block of the page marked ``<!-- run by TEST ... -->``, in the
    page's order, as written (a command continued over a backslash is one line again; a
    here-document's lines stay lines: ``script``)."""
    marked = [
        [command.replace("\n", " ") for command in block.commands]
        for block in shell_blocks(PAGE)
        if re.match(rf"<!-- run by {re.escape(test)}( .*)? -->$", block.above)
    ]
    assert marked, f"{PAGE.name} has no block run by {test}"
    return marked


def script(commands: list[str]) -> str:
    """Commands as one bash script that stops at the first failing one."""
    return "set -euo pipefail\n" + "\n".join(commands)


def run_script(commands: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run a block's commands (``script``); they must succeed. Their output (stdout)."""
    text = script(commands)
    done = subprocess.run(
        ["bash", "-c", text], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{text}\n{done.stdout}{done.stderr}"
    return done.stdout


def queries_in(database: Path) -> set[str]:
    """The queries a SQLite database holds; it must pass ``PRAGMA integrity_check``."""
    with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return {query for (query,) in db.execute("SELECT query_id FROM queries")}


class Checkpoints:
    """A thread posting one pending checkpoint of a new query (``q-0``, ``q-1``, ...) at a
    time to the service at ``url``, while in its ``with``: ``answered`` holds the queries
    the service said it stored (2xx: on disk)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=url, headers=headers, timeout=10)
        self.answered: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._post, daemon=True)
        self._failure: BaseException | None = None

    def post(self, query: str) -> None:
        body = {"checkpoint_id": 1, "group_id": f"g-{query}", "offsets": {"t": {"0": 1}}}
        answer = self.http.post(f"/v1/queries/{query}/checkpoints", json=body)
        assert answer.status_code == 200, answer.text
        self.answered.append(query)

    def _post(self) -> None:
        try:
            while not self._stop.is_set():
                self.post(f"q-{len(self.answered)}")
        except BaseException as failed:  # given back by __exit__
            self._failure = failed

    def __enter__(self) -> Checkpoints:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self._failure is not None and kind is None:
            raise AssertionError(f"a checkpoint was refused: {self._failure}")
