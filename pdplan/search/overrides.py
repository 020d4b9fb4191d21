"""The command line's overrides (:class:`~pdplan.specs.command_line.ScenarioOverrides`) as ``pdplan optimize`` reads
them: the model, workload, SLO and dtypes replace the scenario's; the deployment values narrow its ``search:`` block
(comma-separated lists allowed) or fix the instance counts (``--xpyd``, ``--colocated``)."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.io.overrides import apply_overrides, check_one_mode, parse_xpyd
from pdplan.specs.base import first_error_line
from pdplan.specs.command_line import DEPLOYMENT_FIELDS, ScenarioOverrides, flag
from pdplan.specs.degrees import parse_degrees
from pdplan.specs.scenario import Scenario, SearchSpace


def _names(text: str | None) -> list[str] | None:
    """``"h100-sxm,l40s"`` → ``["h100-sxm", "l40s"]``; None stays None."""
    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise SpecError(f"expected one or more comma-separated names, got {text!r}")
    return names


def _search_update(ov: ScenarioOverrides) -> dict[str, object]:
    """``search:`` fields set by --gpu/--prefill-gpu/--decode-gpu, --tp/--prefill-tp/--decode-tp, --link,
    --granularity and --routing."""
    update: dict[str, object] = {}
    prefill = _names(ov.prefill_gpu) or _names(ov.gpu)
    decode = _names(ov.decode_gpu) or _names(ov.gpu)
    if prefill:
        update["prefill_gpus"] = prefill
    if decode:
        update["decode_gpus"] = decode
    # --tp narrows both roles; --prefill-tp / --decode-tp narrow their own role only (issue #12 item 5: they used
    # to join one TP set searched for both roles)
    for key, degree in (("tp", ov.tp), ("prefill_tp", ov.prefill_tp), ("decode_tp", ov.decode_tp), ("pp", ov.pp)):
        if degree is not None:
            update[key] = [degree]
    if ov.max_instances is not None:
        update["max_instances"] = ov.max_instances
    for key in ("ep", "prefill_ep", "decode_ep", "dp", "prefill_dp", "decode_dp"):
        text = getattr(ov, key)
        if text is not None:
            update[key] = parse_degrees(text, flag(key))
    for key, value in (("links", ov.link), ("granularities", ov.granularity), ("routing", ov.routing)):
        names = _names(value)
        if names:
            update[key] = names
    return update


def _narrowed(scenario: Scenario, update: Mapping[str, object]) -> Scenario:
    """``scenario`` whose ``search:`` block takes ``update``, validated again (one-line SpecError)."""
    if not update:
        return scenario
    s = scenario.search or SearchSpace()
    try:
        search = SearchSpace.model_validate({**s.model_dump(), **update})
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(message, source="command line", field=f"search.{field}") from None
    return scenario.model_copy(update={"search": search})


def with_search_overrides(scenario: Scenario, ov: ScenarioOverrides) -> Scenario:
    """``scenario`` whose ``search:`` block is narrowed by the CLI (``--gpu`` both roles, ``--tp`` one degree...).

    The roles, TP, links, granularities and routing are validated first, ``--scheduler`` (the colocated baseline's
    batching) after them, so a bad value in each reports the first one alone.
    """
    narrowed = _narrowed(scenario, _search_update(ov))
    scheduler = {} if ov.scheduler is None else {"colocated_scheduler": ov.scheduler}
    return _narrowed(narrowed, scheduler)


def instance_counts(ov: ScenarioOverrides) -> tuple[tuple[int, int] | None, int | None]:
    """``(x, y)`` from ``--xpyd`` and ``N`` from ``--colocated`` (None: search them); at most one is given."""
    check_one_mode(ov)
    return (parse_xpyd(ov.xpyd) if ov.xpyd is not None else None), ov.colocated


def search_scenario(scenario: Scenario, ov: ScenarioOverrides) -> Scenario:
    """The scenario ``optimize`` searches: ``scenario`` with the model, workload, SLO and dtype overrides applied,
    and its ``search:`` block narrowed by the deployment ones (:func:`with_search_overrides`)."""
    return with_search_overrides(apply_overrides(scenario, ov.without(DEPLOYMENT_FIELDS)), ov)
