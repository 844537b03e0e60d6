"""aiokafka client options from the settings: bootstrap, client id, TLS and SASL.

One place for both Kafka clients of the service (the committer's consumers and the
recovery reader), so they always connect the same way. The SASL password is read here,
when a client is made, and goes nowhere else.
"""

from __future__ import annotations

from typing import Any

from aiokafka.helpers import create_ssl_context

from spark_offset_sidecar.settings import Settings


def kafka_client_options(settings: Settings) -> dict[str, Any]:
    protocol = settings.kafka_security_protocol
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        "client_id": settings.kafka_client_id,
        "security_protocol": protocol,
    }
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = create_ssl_context(
            cafile=settings.kafka_ssl_cafile,
            certfile=settings.kafka_ssl_certfile,
            keyfile=settings.kafka_ssl_keyfile,
        )
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        options["sasl_mechanism"] = settings.kafka_sasl_mechanism
        options["sasl_plain_username"] = settings.kafka_sasl_username
        options["sasl_plain_password"] = settings.kafka_sasl_secret()
    return options
