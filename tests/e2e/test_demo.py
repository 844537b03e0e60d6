"""``make demo`` from a cold start: a fresh clone, a user who is not root, and a broker the
demo starts itself in a new folder on a private port, so a warm broker (one that already
has ``__consumer_offsets``) can never hide a first-contact defect again. The demo exits 0
only when the group's lag, read back from Kafka, reached zero."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.kafka_broker import answers
from harness.machine import ROOT, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def what_a_user_sees_reads_as_success(output: str) -> None:
    """The demo's output is its own lines and the group's tables: no warning of Spark, the
    JVM or setuptools, no colour code, and the group is said to be seen by lag tools only
    once a table showed an offset committed."""
    assert "\x1b[" not in output, "a colour code"
    assert not re.search(r"\bWARN(ING)?\b", output), "a warning"
    assert "Editable installation" not in output, "setuptools' notice"
    lines = output.splitlines()
    said = next(i for i, line in enumerate(lines) if "every lag tool now sees" in line)
    table = lines[max(i for i in range(said) if lines[i].startswith("[demo]")) + 1 : said]
    committed = [row.split()[3] for row in table if row.startswith("  demo-kafka-to-parquet ")]
    assert committed, "a table before"
    assert any(offset.isdigit() for offset in committed), "said before any commit"


DEMO_USER = "sidecar-demo"


def _as_a_user_who_is_not_root(home: Path) -> list[str]:
    """The command prefix that runs as a user without root (this one, when it is not root;
    else a user made for it, who has no sudo, its home ``home``/home)."""
    if os.geteuid() != 0:
        return []
    if subprocess.run(["id", DEMO_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", DEMO_USER], check=True)
    # Its home is this test's empty folder (Java reads it from the user database, not $HOME).
    subprocess.run(["usermod", "--home", str(home / "home"), DEMO_USER], check=True)
    subprocess.run(["chown", "-R", f"{DEMO_USER}:", str(home)], check=True)
    return ["runuser", "-u", DEMO_USER, "--"]


def _path_without(tmp: Path, *left_out: str) -> str:
    """A PATH holding every program of this machine's PATH but ``left_out`` (and none of
    this checkout's or this virtualenv's: the user has its own)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    own = (ROOT, Path(sys.prefix), Path.home())
    for folder in os.environ["PATH"].split(os.pathsep):
        if any(Path(folder).resolve().is_relative_to(p.resolve()) for p in own):
            continue
        if not _open_to_others(Path(folder)):  # root's own (a pyenv under /root, say)
            continue
        for program in Path(folder).glob("*") if Path(folder).is_dir() else ():
            link = bin_dir / program.name
            if program.name not in left_out and not link.exists() and os.access(program, os.X_OK):
                link.symlink_to(program)
    return str(bin_dir)


def _open_to_others(folder: Path) -> bool:
    """Whether a user who is not the owner may reach ``folder``: every folder from the root
    down to it lets others in."""
    resolved = folder.resolve()
    return all(
        p.exists() and p.stat().st_mode & stat.S_IXOTH for p in (resolved, *resolved.parents)
    )


def test_make_demo_from_a_fresh_clone_as_a_user_who_is_not_root() -> None:
    """The front door's first command asks for Python 3.11 and Java 17 only: run as a user
    without root or sudo, with an empty home (no pip, Maven or jar cache) and no ``mvn``
    on its PATH, in a fresh clone (committed files only), its broker started in a folder
    that does not exist yet."""
    base = Path(tempfile.mkdtemp(prefix="demo-user-"))
    base.chmod(0o755)
    home, clone = base / "home", base / "clone"
    home.mkdir()
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    path = _path_without(base, "mvn", "sudo")
    kafka_port = free_port()
    assert not answers(f"127.0.0.1:{kafka_port}")
    env = {
        "HOME": str(home),
        "PATH": path,
        "LANG": "C.UTF-8",
        "LOCAL_KAFKA_PORT": str(kafka_port),
        "LOCAL_KAFKA_DIR": str(base / "kafka"),
        "SIDECAR_PORT": str(free_port()),
        "DEMO_STATE_DIR": str(base / "state"),
        "DEMO_RECORDS": "1500",
        "DEMO_RATE": "500",
        "DEMO_TIMEOUT": "300",
    }
    prefix = _as_a_user_who_is_not_root(base)
    try:
        demo = subprocess.run(
            [*prefix, "env", "-i", *(f"{k}={v}" for k, v in env.items()), "make", "demo"],
            cwd=clone,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    finally:
        subprocess.run(
            [*prefix, "env", "-i", *(f"{k}={v}" for k, v in env.items()),
             str(clone / "scripts" / "local-kafka.sh"), "stop"],
            capture_output=True,
        )  # fmt: skip
    output = demo.stdout + demo.stderr
    try:
        assert demo.returncode == 0, output[-4000:]
        assert "lag is zero" in output, output[-4000:]
        # Its first read of the group is the brand-new broker's first coordinator look-up:
        # it must wait for __consumer_offsets to be created, never fail.
        assert "could not read the group" not in output, output[-4000:]
        assert "before the job" in output
        assert "sidecar status of demo-kafka-to-parquet: OK, total lag 0" in output
        assert (base / "kafka" / "data" / "meta.properties").exists(), "a brand-new broker"
        assert "Kafka stopped" in output, "the demo stops the broker it started"
        assert "please install" not in output
        what_a_user_sees_reads_as_success(output)
        assert "fetching Apache Maven" in output, "mvn was not on PATH: Maven came from Central"
        assert not (clone / ".venv" / ".installed").exists(), "no test extras were installed"
        installed = subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert "pytest" not in installed
    finally:
        shutil.rmtree(base, ignore_errors=True)
