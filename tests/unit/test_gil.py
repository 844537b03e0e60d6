"""The switch interval the serving process runs with where it watches the fleet, and the
interpreter's given back after; apps never touch it, and tell the process's heap keeper
when the fleet's state is rebuilt."""

from __future__ import annotations

import gc
import logging
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from spark_offset_sidecar.app import create_app
from spark_offset_sidecar.cli import process_tuning
from spark_offset_sidecar.core.offsets import TopicPartition
from spark_offset_sidecar.gil import SWITCH_INTERVAL, GilShare
from spark_offset_sidecar.settings import Settings, TuningSettings
from spark_offset_sidecar.testing import InMemoryCommitter, InMemoryLogEnds
from tests.support.app import settings_for
from tests.support.service import spark_progress, wait_for


def test_install_sets_the_interval_and_uninstall_restores_it() -> None:
    before = sys.getswitchinterval()
    share = GilShare(0.0007)
    share.install()
    try:
        assert sys.getswitchinterval() == 0.0007
        share.install()  # twice: still the interpreter's own to restore
    finally:
        share.uninstall()
    assert sys.getswitchinterval() == before
    share.uninstall()  # not installed: nothing to give back
    assert sys.getswitchinterval() == before


def test_the_default_is_shorter_than_cpythons() -> None:
    assert 0 < SWITCH_INTERVAL < 0.005


def test_a_process_that_watches_sets_its_interval_and_heap_keeper_and_gives_them_back(
    tmp_path: Path,
) -> None:
    """One process watching the fleet (``SIDECAR_WATCHER=in-process``): the setting's
    interval and the freezing heap keeper for the life of the server, the interpreter's
    own after."""
    before, callbacks = sys.getswitchinterval(), list(gc.callbacks)
    with process_tuning(TuningSettings(gil_switch_interval_seconds=0.0003), watches=True) as heap:
        assert sys.getswitchinterval() == 0.0003
        assert len(gc.callbacks) == len(callbacks) + 1, "the heap keeper watches collections"
        assert heap.thaw_every == TuningSettings().gc_thaw_seconds
    assert sys.getswitchinterval() == before
    assert gc.callbacks == callbacks


def test_a_process_whose_watcher_is_elsewhere_keeps_the_interpreters_interval_and_counts_pauses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``serve`` with its watcher a child (the default) or separate: no switch interval, no
    freezing (no measured gain there), pauses still counted; a tuning set explicitly is
    named as not applied."""
    before, callbacks = sys.getswitchinterval(), list(gc.callbacks)
    with process_tuning(TuningSettings(), watches=False) as heap:
        assert sys.getswitchinterval() == before
        assert heap.thaw_every == 0, "nothing frozen"
        gc.collect()
        assert heap.pauses[2].collections >= 1, "the full collection's pause is counted"
    assert gc.callbacks == callbacks
    assert not caplog.records, "defaults are not worth a warning"
    env = {"SIDECAR_GIL_SWITCH_INTERVAL_SECONDS": "0.001"}
    with (
        caplog.at_level(logging.WARNING),
        process_tuning(Settings.from_env(env).tuning, watches=False),
    ):
        assert sys.getswitchinterval() == before
    assert "SIDECAR_GIL_SWITCH_INTERVAL_SECONDS" in caplog.text
    assert "not applied" in caplog.text
    assert "SIDECAR_GC_THAW_SECONDS" not in caplog.text, "only what was set is named"


def test_apps_leave_the_interpreter_alone(tmp_path: Path) -> None:
    """Two apps in one process, started and stopped in turn: neither sets nor undoes
    anything of the interpreter's (a process-wide setting per app would be undone by the
    first app to stop while the other runs)."""
    before, thresholds = sys.getswitchinterval(), gc.get_threshold()
    apps = [
        create_app(
            settings_for(tmp_path / str(i), gil_switch_interval_seconds=0.0003),
            committer=InMemoryCommitter(),
            log_ends=InMemoryLogEnds({}),
        )
        for i in range(2)
    ]
    with TestClient(apps[0]) as first:
        with TestClient(apps[1]) as second:
            assert second.get("/livez").status_code == 200
            assert sys.getswitchinterval() == before
        assert first.get("/livez").status_code == 200
        assert (sys.getswitchinterval(), gc.get_threshold()) == (before, thresholds)


def test_the_serving_apps_lag_reads_settle_the_process_heap(tmp_path: Path) -> None:
    """``serve`` hands its heap keeper to the app: each evaluation of the fleet, once in
    place, is frozen by it (``HeapKeeper.settle``)."""
    tp = TopicPartition("orders", 0)
    with process_tuning(TuningSettings(), watches=True) as heap:
        settled = []
        heap.settle = lambda: settled.append(gc.get_freeze_count())  # type: ignore[method-assign]
        app = create_app(
            settings_for(tmp_path, lag_read_interval_seconds=0.05),
            committer=InMemoryCommitter(),
            log_ends=InMemoryLogEnds({tp: 10}),
            heap=heap,
        )
        with TestClient(app) as client:
            body = {"group_id": "g", "progress": spark_progress(0, {"orders": {"0": 5}})}
            assert client.post("/v1/progress", json=body).status_code == 200
            wait_for(lambda: len(settled) >= 2, what="two evaluations told to the keeper")
