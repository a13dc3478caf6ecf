"""The one base of every config section: a typo is refused by name, with the key it was probably meant to be.

pydantic's ``extra="forbid"`` alone says "Extra inputs are not permitted", which tells a user neither which
valid key they missed nor where. Every section model derives from ``ConfigSection`` instead, so an unknown
key fails with ``unknown key 'max_calls_per_rolout'; did you mean 'max_calls_per_rollout'?`` and
``describe_errors`` (what ``load_config`` reports) adds the section, ``[gateway.limits]``, from the error's
location. Fields that hold the user's own data (``dict[str, str]`` environments, labels) stay free-form:
only the section models themselves are strict.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, ModelWrapValidatorHandler, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

#: The error type of an unknown key (``ValidationError.errors()[i]["type"]``); its ``ctx`` has ``key``,
#: ``suggestion`` (None when no valid key is close) and ``valid`` (the section's keys, comma-separated).
UNKNOWN_KEY = "unknown_key"
_PYDANTIC_ERROR_TYPES = frozenset(get_args(core_schema.ErrorType))


class ConfigSection(BaseModel):
    """A strict section of the run config: every key it accepts is a field, and any other is refused."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="wrap")
    @classmethod
    def _name_the_closest_key(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        """pydantic's "extra inputs are not permitted" for this section's keys, turned into an unknown-key
        error that says which key was probably meant; every other error of the section is kept as it was."""
        try:
            return handler(data)
        except ValidationError as exc:
            errors = exc.errors()
            if not any(e["type"] == "extra_forbidden" and len(e["loc"]) == 1 for e in errors):
                raise
            raise ValidationError.from_exception_data(exc.title, [_rebuilt(cls, e) for e in errors]) from None


def closest(key: str, valid: Sequence[str]) -> str | None:
    """The valid key ``key`` was most likely meant to be (difflib's ratio), or None when none is close."""
    matches = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    return matches[0] if matches else None


def section_keys(model: type[BaseModel]) -> list[str]:
    """The keys a section accepts and offers (fields excluded from dumps, like ``base_dir``, are not offered)."""
    return [name for name, field in model.model_fields.items() if not field.exclude]


def describe_errors(exc: ValidationError) -> str:
    """One line per problem, each naming its section: what ``load_config`` puts in its ``ConfigError``."""
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"]]
        value = error.get("input")
        if error["type"] == UNKNOWN_KEY:
            ctx = error.get("ctx") or {}
            lines.append(unknown_key_line(loc[-1], loc[:-1], ctx.get("suggestion"), ctx.get("valid", ""),
                                          table=isinstance(value, dict)))
            continue
        message = error["msg"].removeprefix("Value error, ")
        if not loc or message.startswith("["):  # a check whose message names its sections itself
            lines.append(message)
        elif isinstance(value, dict):  # a check of a whole section
            lines.append(f"[{'.'.join(loc)}]: {message}")
        else:
            where = f"[{'.'.join(loc[:-1])}] {loc[-1]}" if len(loc) > 1 else loc[0]
            lines.append(f"{where}: {message} (got {value!r})")
    return "\n".join(f"  {line}" for line in lines)


def unknown_key_line(key: str, section: Sequence[str] | None, suggestion: str | None, valid: str = "", *,
                     table: bool = False) -> str:
    """``unknown key 'k' in [a.b]; did you mean 'x'?`` (``section`` None: not known where it was read)."""
    if table:  # a [table] of its own: said the way the file spells it
        prefix = "".join(f"{part}." for part in section or ())
        what = f"unknown table [{prefix}{key}]"
        hint = f"; did you mean [{prefix}{suggestion}]?" if suggestion else ""
    else:
        where = "" if section is None else f" in [{'.'.join(section)}]" if section else " at the top level"
        what = f"unknown key {key!r}{where}"
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
    return what + (hint or (f"; valid keys: {valid}" if valid else ""))


def _rebuilt(model: type[BaseModel], error: Any) -> InitErrorDetails:
    """``error`` as it can be raised again; this section's own extra keys become unknown-key errors."""
    loc, value, ctx = error["loc"], error["input"], error.get("ctx") or {}
    if error["type"] == "extra_forbidden" and len(loc) == 1:
        valid = section_keys(model)
        suggestion = closest(str(loc[0]), valid)
        ctx = {"key": str(loc[0]), "suggestion": suggestion, "valid": ", ".join(valid)}
        message = unknown_key_line(str(loc[0]), None, suggestion, ctx["valid"], table=isinstance(value, dict))
        return InitErrorDetails(type=PydanticCustomError(UNKNOWN_KEY, message, ctx), loc=loc, input=value)
    if error["type"] in _PYDANTIC_ERROR_TYPES:
        return InitErrorDetails(type=error["type"], loc=loc, input=value, ctx=ctx)
    return InitErrorDetails(type=PydanticCustomError(error["type"], error["msg"], ctx), loc=loc, input=value)
