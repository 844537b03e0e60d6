"""A real PostgreSQL server for tests: initdb and pg_ctl from Debian's postgresql package,
in a temporary folder, on a free loopback port; run as the ``postgres`` user when root
(PostgreSQL refuses to run as root)."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from harness.machine import free_port, refuse_in_inner_loop


def pg_bin() -> Path | None:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    return Path(found[-1]).parent if found else None


class PostgresServer:
    def __init__(self) -> None:
        binaries = pg_bin()
        if binaries is None:
            raise RuntimeError("no PostgreSQL server binaries; run scripts/install-system-deps.sh")
        self.bin = binaries
        # Its own folder: pytest's are private to root, and postgres must reach this one.
        self.root = Path(tempfile.mkdtemp(prefix="sidecar-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql+psycopg://sidecar@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        """Create the cluster on first use, then start the server."""
        refuse_in_inner_loop("starts PostgreSQL (a Debian package)")
        if not self.data.exists():
            if os.geteuid() == 0:
                shutil.chown(self.root, "postgres", "postgres")
            self._run(
                str(self.bin / "initdb"), "-D", str(self.data), "-U", "sidecar",
                "--auth=trust", "--no-sync", "-E", "UTF8",
            )  # fmt: skip
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=on"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self.root / "server.log"), "-w", "start",
        )  # fmt: skip
        return self

    def pid(self) -> int:
        """The postmaster's pid (every backend is its child)."""
        return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])

    def halt(self) -> None:
        """Stop the server at once, as a crash or a network cut would: clients lose their
        connections mid-session."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def reset(self) -> None:
        """Drop every table, so each test starts from an empty database."""
        from sqlalchemy import create_engine, text

        engine = create_engine(self.url)
        with engine.begin() as connection:
            connection.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
        engine.dispose()
