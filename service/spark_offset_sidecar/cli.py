"""``offset-sidecar``: run the service and its operator tasks (``COMMANDS``); ``offset-sidecar
COMMAND --help`` names the settings COMMAND reads."""

from __future__ import annotations

import argparse
import logging
import sys
import textwrap
from collections.abc import Callable
from contextlib import closing, suppress
from dataclasses import dataclass
from typing import Any

from spark_offset_sidecar import __version__
from spark_offset_sidecar.core.clusters import UnknownCluster
from spark_offset_sidecar.errors import ConfigError, KafkaReadError, OffsetsNotFound, StoreError
from spark_offset_sidecar.heap import HeapKeeper
from spark_offset_sidecar.observe.logs import configure_logging
from spark_offset_sidecar.settings import (
    ClusterSettings,
    CommitSettings,
    DatabaseSettings,
    HttpSettings,
    KafkaSettings,
    LogSettings,
    Settings,
)

log = logging.getLogger("spark_offset_sidecar")


def _serve(settings: Settings) -> int:
    # serve's handler alone imports the service (the other commands need none of it).
    from spark_offset_sidecar.app.parts import production
    from spark_offset_sidecar.app.root import create_app
    from spark_offset_sidecar.serving import run_http

    _refuse_a_newer_database(settings)
    # The interpreter's collector thresholds and pause counts, for serve's whole life: set
    # by the process, never by an app.
    heap = HeapKeeper()
    heap.install()
    try:
        run_http(settings, create_app(settings, production(settings, heap=heap)))
    finally:
        heap.uninstall()
    return 0


def _refuse_a_newer_database(settings: Settings) -> None:
    """A database migrated by a newer release ends serve here, in one line and exit 1,
    not as the start's traceback; one not reachable now is left to the start."""
    from spark_offset_sidecar.adapters.sql.store import SqlStore
    from spark_offset_sidecar.errors import StoreUnavailable

    with closing(SqlStore(settings.database.url)) as store, suppress(StoreUnavailable):
        store.refuse_newer_schema()


def _migrate(settings: Settings) -> int:
    from spark_offset_sidecar.adapters.sql import migrate
    from spark_offset_sidecar.adapters.sql.store import SqlStore

    with closing(SqlStore(settings.database.url)) as store:
        store.migrate()
        store.check()
    print(f"database at the newest migration ({migrate.HEAD})")
    return 0


def _backup(settings: Settings, args: argparse.Namespace) -> int:
    from pathlib import Path

    from spark_offset_sidecar.adapters.sql.backup import backup_sqlite

    done = backup_sqlite(settings.database.url, Path(args.file))
    print(
        f"backed up {done.source} to {done.target}: {done.pages} pages of "
        f"{done.page_size} bytes, integrity ok"
    )
    return 0


def _read_group(settings: Settings, args: argparse.Namespace, read: Callable[..., Any]) -> Any:
    """Run ``read(client options, group, topics, request_timeout=...)`` for the named group,
    on its Kafka cluster: ``--cluster``, else the one the service chooses for the group
    (``SIDECAR_KAFKA_CLUSTER_BY_GROUP``, else the default)."""
    import asyncio

    from spark_offset_sidecar.adapters.kafka.options import kafka_client_options

    clusters = settings.clusters.choice()
    try:
        cluster = clusters.name_of(clusters.of(args.group, args.cluster).name)
    except UnknownCluster as exc:
        raise ServiceRefused(str(exc)) from None
    kafka = settings.for_cluster(cluster)
    return asyncio.run(
        read(
            kafka_client_options(kafka, settings.commits.commit_timeout_seconds),
            args.group,
            args.topic or (),
            request_timeout=settings.commits.commit_timeout_seconds,
        )
    )


def _starting_offsets(settings: Settings, args: argparse.Namespace) -> int:
    from spark_offset_sidecar.adapters.kafka.starting_offsets import starting_offsets

    found = _read_group(settings, args, starting_offsets)
    if found.uncommitted:
        print(
            f"no committed offset for {', '.join(found.uncommitted)}: starting at earliest",
            file=sys.stderr,
        )
    print(found.spark_option())
    return 0


def _describe_group(settings: Settings, args: argparse.Namespace) -> int:
    from spark_offset_sidecar.adapters.kafka.group_report import describe_group

    print(_read_group(settings, args, describe_group).table())
    return 0


TOKEN_ENV = "OFFSET_SIDECAR_TOKEN"  # the CLI's bearer token (not a SIDECAR_ setting)


def _service_call(
    settings: Settings, args: argparse.Namespace, method: str, path: str, body: Any = None
) -> Any:
    """One call to the running service's API; prints its refusal and exits 1 on an error."""
    import json
    import os

    import httpx

    from spark_offset_sidecar.adapters.http_client import fetch

    http = settings.http
    host = "127.0.0.1" if http.host in ("0.0.0.0", "::") else http.host
    scheme = "https" if http.tls_certfile else "http"
    base = args.url or f"{scheme}://{host}:{http.port}"
    headers = {"content-type": "application/json"}
    if token := os.environ.get(TOKEN_ENV):
        headers["authorization"] = f"Bearer {token}"
    try:
        status, answer = fetch(
            method,
            base.rstrip("/") + path,
            timeout=30,
            limit=1 << 30,
            headers=headers,
            content=None if body is None else json.dumps(body).encode(),
        )
    except httpx.HTTPError as exc:
        raise ServiceRefused(f"cannot reach the service at {base}: {exc}") from None
    if httpx.codes.is_success(status):
        return json.loads(answer or b"null")
    hint = ""
    if status == 401:
        hint = (
            f" (the service has tokens: set {TOKEN_ENV} to one that may "
            f"{'read' if method == 'GET' else 'write'} this group)"
            if not os.environ.get(TOKEN_ENV)
            else f" ({TOKEN_ENV} holds a token the service does not know)"
        )
    detail = answer.decode(errors="replace")
    raise ServiceRefused(f"{method} {path}: HTTP {status}{hint}: {detail}")


class ServiceRefused(Exception):
    pass


def _follow(settings: Settings, args: argparse.Namespace) -> int:
    import json

    body = {"path": args.path, "group_id": args.group}
    if args.cluster:
        body["cluster"] = args.cluster
    folder = _service_call(settings, args, "POST", "/v1/followed-folders", body)
    print(json.dumps(folder, indent=2))
    return 0


def _unfollow(settings: Settings, args: argparse.Namespace) -> int:
    from urllib.parse import quote

    answer = _service_call(
        settings, args, "DELETE", f"/v1/followed-folders?path={quote(args.path, safe='')}"
    )
    print(answer["detail"])
    return 0


def _followed(settings: Settings, args: argparse.Namespace) -> int:
    folders = _service_call(settings, args, "GET", "/v1/followed-folders")
    print(f"{'FOLDER':48} {'GROUP':24} {'LAST BATCH':>10} {'NEWEST':>8} {'BEHIND S':>8}  ERRORS")
    for f in folders:
        errors = ", ".join(f"{k}={v}" for k, v in sorted(f["errors"].items())) or "-"
        last = "-" if f["last_batch_recorded"] is None else f["last_batch_recorded"]
        newest = "-" if f["newest_batch_in_folder"] is None else f["newest_batch_in_folder"]
        print(
            f"{f['path']:48} {f['group_id']:24} {last!s:>10} {newest!s:>8} "
            f"{f['behind_seconds']:8.1f}  {errors}"
        )
    return 0


def _settings(_settings: Settings) -> int:
    for name, section in Settings.sections().items():
        print(f"# {section.title}: settings.{name}")
        for variable, default, meaning in section.describe():
            print(f"{variable:40} {default:24} {meaning}")
    return 0


# The settings each command reads (``offset-sidecar settings`` lists them all).
LOG_SETTINGS = tuple(LogSettings.variables().values())
KAFKA_SETTINGS = (
    *KafkaSettings.variables().values(),
    *ClusterSettings.variables().values(),
    CommitSettings.variable("commit_timeout_seconds"),
    *LOG_SETTINGS,
)
SERVICE_SETTINGS = (
    *(HttpSettings.variable(f) for f in ("host", "port", "tls_certfile")),
    *LOG_SETTINGS,
)


def _folder_arguments(sub: argparse.ArgumentParser, *, path: bool, group: bool) -> None:
    if path:
        sub.add_argument("path", help="the checkpoint folder: /abs/path, s3://bucket/key, ...")
    if group:
        sub.add_argument("--group", required=True, help="the consumer group to commit to")
        sub.add_argument(
            "--cluster",
            help="the Kafka cluster the job reads, when the service has several "
            "(default: the service's choice for the group)",
        )
    sub.add_argument(
        "--url",
        help="the service (default http://SIDECAR_HOST:SIDECAR_PORT); "
        f"a token, if needed, in {TOKEN_ENV}",
    )


def _backup_arguments(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "file", metavar="FILE", help="the copy to make (a new file: an existing one is refused)"
    )


@dataclass(frozen=True)
class Command:
    run: Callable[[Settings, argparse.Namespace], int]
    summary: str
    # The settings it reads; ("*",): every one, and the checks across sections (serving).
    reads: tuple[str, ...]
    takes_group: bool = False
    arguments: Callable[[argparse.ArgumentParser], None] = lambda sub: None


COMMANDS: dict[str, Command] = {
    "serve": Command(
        lambda settings, _args: _serve(settings),
        "apply migrations, then serve HTTP and commit offsets to Kafka",
        ("*",),
    ),
    "migrate": Command(
        lambda settings, _args: _migrate(settings),
        "apply database migrations and exit",
        (DatabaseSettings.variable("url"), *LOG_SETTINGS),
    ),
    "backup": Command(
        _backup,
        "copy the SQLite database into a new FILE while the service runs (SQLite's online "
        "backup: one consistent file); PostgreSQL: use pg_dump",
        (DatabaseSettings.variable("url"), *LOG_SETTINGS),
        arguments=_backup_arguments,
    ),
    "settings": Command(
        lambda settings, _args: _settings(settings),
        "list every SIDECAR_* variable with its default and meaning",
        (),
    ),
    "starting-offsets": Command(
        _starting_offsets,
        "the startingOffsets JSON that restarts a query where GROUP's commits stand",
        KAFKA_SETTINGS,
        takes_group=True,
    ),
    "describe-group": Command(
        _describe_group,
        "GROUP as kafka-consumer-groups.sh --describe shows it, read from Kafka",
        KAFKA_SETTINGS,
        takes_group=True,
    ),
    "follow": Command(
        _follow,
        "follow a Spark checkpoint folder into a consumer group (asks the running service)",
        SERVICE_SETTINGS,
        arguments=lambda sub: _folder_arguments(sub, path=True, group=True),
    ),
    "unfollow": Command(
        _unfollow,
        "stop following a checkpoint folder (asks the running service)",
        SERVICE_SETTINGS,
        arguments=lambda sub: _folder_arguments(sub, path=True, group=False),
    ),
    "followed": Command(
        _followed,
        "the followed checkpoint folders and how reading them goes",
        SERVICE_SETTINGS,
        arguments=lambda sub: _folder_arguments(sub, path=False, group=False),
    ),
}


def _settings_epilog(reads: tuple[str, ...]) -> str:
    if reads == ("*",):
        lines = [
            "The first settings to set: SIDECAR_KAFKA_BOOTSTRAP_SERVERS (Kafka, default",
            "127.0.0.1:9092), SIDECAR_DATABASE_URL (default SQLite sidecar.db in the working",
            "folder), SIDECAR_HOST / SIDECAR_PORT, SIDECAR_TOKENS_FILE.",
            "",
            "Settings it reads (environment variables), by section; offset-sidecar settings",
            "gives each one's default and meaning:",
        ]
        for section in Settings.sections().values():
            names = " ".join(section.variables().values())
            lines += [
                f"  {section.title}:",
                *textwrap.wrap(names, 88, initial_indent=" " * 4, subsequent_indent=" " * 4),
            ]
        lines.append("  and each cluster of SIDECAR_KAFKA_CLUSTERS: SIDECAR_CLUSTER_<NAME>_KAFKA_*")
        return "\n".join(lines)
    if not reads:
        return "Reads no setting."
    defaults = {variable: default for variable, default, _ in Settings.describe()}
    lines = [
        f"  {v:34} " + (f"(default {defaults[v]})" if defaults[v] else "(unset by default)")
        for v in reads
    ]
    return "Settings it reads (environment variables):\n" + "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="offset-sidecar",
        description="Commit Spark Structured Streaming's Kafka offsets to consumer groups.",
        epilog="Point it at Kafka with SIDECAR_KAFKA_BOOTSTRAP_SERVERS=host:port[,host:port] "
        "(default 127.0.0.1:9092). Every setting is a SIDECAR_* environment variable: "
        "offset-sidecar settings lists them; offset-sidecar COMMAND --help names the ones "
        "COMMAND reads.",
    )
    top.add_argument("--version", action="version", version=f"offset-sidecar {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = commands.add_parser(
            name,
            help=command.summary,
            description=command.summary,
            epilog=_settings_epilog(command.reads),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command.takes_group:
            sub.add_argument("group", help="the consumer group")
            sub.add_argument(
                "--topic", action="append", help="a topic the query reads (repeatable)"
            )
            sub.add_argument(
                "--cluster",
                help="the Kafka cluster of the group, when the service has several "
                "(default: the service's choice for the group)",
            )
        command.arguments(sub)
    return top


def read_settings(reads: tuple[str, ...]) -> Settings:
    """What a command reads: every setting, checked for serving, for ``("*",)``; else the
    sections of the settings it names, unchecked against the others (it serves nothing)."""
    if reads == ("*",):
        return Settings.from_env()
    sections = Settings.sections().items()
    return Settings.from_env(
        only={name for name, section in sections if set(reads) & set(section.variables().values())}
    )


def _warn_of_service_links() -> None:
    """One warning naming the Kubernetes service-link variables the settings left out."""
    import os

    from spark_offset_sidecar.settings.service_links import service_links

    if links := service_links(os.environ):
        log.warning(
            "ignored %d variables Kubernetes sets for Services whose names begin with "
            "'sidecar' (not settings; the chart's pod sets enableServiceLinks: false): %s",
            len(links),
            ", ".join(links),
        )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = COMMANDS[args.command]
    try:
        settings = read_settings(command.reads)
    except ConfigError as exc:
        print(f"offset-sidecar: invalid setting {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log.level, settings.log.format)
    _warn_of_service_links()
    try:
        return command.run(settings, args)
    except (StoreError, OffsetsNotFound, KafkaReadError, ServiceRefused) as exc:
        print(f"offset-sidecar: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
