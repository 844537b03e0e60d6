"""What the Docker image runs, without a Docker engine: the release's wheel (``make dist``,
the ``release_folder`` fixture) installed into a clean virtual environment as a user
installs it, then the image's own commands (``offset-sidecar migrate``, ``serve`` and the
HEALTHCHECK, read from the Dockerfile) run with the image's environment, from a folder the
service may not write to."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

from harness.machine import ROOT, free_port
from tests.support.release import build_info, one
from tests.support.wheels import dockerfile_healthcheck


@pytest.fixture(scope="module")
def wheel(release_folder: Path) -> Path:
    """The release's wheel, built from its sdist in a copy of the tree (a checkout's own
    ``build/`` can hold modules that no longer exist)."""
    return one(release_folder, "spark_offset_sidecar-*.whl")


def test_the_wheel_in_a_clean_venv_migrates_serves_and_passes_the_healthcheck(
    tmp_path: Path, wheel: Path, request: pytest.FixtureRequest, release_folder: Path
) -> None:
    """Installed plain, then with the ``postgres`` extra added, in one virtualenv (one
    install of the dependencies for both)."""
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True
    )
    command = str(env_dir / "bin" / "offset-sidecar")
    bare_env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
    said = subprocess.run([command, "--version"], env=bare_env, capture_output=True, text=True)
    assert said.stdout == f"offset-sidecar {build_info(release_folder)['version']}\n", said

    def has_psycopg() -> bool:
        probe = subprocess.run([str(python), "-c", "import psycopg"], capture_output=True)
        return probe.returncode == 0

    # without the extra, PostgreSQL is refused at start, naming the extra to install
    assert not has_psycopg(), "the plain install brings psycopg"
    refused = subprocess.run(
        [command, "serve"],
        env={**bare_env, "SIDECAR_DATABASE_URL": "postgresql+psycopg://u:p@127.0.0.1:1/db"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2, refused.stderr
    assert "SIDECAR_DATABASE_URL" in refused.stderr
    version = build_info(release_folder)["version"]
    assert f"pip install 'spark-offset-sidecar[postgres]=={version}'" in refused.stderr
    assert "py3-none-any.whl[postgres]'" in refused.stderr
    # the extra alone brings psycopg, and serves PostgreSQL: migrate a real server
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", f"{wheel}[postgres]"],
        check=True,
        capture_output=True,
    )
    assert has_psycopg(), "the postgres extra brings no psycopg"
    database = request.getfixturevalue("postgres_server")
    database.reset()
    migrated = subprocess.run(
        [command, "migrate"],
        env={**bare_env, "SIDECAR_DATABASE_URL": str(database.url)},
        capture_output=True,
        text=True,
    )
    assert migrated.returncode == 0, migrated.stderr
    data = tmp_path / "data"
    data.mkdir()
    workdir = tmp_path / "readonly"
    workdir.mkdir()
    workdir.chmod(0o555)  # like the image's read-only root: only /data is written
    port = free_port()
    image_env = {
        **bare_env,
        "SIDECAR_HOST": "127.0.0.1",  # the image says 0.0.0.0, with tokens in production
        "SIDECAR_PORT": str(port),
        "SIDECAR_DATABASE_URL": f"sqlite:///{data / 'sidecar.db'}",
        "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",  # no Kafka: ready and live anyway
    }
    migrated = subprocess.run(
        [command, "migrate"],
        env=image_env,
        cwd=workdir,
        capture_output=True,
        text=True,
    )
    assert migrated.returncode == 0, migrated.stderr
    assert "newest migration" in migrated.stdout
    server = subprocess.Popen(
        [command, "serve"],
        env=image_env,
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            raise AssertionError("the installed service did not become ready")
        check = dockerfile_healthcheck()
        assert check[0] == "python"
        healthy = subprocess.run(
            [str(python), *check[1:]], env=image_env, capture_output=True, timeout=10
        )
        assert healthy.returncode == 0, healthy.stderr
    finally:
        server.terminate()
        output, _ = server.communicate(timeout=30)
    # uvicorn shuts down gracefully, then re-raises SIGTERM to exit with it.
    assert server.returncode in (0, -signal.SIGTERM), output
    # The installed service logs JSON lines; the ledger file is where the image keeps it.
    lines = [json.loads(line) for line in output.splitlines() if line.strip()]
    assert any(line["message"].startswith("ready") for line in lines)
    assert (data / "sidecar.db").exists()
    assert not any(workdir.iterdir())
    stopped = subprocess.run(
        [str(python), *dockerfile_healthcheck()[1:]], env=image_env, capture_output=True
    )
    assert stopped.returncode != 0  # the check can fail


def _wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if ".dist-info/" not in name}


def test_the_service_wheel_holds_one_import_name_with_every_module_and_migration(
    wheel: Path,
) -> None:
    files = _wheel_files(wheel)
    assert {name.split("/")[0] for name in files} == {"spark_offset_sidecar"}
    package = ROOT / "service" / "spark_offset_sidecar"
    expected = {
        "spark_offset_sidecar/" + path.relative_to(package).as_posix()
        for path in package.rglob("*")
        if path.suffix in {".py", ".typed", ".html"} and "__pycache__" not in path.parts
    }
    migrations = ROOT / "migrations"
    expected |= {
        "spark_offset_sidecar/migrations/" + path.relative_to(migrations).as_posix()
        for path in migrations.rglob("*")
        if path.suffix in {".py", ".ini", ".mako"} and "__pycache__" not in path.parts
    }
    assert expected - files == set(), "pyproject.toml's package list misses these"
    assert "spark_offset_sidecar/migrations/versions/0001_initial.py" in files
    assert "spark_offset_sidecar/http/status_page.html" in files  # /ui's page


def test_the_listener_wheel_is_the_listener_alone_with_no_dependency(
    release_folder: Path,
) -> None:
    built = one(release_folder, "spark_offset_listener-*.whl")
    files = _wheel_files(built)
    assert {name.split("/")[0] for name in files} == {"spark_offset_listener"}
    assert "spark_offset_listener/listener.py" in files
    with zipfile.ZipFile(built) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        assert "Requires-Dist" not in archive.read(metadata).decode()
