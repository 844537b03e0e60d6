"""The app in-process (FastAPI's TestClient): settings on a SQLite file of the test's own,
and posting a Spark progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from spark_offset_sidecar.settings import Settings
from tests.support.service import spark_progress


def settings_for(tmp_path: Path, **values: Any) -> Settings:
    """The settings a service reads from its environment, on a SQLite file in ``tmp_path``:
    each keyword is the variable ``SIDECAR_<KEYWORD>`` (``lag_read_interval_seconds=0.05``,
    ``cluster_eu_kafka_bootstrap_servers="eu:9092"``), its value as the environment gives it."""
    environ = {"SIDECAR_DATABASE_URL": f"sqlite:///{tmp_path / 'sidecar.db'}"}
    environ.update({f"SIDECAR_{name.upper()}": _text(value) for name, value in values.items()})
    return Settings.from_env(environ)


def _text(value: Any) -> str:
    """``value`` as the environment writes it: ``True`` as ``true``, a tuple with commas."""
    if isinstance(value, bool):
        return str(value).lower()
    return ",".join(value) if isinstance(value, tuple) else str(value)


def post_progress(client: TestClient, batch: int, offsets: dict[str, dict[str, int]], **kw: Any):  # type: ignore[no-untyped-def]
    group = kw.pop("group", "orders-app")
    return client.post(
        "/v1/progress", json={"group_id": group, "progress": spark_progress(batch, offsets, **kw)}
    )
