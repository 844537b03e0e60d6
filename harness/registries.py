"""Real registry servers on loopback, for the tests that publish a release and install it
by version as users do (tests/e2e/test_registries.py):

- ``PackageIndex``: pypiserver (PyPI), uploads taken without a password; a package it
  does not hold is answered with a redirect to PyPI (or the index this machine's pip is
  given, ``PIP_INDEX_URL``), as a company's index proxies PyPI.
- ``OciRegistry``: go-containerregistry's ``crane registry serve`` (``make tools``) on a
  loopback address, its blobs in a folder.
- ``MavenRepository``: a folder in Maven's repository layout, written by
  ``mvn deploy:deploy-file``, served over HTTP by Python's ``http.server``.

Each is its own process on a free loopback port, stopped by ``stop()``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.machine import (
    ROOT,
    answers_http,
    free_port,
    refuse_in_inner_loop,
    stop_process,
    wait_answering,
)

BIN = Path(sys.executable).parent


class PackageIndex:
    """pypiserver serving ``folder``: ``simple`` is the index pip reads, ``url`` the one
    twine uploads to."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.simple = f"{self.url}simple/"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> PackageIndex:
        refuse_in_inner_loop("starts a package index (pypiserver)")
        self.folder.mkdir(parents=True, exist_ok=True)
        log = (self.folder.parent / f"{self.folder.name}.log").open("wb")
        self.process = subprocess.Popen(
            [str(BIN / "pypi-server"), "run", "--interface", "127.0.0.1",
             "--port", str(self.port), "--authenticate", ".", "--passwords", ".",
             "--fallback-url", os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/"),
             str(self.folder)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_answering(
            lambda: answers_http(self.simple),
            self.process,
            f"pypi-server on {self.simple}",
            timeout,
        )
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None


def crane() -> str:
    found = ROOT / ".local" / "bin" / "crane"
    if not found.exists():
        raise RuntimeError("crane is missing: run `make tools`")
    return str(found)


class OciRegistry:
    """``crane registry serve`` on ``host`` (``127.0.0.1:port``), its blobs in ``folder``,
    over plain HTTP: helm takes a loopback registry as HTTP by itself, and podman takes it
    once ``registries.conf`` names it ``insecure``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> OciRegistry:
        refuse_in_inner_loop("starts an OCI registry (crane, built by `make tools`)")
        self.folder.mkdir(parents=True, exist_ok=True)
        log = (self.folder.parent / f"{self.folder.name}.log").open("wb")
        self.process = subprocess.Popen(
            [crane(), "registry", "serve", "--address", self.host, "--disk", str(self.folder)],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        v2 = f"http://{self.host}/v2/"
        wait_answering(lambda: answers_http(v2), self.process, f"crane registry on {v2}", timeout)
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None


class MavenRepository:
    """A Maven repository in ``folder`` (``deploy`` writes it with Maven), served over
    HTTP at ``url``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.process: subprocess.Popen[bytes] | None = None

    def deploy(self, jar: Path, pom: Path, sources: Path, javadoc: Path) -> None:
        """``mvn deploy:deploy-file``: the jar, its POM, sources and javadoc jars, with the
        checksums Maven writes beside each."""
        self.folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["bash", str(ROOT / "scripts" / "mvn.sh"), "-B", "-q", "-Dstyle.color=never",
             "-s", str(ROOT / "scripts" / "maven" / "settings.xml"),
             "org.apache.maven.plugins:maven-deploy-plugin:3.1.4:deploy-file",
             f"-Dfile={jar}", f"-DpomFile={pom}", f"-Dsources={sources}",
             f"-Djavadoc={javadoc}", f"-Durl={self.folder.as_uri()}",
             "-DrepositoryId=test-repository"],
            capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"mvn deploy:deploy-file failed:\n{done.stdout[-4000:]}")

    def start(self, timeout: float = 60.0) -> MavenRepository:
        refuse_in_inner_loop("serves a Maven repository")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(self.port),
             "--directory", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_answering(
            lambda: answers_http(self.url),
            self.process,
            f"the Maven repository on {self.url}",
            timeout,
        )
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
