"""The one frozen pydantic base of every spec, and pydantic errors turned into one-line :class:`SpecError`.

Validation without files: :mod:`pdplan.io` reads a file and hands the mapping to :func:`validate_spec`.
"""

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from pdplan.errors import SpecError

SpecT = TypeVar("SpecT", bound=BaseModel)


class FrozenModel(BaseModel):
    """Immutable spec that rejects unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def first_error_line(err: ValidationError) -> tuple[str | None, str]:
    """(field path, or None for a whole-object check; message) of the first pydantic error."""
    first = err.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or None
    kind = first["type"]
    message = first["msg"]
    if kind == "extra_forbidden":
        message = "unknown field"
    elif kind == "missing":
        message = "required field is missing"
    elif message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    extra = len(err.errors()) - 1
    if extra:
        message += f" (and {extra} more error{'s' if extra > 1 else ''})"
    return field, message


def validate_spec(cls: type[SpecT], data: dict[str, Any], source: str) -> SpecT:
    """Validate ``data`` as ``cls``; a pydantic error becomes one SpecError line naming file and field."""
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(message, source=source, field=field) from None
