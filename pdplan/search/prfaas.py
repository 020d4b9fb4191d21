"""``optimize`` of a scenario with a ``prfaas:`` block: search PrfaaS deployments (arXiv 2604.15039 §3.4).

The local instance types (prefill and decode GPU × TP) and the remote one come from the scenario; the search
chooses, jointly,

* the local prefill/decode counts ``N_p``, ``N_d`` within the local GPU budget (``--gpus``, else the scenario's
  local GPUs): every split that leaves no room for another instance (more instances never lower goodput);
* the remote instance count ``N_r``: the ``prfaas.count`` given in a budget search; ``1 … count`` with
  ``--rate`` (the fewest GPUs meeting the rate, remote ones counted);
* the threshold ``t``, continuous: a bounded scalar search (scipy, :func:`pdplan.serving.prfaas.queue.
  search_goodput_threshold`) on the goodput, unless ``--prfaas-threshold`` / ``prfaas.threshold`` pins it.

Screen, then exact (as the dense search, :mod:`pdplan.search.optimize`): every candidate gets its capacity
``Λ_max`` at its Eq. 7 threshold (:func:`pdplan.serving.prfaas.capacity.search_threshold`, an upper bound on its
goodput); in screen order, candidates get the per-path queueing goodput with the threshold searched until
``EXACT_PLANS`` pass. Homogeneous PD on the same local GPUs (its best split, branch and bound, one goodput root per
split) is computed too; when it beats every plan so far its split is searched as well (its threshold search includes
``t`` above every prompt, which *is* homogeneous PD), so the pick is never worse than homogeneous PD. Each exact plan
carries the ``prfaas`` object (:func:`pdplan.serving.prfaas.evaluate.prfaas_result`) and passes the physics
invariants (:mod:`pdplan.serving.checks.prfaas`) at its operating rate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from pdplan.errors import NoFeasiblePlanError
from pdplan.evaluation.error_band import of_prfaas
from pdplan.io.catalog import Catalog
from pdplan.search.describe import describe_assumptions
from pdplan.search.plans import Plan, PlanResult, SearchStats
from pdplan.search.prfaas_describe import (
    check_supported,
    prfaas_inputs,
    prfaas_objective,
    prfaas_question,
    prfaas_warnings,
)
from pdplan.search.priced import prfaas_priced_record
from pdplan.search.space import Space
from pdplan.serving import Disaggregated, DisaggregatedHardware, Latency, Prfaas, ResolvedScenario, Role
from pdplan.serving.checks.prfaas import check_prfaas
from pdplan.serving.prfaas.build import PrfaasSetup, prfaas_local, prfaas_setup
from pdplan.serving.prfaas.capacity import SplitCapacity, capacity_at, search_threshold
from pdplan.serving.prfaas.evaluate import best_goodput, homogeneous, prfaas_result
from pdplan.serving.prfaas.queue import PathGoodput, path_mixture
from pdplan.serving.prfaas.result import PrfaasResult
from pdplan.types import UtilisationKey

EXACT_PLANS = 2
"""Plans (besides homogeneous PD's split) whose goodput is found with the threshold searched: each costs a bounded
scalar search of ~15 goodput roots (~0.4 s CPU on the examples), which keeps the search under 1 s CPU there
(docs/prfaas.md)."""
MAX_TRIES_PER_PLAN = 4
"""Candidates evaluated exactly at most per plan asked for (as :data:`pdplan.search.optimize.MAX_TRIES_PER_PLAN`)."""


@dataclass(frozen=True)
class Candidate:
    """One PrfaaS deployment: local counts, remote count, its screen (capacity at the Eq. 7 threshold)."""

    n_prefill: int
    n_decode: int
    n_remote: int
    setup: PrfaasSetup
    screen: SplitCapacity
    gpus: int


def _per_instance_gpus(role: Role) -> int:
    return role.tp * role.pp * role.dp


def local_splits(dep: Disaggregated, budget_gpus: int | None, xpyd: tuple[int, int] | None) -> list[tuple[int, int]]:
    """``(N_p, N_d)`` splits of the local GPU budget that leave no room for another instance of either kind."""
    if xpyd is not None:
        return [xpyd]
    g_p, g_d = _per_instance_gpus(dep.prefill), _per_instance_gpus(dep.decode)
    budget = budget_gpus if budget_gpus is not None else dep.prefill.gpus + dep.decode.gpus
    out = []
    for n_p in range(1, budget // g_p + 1):
        n_d = (budget - n_p * g_p) // g_d
        if n_d >= 1 and budget - n_p * g_p - n_d * g_d < g_p:  # maximal: no prefill instance fits either
            out.append((n_p, n_d))
    if not out:
        raise NoFeasiblePlanError(
            f"a local GPU budget of {budget} fits no prefill ({g_p} GPUs) + decode ({g_d} GPUs) instance pair",
            binding_constraint="GPU budget",
        )
    return out


def with_counts(setup: PrfaasSetup, n_prefill: int, n_decode: int, n_remote: int) -> PrfaasSetup:
    cap = setup.capacity
    counts = replace(
        cap,
        local=replace(cap.local, instances=n_prefill),
        decode=replace(cap.decode, instances=n_decode),
        remote=replace(cap.remote, instances=n_remote),
    )
    return replace(setup, capacity=counts, spec=setup.spec.model_copy(update={"count": n_remote}))


def _screen(setup: PrfaasSetup) -> SplitCapacity:
    if setup.spec.threshold is not None:
        return capacity_at(setup.capacity, float(setup.spec.threshold))
    return search_threshold(setup.capacity)


def candidates(
    res: ResolvedScenario[DisaggregatedHardware],
    setup: PrfaasSetup,
    splits: list[tuple[int, int]],
    remotes: range | tuple[int, ...],
) -> list[Candidate]:
    """Every split × remote count with its capacity screen."""
    dep = res.hardware.deployment
    g_p, g_d, g_r = _per_instance_gpus(dep.prefill), _per_instance_gpus(dep.decode), setup.spec.tp
    out = []
    for n_p, n_d in splits:
        for n_r in remotes:
            s = with_counts(setup, n_p, n_d, n_r)
            out.append(Candidate(n_p, n_d, n_r, s, _screen(s), n_p * g_p + n_d * g_d + n_r * g_r))
    return out


def _key(rate_rps: float | None, goodput_rps: float, gpus: int) -> tuple[float, float]:
    """Rank key (ascending): most goodput in a budget search; fewest GPUs, then most goodput, with ``--rate``."""
    return (-goodput_rps, gpus) if rate_rps is None else (gpus, -goodput_rps)


def _ordered(cands: list[Candidate], rate_rps: float | None) -> list[Candidate]:
    """Candidates in screen order (capacity reaching the rate, with ``--rate``)."""
    able = [c for c in cands if rate_rps is None or c.screen.lambda_max_rps >= rate_rps]
    return sorted(able, key=lambda c: _key(rate_rps, c.screen.lambda_max_rps, c.gpus))


@dataclass(frozen=True)
class Exact:
    cand: Candidate
    good: PathGoodput
    rate_rps: float
    """The goodput after headroom (the SLO-meeting rate / (1 + H))."""


def _exact(res: ResolvedScenario[DisaggregatedHardware], cand: Candidate, headroom: float) -> Exact | None:
    """The candidate's goodput with the threshold searched (None: no rate meets the SLO)."""
    slo = res.scenario.slo
    g = best_goodput(cand.setup, slo.ttft, slo.attainment)
    return Exact(cand, g, g.goodput_rps / (1.0 + headroom)) if g.goodput_rps > 0 else None


def _refine(
    res: ResolvedScenario[DisaggregatedHardware], ordered: list[Candidate], space: Space
) -> tuple[list[Exact], int]:
    """Exact goodputs in screen order until ``EXACT_PLANS`` pass (meet the target rate, with ``--rate``), trying at
    most ``MAX_TRIES_PER_PLAN`` per plan (a candidate the capacity screen passes may miss once queueing counts);
    returns the plans and the number tried."""
    kept: list[Exact] = []
    tried = 0
    for cand in ordered:
        if len(kept) >= EXACT_PLANS or tried >= EXACT_PLANS * MAX_TRIES_PER_PLAN:
            break
        tried += 1
        e = _exact(res, cand, space.headroom)
        if e is not None and (space.rate_rps is None or e.rate_rps >= space.rate_rps):
            kept.append(e)
    return kept, tried


def _latency(setup: PrfaasSetup, threshold: float, rate_rps: float, ttft_slo_s: float) -> tuple[Latency, float]:
    """TTFT of the path mixture at ``rate_rps`` (mean, and P50/P90/P99 each solved on first read:
    :meth:`Latency.solved`) and the share of requests within the TTFT SLO (the attainment the goodput root holds at
    its target; decode runs at the TPOT SLO by construction)."""
    mix = path_mixture(setup, threshold, rate_rps)
    p = mix.offload_fraction
    mean = (p * float(mix.remote.mean_s[0]) if mix.remote is not None else 0.0) + (
        (1 - p) * float(mix.local.mean_s[0]) if mix.local is not None else 0.0
    )
    return Latency.solved(mean, mix.quantile), mix.cdf(ttft_slo_s)


def _price(catalog: Catalog, gpu: str) -> float | None:
    spec = catalog.gpu(gpu)
    return None if spec.price is None else spec.price.typical_usd_per_gpu_hour


def _cost(catalog: Catalog, roles: list[tuple[str, int]]) -> float | None:
    total = 0.0
    for gpu, count in roles:
        price = _price(catalog, gpu)
        if price is None:
            return None
        total += price * count
    return total


def _utilisation(cap: SplitCapacity, rate_rps: float, link_bytes_per_s: float) -> dict[UtilisationKey, float]:
    """Local prefill load ``λ(1−p)E[T_l | L≤t]/N_p``, decode ``λ/Θ_pd-d`` and link ``λE[S; L>t]/B_out`` at
    ``rate_rps`` (``cap`` gives the same quantities at ``Λ_max``)."""
    local = rate_rps * (1 - cap.offload_fraction) / cap.theta_local_prefill_rps if cap.offload_fraction < 1 else 0.0
    link = rate_rps * cap.egress_bytes_per_s / cap.lambda_max_rps / link_bytes_per_s
    return {"prefill": local, "decode": rate_rps / cap.theta_decode_rps, "link": link}


def _plan(
    res: ResolvedScenario[DisaggregatedHardware],
    catalog: Catalog,
    e: Exact,
    rate_target: float | None,
    doc: PrfaasResult,
) -> Plan:
    dep, c, slo = res.hardware.deployment, e.cand, res.scenario.slo
    operating = rate_target if rate_target is not None else e.rate_rps
    check_prfaas(res, c.setup, e.good.threshold_tokens, operating)
    prefill = replace(dep.prefill, count=c.n_prefill)
    decode = replace(dep.decode, count=c.n_decode)
    remote_gpus = c.n_remote * c.setup.spec.tp
    cap = capacity_at(c.setup.capacity, e.good.threshold_tokens)
    out_mean = c.setup.capacity.mean_output_tokens
    ttft, attainment = _latency(c.setup, e.good.threshold_tokens, operating, slo.ttft)
    local = replace(dep, prefill=prefill, decode=decode)
    return Plan(
        deployment=Prfaas(local, c.setup.spec),
        max_num_seqs=res.max_num_seqs,
        num_gpus=c.gpus,
        goodput_rps=e.rate_rps,
        output_tokens_per_s=e.rate_rps * out_mean,
        cost_usd_per_hour=_cost(
            catalog, [(prefill.gpu, prefill.gpus), (decode.gpu, decode.gpus), (c.setup.spec.gpu, remote_gpus)]
        ),
        operating_rate_rps=operating,
        ttft_s=ttft,
        tpot_s=None,
        attainment=attainment,
        utilisation=_utilisation(cap, operating, c.setup.capacity.link_bytes_per_s),
        memory_headroom={},
        binding_constraint=e.good.binding,
        tokens_per_s_per_user=1.0 / slo.tpot,
        exact=True,
        prfaas=doc,
        priced=prfaas_priced_record(res, c.setup.remote_hw, c.setup.routing),
    )


def optimize_prfaas(
    resolved: ResolvedScenario[Any],
    space: Space,
    catalog: Catalog,
    *,
    top: int,
    analyse: bool,
    xpyd: tuple[int, int] | None,
    started: float,
) -> PlanResult:
    """Search the PrfaaS deployments of ``res`` (module docstring); ``analyse`` adds the pick's link ×0.5/×2
    re-searches."""
    check_supported(space)
    res, _ = prfaas_local(resolved)
    setup = prfaas_setup(res)
    splits = local_splits(res.hardware.deployment, space.budget_gpus, xpyd)
    remotes = range(1, setup.spec.count + 1) if space.rate_rps is not None else (setup.spec.count,)
    cands = candidates(res, setup, splits, remotes)
    ordered = _ordered(cands, space.rate_rps)
    exact, tried = _refine(res, ordered, space)
    homo_setup, homo = homogeneous(setup, res, splits)
    if not exact or homo.goodput_rps / (1.0 + space.headroom) > max(e.rate_rps for e in exact):
        tried += _add_homogeneous_split(res, cands, exact, space, homo_setup)
    exact = _top_exact(exact, len(cands), space.rate_rps, top)
    docs = [
        prfaas_result(
            res, e.cand.setup, best=e.good, with_link_sensitivity=analyse and i == 0, homo_best=(homo_setup, homo)
        )
        for i, e in enumerate(exact)
    ]
    plans = tuple(_plan(res, catalog, e, space.rate_rps, d) for e, d in zip(exact, docs, strict=True))
    plans = tuple(replace(p, expected_error=of_prfaas(res, setup.spec.gpu)) for p in plans)
    return PlanResult(
        question=prfaas_question(res, space, setup),
        objective=prfaas_objective(space),
        plans=plans,
        baseline=None,
        pareto=(),
        search=SearchStats(
            candidates=len(cands),
            feasible=sum(1 for c in cands if space.rate_rps is None or c.screen.lambda_max_rps >= space.rate_rps),
            seconds=time.perf_counter() - started,
            refined=tried,
        ),
        inputs=prfaas_inputs(res, space, catalog, setup, splits, remotes),
        assumptions=describe_assumptions(space, catalog, res),
        warnings=prfaas_warnings(res, docs),
        slo_percentile=res.scenario.slo.percentile,
        objective_key=space.objective,
        rate_target_rps=space.rate_rps,
    )


def _add_homogeneous_split(
    res: ResolvedScenario[DisaggregatedHardware],
    cands: list[Candidate],
    exact: list[Exact],
    space: Space,
    homo_setup: PrfaasSetup,
) -> int:
    """Homogeneous PD beats every plan searched so far: search its split too (at the most remote instances), adding
    the plan to ``exact`` when it meets the target; its threshold search includes "offload nothing", so the pick is
    never below homogeneous PD. Returns the candidates tried (0 or 1)."""
    homo_split = (homo_setup.capacity.local.instances, homo_setup.capacity.decode.instances)
    done = {id(e.cand) for e in exact}
    same = [c for c in cands if (c.n_prefill, c.n_decode) == homo_split and id(c) not in done]
    if not same:
        return 0
    e = _exact(res, max(same, key=lambda c: c.n_remote), space.headroom)
    if e is not None and (space.rate_rps is None or e.rate_rps >= space.rate_rps):
        exact.append(e)
    return 1


def _top_exact(exact: list[Exact], searched: int, rate_rps: float | None, top: int) -> list[Exact]:
    """The ``top`` plans in rank order (:func:`_key`); none raises, naming the ``searched`` candidate count."""
    if not exact:
        what = f"{rate_rps:g} req/s" if rate_rps is not None else "the SLO at any rate"
        raise NoFeasiblePlanError(
            f"no PrfaaS deployment of the {searched} searched meets {what}", binding_constraint="TTFT"
        )
    exact.sort(key=lambda e: _key(rate_rps, e.rate_rps, e.cand.gpus))
    return exact[:top]
