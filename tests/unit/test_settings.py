from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy.engine import make_url

from spark_offset_sidecar.errors import ConfigError
from spark_offset_sidecar.settings import (
    AuthSettings,
    CommitSettings,
    DatabaseSettings,
    FollowSettings,
    HttpSettings,
    KafkaSettings,
    MetricsSettings,
    Settings,
)
from spark_offset_sidecar.settings.section import Section
from spark_offset_sidecar.settings.service_links import is_service_link, service_links
from tests.support.kubernetes import service_link_variables


def test_defaults_and_explicit_values() -> None:
    settings = Settings.from_env({})
    assert settings.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert settings.database.url == f"sqlite:///{Path('sidecar.db').resolve()}"
    assert (settings.http.host, settings.http.port) == ("127.0.0.1", 8000)
    settings = Settings.from_env(
        {
            "SIDECAR_KAFKA_BOOTSTRAP_SERVERS": "a:1, b:2",
            "SIDECAR_DATABASE_URL": "postgresql+psycopg://u:p@db/sidecar",
            "SIDECAR_HOST": "0.0.0.0",
            "SIDECAR_ALLOW_UNAUTHENTICATED": "true",
            "SIDECAR_PORT": "9000",
            "OTHER": "ignored",
        }
    )
    assert settings.kafka.bootstrap_servers == "a:1,b:2"
    assert settings.database.url == "postgresql+psycopg://u:p@db/sidecar"
    assert (settings.http.host, settings.http.port) == ("0.0.0.0", 9000)


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("SIDECAR_PORT", "http", "invalid value"),
        ("SIDECAR_PORT", "70000", "must be at most 65535"),
        ("SIDECAR_KAFKA_BOOTSTRAP_SERVERS", "localhost", "not host:port"),
        ("SIDECAR_KAFKA_BOOTSTRAP_SERVERS", " , ", "at least one"),
        ("SIDECAR_DATABASE_URL", "mysql://x/y", "only sqlite"),
        ("SIDECAR_DATABASE_URL", "not a url", "not a SQLAlchemy URL"),
        ("SIDECAR_COMMIT_TIMEOUT_SECONDS", "0", "greater than 0"),
        ("SIDECAR_COMMIT_TIMEOUT_SECONDS", "inf", "finite number"),
        ("SIDECAR_LEASE_SECONDS", "nan", "finite number"),
        ("SIDECAR_RETRY_MAX_SECONDS", "1e999", "finite number"),
        ("SIDECAR_MAX_PENDING_CHECKPOINTS", "0", "greater than 0"),
        ("SIDECAR_LOG_LEVEL", "LOUD", "'DEBUG', 'INFO'"),
        ("SIDECAR_KAFKA_BOOTSTRAP", "a:1", "unknown setting"),
        ("SIDECAR_METRICS_GRANULARITY", "cluster", "'group', 'topic' or 'partition'"),
        ("SIDECAR_METRICS_GROUPS", " , ", "at least one pattern"),
        ("SIDECAR_METRICS_EXCLUDE_TOPICS", "orders *", "not a name pattern"),
        ("SIDECAR_METRICS_MAX_AGE_SECONDS", "-1", "at least 0"),
        ("SIDECAR_RETENTION_RISK_SECONDS", "0", "greater than 0"),
        ("SIDECAR_KAFKA_SASL_MECHANISM", "GSSAPI", "'OAUTHBEARER' or 'AWS_MSK_IAM'"),
        ("SIDECAR_KAFKA_OAUTH_TOKEN_URL", "ftp://idp/token", "http:// or https://"),
        ("SIDECAR_KAFKA_SASL_EXTENSIONS", "logicalCluster", "not key=value"),
        ("SIDECAR_KAFKA_SASL_EXTENSIONS", "auth=x", "not 'auth'"),
        ("SIDECAR_KAFKA_SASL_EXTENSIONS", "pool-id=x", "a key of letters"),
        ("SIDECAR_OIDC_ISSUER", "kubernetes.default.svc", "http:// or https://"),
        ("SIDECAR_OIDC_JWKS_REFRESH_SECONDS", "0", "greater than 0"),
    ],
)
def test_bad_settings_fail_naming_the_variable(variable: str, value: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({variable: value})
    assert caught.value.variable == variable
    assert problem in str(caught.value)


@pytest.mark.parametrize("url", ["postgresql://u:p@db/sidecar", "postgresql+psycopg://u:p@db/s"])
def test_a_postgresql_url_whose_driver_is_missing_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    driver = make_url(url).get_driver_name()  # what SQLAlchemy would load for this URL
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == driver else real(name, *a)
    )
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SIDECAR_DATABASE_URL": url})
    assert caught.value.variable == "SIDECAR_DATABASE_URL"
    assert f"the {driver} driver, which is not installed" in str(caught.value)
    assert "install the postgres extra: pip install 'spark-offset-sidecar[postgres]==" in str(
        caught.value
    )
    assert "postgresql+psycopg://" in str(caught.value)


def test_metric_patterns_are_comma_separated() -> None:
    settings = Settings.from_env(
        {"SIDECAR_METRICS_GROUPS": "orders-*, payments", "SIDECAR_METRICS_GRANULARITY": "Partition"}
    )
    assert settings.metrics.groups == ("orders-*", "payments")
    assert settings.metrics.exclude_groups == ()
    assert settings.metrics.granularity == "partition"


def test_retry_bounds_must_be_ordered() -> None:
    with pytest.raises(ConfigError, match="SIDECAR_RETRY_MAX_SECONDS"):
        Settings.from_env({"SIDECAR_RETRY_INITIAL_SECONDS": "5", "SIDECAR_RETRY_MAX_SECONDS": "1"})


def test_no_tokens_means_loopback_only_unless_told_otherwise(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "10.1.2.3", "sidecar.example"):
        with pytest.raises(ConfigError, match="lets anyone who reaches it") as caught:
            Settings.from_env({"SIDECAR_HOST": host})
        assert caught.value.variable == "SIDECAR_HOST"
    for host in ("127.0.0.1", "::1", "localhost"):
        assert Settings.from_env({"SIDECAR_HOST": host}).http.host == host
    tokens = tmp_path / "tokens.json"
    tokens.write_text("{}")
    assert Settings.from_env({"SIDECAR_HOST": "0.0.0.0", "SIDECAR_TOKENS_FILE": str(tokens)})
    with pytest.raises(ConfigError, match="no such file"):
        Settings.from_env({"SIDECAR_TOKENS_FILE": str(tmp_path / "missing.json")})


def test_secrets_stay_out_of_repr_and_sasl_needs_a_user(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret-from-a-mounted-secret\n")
    settings = Settings.from_env(
        {
            "SIDECAR_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
            "SIDECAR_KAFKA_SASL_MECHANISM": "scram-sha-512",
            "SIDECAR_KAFKA_SASL_USERNAME": "alice",
            "SIDECAR_KAFKA_SASL_PASSWORD_FILE": str(secret),
        }
    )
    assert settings.kafka.sasl_secret() == "s3cret-from-a-mounted-secret"
    inline = Settings(kafka=KafkaSettings(sasl_password="s3cret-inline"))
    assert "s3cret" not in repr(inline) + str(inline)
    with pytest.raises(ConfigError, match="SASL needs a user") as caught:
        Settings.from_env({"SIDECAR_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"})
    assert caught.value.variable == "SIDECAR_KAFKA_SASL_USERNAME"


SASL = {"SIDECAR_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}


def test_oauthbearer_needs_an_endpoint_a_client_and_its_secret(tmp_path: Path) -> None:
    oauth = {**SASL, "SIDECAR_KAFKA_SASL_MECHANISM": "oauthbearer"}
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(oauth)
    assert caught.value.variable == "SIDECAR_KAFKA_OAUTH_TOKEN_URL"
    oauth["SIDECAR_KAFKA_OAUTH_TOKEN_URL"] = "https://idp.example/oauth2/token"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(oauth)
    assert caught.value.variable == "SIDECAR_KAFKA_OAUTH_CLIENT_ID"
    oauth["SIDECAR_KAFKA_OAUTH_CLIENT_ID"] = "sidecar"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(oauth)
    assert caught.value.variable == "SIDECAR_KAFKA_OAUTH_CLIENT_SECRET"
    secret = tmp_path / "client-secret"
    secret.write_text("oauth-client-secret-0001\n")
    settings = Settings.from_env(
        {
            **oauth,
            "SIDECAR_KAFKA_OAUTH_CLIENT_SECRET_FILE": str(secret),
            "SIDECAR_KAFKA_SASL_EXTENSIONS": "logicalCluster=lkc-1, identityPoolId=pool-2",
        }
    )
    assert settings.kafka.oauth_secret() == "oauth-client-secret-0001"
    assert dict(settings.kafka.sasl_extensions) == {
        "logicalCluster": "lkc-1",
        "identityPoolId": "pool-2",
    }
    assert "oauth-client-secret" not in repr(
        Settings(kafka=KafkaSettings(oauth_client_secret="oauth-client-secret-inline"))
    )


def test_msk_iam_needs_a_region_from_the_setting_or_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS's own region variables are the default, read from the environment
    ``Settings.from_env`` reads, never by a section built in code."""
    monkeypatch.setenv("AWS_REGION", "eu-west-1")  # the process's: not in the mapping given
    msk = {**SASL, "SIDECAR_KAFKA_SASL_MECHANISM": "AWS_MSK_IAM"}
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(msk)
    assert caught.value.variable == "SIDECAR_KAFKA_AWS_REGION"
    with pytest.raises(ConfigError) as caught:
        KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="AWS_MSK_IAM")
    assert caught.value.variable == "SIDECAR_KAFKA_AWS_REGION"
    assert Settings.from_env({**msk, "AWS_DEFAULT_REGION": "eu-west-3"}).kafka.aws_region == (
        "eu-west-3"
    )
    aws = {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-3"}
    assert Settings.from_env({**msk, **aws}).kafka.aws_region == "eu-west-1"
    given = {**msk, **aws, "SIDECAR_KAFKA_AWS_REGION": "us-east-2"}
    assert Settings.from_env(given).kafka.aws_region == "us-east-2"
    eu = {"SIDECAR_KAFKA_CLUSTERS": "eu", "SIDECAR_CLUSTER_EU_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}
    eu["SIDECAR_CLUSTER_EU_KAFKA_SASL_MECHANISM"] = "AWS_MSK_IAM"
    assert Settings.from_env({**eu, **aws}).for_cluster("eu").aws_region == "eu-west-1"


def test_msk_iam_without_the_signer_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "aws_msk_iam_sasl_signer" else real(name, *a),
    )
    with pytest.raises(
        ConfigError,
        match=r"the msk-iam extra: pip install .spark-offset-sidecar\[msk-iam\]==.*whl\[msk-iam\]",
    ):
        Settings.from_env(
            {**SASL, "SIDECAR_KAFKA_SASL_MECHANISM": "AWS_MSK_IAM", "SIDECAR_KAFKA_AWS_REGION": "x"}
        )


def test_jobs_identities_need_issuer_audience_and_a_tokens_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    issuer = {"SIDECAR_OIDC_ISSUER": "https://kubernetes.default.svc"}
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(issuer)
    assert caught.value.variable == "SIDECAR_OIDC_AUDIENCE"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SIDECAR_OIDC_AUDIENCE": "spark-offset-sidecar"})
    assert caught.value.variable == "SIDECAR_OIDC_ISSUER"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SIDECAR_OIDC_JWKS_URL": "https://idp/jwks"})
    assert caught.value.variable == "SIDECAR_OIDC_JWKS_URL"
    both = {**issuer, "SIDECAR_OIDC_AUDIENCE": "spark-offset-sidecar"}
    with pytest.raises(ConfigError) as caught:
        Settings.from_env(both)
    assert caught.value.variable == "SIDECAR_TOKENS_FILE"
    tokens = tmp_path / "tokens.json"
    tokens.write_text("{}")
    assert Settings.from_env({**both, "SIDECAR_TOKENS_FILE": str(tokens)}).oidc.issuer
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "jwt" else real(name, *a)
    )
    with pytest.raises(
        ConfigError,
        match=r"install the oidc extra: pip install .spark-offset-sidecar\[oidc\]==.*whl\[oidc\]",
    ):
        Settings.from_env({**both, "SIDECAR_TOKENS_FILE": str(tokens)})


@pytest.mark.parametrize(
    ("section", "given", "variable"),
    [
        (HttpSettings, {"port": -1}, "SIDECAR_PORT"),
        (CommitSettings, {"commit_timeout_seconds": 0.0}, "SIDECAR_COMMIT_TIMEOUT_SECONDS"),
        (KafkaSettings, {"bootstrap_servers": "no-port"}, "SIDECAR_KAFKA_BOOTSTRAP_SERVERS"),
        (KafkaSettings, {"security_protocol": "TLS"}, "SIDECAR_KAFKA_SECURITY_PROTOCOL"),
        (MetricsSettings, {"groups": ()}, "SIDECAR_METRICS_GROUPS"),
        (MetricsSettings, {"export_kafka_lag": "maybe"}, "SIDECAR_EXPORT_KAFKA_LAG"),
        (KafkaSettings, {"sasl_extensions": (("auth", "x"),)}, "SIDECAR_KAFKA_SASL_EXTENSIONS"),
        (FollowSettings, {"storage_options": {"s3": 1}}, "SIDECAR_CHECKPOINT_STORAGE_OPTIONS"),
        (HttpSettings, {"prot": 8000}, "SIDECAR_PROT"),  # no such setting
        (
            CommitSettings,
            {"retry_initial_seconds": 5, "retry_max_seconds": 1},
            "SIDECAR_RETRY_MAX_SECONDS",
        ),
    ],
)
def test_sections_built_in_code_are_checked_as_the_environment_is(
    section: type[Section], given: dict[str, object], variable: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        section(**given)
    assert refused.value.variable == variable


def test_a_command_that_serves_nothing_reads_its_sections_alone() -> None:
    """``only``: the sections named are read and checked, the others keep their defaults,
    the checks across sections (about serving) are not made; unknown names still stop it."""
    environ = {"SIDECAR_HOST": "0.0.0.0", "SIDECAR_PORT": "9000", "SIDECAR_DATABASE_URL": "x"}
    settings = Settings.from_env(environ, only={"http"})
    assert (settings.http.host, settings.http.port) == ("0.0.0.0", 9000)
    assert settings.database == DatabaseSettings()
    with pytest.raises(ConfigError, match="must be at least 0"):
        Settings.from_env({"SIDECAR_PORT": "-1"}, only={"http"})
    with pytest.raises(ConfigError, match="unknown setting"):
        Settings.from_env({"SIDECAR_PROT": "1"}, only={"http"})
    with pytest.raises(ConfigError, match="lets anyone who reaches it"):
        Settings.from_env({"SIDECAR_HOST": "0.0.0.0"})


def test_checks_across_sections_hold_however_the_settings_are_built() -> None:
    with pytest.raises(ConfigError) as refused:
        Settings(http=HttpSettings(host="0.0.0.0"))
    assert refused.value.variable == "SIDECAR_HOST"
    assert Settings(
        http=HttpSettings(host="0.0.0.0"), auth=AuthSettings(allow_unauthenticated=True)
    )


def test_a_value_built_in_code_is_kept_as_its_parser_gives_it() -> None:
    kafka = KafkaSettings(security_protocol="plaintext", bootstrap_servers="a:1, b:2")
    assert kafka.security_protocol == "PLAINTEXT"
    assert kafka.bootstrap_servers == "a:1,b:2"
    assert MetricsSettings(groups="orders-*, payments").groups == ("orders-*", "payments")


def test_a_value_given_in_code_is_validated_as_itself() -> None:
    """Not written as the environment's text and read again: a tuple stays a tuple in the
    storage options (JSON would make it a list), a pattern with a comma and a space is one
    refused pattern (not two, as the text "orders-*, payments" is)."""
    options = {"s3": {"endpoint_url": "http://minio:9000", "config_kwargs": ("a", "b")}}
    assert FollowSettings(storage_options=options).storage_options == options
    assert MetricsSettings(groups=("orders-*",)).groups == ("orders-*",)
    with pytest.raises(ConfigError, match="not a name pattern"):
        MetricsSettings(groups=("orders-*, payments",))
    with pytest.raises(ConfigError) as refused:
        HttpSettings(host=8000)
    assert refused.value.variable == "SIDECAR_HOST"


def test_a_section_built_in_code_reads_no_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only ``Settings.from_env`` reads the environment: what a test or a benchmark builds
    holds what it was given, whatever the process's variables."""
    monkeypatch.setenv("SIDECAR_PORT", "9999")
    assert HttpSettings().port == 8000
    assert Settings().http.port == 8000
    assert Settings.from_env().http.port == 9999


def test_a_section_reads_its_own_variables_of_the_mapping_it_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIDECAR_KAFKA_CLIENT_ID", "from-the-process")
    kafka = KafkaSettings.from_environ({"SIDECAR_KAFKA_BOOTSTRAP_SERVERS": "k:1", "SIDECAR_X": "1"})
    assert (kafka.bootstrap_servers, kafka.client_id) == ("k:1", "spark-offset-sidecar")
    assert MetricsSettings.from_environ({"SIDECAR_EXPORT_KAFKA_LAG": "yes"}).export_kafka_lag
    eu = "SIDECAR_CLUSTER_EU_KAFKA_"
    assert KafkaSettings.from_environ({f"{eu}BOOTSTRAP_SERVERS": "eu:1"}, eu).bootstrap_servers == (
        "eu:1"
    )
    with pytest.raises(ConfigError) as refused:  # named under the prefix it was read with
        KafkaSettings.from_environ({f"{eu}SECURITY_PROTOCOL": "SASL_SSL"}, eu)
    assert refused.value.variable == f"{eu}SASL_USERNAME"


def test_sections_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.http.port = 1  # type: ignore[misc]


def test_every_variable_belongs_to_one_section_and_has_a_meaning() -> None:
    rows = Settings.describe()
    variables = [variable for variable, _default, _meaning in rows]
    assert len(variables) == len(set(variables)), "a variable read by two sections"
    assert set(variables) == Settings.variables()
    assert all(meaning for _variable, _default, meaning in rows)
    assert all(v.startswith("SIDECAR_") and v == v.upper() for v in variables)


def test_an_unknown_variable_is_named_with_the_setting_it_may_stand_for() -> None:
    """One unknown name, the closest setting if one is close, and where the list is: not
    every setting's name on one line."""
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SIDECAR_KAFKA_BOOTSTRAP": "a:1", "SIDECAR_PROT": "1"})
    assert caught.value.variable == "SIDECAR_KAFKA_BOOTSTRAP"
    assert caught.value.problem == (
        "unknown setting (did you mean SIDECAR_KAFKA_BOOTSTRAP_SERVERS?); also unknown: "
        "SIDECAR_PROT; offset-sidecar settings lists every setting"
    )
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SIDECAR_Q": "1"})
    assert caught.value.problem == "unknown setting; offset-sidecar settings lists every setting"
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"SIDECAR_CLUSTER_US_KAFKA_BOOTSTRAP_SERVERS": "us:9092"})
    assert "for a name of SIDECAR_KAFKA_CLUSTERS" in caught.value.problem


@pytest.mark.parametrize(
    "variable",
    ["SIDECAR_WATCHER", "SIDECAR_DATABASE_WRITER", "SIDECAR_GIL_SWITCH_INTERVAL_SECONDS"],
)
def test_the_settings_of_removed_shapes_are_refused_as_unknown(variable: str) -> None:
    """0.2.0 has one shape per way of running (``topology``): the variables that chose
    another are unknown, so a deployment that still sets them fails at start, named."""
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({variable: "child"})
    assert caught.value.variable == variable
    assert "unknown setting (removed in 0.2.0: serve always runs" in str(caught.value)


ROOT = Path(__file__).resolve().parents[2]
# The project's own tools and the pages that tell developers how to run them.
TOOLS = ("harness", "jobs", "scripts", "bench", ".ci", "tests/support")
TOOL_FILES = (
    "Makefile",
    "Dockerfile",
    "tests/conftest.py",
    "CONTRIBUTING.md",
    "docs/development.md",
)
# A whole variable name: not a prefix written as SIDECAR_KAFKA_* or SIDECAR_CLUSTER_<NAME>_.
VARIABLE = re.compile(r"(?<![A-Z0-9_])SIDECAR_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*<])")


def test_the_projects_own_variables_are_not_under_the_settings_prefix() -> None:
    """Every ``SIDECAR_*`` variable is a setting, and an unknown one stops every
    ``offset-sidecar`` command: a variable of the project's tools (a test broker to reuse,
    a folder of jars) begins with ``OFFSET_SIDECAR_``, so that exporting it stops nothing."""
    files = [p for d in TOOLS for p in (ROOT / d).rglob("*") if p.suffix in (".py", ".sh", "")]
    files += [ROOT / name for name in TOOL_FILES]
    found = {
        (str(path.relative_to(ROOT)), name)
        for path in files
        if path.is_file()
        for name in VARIABLE.findall(path.read_text())
    }
    assert found, "the scan finds the settings the tools set"
    assert sorted((path, name) for path, name in found if name not in Settings.variables()) == []


def test_the_settings_read_the_process_environment_in_one_place() -> None:
    """``Settings.from_env`` alone: each section reads the variables it is handed."""
    folder = ROOT / "service" / "spark_offset_sidecar" / "settings"
    readers = sorted(p.name for p in folder.glob("*.py") if "os.environ" in p.read_text())
    assert readers == ["service_settings.py"]


def test_kubernetes_service_links_are_left_out_and_real_settings_kept() -> None:
    """The exact variables a kubelet sets for Services named ``sidecar-spark-offset-sidecar``
    (``helm install sidecar``), ``sidecar`` (whose ``SIDECAR_PORT=tcp://...`` is not the
    setting) and an IPv6 one are no settings; a real setting beside them is read."""
    links = service_link_variables()
    assert service_links(links) == sorted(links)
    assert Settings.from_env(links).http.port == 8000  # the default, not tcp://...
    settings = Settings.from_env({**links, "SIDECAR_LOG_LEVEL": "DEBUG"})
    assert (settings.log.level, settings.http.port) == ("DEBUG", 8000)
    # The chart sets SIDECAR_PORT itself: a container's own variable wins over the link.
    assert Settings.from_env({**links, "SIDECAR_PORT": "9000"}).http.port == 9000


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SIDECAR_KAFKA_BOOTSTRAP", "a:1"),  # misspelled
        ("SIDECAR_SERVICE_HOST", "sidecar.example"),  # a link's name, not an IP
        ("SIDECAR_SERVICE_PORT_HTTP", "http"),
        ("SIDECAR_PORT_8000_TCP", "tcp://10.96.0.13:9000"),  # another port than its name's
        ("SIDECAR_PORT_8000_TCP_PROTO", "udp"),
        ("SIDECAR_PORT_8000_TCP_PORT", "9000"),
        ("SIDECAR_V6_PORT", "tcp://fd00:10:96::1c:8000"),  # IPv6 without brackets
        ("SIDECAR_SPARK_PORT", "http://10.96.0.12:8000"),  # not a kubelet's protocol
    ],
)
def test_unknown_variables_beside_service_links_are_still_refused(
    variable: str, value: str
) -> None:
    with pytest.raises(ConfigError, match="unknown setting") as caught:
        Settings.from_env({**service_link_variables(), variable: value})
    assert caught.value.variable == variable


def test_no_setting_but_sidecar_port_has_a_service_links_shape() -> None:
    """A setting named like a link would be left out for a link's value: only SIDECAR_PORT
    is (its number is the setting, a URL Kubernetes')."""
    values = set(service_link_variables().values())
    named = {v for v in Settings.variables() for value in values if is_service_link(v, value)}
    assert named == {"SIDECAR_PORT"}
    assert not is_service_link("SIDECAR_PORT", "8000")
