"""The service's child processes as programs (``topology``; each started by a
``Supervisor`` with ``adapters.child_process.child_command``):

    python -m spark_offset_sidecar.child writer LEVEL FORMAT   # the events' batches
    python -m spark_offset_sidecar.child watcher LEVEL FORMAT  # the fleet, on a socket

Each first asks to end with the service (``die_with_parent``), logs as its service does
(the level and format it is given, each line naming the process), then does its one job.
A module of its own, at the top: a package's ``__init__`` runs before its module does,
and the composition root's would load the whole service into a process that only writes
(the writer imports the database's adapter alone; the watcher, the service it watches).
"""

from __future__ import annotations

import sys

from spark_offset_sidecar.adapters.child_process import die_with_parent
from spark_offset_sidecar.observe.logs import configure_logging


def main() -> None:
    die_with_parent()
    role, level, log_format = sys.argv[1:4]
    configure_logging(level, log_format, role)
    if role == "writer":
        from spark_offset_sidecar.adapters.sql.writer_process import serve

        serve(sys.stdin.buffer, sys.stdout.buffer)
    else:
        from spark_offset_sidecar.cli import watch

        sys.exit(watch())


if __name__ == "__main__":
    main()
