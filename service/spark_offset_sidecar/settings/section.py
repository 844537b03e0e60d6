"""One section of the settings: a pydantic-settings class whose fields are read from
``SIDECAR_*`` variables (its ``env_prefix`` and the field's name, or the field's alias
where the variable has another shape).

Invariants:
  - A section reads the environment only inside ``reading(environ)`` (what
    ``Settings.from_env`` does); built in code, it holds what it is given and its
    defaults, never a variable of the process that happens to be set.
  - However a section is built, every value goes through its kind's parser
    (``values``), and a refused value raises ``ConfigError`` naming the variable that
    would set it; checks across fields raise ``ConfigError`` naming one of them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, ClassVar

from pydantic import ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic.functional_validators import ModelWrapValidatorHandler
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from spark_offset_sidecar.errors import ConfigError

PREFIX = "SIDECAR_"

# The variables a ``reading`` block gives the sections it builds; none outside one.
_ENVIRON: ContextVar[Mapping[str, str]] = ContextVar(
    "sidecar_environ", default=MappingProxyType({})
)


@contextmanager
def reading(environ: Mapping[str, str]) -> Iterator[None]:
    """Sections built inside this block read ``environ``'s ``SIDECAR_*`` variables."""
    token = _ENVIRON.set({k: v for k, v in environ.items() if k.startswith(PREFIX)})
    try:
        yield
    finally:
        _ENVIRON.reset(token)


class _GivenEnvironment(EnvSettingsSource):
    """pydantic-settings' environment source, on the variables ``reading`` gives (upper
    case only, as ``reading`` keeps them: the source compares names in lower case)."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {name.lower(): value.strip() for name, value in _ENVIRON.get().items()}


class Section(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        case_sensitive=False,  # variables are upper case, fields lower (see reading)
        frozen=True,
        extra="forbid",
        populate_by_name=True,
    )
    title: ClassVar[str] = ""  # what the section is about, for the settings' reference

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        assert isinstance(env_settings, EnvSettingsSource)
        return init_settings, _GivenEnvironment(settings_cls, env_prefix=env_settings.env_prefix)

    @model_validator(mode="wrap")
    @classmethod
    def _refusals_name_variables(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            raise cls._refusal(exc) from None

    @classmethod
    def _refusal(cls, exc: ValidationError) -> ConfigError:
        error = exc.errors()[0]
        where = str(error["loc"][0]) if error["loc"] else ""
        if where in cls.model_fields:
            variable = cls.variable(where)
        elif where.startswith(PREFIX):  # a field's alias: the variable itself
            variable = where
        else:  # given in code by a name no field has
            variable = cls.prefix() + where.upper()
        if error["type"] == "extra_forbidden":
            return ConfigError(variable, f"no such setting in {cls.__name__}")
        cause = error.get("ctx", {}).get("error")
        problem = str(cause) if isinstance(cause, Exception) else error["msg"]
        return ConfigError(variable, f"invalid value {error['input']!r}: {problem}")

    @classmethod
    def prefix(cls) -> str:
        """What the section's variables begin with (but those of fields with an alias)."""
        return cls.model_config.get("env_prefix") or PREFIX

    @classmethod
    def variable(cls, field_name: str, prefix: str | None = None) -> str:
        """The variable that sets ``field_name`` (under ``prefix``, the section's own by
        default)."""
        alias = cls.model_fields[field_name].validation_alias
        if isinstance(alias, str):
            return alias
        return (prefix or cls.prefix()) + field_name.upper()

    @classmethod
    def variables(cls, prefix: str | None = None) -> dict[str, str]:
        """Every field's variable, by field name."""
        return {name: cls.variable(name, prefix) for name in cls.model_fields}

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        """(variable, default as the environment writes it, meaning) of every field."""
        return [
            (cls.variable(name), _shown(spec), spec.description or "")
            for name, spec in cls.model_fields.items()
        ]


def _shown(spec: FieldInfo) -> str:
    """A default as it is written in the environment ("" when computed or none)."""
    default = spec.default
    if spec.default_factory is not None or default is None:
        return ""
    return ",".join(default) if isinstance(default, tuple) else str(default)
