"""One-line :class:`SpecError` from a model spec's pydantic validation error (field path, message, a typo hint)."""

from __future__ import annotations

import difflib

from pydantic import BaseModel, ValidationError

from pdplan.errors import SpecError
from pdplan.specs.model_parts import FieldError, LinearAttentionSpec, MlaSpec, MoeSpec, SlidingWindowSpec


def spec_error_from(err: ValidationError, source: str | None, model: type[BaseModel]) -> SpecError:
    """First pydantic error → one-line SpecError (field path, message, a hint for typos)."""
    errors = err.errors()
    # an unknown key usually explains a "missing" one (a typo), so report it first
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(p) for p in first["loc"]]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):  # a nested block's validator names its own field
        return SpecError(cause.message, source=source, field=".".join([*loc, cause.field]))
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        blocks: dict[str, type[BaseModel]] = {
            "moe": MoeSpec,
            "mla": MlaSpec,
            "linear_attention": LinearAttentionSpec,
            "sliding_window": SlidingWindowSpec,
        }
        owner = blocks.get(loc[0], model) if len(loc) > 1 else model
        close = difflib.get_close_matches(loc[-1], list(owner.model_fields), n=1, cutoff=0.6)
        message = "unknown field" + (f"; did you mean {close[0]!r}?" if close else "")
    elif first["type"] == "missing":
        message = "required field is missing"
    else:
        message = f"{message} (got {first['input']!r:.60})"
    return SpecError(message, source=source, field=".".join(loc) or None)
