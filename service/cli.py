"""``offset-sidecar``: run the service and its operator tasks.

offset-sidecar serve       apply migrations, then serve HTTP (settings: SIDECAR_*)
offset-sidecar migrate     apply migrations and exit
offset-sidecar settings    list every SIDECAR_* variable with its default
offset-sidecar describe-group GROUP [--topic T]
                           the group as kafka-consumer-groups.sh shows it, read from Kafka
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from typing import Any

from service.errors import ConfigError, KafkaReadError, OffsetsNotFound, StoreError
from service.json_logs import configure_logging
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
        log_config=None,  # uvicorn's loggers go through ours (service.json_logs)
        lifespan="on",
        access_log=False,
        ssl_certfile=settings.tls_certfile,
        ssl_keyfile=settings.tls_keyfile,
        # SIGTERM must end in bounded time even with a client holding a connection open.
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds) + 1,
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


def _read_group(
    settings: Settings, args: argparse.Namespace, command: str, read: Callable[..., Any]
) -> Any:
    """Run ``read(client options, group, topics, request_timeout=...)`` for the named group."""
    import asyncio

    from service.kafka_options import kafka_client_options

    if not args.group:
        raise SystemExit(f"offset-sidecar {command}: name the consumer group")
    return asyncio.run(
        read(
            kafka_client_options(settings),
            args.group,
            args.topic or (),
            request_timeout=settings.commit_timeout_seconds,
        )
    )


def _starting_offsets(settings: Settings, args: argparse.Namespace) -> int:
    from service.recovery import starting_offsets

    found = _read_group(settings, args, "starting-offsets", starting_offsets)
    if found.uncommitted:
        print(
            f"no committed offset for {', '.join(found.uncommitted)}: starting at earliest",
            file=sys.stderr,
        )
    print(found.spark_option())
    return 0


def _describe_group(settings: Settings, args: argparse.Namespace) -> int:
    from service.group_report import describe_group

    print(_read_group(settings, args, "describe-group", describe_group).table())
    return 0


def _settings(_settings: Settings) -> int:
    for variable, default, meaning in Settings.describe():
        print(f"{variable:40} {default:24} {meaning}")
    return 0


COMMANDS: dict[str, Callable[[Settings, argparse.Namespace], int]] = {
    "serve": lambda settings, _args: _serve(settings),
    "migrate": lambda settings, _args: _migrate(settings),
    "settings": lambda settings, _args: _settings(settings),
    "starting-offsets": _starting_offsets,
    "describe-group": _describe_group,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="offset-sidecar",
        description="Commit Spark Structured Streaming's Kafka offsets to consumer groups.",
    )
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument(
        "group",
        nargs="?",
        help="consumer group (starting-offsets, describe-group)",
    )
    parser.add_argument("--topic", action="append", help="topic the query reads (repeatable)")
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"offset-sidecar: invalid setting {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        return COMMANDS[args.command](settings, args)
    except (StoreError, OffsetsNotFound, KafkaReadError) as exc:
        print(f"offset-sidecar: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
