"""The listener's tests run against ``FakeSidecar``, an HTTP server in the service's place."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.support.fake_sidecar import FakeSidecar


@pytest.fixture
def sidecar() -> Iterator[FakeSidecar]:
    server = FakeSidecar()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
