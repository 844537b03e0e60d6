"""One section of the settings: a frozen pydantic model whose fields are set by
``SIDECAR_*`` variables (its ``prefix`` and the field's name, or the field's alias).

A section reads only the mapping ``from_environ`` is given, never the process's
environment; however it is built, a refused value raises ``ConfigError`` naming the
variable that would set it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic.functional_validators import ModelWrapValidatorHandler

from spark_offset_sidecar.errors import ConfigError

PREFIX = "SIDECAR_"
# pydantic's refusals where the environment's words are other than its own.
WORDS = {
    "bool_parsing": "must be true or false",
    "greater_than_equal": "must be at least {ge:g}",
    "less_than_equal": "must be at most {le:g}",
    "path_not_file": "no such file",
}


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    prefix: ClassVar[str] = PREFIX  # what its variables begin with (but those of aliases)
    title: ClassVar[str] = ""  # what the section is about, for the settings' reference

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], prefix: str | None = None) -> Self:
        """The section ``environ``'s variables set (under ``prefix``, the section's own by
        default); a refusal names the variable as it is under that prefix."""
        variables = cls.variables(prefix)
        given = {name: environ[v].strip() for name, v in variables.items() if v in environ}
        try:
            return cls.model_validate(given)
        except ConfigError as exc:  # named under the section's own prefix
            if prefix is None:
                raise
            raise ConfigError(exc.variable.replace(cls.prefix, prefix, 1), exc.problem) from None

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
            variable = cls.prefix + where.upper()
        if error["type"] == "extra_forbidden":
            return ConfigError(variable, f"no such setting in {cls.__name__}")
        context = error.get("ctx", {})
        cause = context.get("error")
        if isinstance(cause, Exception):  # a check of ours
            problem = str(cause)
        elif error["type"] in WORDS:
            problem = WORDS[error["type"]].format(**context)
        else:
            problem = error["msg"].replace("Input should be", "must be", 1)
        inside = "".join(f" at {part}" for part in error["loc"][1:] if isinstance(part, str))
        return ConfigError(variable, f"invalid value {error['input']!r}{inside}: {problem}")

    @classmethod
    def variable(cls, field_name: str, prefix: str | None = None) -> str:
        """The variable that sets ``field_name`` (under ``prefix``, the section's own by
        default)."""
        alias = cls.model_fields[field_name].validation_alias
        if isinstance(alias, str):
            return alias
        return (prefix or cls.prefix) + field_name.upper()

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
