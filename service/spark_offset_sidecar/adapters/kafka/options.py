"""aiokafka client options from the settings: bootstrap, client id, TLS and SASL.

One place for every Kafka client of the service (the committer, the log-end and record
readers, the recovery reader), so they always connect the same way; the composition root
calls it once, so they share one token provider (one token, renewed once for all). The
SASL password is read here, when the options are made, and goes nowhere else; an OAuth
client secret is read by the token provider at each renewal.
"""

from __future__ import annotations

from typing import Any

from aiokafka.helpers import create_ssl_context

from spark_offset_sidecar.adapters.kafka.oauth import (
    ClientCredentialsTokens,
    MskIamTokens,
    RenewedTokens,
)
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
        mechanism = settings.kafka_sasl_mechanism
        if mechanism in ("OAUTHBEARER", "AWS_MSK_IAM"):
            options["sasl_mechanism"] = "OAUTHBEARER"
            options["sasl_oauth_token_provider"] = token_provider(settings)
        else:
            options["sasl_mechanism"] = mechanism
            options["sasl_plain_username"] = settings.kafka_sasl_username
            options["sasl_plain_password"] = settings.kafka_sasl_secret()
    return options


def token_provider(settings: Settings) -> RenewedTokens:
    """The OAUTHBEARER token source the settings name (``Settings`` checked them)."""
    if settings.kafka_sasl_mechanism == "AWS_MSK_IAM":
        return MskIamTokens(str(settings.aws_region()), settings.kafka_aws_role_arn)
    return ClientCredentialsTokens(
        str(settings.kafka_oauth_token_url),
        str(settings.kafka_oauth_client_id),
        settings.kafka_oauth_secret,
        scope=settings.kafka_oauth_scope,
        audience=settings.kafka_oauth_audience,
        timeout=settings.commit_timeout_seconds,
        extensions=dict(settings.kafka_sasl_extensions),
    )
