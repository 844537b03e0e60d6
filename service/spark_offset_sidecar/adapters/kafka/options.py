"""aiokafka client options from the settings: bootstrap, client id, TLS and SASL, one place
for every Kafka client of the service. The composition root calls it once per cluster, so
its clients share one token provider; the SASL password is read here, and an OAuth client
secret by the token provider at each renewal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiokafka.helpers import create_ssl_context

from spark_offset_sidecar.adapters.kafka.wire import refuse_oauth_error_challenge
from spark_offset_sidecar.settings import KafkaSettings

if TYPE_CHECKING:
    from spark_offset_sidecar.adapters.kafka.oauth import RenewedTokens


def kafka_client_options(kafka: KafkaSettings, timeout: float) -> dict[str, Any]:
    """The options of every client of cluster ``kafka``; ``timeout`` bounds a token's
    request (as it bounds a commit)."""
    protocol = kafka.security_protocol
    options: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers,
        "client_id": kafka.client_id,
        "security_protocol": protocol,
    }
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = create_ssl_context(
            cafile=kafka.ssl_cafile,
            certfile=kafka.ssl_certfile,
            keyfile=kafka.ssl_keyfile,
        )
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = kafka.sasl_mechanism
        if mechanism in ("OAUTHBEARER", "AWS_MSK_IAM"):
            options["sasl_mechanism"] = "OAUTHBEARER"
            options["sasl_oauth_token_provider"] = token_provider(kafka, timeout)
            refuse_oauth_error_challenge()  # a refused token is a refusal (``wire``)
        else:
            options["sasl_mechanism"] = mechanism
            options["sasl_plain_username"] = kafka.sasl_username
            options["sasl_plain_password"] = kafka.sasl_secret()
    return options


def token_provider(kafka: KafkaSettings, timeout: float) -> RenewedTokens:
    """The OAUTHBEARER token source the settings name (``KafkaSettings`` checked them)."""
    # Only OAUTHBEARER's clients need a token endpoint's HTTP client (httpx): imported here.
    from spark_offset_sidecar.adapters.kafka.oauth import ClientCredentialsTokens, MskIamTokens

    if kafka.sasl_mechanism == "AWS_MSK_IAM":
        return MskIamTokens(str(kafka.aws_region), kafka.aws_role_arn)
    return ClientCredentialsTokens(
        str(kafka.oauth_token_url),
        str(kafka.oauth_client_id),
        kafka.oauth_secret,
        scope=kafka.oauth_scope,
        audience=kafka.oauth_audience,
        timeout=timeout,
        extensions=dict(kafka.sasl_extensions),
    )
