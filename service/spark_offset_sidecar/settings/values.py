"""The kinds of value a setting holds: pydantic's types and constraints, and the few
checks pydantic has none for (each raises ``ValueError``; the section names the variable).
A list in one variable is split at its commas; a value given in code is validated as is.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import AfterValidator, BeforeValidator, Field, FilePath

from spark_offset_sidecar.core.names import CLUSTER
from spark_offset_sidecar.errors import install_extra

# A commit interval longer than this would leave lag tools minutes behind the jobs.
MAX_COMMIT_INTERVAL = 3600.0


def comma_separated(value: Any) -> Any:
    """``"a, b"`` as ``("a", "b")``: a list in one variable, written with commas (pydantic
    reads a list from JSON only); a value that is no text is kept."""
    if not isinstance(value, str):
        return value
    return tuple(item.strip() for item in value.split(",") if item.strip())


def pairs_of(shape: str) -> BeforeValidator:
    """``"a=1, b=2"`` as ``(("a", "1"), ("b", "2"))``, an item without ``=`` refused as not
    ``shape``."""

    def split(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        found = comma_separated(value)
        for item in found:
            if "=" not in item:
                raise ValueError(f"{item!r} is not {shape}")
        return tuple(tuple(part.strip() for part in item.split("=", 1)) for item in found)

    return BeforeValidator(split)


def checked_by(check: Callable[[Any], str | None]) -> AfterValidator:
    """A check pydantic has no constraint for: ``check`` says what is wrong, or None."""

    def validate(value: Any) -> Any:
        if problem := check(value):
            raise ValueError(problem)
        return value

    return AfterValidator(validate)


def bootstrap(value: str) -> str:
    """host:port,... (pydantic's URL types want a scheme), the spaces left out."""
    servers = [s.strip() for s in value.split(",") if s.strip()]
    if not servers:
        raise ValueError("needs at least one host:port")
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{server!r} is not host:port")
    return ",".join(servers)


def database_url(value: str) -> str | None:
    """SQLAlchemy's URL, of a backend and a driver the service has (pydantic's DSN types
    know no sqlite:// and no installed driver)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(value)
    except ArgumentError as exc:
        return f"not a SQLAlchemy URL ({exc})"
    if url.get_backend_name() not in ("sqlite", "postgresql"):
        return "only sqlite:// and postgresql:// URLs are supported"
    driver = url.get_driver_name()  # SQLAlchemy's default for postgresql:// is psycopg2
    if url.get_backend_name() == "postgresql" and importlib.util.find_spec(driver) is None:
        return (
            f"PostgreSQL through the {driver} driver, which is not installed: "
            f"{install_extra('postgres')}; and write the URL as postgresql+psycopg://..."
        )
    return None


def default_database_url() -> str:
    return f"sqlite:///{Path('sidecar.db').resolve()}"


_HTTP_URL = pydantic.TypeAdapter(pydantic.HttpUrl)


def http_url(value: str) -> str | None:
    """Checked as pydantic's ``HttpUrl``, kept as written: a JWT's iss must equal the
    issuer exactly, and ``HttpUrl`` adds a ``/`` to a URL without a path."""
    try:
        _HTTP_URL.validate_python(value)
    except pydantic.ValidationError:
        return "must be an http:// or https:// URL"
    return None


def name_pattern(pattern: str) -> str | None:
    """A shell pattern (``orders-*``), as the token file's grants take."""
    if not pattern or any(c.isspace() or not c.isprintable() for c in pattern):
        return "not a name pattern (one without spaces or control characters)"
    return None


def extension(pair: tuple[str, str]) -> str | None:
    """A SASL extension: RFC 7628 keys are letters, ``auth`` is the token's own."""
    key, value = pair
    if not key.isascii() or not key.isalpha() or key == "auth":
        return f"{key!r} is not a key of letters (not 'auth')"
    if not value.isprintable():
        return f"the value of {key!r} holds a control character"
    return None


def json_text(value: Any) -> Any:
    """JSON text as what it holds (a value that is no text is kept)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ValueError(f"not JSON ({exc})") from None


def some(patterns: tuple[str, ...]) -> str | None:
    """Not pydantic's min_length, whose words would not say what to write instead."""
    return None if patterns else "needs at least one pattern (* for every name)"


def distinct(names: tuple[str, ...]) -> str | None:
    """pydantic checks no tuple's items are distinct (a set would lose their order)."""
    return "names a cluster twice" if len(set(names)) != len(names) else None


def cased(case: Callable[[str], str]) -> BeforeValidator:
    """A choice as the service names it, however written (pydantic's ``Literal`` is exact)."""
    return BeforeValidator(lambda value: case(value) if isinstance(value, str) else value)


# The kinds of value, as types the sections' fields are declared with.
Text = str
Flag = bool
PositiveInt = pydantic.PositiveInt
Port = Annotated[int, Field(ge=0, le=65535)]
StatusWindow = Annotated[int, Field(ge=2)]  # a status compares commits
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
CommitInterval = Annotated[float, Field(ge=0, le=MAX_COMMIT_INTERVAL, allow_inf_nan=False)]
ReadableFile = Annotated[FilePath, AfterValidator(Path.resolve)]
HttpUrl = Annotated[str, checked_by(http_url)]
Bootstrap = Annotated[str, AfterValidator(bootstrap)]
DatabaseUrl = Annotated[str, checked_by(database_url)]
Pattern = Annotated[str, checked_by(name_pattern)]
Patterns = Annotated[tuple[Pattern, ...], BeforeValidator(comma_separated)]
SomePatterns = Annotated[Patterns, checked_by(some)]
Extensions = Annotated[
    tuple[Annotated[tuple[str, str], checked_by(extension)], ...], pairs_of("key=value")
]
StorageOptions = Annotated[dict[str, dict[str, Any]], BeforeValidator(json_text)]
ClusterName = Annotated[str, checked_by(CLUSTER.problem)]
ClusterNames = Annotated[
    tuple[ClusterName, ...], BeforeValidator(comma_separated), checked_by(distinct)
]
# pattern=cluster,...: the first pattern that matches a group names its cluster.
ClusterByGroup = Annotated[tuple[tuple[Pattern, ClusterName], ...], pairs_of("pattern=cluster")]

LogLevel = Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], cased(str.upper)]
LogFormat = Annotated[Literal["json", "text"], cased(str.lower)]
Granularity = Annotated[Literal["group", "topic", "partition"], cased(str.lower)]
SecurityProtocol = Annotated[
    Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], cased(str.upper)
]
SaslMechanism = Annotated[
    Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"],
    cased(str.upper),
]
