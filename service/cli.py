"""``offset-sidecar``: run the service and its operator tasks.

offset-sidecar serve       apply migrations, then serve HTTP (settings: SIDECAR_*)
offset-sidecar migrate     apply migrations and exit
offset-sidecar settings    list every SIDECAR_* variable with its default
"""

from __future__ import annotations

import argparse
import logging
import sys

from service.errors import ConfigError, StoreError
from service.settings import Settings

log = logging.getLogger("service")


def _serve(settings: Settings) -> int:
    import uvicorn

    from service.app import create_app

    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        lifespan="on",
        access_log=False,
    )
    uvicorn.Server(config).run()
    return 0


def _migrate(settings: Settings) -> int:
    from service import migrate
    from service.sql_store import SqlStore

    store = SqlStore(settings.database_url)
    try:
        store.migrate()
        store.check()
    finally:
        store.close()
    print(f"database at the newest migration ({migrate.head_revision()})")
    return 0


def _settings(_settings: Settings) -> int:
    for variable, default, meaning in Settings.describe():
        print(f"{variable:40} {default:24} {meaning}")
    return 0


COMMANDS = {"serve": _serve, "migrate": _migrate, "settings": _settings}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="offset-sidecar",
        description="Commit Spark Structured Streaming's Kafka offsets to consumer groups.",
    )
    parser.add_argument("command", choices=sorted(COMMANDS))
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"offset-sidecar: invalid setting {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        return COMMANDS[args.command](settings)
    except StoreError as exc:
        print(f"offset-sidecar: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
