"""What a PrfaaS search (:mod:`pdplan.search.prfaas`) says besides its plans: the options it refuses, its
question and objective in words, the inputs it searched over, and its warnings.
"""

from __future__ import annotations

import dataclasses

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.search.describe import describe_inputs
from pdplan.search.inputs_record import PrfaasFacts, PrfaasSpaceFacts, SearchInputs
from pdplan.search.planning import planning_inputs
from pdplan.search.space import Space
from pdplan.serving import DisaggregatedHardware, ResolvedScenario
from pdplan.serving.prfaas.build import PrfaasSetup
from pdplan.serving.prfaas.result import PrfaasResult


def check_supported(space: Space) -> None:
    """Planning options this search does not model: refused, never silently dropped."""
    if space.objective != "gpus":
        raise SpecError(
            f"optimize with a prfaas: block ranks by goodput (or by GPUs with --rate); --objective {space.objective} "
            "is not supported with PrfaaS yet",
            field="--objective",
        )
    if space.redundancy != "none" or space.budget_usd_per_hour is not None:
        raise SpecError(
            "--redundancy and --budget-usd-per-hour are not supported with a prfaas: block yet", field="prfaas"
        )


def prfaas_warnings(res: ResolvedScenario[DisaggregatedHardware], docs: list[PrfaasResult]) -> tuple[str, ...]:
    out = [
        *res.warnings,
        "PrfaaS plans: decode capacity is taken at the TPOT SLO (Eq. 5), TPOT percentiles are not modelled; "
        "tokens/s per user is 1 / TPOT SLO, a floor, and SLO attainment is the share within the TTFT SLO",
    ]
    srcs = docs[0].sources if docs else {}
    measured = [k for k, v in srcs.items() if str(v).startswith(("profile", "measured"))]
    if measured:
        out.append(f"PrfaaS inputs from measured profiles, not pdplan's roofline: {', '.join(measured)}")
    return tuple(dict.fromkeys(out))


def prfaas_inputs(
    res: ResolvedScenario[DisaggregatedHardware],
    space: Space,
    catalog: Catalog,
    setup: PrfaasSetup,
    splits: list[tuple[int, int]],
    remotes: range | tuple[int, ...],
) -> SearchInputs:
    """The inputs of a PrfaaS search: :func:`describe_inputs` with the space it searched (the local instance types,
    the local splits, the remote counts and how the threshold was chosen) and the remote cluster and its link."""
    link = catalog.link(setup.link_name)
    remote = catalog.gpu(setup.spec.gpu)
    prfaas = PrfaasFacts(
        remote_gpu=remote.name,
        remote_tp=setup.spec.tp,
        remote_instances_max=setup.spec.count,
        link=link.name,
        link_line_rate_gbit_per_s=link.line_rate_bytes_per_s * 8e-9,
        link_efficiency=link.efficiency,
        link_source=link.sources.get("line_rate_bytes_per_s", ""),
        rtt_s=setup.rtt_s,
        threshold_pinned_tokens=setup.spec.threshold,
        sources=setup.sources,
    )
    searched = PrfaasSpaceFacts(
        prefill=res.hardware.prefill.label,
        decode=res.hardware.decode.label,
        local_splits=tuple(f"{n_p}P{n_d}D" for n_p, n_d in splits),
        remote_instances=tuple(remotes),
        threshold="pinned"
        if setup.spec.threshold is not None
        else "searched (log-spaced scan, then bounded scalar search)",
        budget_gpus=space.budget_gpus,
        rate_rps=space.rate_rps,
        headroom=space.headroom,
    )
    inputs = describe_inputs(res, space, catalog, planning_inputs(space))
    return dataclasses.replace(inputs, search_space=searched, prfaas=prfaas)


def prfaas_question(res: ResolvedScenario[DisaggregatedHardware], space: Space, setup: PrfaasSetup) -> str:
    slo, dep = res.scenario.slo, res.hardware.deployment
    return (
        f"How should {res.model.name} be split between a local {dep.prefill.gpu} / {dep.decode.gpu} PD cluster and "
        f"up to {setup.spec.count} remote {setup.spec.gpu} TP{setup.spec.tp} prefill instances over "
        f"{setup.link_name} for the {res.scenario.workload.name or 'given'} workload so that "
        f"{slo.attainment:.0%} of requests meet P{slo.percentile:g} TTFT <= {slo.ttft:g} s and TPOT <= "
        f"{slo.tpot * 1e3:g} ms — to {prfaas_objective(space)}?"
    )


def prfaas_objective(space: Space) -> str:
    if space.rate_rps is not None:
        return f"meet {space.rate_rps:g} req/s at the fewest GPUs (remote ones counted)"
    where = f"{space.budget_gpus} local GPUs" if space.budget_gpus is not None else "the scenario's local GPUs"
    return f"maximise goodput on {where} with the remote prefill cluster (PrfaaS)"
