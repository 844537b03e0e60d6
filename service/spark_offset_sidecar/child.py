"""The service's child processes as programs (``topology``; each started by a
``Supervisor`` with ``adapters.child_process.child_command``):

    python -m spark_offset_sidecar.child writer LEVEL FORMAT   # the events' batches
    python -m spark_offset_sidecar.child watcher LEVEL FORMAT  # the fleet, on a socket,
                                                               # as its brief on stdin says

Each first asks to end with the service (``die_with_parent``), logs as its service does
(the level and format it is given, each line naming the process), then does its one job.
A module of its own, at the top, that imports what both share alone: each program
imports its own part when it runs (the writer the database's adapter; the watcher its
composition, ``app.watch``, and nothing of the side taking events), as a command of the
command line does (docs/decisions.md, "Each process imports what it runs").
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable

from spark_offset_sidecar.adapters.child_process import PARENT_ENV, SOCKET_ENV, die_with_parent
from spark_offset_sidecar.errors import ConfigError
from spark_offset_sidecar.observe.logs import configure_logging


def writer() -> int:
    """The events' batches, read on stdin, written to the database, answered on stdout."""
    from spark_offset_sidecar.adapters.sql.writer_process import serve  # its part alone

    serve(sys.stdin.buffer, sys.stdout.buffer)
    return 0


def watcher() -> int:
    """The watcher: its service's settings and topology read once from stdin (its brief:
    ``app.watcher_brief``; none from the environment), served on the Unix socket the
    service named. Ended by SIGTERM (its service's stop, or the kernel's once its service
    is gone: then it removes the socket's folder, which nobody else will)."""
    # Its part alone, when it runs (the writer imports none of it).
    from pydantic import ValidationError

    from spark_offset_sidecar.app.watch import create_watch_app
    from spark_offset_sidecar.app.watcher_brief import WatcherBrief
    from spark_offset_sidecar.serving import run_http

    try:
        brief = WatcherBrief.model_validate_json(sys.stdin.buffer.read())
    except ConfigError as exc:
        print(f"offset-sidecar watcher: invalid setting {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:  # its words, not its input: the secrets
        print(f"offset-sidecar watcher: no brief: {exc.errors()[0]['msg']}", file=sys.stderr)
        return 2
    settings = brief.settings
    socket = os.environ[SOCKET_ENV]
    parent = int(os.environ.get(PARENT_ENV, "0:").partition(":")[0] or 0)

    def ended(signum: int, _frame: object) -> None:
        """Once uvicorn has stopped, it raises the signal again: it ends here."""
        if parent and os.getppid() != parent:
            shutil.rmtree(os.path.dirname(socket), ignore_errors=True)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, ended)
    run_http(settings, create_watch_app(settings, brief.topology), uds=socket)
    return 0


PROGRAMS: dict[str, Callable[[], int]] = {"writer": writer, "watcher": watcher}


def main() -> None:
    die_with_parent()
    role, level, log_format = sys.argv[1:4]
    configure_logging(level, log_format, role)
    sys.exit(PROGRAMS[role]())


if __name__ == "__main__":
    main()
