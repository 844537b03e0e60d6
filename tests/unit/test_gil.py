"""The switch interval the server runs with, and the interpreter's given back after."""

from __future__ import annotations

import sys
from pathlib import Path

from fastapi.testclient import TestClient

from spark_offset_sidecar.app import create_app
from spark_offset_sidecar.gil import SWITCH_INTERVAL, GilShare
from spark_offset_sidecar.testing import InMemoryCommitter, InMemoryLogEnds
from tests.support.app import settings_for


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


def test_the_server_runs_with_its_setting_and_gives_the_interval_back(tmp_path: Path) -> None:
    before = sys.getswitchinterval()
    app = create_app(
        settings_for(tmp_path, gil_switch_interval_seconds=0.0003),
        committer=InMemoryCommitter(),
        log_ends=InMemoryLogEnds({}),
    )
    with TestClient(app) as client:
        assert client.get("/livez").status_code == 200
        assert sys.getswitchinterval() == 0.0003
    assert sys.getswitchinterval() == before
