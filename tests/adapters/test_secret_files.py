"""When each Kafka setting that names a file is read, as the service page says
(docs/run/service.md): the SASL password and the TLS files once, when the clients'
options are made at start (a rotated file needs a restart); the OAuth client secret at
each token request."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from spark_offset_sidecar.adapters.kafka import options as kafka_options
from spark_offset_sidecar.adapters.kafka.options import kafka_client_options, token_provider
from spark_offset_sidecar.settings import KafkaSettings


def test_the_sasl_password_file_is_read_once_when_the_options_are_made(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("first\n")
    kafka = KafkaSettings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="sidecar",
        sasl_password_file=str(password),
    )
    options = kafka_client_options(kafka, timeout=5)
    password.write_text("rotated\n")
    assert options["sasl_plain_password"] == "first"  # until the service starts again
    assert kafka_client_options(kafka, timeout=5)["sasl_plain_password"] == "rotated"


def test_the_tls_files_are_read_once_when_the_options_are_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("a CA bundle")
    read: list[Path | None] = []

    def create_ssl_context(**files: Path | None) -> ssl.SSLContext:
        read.append(files["cafile"])
        return ssl.create_default_context()

    monkeypatch.setattr(kafka_options, "create_ssl_context", create_ssl_context)
    kafka = KafkaSettings(security_protocol="SSL", ssl_cafile=str(ca))
    options = kafka_client_options(kafka, timeout=5)
    assert read == [ca.resolve()]
    assert isinstance(options["ssl_context"], ssl.SSLContext)  # made once, kept


def test_the_oauth_client_secret_file_is_read_at_each_token_request(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("first\n")
    kafka = KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        oauth_token_url="https://idp.example/token",
        oauth_client_id="sidecar",
        oauth_client_secret_file=str(secret),
    )
    tokens = token_provider(kafka, timeout=5)
    assert tokens._client_secret() == "first"
    secret.write_text("rotated\n")
    assert tokens._client_secret() == "rotated"
