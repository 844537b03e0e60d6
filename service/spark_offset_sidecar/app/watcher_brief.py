"""What a service hands its watcher child (``child``'s watcher) at each start: the
service's own settings, validated, and the ``Topology`` it resolved. JSON, its first
request on its channel (``adapters.child_process``): the child reads no setting from its
environment, so a service built in code (``create_app(Settings(...))``) has a watcher
with its settings.

Secrets go as they are (the settings hold them as text, out of ``repr``; nothing logs a
brief), on a pipe rather than in the child's environment. The certificate and key of the
service's HTTPS are left out: the watcher serves no port.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from spark_offset_sidecar.settings import Settings
from spark_offset_sidecar.topology import Topology

NOT_HANDED = {"http": {"tls_certfile", "tls_keyfile"}}  # of the settings


class WatcherBrief(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    settings: Settings
    topology: Topology

    def encode(self) -> bytes:
        """Read back by ``model_validate_json``, checked as settings built in code are
        (``ConfigError``; pydantic's ``ValidationError`` for a brief of another shape)."""
        return self.model_dump_json(exclude={"settings": NOT_HANDED}).encode()
