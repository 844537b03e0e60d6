"""The app in-process (FastAPI's TestClient): settings on a SQLite file of the test's own,
and posting a Spark progress."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from spark_offset_sidecar.settings import Settings
from tests.support.service import spark_progress


def settings_for(tmp_path: Path, **overrides: Any) -> Settings:
    return Settings(database_url=f"sqlite:///{tmp_path / 'sidecar.db'}", **overrides)


def post_progress(client: TestClient, batch: int, offsets: dict[str, dict[str, int]], **kw: Any):  # type: ignore[no-untyped-def]
    group = kw.pop("group", "orders-app")
    return client.post(
        "/v1/progress", json={"group_id": group, "progress": spark_progress(batch, offsets, **kw)}
    )
