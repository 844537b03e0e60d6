"""The service on every Python that ``pyproject.toml`` declares (``requires-python``): 3.11 is
the project's own environment, where every test runs; for 3.12, 3.13 and 3.14, a clean
virtualenv of that interpreter gets the project's dependencies (every extra, as ``make
venv`` installs them, here by uv) and the wheel built as the Dockerfile builds it, and runs
the suite that needs no broker, Spark, container or tool (what ``make check`` runs): the
whole of it on the newest, its layers below HTTP (``BETWEEN``) on the versions between
(docs/decisions.md, "Every Python, the whole suite on the ends").
Interpreters are taken from pyenv (``~/.pyenv/versions/3.12.*``) or PATH (``python3.12``);
one that the machine lacks, from Debian's package of it, in a container of the Debian
suite that has it (``DEBIAN_SUITES``), with the checkout mounted at its own path.

It found, on 3.13: FastAPI's descriptions of 413 and 422 (Python's own reason phrases,
renamed in 3.13) made the API reference differ by interpreter, and json parses 2,000
levels of nesting that 3.11 refuses (a test sent them as "too deep"); on 3.12.1, a
collection leaves objects counted as frozen (``gc.get_freeze_count``) with none frozen."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from uv import find_uv_bin

from harness.machine import ROOT
from harness.pod import build_base, podman
from tests.support.wheels import requirements, service_wheel, wheelhouse

pytestmark = pytest.mark.tools

VERSIONS = ["3.12", "3.13", "3.14"]
# Where Debian packages a Python this machine may lack (``python3.X`` and its ``-venv``):
# looked up 2026-11-28, unstable had python3.14 3.14.10.
DEBIAN_SUITES = {"3.14": "sid"}
IN_PROCESS = "not kafka and not spark and not container and not tools"
# What runs on a Python between 3.11 (every test) and the newest (the in-process suite): the
# pure core, the runtime and the listener (why: the decision the docstring names).
BETWEEN = ("tests/unit", "tests/runtime", "tests/listener")
# Of that suite, what this test already proves on the interpreter (the wheel installed in
# a clean virtualenv of it), the benchmarks' small runs and the test harness's own port
# ledger (the project's tools, run on its own Python): 40 s of the suite's 335 s on one
# core here.
ALREADY_PROVEN = (
    "tests/e2e/test_packaging.py::"
    "test_the_wheel_in_a_clean_venv_migrates_serves_and_passes_the_healthcheck",
    "tests/e2e/test_bench_scenarios.py",
    "tests/unit/test_free_port.py",
)
# The fuzz and property tests (``tests.support.fuzz``) run a quarter of their examples on
# each other Python, seeded as in make test: the same inputs' shapes.
VERSION_FUZZ_EXAMPLES = "30"


def interpreter(version: str) -> Path | None:
    """The first of pyenv's and PATH's ``python3.X`` that runs (pyenv's shim on PATH does
    not, for a version that is installed but not selected)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True)
    found = shutil.which(f"python{version}")
    for candidate in [*candidates, *([Path(found)] if found else [])]:
        if subprocess.run([str(candidate), "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


def test_requires_python_names_the_versions_tested_here() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert declared == f">=3.11,<3.{int(VERSIONS[-1].split('.')[1]) + 1}"


def test_what_the_version_suites_leave_out_names_tests_that_exist() -> None:
    """A renamed test would be deselected by nothing, silently: each name must resolve."""
    for node in ALREADY_PROVEN:
        path, _, function = node.partition("::")
        assert (ROOT / path).is_file(), node
        if function:
            assert f"def {function}(" in (ROOT / path).read_text(), node


@pytest.mark.long
@pytest.mark.parametrize(
    "version",
    [pytest.param(v, marks=[pytest.mark.container] * (v in DEBIAN_SUITES)) for v in VERSIONS],
)
def test_the_in_process_suite_passes_on_this_python(version: str, tmp_path: Path) -> None:
    python = interpreter(version)
    wheel = service_wheel(tmp_path / "wheel")
    if python is not None:
        ran = _on_this_machine(version, python, wheel, tmp_path)
    elif version in DEBIAN_SUITES:
        python = Path(f"/usr/bin/python{version}")
        ran = _in_debian(version, wheel, tmp_path)
    else:
        pytest.skip(f"no Python {version} on this machine (PATH or pyenv)")
    summary = ran.stdout.strip().splitlines()[-1] if ran.stdout.strip() else ""
    print(f"\nPython {version} ({python}): {summary}")
    assert ran.returncode == 0, ran.stdout[-5000:] + ran.stderr[-2000:]
    assert " passed" in summary


def _suite(version: str, python: str, tmp_path: Path) -> list[str]:
    """The in-process suite for ``version``, run by ``python`` from the checkout."""
    return [
        *(python, "-m", "pytest", "-q", "-p", "no:cacheprovider"),
        *("-m", IN_PROCESS, "-x", "--basetemp", str(tmp_path / "pytest")),
        *(f"--deselect={node}" for node in ALREADY_PROVEN),
        *(() if version == VERSIONS[-1] else BETWEEN),
    ]


def _on_this_machine(
    version: str, python: Path, wheel: Path, tmp_path: Path
) -> CompletedProcess[str]:
    env_dir = tmp_path / "venv"
    subprocess.run([str(python), "-m", "venv", str(env_dir)], check=True)
    # uv, not pip: the same requirements from PyPI in under half of pip's time (the
    # dependencies here: pip 133 s and 90 s of CPU, uv 57 s and 25 s; from uv's cache, 2 s).
    install = [find_uv_bin(), "pip", "install", "-q", "--python", str(env_dir / "bin" / "python")]
    install += ["--find-links", str(wheelhouse(requirements()))]
    for step in (requirements(), [str(wheel), str(ROOT / "jobs")]):
        installed = subprocess.run([*install, *step], capture_output=True, text=True)
        assert installed.returncode == 0, installed.stderr[-3000:]
    # Compiled modules written, to a folder of this run's: the virtualenv's (uv compiles
    # none) and the checkout's for this Python, compiled by the first process that imports
    # them, not by each of the suite's processes (PYTHONDONTWRITEBYTECODE, where it is set).
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "VIRTUAL_ENV")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    return subprocess.run(
        _suite(version, str(env_dir / "bin" / "python"), tmp_path),
        cwd=ROOT,
        env={**env, "INNER_LOOP": "1", "FUZZ_EXAMPLES": VERSION_FUZZ_EXAMPLES},
        capture_output=True,
        text=True,
    )


def _in_debian(version: str, wheel: Path, tmp_path: Path) -> CompletedProcess[str]:
    """The same steps in a container of Debian's ``python3.X``: the checkout and
    ``tmp_path`` mounted at their own paths, this machine's uv and its cache beside them
    (as on this machine, the dependencies from uv's cache: without it each run fetched and
    unpacked them all into the container, 55 s and 21 s of CPU; with it 21 s and 8 s, a
    copy: a hard link cannot cross two mounts)."""
    # git: the release's version of a development build is read from the checkout's history.
    image = build_base(DEBIAN_SUITES[version], (f"python{version}", f"python{version}-venv", "git"))
    uv_cache = subprocess.run(
        [find_uv_bin(), "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(uv_cache).mkdir(parents=True, exist_ok=True)
    env_dir = tmp_path / "venv"
    python = str(env_dir / "bin" / "python")
    (tmp_path / "requirements.txt").write_text("\n".join(requirements()) + "\n")
    wheels = wheelhouse(requirements())
    install = f"/usr/local/bin/uv pip install -q --python {python} --find-links {wheels}"
    steps = [
        f"python{version} -m venv {env_dir}",
        f"{install} -r {tmp_path / 'requirements.txt'}",
        f"{install} {wheel} {ROOT / 'jobs'}",
        shlex.join(_suite(version, python, tmp_path)),
    ]
    return podman(
        "run", "--rm", "--network", "host", "-e", "INNER_LOOP=1",
        "-e", f"FUZZ_EXAMPLES={VERSION_FUZZ_EXAMPLES}", "-w", str(ROOT),
        "-v", f"{ROOT}:{ROOT}", "-v", f"{tmp_path}:{tmp_path}", "-v", f"{wheels}:{wheels}:ro",
        "-v", f"{find_uv_bin()}:/usr/local/bin/uv:ro",
        "-v", f"{uv_cache}:{uv_cache}", "-e", f"UV_CACHE_DIR={uv_cache}", "-e", "UV_LINK_MODE=copy",
        image, "bash", "-ec", " && ".join(steps),
        check=False, timeout=1800,
    )  # fmt: skip
