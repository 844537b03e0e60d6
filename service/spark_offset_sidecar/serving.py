"""The service's ASGI app served by uvicorn on the settings' host and port (``cli``'s
``serve``). Its watcher serves no port: ``adapters.watcher.answering``."""

from __future__ import annotations

from typing import Any

import uvicorn

from spark_offset_sidecar.settings import Settings


def run_http(settings: Settings, app: Any) -> None:
    """``app`` on the settings' host and port."""
    config = uvicorn.Config(
        app,
        host=settings.http.host,
        port=settings.http.port,
        log_level=settings.log.level.lower(),
        log_config=None,  # uvicorn's loggers go through ours (observe.logs)
        lifespan="on",
        ws="none",  # no route is a WebSocket: uvicorn imports no WebSocket library
        access_log=False,
        ssl_certfile=settings.http.tls_certfile,
        ssl_keyfile=settings.http.tls_keyfile,
        timeout_keep_alive=settings.http.keep_alive_seconds,
        # SIGTERM must end in bounded time even with a client holding a connection open.
        timeout_graceful_shutdown=int(settings.commits.shutdown_grace_seconds) + 1,
    )
    uvicorn.Server(config).run()
