"""A real S3-compatible server for tests and benchmarks: moto's server mode (PyPI
``moto[server]``), its own process on a free loopback port, speaking the S3 REST API
over HTTP. Clients reach it with ``endpoint_url`` and any key pair (it checks none).

Why moto and not MinIO: MinIO's server is not served by the Go module proxy that this
machine reaches (only its client library, minio-go, is), and moto installs with pip in
seconds. Spark does not write to it directly: ``s3a://`` needs hadoop-aws and the AWS SDK
bundle (hundreds of MB); the tests copy a real Spark checkpoint into it as it grows (the
way a sync job would), which is what the follower reads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.machine import answers_http, free_port, stop_process, wait_answering

ACCESS = {"AWS_ACCESS_KEY_ID": "sidecar", "AWS_SECRET_ACCESS_KEY": "sidecar-secret"}


class S3Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> S3Server:
        moto = Path(sys.executable).parent / "moto_server"
        self.process = subprocess.Popen(
            [str(moto), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_answering(
            lambda: answers_http(self.endpoint),
            self.process,
            f"moto_server on {self.endpoint}",
            timeout,
        )
        return self

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def storage_options(self) -> dict[str, dict[str, str]]:
        """``SIDECAR_CHECKPOINT_STORAGE_OPTIONS`` for this server."""
        return {
            "s3": {
                "endpoint_url": self.endpoint,
                "key": ACCESS["AWS_ACCESS_KEY_ID"],
                "secret": ACCESS["AWS_SECRET_ACCESS_KEY"],
            }
        }

    def client(self):  # type: ignore[no-untyped-def]
        """A boto3 client (tests use it to make buckets and upload files)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=ACCESS["AWS_SECRET_ACCESS_KEY"],
            region_name="us-east-1",
        )


def env() -> dict[str, str]:
    return {**os.environ, **ACCESS}
