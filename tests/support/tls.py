"""A throw-away certificate authority and a certificate for 127.0.0.1, made with openssl."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CertificateSet:
    ca: Path  # the CA certificate (PEM): what clients trust
    cert: Path  # the server certificate for 127.0.0.1 / localhost
    key: Path  # its private key, unencrypted PKCS#8
    bundle: Path  # key + certificate in one PEM (Kafka's PEM keystore)


def make_certificates(folder: Path) -> CertificateSet:
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "ca.key")
    openssl(
        "req", "-x509", "-new", "-key", "ca.key", "-days", "2", "-subj", "/CN=sidecar-test-ca",
        "-out", "ca.pem",
    )  # fmt: skip
    openssl(
        "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "server.key"
    )
    openssl("req", "-new", "-key", "server.key", "-subj", "/CN=127.0.0.1", "-out", "server.csr")
    (folder / "san.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    )
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", "server.pem",
    )  # fmt: skip
    bundle = folder / "server-bundle.pem"
    bundle.write_text((folder / "server.key").read_text() + (folder / "server.pem").read_text())
    return CertificateSet(folder / "ca.pem", folder / "server.pem", folder / "server.key", bundle)
