"""The kinds of value a setting holds, each with the one parser that reads it from text.

A value is checked by the same parser however it is given: as an environment variable's
text, or in code (``KafkaSettings(bootstrap_servers="a:1, b:2")``), which is first
written as the environment would give it (``as_text``). What the parser returns is what
the setting holds (``sasl_ssl`` is ``SASL_SSL`` however given). A parser raises
``ValueError`` saying what is wrong; the section names the variable.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import BeforeValidator

from spark_offset_sidecar.core.names import CLUSTER
from spark_offset_sidecar.errors import install_extra

T = TypeVar("T")

# A commit interval longer than this would leave lag tools minutes behind the jobs.
MAX_COMMIT_INTERVAL = 3600.0


def as_text(value: Any) -> str:
    """``value`` as an environment variable would give it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return json.dumps(value)
    if isinstance(value, tuple | list):
        return ",".join(_item_text(item) for item in value)
    return str(value)


def _item_text(item: Any) -> str:
    if isinstance(item, tuple | list):  # key=value pairs: SASL extensions, cluster patterns
        return "=".join(str(part) for part in item)
    return str(item)


def parsed_by(parse: Callable[[str], Any]) -> BeforeValidator:
    """Validation by ``parse`` of the value's text (None stays None: not set)."""

    def validate(value: Any) -> Any:
        if value is None:
            return None
        return parse(value.strip() if isinstance(value, str) else as_text(value))

    return BeforeValidator(validate)


def bootstrap(value: str) -> str:
    servers = [s.strip() for s in value.split(",") if s.strip()]
    if not servers:
        raise ValueError("needs at least one host:port")
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{server!r} is not host:port")
    return ",".join(servers)


def database_url(value: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(value)
    except ArgumentError as exc:
        raise ValueError(f"not a SQLAlchemy URL ({exc})") from None
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError("only sqlite:// and postgresql:// URLs are supported")
    if url.get_backend_name() == "postgresql":
        driver = url.get_driver_name()  # SQLAlchemy's default for postgresql:// is psycopg2
        if importlib.util.find_spec(driver) is None:
            raise ValueError(
                f"PostgreSQL through the {driver} driver, which is not installed: "
                f"{install_extra('postgres')}; and write the URL as postgresql+psycopg://..."
            )
    return value


def default_database_url() -> str:
    return f"sqlite:///{Path('sidecar.db').resolve()}"


def positive_float(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or not number > 0:
        raise ValueError("must be a finite number greater than 0")
    return number


def non_negative_float(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError("must be a finite number, 0 or more")
    return number


def commit_interval(value: str) -> float:
    number = float(value)
    if not math.isfinite(number) or not 0 <= number <= MAX_COMMIT_INTERVAL:
        raise ValueError(f"must be a number of seconds from 0 to {MAX_COMMIT_INTERVAL:g}")
    return number


def int_at_least(minimum: int, why: str = "") -> Callable[[str], int]:
    def parse(value: str) -> int:
        number = int(value)
        if number < minimum:
            raise ValueError(f"must be at least {minimum}{why}")
        return number

    return parse


def port(value: str) -> int:
    number = int(value)
    if not 0 <= number < 65536:
        raise ValueError("must be a TCP port (0-65535)")
    return number


def flag(value: str) -> bool:
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def choice(*allowed: str, case: Callable[[str], str] = str.upper) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if case(value) not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return case(value)

    return parse


def readable_file(value: str) -> str:
    path = Path(value)
    if not path.is_file():
        raise ValueError("no such file")
    return str(path.resolve())


def http_url(value: str) -> str:
    scheme, _, rest = value.partition("://")
    if scheme.lower() not in ("http", "https") or not rest.strip("/"):
        raise ValueError("must be an http:// or https:// URL")
    return value


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (or pod) only: localhost, 127.0.0.0/8, ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def patterns(value: str) -> tuple[str, ...]:
    """Comma-separated shell patterns (``orders-*``), as the token file's grants take."""
    found = tuple(p.strip() for p in value.split(",") if p.strip())
    for pattern in found:
        if any(c.isspace() or not c.isprintable() for c in pattern):
            raise ValueError(f"{pattern!r} is not a name pattern")
    return found


def some_patterns(value: str) -> tuple[str, ...]:
    found = patterns(value)
    if not found:
        raise ValueError("needs at least one pattern (* for every name)")
    return found


def extensions(value: str) -> tuple[tuple[str, str], ...]:
    """``key=value,key=value``: SASL extensions (RFC 7628: keys of letters only)."""
    found: dict[str, str] = {}
    for pair in (p.strip() for p in value.split(",") if p.strip()):
        key, equals, text = pair.partition("=")
        if not equals or not key.isascii() or not key.isalpha() or key == "auth":
            raise ValueError(f"{pair!r} is not key=value with a key of letters (not 'auth')")
        if not text.isprintable():
            raise ValueError(f"the value of {key!r} holds a control character")
        found[key] = text
    return tuple(found.items())


def storage_options(value: str) -> dict[str, dict[str, Any]]:
    try:
        found = json.loads(value)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(found, dict) or not all(isinstance(v, dict) for v in found.values()):
        raise ValueError('must be an object of protocol -> options, e.g. {"s3": {...}}')
    return found


def cluster_name(value: str) -> str:
    name = value.strip()
    if problem := CLUSTER.problem(name):
        raise ValueError(problem)
    return name


def cluster_names(value: str) -> tuple[str, ...]:
    names = tuple(cluster_name(n) for n in value.split(",") if n.strip())
    if len(set(names)) != len(names):
        raise ValueError("names a cluster twice")
    return names


def cluster_by_group(value: str) -> tuple[tuple[str, str], ...]:
    """``pattern=cluster,...``: the first pattern that matches a group names its cluster."""
    pairs = []
    for item in (i.strip() for i in value.split(",") if i.strip()):
        pattern, equals, name = item.partition("=")
        if not equals:
            raise ValueError(f"{item!r} is not pattern=cluster")
        (pattern,) = some_patterns(pattern)
        pairs.append((pattern, cluster_name(name)))
    return tuple(pairs)


# The kinds of value, as types the sections' fields are declared with.
Text = Annotated[str, parsed_by(str)]
Bootstrap = Annotated[str, parsed_by(bootstrap)]
DatabaseUrl = Annotated[str, parsed_by(database_url)]
PositiveFloat = Annotated[float, parsed_by(positive_float)]
NonNegativeFloat = Annotated[float, parsed_by(non_negative_float)]
CommitInterval = Annotated[float, parsed_by(commit_interval)]
PositiveInt = Annotated[int, parsed_by(int_at_least(1))]
Port = Annotated[int, parsed_by(port)]
Flag = Annotated[bool, parsed_by(flag)]
ReadableFile = Annotated[str, parsed_by(readable_file)]
HttpUrl = Annotated[str, parsed_by(http_url)]
Patterns = Annotated[tuple[str, ...], parsed_by(patterns)]
SomePatterns = Annotated[tuple[str, ...], parsed_by(some_patterns)]
Extensions = Annotated[tuple[tuple[str, str], ...], parsed_by(extensions)]
StorageOptions = Annotated[dict[str, dict[str, Any]], parsed_by(storage_options)]
ClusterName = Annotated[str, parsed_by(cluster_name)]
ClusterNames = Annotated[tuple[str, ...], parsed_by(cluster_names)]
ClusterByGroup = Annotated[tuple[tuple[str, str], ...], parsed_by(cluster_by_group)]

LogLevel = Annotated[str, parsed_by(choice("DEBUG", "INFO", "WARNING", "ERROR"))]
LogFormat = Annotated[str, parsed_by(choice("json", "text", case=str.lower))]
Granularity = Annotated[str, parsed_by(choice("group", "topic", "partition", case=str.lower))]
SecurityProtocol = Annotated[
    str, parsed_by(choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"))
]
SaslMechanism = Annotated[
    str,
    parsed_by(choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM")),
]
StatusWindow = Annotated[int, parsed_by(int_at_least(2, " (a status compares commits)"))]
