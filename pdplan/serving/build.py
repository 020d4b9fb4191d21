"""The serving model of a bound deployment: one model per kind.

* :class:`~pdplan.serving.deployment.Disaggregated` → :class:`~pdplan.serving.disaggregated.DisaggregatedModel`;
* :class:`~pdplan.serving.deployment.Colocated` → :class:`~pdplan.serving.colocated.ColocatedModel`;
* :class:`~pdplan.serving.deployment.Prfaas` → the model of its local xPyD cluster (what the plain rows of a PrfaaS
  report describe); the remote cluster's analysis is :class:`pdplan.serving.prfaas.model.PrfaasModel`.

``evaluate`` and the optimiser's exact re-evaluation share this path: the scenario is resolved once and each
deployment only bound (:func:`pdplan.serving.resolve.bind`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pdplan.serving.colocated import ColocatedModel, build_colocated
from pdplan.serving.deployment import Deployment
from pdplan.serving.disaggregated import DisaggregatedModel, build_disaggregated
from pdplan.serving.goodput import Goodput, find_goodput
from pdplan.serving.resolve import ColocatedHardware, DisaggregatedHardware, ResolvedScenario, bind
from pdplan.specs.scenario import SloSpec

LocalModel = DisaggregatedModel | ColocatedModel
"""A serving model of one cluster."""


def build_model(res: ResolvedScenario[Any]) -> LocalModel:
    """The serving model of the deployment ``res`` is bound to."""
    hw = res.hardware
    if isinstance(hw, ColocatedHardware):
        return build_colocated(res)
    if isinstance(hw, DisaggregatedHardware):
        return build_disaggregated(res)
    raise TypeError(f"no serving model for hardware {type(hw).__name__}")


def build(res: ResolvedScenario[Any], deployment: Deployment) -> LocalModel:
    """The serving model of ``deployment`` on a resolved scenario."""
    return build_model(bind(res, deployment))


CACHE_RATE_RTOL = 0.01
"""The goodput fixed point with a prefix cache stops when the goodput moves less than this between rounds."""
CACHE_RATE_ROUNDS = 6


def with_cache_rate(res: ResolvedScenario[Any], rate_rps: float) -> ResolvedScenario[Any]:
    """``res`` with the prefix cache's hit rates evaluated at ``rate_rps`` (unchanged without a cache)."""
    if res.cache is None:
        return res
    return dataclasses.replace(res, cache_rate_rps=max(float(rate_rps), 1e-9))


def goodput_model(res: ResolvedScenario[Any], slo: SloSpec) -> tuple[ResolvedScenario[Any], LocalModel, Goodput]:
    """The model whose goodput is reported, and that goodput. Without a prefix cache: the model of ``res``. With
    one, hit rates depend on the rate (a faster stream churns the cache sooner), so the goodput is a fixed point:
    rebuild with the hit rates at the last goodput until it moves less than :data:`CACHE_RATE_RTOL` (at most
    :data:`CACHE_RATE_ROUNDS`; the goodput falls as the rate it is taken at rises, so the rounds close in on it)."""
    model = build_model(res)
    good = find_goodput(model, slo)
    if res.cache is None:
        return res, model, good
    for _ in range(CACHE_RATE_ROUNDS):
        nxt = with_cache_rate(res, good.rate_rps)
        model_n = build_model(nxt)
        good_n = find_goodput(model_n, slo)
        moved = abs(good_n.rate_rps - good.rate_rps) / max(good.rate_rps, 1e-12)
        res, model, good = nxt, model_n, good_n
        if moved < CACHE_RATE_RTOL:
            break
    return res, model, good
