"""``evaluate`` of a scenario with a ``prfaas:`` block: the plan's ``prfaas`` object (ARCHITECTURE §4) and the
comparisons the reports print.

* the threshold: ``prfaas.threshold`` when given, else the goodput-maximising one (bounded scalar search,
  :func:`.queue.search_goodput_threshold`); the capacity-only optimum (Eq. 7) is reported beside it;
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

from pdplan.serving.inputs import ResolvedScenario
from pdplan.serving.prfaas.build import PrfaasSetup, prfaas_setup
from pdplan.serving.prfaas.capacity import capacity_at, search_threshold
from pdplan.serving.prfaas.queue import PathGoodput, goodput, path_mixture, percentile_s, search_goodput_threshold

THRESHOLD_XATOL_TOKENS = 256.0
"""Goodput threshold search tolerance (tokens): on the case study goodput moves < 0.1 % within 256 tokens of t*."""
LINK_SCALES = (0.5, 2.0)


def _best(setup: PrfaasSetup, ttft_s: float, attainment: float) -> PathGoodput:
    if setup.spec.threshold is not None:
        return goodput(setup, float(setup.spec.threshold), ttft_s, attainment)
    return search_goodput_threshold(setup, ttft_s, attainment, THRESHOLD_XATOL_TOKENS)


def _same_roles(res: ResolvedScenario) -> bool:
    """Local prefill and decode instances are the same GPU × TP (so a baseline may re-split them)."""
    return res.prefill is not None and res.decode is not None and res.prefill.label == res.decode.label


def _naive_setup(setup: PrfaasSetup, res: ResolvedScenario) -> PrfaasSetup:
    cap = setup.capacity
    extra = cap.local.instances if _same_roles(res) else 0
    naive = replace(
        cap,
        local=replace(cap.local, instances=0),
        decode=replace(cap.decode, instances=cap.decode.instances + extra),
    )
    return replace(setup, capacity=naive, spec=setup.spec.model_copy(update={"threshold": 1}))


def _homogeneous_setup(setup: PrfaasSetup, res: ResolvedScenario) -> PrfaasSetup:
    """Nothing offloaded; with interchangeable local instances, the best prefill/decode split of them (Eq. 8)."""
    cap = setup.capacity
    homo = replace(cap, remote=replace(cap.remote, instances=0))
    total = cap.local.instances + cap.decode.instances
    if _same_roles(res) and total >= 2:
        splits = [
            replace(homo, local=replace(cap.local, instances=n_p), decode=replace(cap.decode, instances=total - n_p))
            for n_p in range(1, total)
        ]
        homo = max(splits, key=lambda c: capacity_at(c, c.law.upper).lambda_max_rps)
    return replace(setup, capacity=homo, spec=setup.spec.model_copy(update={"threshold": int(cap.law.upper) + 1}))


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


def evaluate_prfaas(res: ResolvedScenario) -> dict[str, Any]:
    """The ``prfaas`` document of one scenario (keys in ARCHITECTURE §4, then the report's extras)."""
    setup = prfaas_setup(res)
    slo = res.scenario.slo
    q = slo.percentile / 100.0
    best = _best(setup, slo.ttft, slo.attainment)
    at = _at(setup, best, q)
    eq7 = search_threshold(setup.capacity)
    homo_setup = _homogeneous_setup(setup, res)
    homo = goodput(homo_setup, setup.capacity.law.upper, slo.ttft, slo.attainment)
    naive = goodput(_naive_setup(setup, res), setup.capacity.law.lower - 1.0, slo.ttft, slo.attainment)
    sensitivity = []
    for scale in LINK_SCALES:
        scaled = replace(
            setup, capacity=replace(setup.capacity, link_bytes_per_s=setup.capacity.link_bytes_per_s * scale)
        )
        g = _best(scaled, slo.ttft, slo.attainment)
        sensitivity.append({"link_scale": scale, "threshold_tokens": g.threshold_tokens, "goodput_rps": g.goodput_rps})
    link_bps = setup.capacity.link_bytes_per_s
    return {
        "threshold_tokens": best.threshold_tokens,
        "offload_fraction": at["p"],
        "link_utilization": at["egress"] / link_bps,
        "remote_instances": setup.capacity.remote.instances,
        "remote_ttft_p90_s": at["remote"],
        "local_ttft_p90_s": at["local"],
        "ttft_p90_s": at["all"],
        "threshold_searched": setup.spec.threshold is None,
        "remote": {"gpu": setup.spec.gpu, "tp": setup.spec.tp, "count": setup.spec.count},
        "link": setup.link_name,
        "rtt_s": setup.rtt_s,
        "goodput_rps": best.goodput_rps,
        "binding_constraint": best.binding,
        "stability_limit_rps": best.stability_rps,
        "egress_gbps": at["egress"] * 8 / 1e9,
        "homogeneous_goodput_rps": homo.goodput_rps,
        "homogeneous_split": [homo_setup.capacity.local.instances, homo_setup.capacity.decode.instances],
        "naive_goodput_rps": naive.goodput_rps,
        "gain_vs_homogeneous": _ratio(best.goodput_rps, homo.goodput_rps),
        "gain_vs_naive": _ratio(best.goodput_rps, naive.goodput_rps),
        "capacity_threshold_tokens": eq7.threshold_tokens,
        "capacity_lambda_max_rps": eq7.lambda_max_rps,
        "capacity_binding": eq7.binding,
        "link_sensitivity": sensitivity,
        "sources": setup.sources,
    }
