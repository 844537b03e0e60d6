"""The service's child processes as programs (``topology``; each started by a
``Supervisor`` with ``adapters.child_process.child_command``):

    python -m spark_offset_sidecar.child writer LEVEL FORMAT   # the events' batches
    python -m spark_offset_sidecar.child watcher LEVEL FORMAT  # the fleet, as briefed

Each first asks to end with the service (``die_with_parent``), logs as its service does
(the level and format it is given, each line naming the process), then does its one job,
answering its service's requests on its channel (``adapters.child_process``).
A module of its own, at the top, that imports what both share alone: each program
imports its own part when it runs (the writer the database's adapter; the watcher its
composition, ``app.watch``, and nothing of the side taking events), as a command of the
command line does (docs/decisions.md, "Each process imports what it runs").
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from spark_offset_sidecar.adapters.child_process import die_with_parent
from spark_offset_sidecar.errors import ConfigError
from spark_offset_sidecar.observe.logs import configure_logging


def writer() -> int:
    """The events' batches, read on its channel, written to the database, answered."""
    from spark_offset_sidecar.adapters.sql.writer_process import serve  # its part alone

    serve()
    return 0


def watcher() -> int:
    """The watcher: its service's settings and topology, its first request (its brief:
    ``app.watcher_brief``; none from the environment), then its app's routes answered on
    its channel. Ended by SIGTERM (its service's stop, or the kernel's once its service
    is gone) or by its input closed."""
    # Its part alone, when it runs (the writer imports none of it).
    from pydantic import ValidationError

    from spark_offset_sidecar.adapters.child_process import ChannelEnd
    from spark_offset_sidecar.adapters.watcher.answering import answer_on_channel
    from spark_offset_sidecar.app.kafka_clients import KafkaClients
    from spark_offset_sidecar.app.watch import create_watch_app, open_database
    from spark_offset_sidecar.app.watcher_brief import WatcherBrief

    channel = ChannelEnd()
    number, given = next(channel.requests(), (0, None))
    if given is None:
        return 0  # its service stopped before it was briefed
    try:
        brief = WatcherBrief.model_validate_json(given)
    except ConfigError as exc:
        print(f"offset-sidecar watcher: invalid setting {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:  # its words, not its input: the secrets
        print(f"offset-sidecar watcher: no brief: {exc.errors()[0]['msg']}", file=sys.stderr)
        return 2
    channel.reply(number, None)
    kafka = KafkaClients(brief.settings)
    app = create_watch_app(brief.settings, brief.topology, kafka, open_database)
    return answer_on_channel(channel, app)


PROGRAMS: dict[str, Callable[[], int]] = {"writer": writer, "watcher": watcher}


def main() -> None:
    die_with_parent()
    role, level, log_format = sys.argv[1:4]
    configure_logging(level, log_format, role)
    sys.exit(PROGRAMS[role]())


if __name__ == "__main__":
    main()
