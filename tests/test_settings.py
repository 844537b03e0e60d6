from __future__ import annotations

from pathlib import Path

import pytest

from service.errors import ConfigError
from service.settings import Settings


def test_defaults_and_explicit_values() -> None:
    settings = Settings.from_env({})
    assert settings.kafka_bootstrap_servers == "127.0.0.1:9092"
    assert settings.database_url == f"sqlite:///{Path('sidecar.db').resolve()}"
    assert (settings.host, settings.port) == ("127.0.0.1", 8000)
    settings = Settings.from_env(
        {
            "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": "a:1, b:2",
            "SIDECAR_DATABASE_URL": "postgresql://u:p@db/sidecar",
            "SIDECAR_HOST": "0.0.0.0",
            "SIDECAR_PORT": "9000",
            "OTHER": "ignored",
        }
    )
    assert settings.kafka_bootstrap_servers == "a:1,b:2"
    assert settings.database_url == "postgresql://u:p@db/sidecar"
    assert (settings.host, settings.port) == ("0.0.0.0", 9000)


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("SIDECAR_PORT", "http", "invalid value"),
        ("SIDECAR_PORT", "70000", "TCP port"),
        ("SIDECAR_KAFKA_BOOTSTRAP_SERVERS", "localhost", "not host:port"),
        ("SIDECAR_KAFKA_BOOTSTRAP_SERVERS", " , ", "at least one"),
        ("SIDECAR_DATABASE_URL", "mysql://x/y", "only sqlite"),
        ("SIDECAR_DATABASE_URL", "not a url", "not a SQLAlchemy URL"),
        ("SIDECAR_COMMIT_TIMEOUT_SECONDS", "0", "greater than 0"),
        ("SIDECAR_MAX_PENDING_CHECKPOINTS", "0", "at least 1"),
        ("SIDECAR_LOG_LEVEL", "LOUD", "DEBUG, INFO"),
        ("SIDECAR_KAFKA_BOOTSTRAP", "a:1", "unknown setting"),
    ],
)
def test_bad_settings_fail_naming_the_variable(variable: str, value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({variable: value})
    assert caught.value.variable == variable
    assert problem in str(caught.value)


def test_retry_bounds_must_be_ordered() -> None:
    with pytest.raises(ConfigError, match="SIDECAR_RETRY_MAX_SECONDS"):
        Settings.from_env({"SIDECAR_RETRY_INITIAL_SECONDS": "5", "SIDECAR_RETRY_MAX_SECONDS": "1"})
