"""``evaluate`` of a scenario with a ``prfaas:`` block: the plan's ``prfaas`` object (docs/architecture.md §4) and the
comparisons the reports print.

* the threshold: ``prfaas.threshold`` when given, else the goodput-maximising one (a log-spaced scan, then a
  bounded scalar search, :func:`.queue.search_goodput_threshold`); the capacity-only optimum (Eq. 7) is reported
  beside it;
* the baselines on the same local GPUs, with the same curves and queueing: **homogeneous PD** (nothing
  offloaded; its local instances re-split to their best prefill/decode ratio when interchangeable) and
  **naive heterogeneous PD** (everything prefilled remotely; the local prefill instances become decode instances
  when they are the same GPU × TP as the decode ones, as in the paper's 4/—/8);
* link sensitivity: threshold and goodput re-searched with the link bandwidth halved and doubled.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from pdplan.serving.prfaas.build import PrfaasSetup, prfaas_local, prfaas_setup
from pdplan.serving.prfaas.capacity import capacity_at, search_threshold
from pdplan.serving.prfaas.queue import (
    STABLE,
    PathGoodput,
    goodput,
    path_mixture,
    percentile_s,
    search_goodput_threshold,
)
from pdplan.serving.prfaas.result import LinkSensitivity, PrfaasResult, RemoteCluster
from pdplan.serving.resolve import DisaggregatedHardware, ResolvedScenario

THRESHOLD_XATOL_TOKENS = 256.0
"""Goodput threshold search tolerance (tokens): on the case study goodput moves < 0.1 % within 256 tokens of t*."""
LINK_SCALES = (0.5, 2.0)


def best_goodput(setup: PrfaasSetup, ttft_s: float, attainment: float) -> PathGoodput:
    if setup.spec.threshold is not None:
        return goodput(setup, float(setup.spec.threshold), ttft_s, attainment)
    return search_goodput_threshold(setup, ttft_s, attainment, THRESHOLD_XATOL_TOKENS)


def _same_roles(res: ResolvedScenario[DisaggregatedHardware]) -> bool:
    """Local prefill and decode instances are the same GPU × TP (so a baseline may re-split them)."""
    return res.hardware.prefill.label == res.hardware.decode.label


def _naive_setup(setup: PrfaasSetup, res: ResolvedScenario[DisaggregatedHardware]) -> PrfaasSetup:
    cap = setup.capacity
    extra = cap.local.instances if _same_roles(res) else 0
    naive = replace(
        cap,
        local=replace(cap.local, instances=0),
        decode=replace(cap.decode, instances=cap.decode.instances + extra),
    )
    return replace(setup, capacity=naive, spec=setup.spec.model_copy(update={"threshold": 1}))


def homogeneous(
    setup: PrfaasSetup, res: ResolvedScenario[DisaggregatedHardware], splits: list[tuple[int, int]] | None = None
) -> tuple[PrfaasSetup, PathGoodput]:
    """Homogeneous PD: nothing offloaded, on the local split of ``splits`` with the most goodput (default: every
    prefill/decode split of the local instances when they are interchangeable, else the setup's own).

    Branch and bound: splits in decreasing capacity (Eq. 6 with ``p = 0``), stopping once a split's capacity
    (× the lattice's stability margin, the most goodput can reach) is below the best goodput found: exact, and
    usually one or two goodput roots."""
    slo = res.scenario.slo
    cap = setup.capacity
    total = cap.local.instances + cap.decode.instances
    if splits is None:
        same = _same_roles(res) and total >= 2
        splits = [(n, total - n) for n in range(1, total)] if same else [(cap.local.instances, cap.decode.instances)]
    pinned = setup.spec.model_copy(update={"threshold": int(cap.law.upper) + 1})
    trials = []
    for n_p, n_d in splits:
        c = replace(
            cap,
            remote=replace(cap.remote, instances=0),
            local=replace(cap.local, instances=n_p),
            decode=replace(cap.decode, instances=n_d),
        )
        trials.append((capacity_at(c, c.law.upper).lambda_max_rps, replace(setup, capacity=c, spec=pinned)))
    trials.sort(key=lambda x: -x[0])
    first = trials[0][1]  # splits is never empty: the setup's own split at least
    best = (first, goodput(first, cap.law.upper, slo.ttft, slo.attainment))
    for lam, trial in trials[1:]:
        if lam * STABLE <= best[1].goodput_rps:
            break
        g = goodput(trial, cap.law.upper, slo.ttft, slo.attainment)
        if g.goodput_rps > best[1].goodput_rps:
            best = (trial, g)
    return best


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.inf


def _at(setup: PrfaasSetup, g: PathGoodput, q: float) -> dict[str, float]:
    """TTFT percentiles per path and egress at the goodput rate."""
    cap = capacity_at(setup.capacity, g.threshold_tokens)
    rate = g.goodput_rps
    egress = rate * setup.capacity.law.tail(setup.capacity.remote.curves.kv_bytes, g.threshold_tokens)
    if rate <= 0:
        return {"remote": math.nan, "local": math.nan, "all": math.nan, "egress": 0.0, "p": cap.offload_fraction}
    mix = path_mixture(setup, g.threshold_tokens, rate)
    return {
        "remote": percentile_s(mix, "remote", q),
        "local": percentile_s(mix, "local", q),
        "all": percentile_s(mix, "all", q),
        "egress": egress,
        "p": cap.offload_fraction,
    }


def evaluate_prfaas(resolved: ResolvedScenario[Any]) -> PrfaasResult:
    """The PrfaaS analysis of one scenario's deployment (:class:`~pdplan.serving.prfaas.result.PrfaasResult`)."""
    res, _ = prfaas_local(resolved)
    return prfaas_result(res, prfaas_setup(res))


def link_sensitivity(setup: PrfaasSetup, ttft_s: float, attainment: float) -> tuple[LinkSensitivity, ...]:
    """Threshold and goodput re-searched with the link bandwidth scaled by each of :data:`LINK_SCALES`."""
    out = []
    for scale in LINK_SCALES:
        scaled = replace(
            setup, capacity=replace(setup.capacity, link_bytes_per_s=setup.capacity.link_bytes_per_s * scale)
        )
        g = best_goodput(scaled, ttft_s, attainment)
        out.append(LinkSensitivity(scale, g.threshold_tokens, g.goodput_rps))
    return tuple(out)


def prfaas_result(
    res: ResolvedScenario[DisaggregatedHardware],
    setup: PrfaasSetup,
    *,
    best: PathGoodput | None = None,
    with_link_sensitivity: bool = True,
    homo_best: tuple[PrfaasSetup, PathGoodput] | None = None,
) -> PrfaasResult:
    """The analysis of ``setup`` (its instance counts may differ from ``res``'s deployment, as in a search):
    ``best`` is its goodput when already found; ``with_link_sensitivity=False`` leaves out the link ×0.5/×2
    re-searches (none); ``homo_best``: homogeneous PD when already found (:func:`homogeneous`)."""
    slo = res.scenario.slo
    q = slo.percentile / 100.0
    best = best if best is not None else best_goodput(setup, slo.ttft, slo.attainment)
    at = _at(setup, best, q)
    eq7 = search_threshold(setup.capacity)
    homo_setup, homo = homo_best if homo_best is not None else homogeneous(setup, res)
    naive = goodput(_naive_setup(setup, res), setup.capacity.law.lower - 1.0, slo.ttft, slo.attainment)
    sensitivity = link_sensitivity(setup, slo.ttft, slo.attainment) if with_link_sensitivity else ()
    link_bps = setup.capacity.link_bytes_per_s
    return PrfaasResult(
        threshold_tokens=best.threshold_tokens,
        offload_fraction=at["p"],
        link_utilization=at["egress"] / link_bps,
        remote_instances=setup.capacity.remote.instances,
        remote_ttft_p90_s=at["remote"],
        local_ttft_p90_s=at["local"],
        ttft_p90_s=at["all"],
        threshold_searched=setup.spec.threshold is None,
        remote=RemoteCluster(setup.spec.gpu, setup.spec.tp, setup.capacity.remote.instances),
        link=setup.link_name,
        rtt_s=setup.rtt_s,
        goodput_rps=best.goodput_rps,
        binding_constraint=best.binding,
        stability_limit_rps=best.stability_rps,
        egress_gbps=at["egress"] * 8 / 1e9,
        homogeneous_goodput_rps=homo.goodput_rps,
        homogeneous_split=(homo_setup.capacity.local.instances, homo_setup.capacity.decode.instances),
        naive_goodput_rps=naive.goodput_rps,
        gain_vs_homogeneous=_ratio(best.goodput_rps, homo.goodput_rps),
        gain_vs_naive=_ratio(best.goodput_rps, naive.goodput_rps),
        capacity_threshold_tokens=eq7.threshold_tokens,
        capacity_lambda_max_rps=eq7.lambda_max_rps,
        capacity_binding=eq7.binding,
        link_sensitivity=sensitivity,
        sources=dict(setup.sources),
    )
