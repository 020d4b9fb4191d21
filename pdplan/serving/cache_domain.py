"""The cache domains of a bound deployment and the inputs the prefix cache's hit rates are evaluated with
(:mod:`pdplan.serving.prefix_cache`).

* **Domain**: an xPyD deployment caches on its prefill instances (each attention-DP rank holds its own KV pool), a
  colocated one on its instances. HBM cache = the instance's KV capacity less what its running work holds (a prefill
  instance: the longest prompt it prefills; a colocated one: the mean resident KV of its decoding sequences).
* **Rate**: the hit rates hold at ``res.cache_rate_rps`` (set by the goodput fixed point of
  :mod:`pdplan.evaluation.evaluate` and the optimiser); before it is known, :data:`FIRST_LOAD` of the instances'
  capacity without a cache.
* **Turn duration** (sessions): from the cache's last touch of a turn's blocks to the turn's end, the part of the
  gap between turns that is not think time. An engine frees a finished request's blocks into its LRU as the request
  ends (vLLM's free-block queue, SGLang's radix tree: a running request's blocks are pinned, not evictable), so on a
  colocated instance the gap is the think time alone (duration 0). An xPyD prefill instance releases the prompt's
  blocks when its prefill ends and never sees the outputs, decoded elsewhere: the gap adds the decode,
  ``(E[output] − 1)`` of the decode pool's mean token intervals at the rate (the SLO's TPOT where the pool is past
  its stable range), and the item it keeps is the prompt (:class:`Domain` ``holds_outputs``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np

from pdplan.serving.resolve import ResolvedScenario
from pdplan.serving.role_hardware import RoleHardware, instance_budget
from pdplan.serving.roles import prefill_perf

if TYPE_CHECKING:
    from pdplan.serving.prefix_cache import Domain

FIRST_LOAD = 0.7
"""The share of the no-cache prefill capacity at which hit rates are first evaluated (a starting point only)."""


def role_domain(res: ResolvedScenario[Any], hw: RoleHardware, role: str, instances: int, held_tokens: float) -> Domain:
    from pdplan.serving.prefix_cache import Domain  # lazy: start-up (issue #27)

    mem = instance_budget(hw, role)
    # one domain per attention-DP rank: each rank keeps its own KV pool, 1/dp of the instance's (perf.memory)
    capacity = float(np.ravel(mem.kv_capacity_tokens)[0]) / hw.dp
    per_node = max(1, hw.gpu.gpus_per_node // hw.gpus_per_instance)
    return Domain(
        hbm_tokens=max(capacity - held_tokens, 0.0),
        kv_bytes_per_token=res.model.kv_bytes_per_token(hw.precision.kv_bytes),
        instances=instances,
        instances_per_node=per_node,
        layers=res.model.num_layers,
        gpus_per_instance=hw.tp * hw.pp,
    )


def prefill_domain(res: ResolvedScenario[Any]) -> Domain:
    """The prefill instances of an xPyD deployment (one prompt at a time: the longest prompt is held)."""
    hw = res.hardware.prefill
    count = res.hardware.deployment.prefill.count * hw.dp
    return dataclasses.replace(
        role_domain(res, hw, "prefill", count, float(res.lengths.input_tokens.max())), holds_outputs=False
    )


def colocated_domain(res: ResolvedScenario[Any], resident_tokens: float) -> Domain:
    """The colocated instances (``resident_tokens``: the decoding sequences' mean KV on one instance)."""
    hw = res.hardware.colocated
    return role_domain(res, hw, "colocated", res.hardware.deployment.instance.count, resident_tokens)


def cache_rate(res: ResolvedScenario[Any]) -> float:
    """The request rate the hit rates hold at (module docstring)."""
    if res.cache_rate_rps is not None:
        return res.cache_rate_rps
    servers = 0
    for name, hw in res.roles:
        if name in ("prefill", "colocated"):
            count = (
                res.hardware.deployment.prefill.count if name == "prefill" else res.hardware.deployment.instance.count
            )
            servers = count * hw.dp
            mean_s = float(res.lengths.input_marginal() @ prefill_perf(hw, res.lengths.input_tokens).service_s)
    return FIRST_LOAD * servers / mean_s


def turn_duration_s(res: ResolvedScenario[Any], token_interval_s: float | None = None) -> float:
    """From the cache's last touch of a turn's blocks to the turn's end (module docstring): 0 on a colocated
    instance; after an xPyD prefill, the decode: ``(E[output] − 1)`` token intervals (``token_interval_s``, the
    decode pool's at the rate; None: the SLO's TPOT)."""
    if res.hardware.deployment.mode == "colocated":
        return 0.0
    return decode_duration_s(res, token_interval_s)


def decode_duration_s(res: ResolvedScenario[Any], token_interval_s: float | None = None) -> float:
    """A turn's decode after its xPyD prefill: ``(E[output] − 1)`` token intervals (None: the SLO's TPOT)."""
    interval_s = res.scenario.slo.tpot if token_interval_s is None else token_interval_s
    return max(res.lengths.mean_output() - 1.0, 0.0) * interval_s
