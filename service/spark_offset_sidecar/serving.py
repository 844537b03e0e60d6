"""An ASGI app served by uvicorn, as a process serves it: the service on the settings'
host and port (``cli``'s ``serve``), its watcher on a Unix socket (``child``)."""

from __future__ import annotations

from typing import Any

import uvicorn

from spark_offset_sidecar.settings import Settings


def run_http(settings: Settings, app: Any, uds: str | None = None) -> None:
    """``app`` on the settings' host and port, or on the Unix socket ``uds`` (plain HTTP)."""
    tls = uds is None
    config = uvicorn.Config(
        app,
        host=settings.http.host,
        port=settings.http.port,
        uds=uds,
        log_level=settings.log.level.lower(),
        log_config=None,  # uvicorn's loggers go through ours (observe.logs)
        lifespan="on",
        ws="none",  # no route is a WebSocket: uvicorn imports no WebSocket library
        access_log=False,
        ssl_certfile=settings.http.tls_certfile if tls else None,
        ssl_keyfile=settings.http.tls_keyfile if tls else None,
        timeout_keep_alive=settings.http.keep_alive_seconds,
        # SIGTERM must end in bounded time even with a client holding a connection open.
        timeout_graceful_shutdown=int(settings.commits.shutdown_grace_seconds) + 1,
    )
    uvicorn.Server(config).run()
