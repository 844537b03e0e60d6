"""Each process imports what it runs (docs/decisions.md, "Each process imports what it
runs"): the service's children, run as their supervisor runs them, load nothing of the
side taking events. What a program imported is read from ``python -X importtime``'s
report of it, so a module pulled in through any path counts."""

from __future__ import annotations

import os
import subprocess

import pytest

from spark_offset_sidecar.adapters.child_process import child_command

# What the watcher never runs: the events' routes and ledger, the commits, the writer, the
# migrations, the checkpoint folders, an HTTP server (it answers on its channel).
NOT_IN_THE_WATCHER = (
    "spark_offset_sidecar.app.root",
    "spark_offset_sidecar.app.start",
    "spark_offset_sidecar.cli",
    "spark_offset_sidecar.http.event_routes",
    "spark_offset_sidecar.http.follow_routes",
    "spark_offset_sidecar.http.progress_route",
    "spark_offset_sidecar.runtime.durable_ledger",
    "spark_offset_sidecar.runtime.commit_loop",
    "spark_offset_sidecar.runtime.checkpoint_follower",
    "spark_offset_sidecar.adapters.kafka.committer",
    "spark_offset_sidecar.adapters.sql.writer_process",
    "spark_offset_sidecar.adapters.watcher.child",
    "alembic",
    "uvicorn",
    "fsspec",
    "sqlalchemy.dialects.postgresql",
)
# The writer writes batches to the database: no web framework, no Kafka, no settings.
NOT_IN_THE_WRITER = (
    "fastapi",
    "starlette",
    "uvicorn",
    "pydantic",
    "aiokafka",
    "httpx",
    "alembic",
    "prometheus_client",
    "spark_offset_sidecar.app",
    "spark_offset_sidecar.http",
    "spark_offset_sidecar.settings",
    "sqlalchemy.dialects.postgresql",
)


def imported_by(role: str, env: dict[str, str]) -> set[str]:
    """Every module child ``role`` imported before it ended, as its supervisor starts it."""
    python, *program = child_command(role, "INFO", "text")
    done = subprocess.run(
        [python, "-X", "importtime", *program],
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,  # the writer ends at once (no batch), the watcher (no brief)
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert report, done.stderr
    return {line.rsplit("|", 1)[1].strip() for line in report[1:]}


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """``names`` among ``modules``, a package counting when any of its modules is."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


def test_the_watcher_imports_nothing_of_the_side_taking_events() -> None:
    # No brief on its input ends it after its imports, before it serves.
    modules = imported_by("watcher", {})
    assert "spark_offset_sidecar.app.watch" in modules  # what it runs was imported
    assert loaded(modules, NOT_IN_THE_WATCHER) == []


def test_the_writer_imports_the_database_alone() -> None:
    modules = imported_by("writer", {})
    assert "spark_offset_sidecar.adapters.sql.store" in modules
    assert loaded(modules, NOT_IN_THE_WRITER) == []


@pytest.mark.parametrize("names", [NOT_IN_THE_WATCHER, NOT_IN_THE_WRITER])
def test_the_check_sees_a_module_loaded(names: tuple[str, ...]) -> None:
    """It can fail: a module's submodule counts for it."""
    modules = {"spark_offset_sidecar.app.start", "alembic.command", "fastapi.routing"}
    assert "alembic" in loaded(modules, names)
