"""The batches' writer (``adapters.sql.writer_process``) as the program its service starts:
its log lines as the service's (the level and format it is given, each line naming the
``writer`` process), killed with its parent, then serving its pipe until it closes.

    python -m spark_offset_sidecar.batch_writer LEVEL FORMAT

A module of its own, at the top: a package's ``__init__`` runs before its module does,
and the composition root's would load the whole service into a process that only writes.
"""

from __future__ import annotations

import sys

from spark_offset_sidecar.adapters.sql.writer_process import die_with_parent, serve
from spark_offset_sidecar.observe.logs import configure_logging

PROGRAM = "spark_offset_sidecar.batch_writer"  # this module (run as __main__)


def command(level: str, log_format: str) -> tuple[str, ...]:
    """The command that starts the writer of a service that logs at ``level`` in
    ``log_format`` (its ``LogSettings``: not imported here, to keep the child small)."""
    return (sys.executable, "-m", PROGRAM, level, log_format)


def main() -> None:
    die_with_parent()
    level, log_format = sys.argv[1:3]
    configure_logging(level, log_format, "writer")
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
