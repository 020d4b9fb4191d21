"""CLI values that narrow ``pdplan optimize``'s search (comma-separated lists allowed), applied to a scenario's
``search:`` block."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.specs.base import first_error_line
from pdplan.specs.scenario import Scenario, SearchSpace


def _names(text: str | None) -> list[str] | None:
    """``"h100-sxm,l40s"`` → ``["h100-sxm", "l40s"]``; None stays None."""
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise SpecError(f"expected one or more comma-separated names, got {text!r}")
    return names


@dataclass(frozen=True)
class SearchOverrides:
    """CLI values that narrow the search (comma-separated lists allowed); None keeps the scenario's."""

    gpu: str | None = None
    prefill_gpu: str | None = None
    decode_gpu: str | None = None
    tp: int | None = None
    prefill_tp: int | None = None
    decode_tp: int | None = None
    link: str | None = None
    granularity: str | None = None
    routing: str | None = None
    scheduler: str | None = None


def with_search_overrides(scenario: Scenario, ov: SearchOverrides) -> Scenario:
    """``scenario`` whose ``search:`` block is narrowed by the CLI (``--gpu`` both roles, ``--tp`` one degree...)."""
    s = scenario.search or SearchSpace()
    update: dict[str, object] = {}
    prefill = _names(ov.prefill_gpu) or _names(ov.gpu)
    decode = _names(ov.decode_gpu) or _names(ov.gpu)
    if prefill:
        update["prefill_gpus"] = prefill
    if decode:
        update["decode_gpus"] = decode
    tps = {t for t in (ov.tp, ov.prefill_tp, ov.decode_tp) if t is not None}
    if tps:
        update["tp"] = sorted(tps)
    for key, value in (("links", ov.link), ("granularities", ov.granularity), ("routing", ov.routing)):
        names = _names(value)
        if names:
            update[key] = names
    if ov.scheduler is not None:
        update["colocated_scheduler"] = ov.scheduler
    if not update:
        return scenario
    try:
        search = SearchSpace.model_validate({**s.model_dump(), **update})
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(message, source="command line", field=f"search.{field}") from None
    return scenario.model_copy(update={"search": search})
