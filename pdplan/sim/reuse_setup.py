"""A scenario's ``cache:`` block as the simulator's inputs (:mod:`pdplan.sim.reuse`): the caches' sizes, the tiers'
load time, the routing. What ``pdplan simulate`` uses when the workload reuses KV; a library caller may build the
same :class:`~pdplan.sim.reuse.CacheLayout` and load callable with its own figures.

* **HBM per instance**: the instance's KV capacity (:func:`pdplan.serving.role_hardware.instance_budget`) less its
  mean resident KV: a disaggregated prefill instance holds one prompt at a time (the workload's mean prompt); a
  colocated instance the closed form's mean resident KV at the rate (``decode_kv`` utilisation × capacity; a rate
  past the closed form's stability leaves no HBM to the cache).
* **Tiers** (``cache.tiers``, each a storage catalogue entry and its size): host DRAM and local SSD are per node,
  split into per-instance shares of ``capacity × GPUs per instance / GPUs per node`` (each engine process keeps its
  own offload store: vLLM's offloading connector, SGLang HiCache); a remote pool is one domain shared by every
  instance. Capacities in tokens at the model's KV bytes per token (all layers).
* **Mechanism**: inclusion and layer-wise loading come from the engine's KV-offload mechanism
  (``pdplan/data/kv_offload.yaml``, each fact with its source): vLLM's native offloading connector for host DRAM
  alone, its LMCache connector for SSD or remote tiers; SGLang HiCache; TensorRT-LLM's block reuse with host
  offload. A mechanism that records no value for a fact the tiers need is an error, never a guess.
* **Load time**: :meth:`pdplan.cache.tiers.CacheTier.exposed_load_s` of each lower tier
  (:func:`pdplan.cache.tiers.tier_from_storage`: the medium's node bandwidth shared by the node's instances, then
  the path into one GPU), summed over the tiers a request's hit came from (loads from different tiers one after the
  other), over the prefill compute of the cached prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.cache.tiers import CacheTier, tier_from_storage
from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.io.kv_offload import load_kv_offload
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.role_hardware import RoleHardware, instance_budget
from pdplan.sim.reuse import CacheLayout, CacheRouting, ExposedLoadFn, SimTier
from pdplan.specs.cache import CacheSpec
from pdplan.specs.kv_offload import OffloadMechanism
from pdplan.specs.storage import StorageSpec

_MECHANISMS = {"sglang": "sglang-hicache", "trtllm": "trtllm-kv-reuse-host-offload"}
"""Engine → its KV-offload mechanism in ``pdplan/data/kv_offload.yaml`` (vLLM: see :func:`_mechanism`)."""


@dataclass(frozen=True, slots=True)
class ReuseInputs:
    """What :func:`pdplan.sim.reuse.simulate_reuse` takes besides the model and the workload."""

    layout: CacheLayout
    exposed_load_s: ExposedLoadFn | None
    routing: CacheRouting


def reuse_inputs(
    model: DisaggregatedModel | ColocatedModel, cache: CacheSpec | None, catalog: Catalog, rate_rps: float
) -> ReuseInputs:
    """The scenario's cache (module docstring); ``cache=None`` is the engines' default: caching on, HBM only,
    affinity routing."""
    spec = cache or CacheSpec()
    hw = model.res.hardware.colocated if isinstance(model, ColocatedModel) else model.res.hardware.prefill
    kv_bytes = float(hw.model.kv_bytes_per_token(hw.precision.kv_bytes))
    per_node = max(1, hw.gpu.gpus_per_node // hw.gpus_per_instance)
    hbm = _hbm_tokens(model, hw, rate_rps)
    if not spec.tiers:
        return ReuseInputs(CacheLayout(hbm, prefix_caching=spec.prefix_caching), None, spec.routing)
    stores = [catalog.storage(t.storage) for t in spec.tiers]
    mechanism = _mechanism(model.res.engine.engine, stores)
    inclusion, layerwise = mechanism.inclusion.value, mechanism.layerwise_overlap.value
    if inclusion is None or layerwise is None:
        raise SpecError(
            f"KV-offload mechanism {mechanism.name!r} records no inclusion or layer-wise loading "
            "(pdplan/data/kv_offload.yaml); pdplan cannot simulate its tiers",
            field="cache.tiers",
        )
    sims, tiers = [], []
    for choice, store in zip(spec.tiers, stores, strict=True):
        size = choice.capacity if choice.capacity is not None else store.capacity_bytes
        if size is None:
            raise SpecError(f"tier {store.name!r} records no capacity; give cache.tiers capacity", field="cache.tiers")
        pool = store.kind == "remote-pool"
        tokens = size / kv_bytes if pool else size / kv_bytes * hw.gpus_per_instance / hw.gpu.gpus_per_node
        sims.append(SimTier(store.name, tokens, "pool" if pool else "instance"))
        tiers.append(tier_from_storage(store, capacity_tokens=tokens, sharing=per_node, layerwise_overlap=layerwise))
    layout = CacheLayout(hbm, tuple(sims), inclusion, per_node, spec.prefix_caching)
    return ReuseInputs(layout, tier_load(tiers, kv_bytes, hw.model.num_layers), spec.routing)


def tier_load(tiers: list[CacheTier], kv_bytes_per_token: float, n_layers: int) -> ExposedLoadFn:
    """The exposed load of a hit, summed over the tiers it came from (module docstring)."""

    def exposed_load_s(tokens: object, compute_s: float) -> float:
        total = 0.0
        for tier, n in zip(tiers, tokens, strict=True):  # type: ignore[call-overload]
            if n:
                total += float(tier.exposed_load_s(float(n), kv_bytes_per_token, compute_s, n_layers))
        return total

    return exposed_load_s


def _hbm_tokens(model: DisaggregatedModel | ColocatedModel, hw: RoleHardware, rate_rps: float) -> float:
    """KV capacity less the mean resident KV (module docstring), at least 0."""
    capacity = float(np.ravel(instance_budget(hw, "prefix cache").kv_capacity_tokens)[0])
    if isinstance(model, ColocatedModel):
        used = float(np.ravel(model.utilisation(np.array([rate_rps]))["decode_kv"])[0])
        used = min(used, 1.0) if np.isfinite(used) else 1.0  # beyond the closed form's stability: KV full
        resident = used * model.decode.kv_capacity_tokens
    else:
        resident = float(model.res.lengths.mean_input())
    return max(capacity - resident, 0.0)


def _mechanism(engine: str, stores: list[StorageSpec]) -> OffloadMechanism:
    """The engine's KV-offload mechanism for these tiers (module docstring)."""
    kinds = {s.kind for s in stores}
    name = _MECHANISMS.get(engine)
    if engine == "vllm":
        name = "vllm-offloading-connector" if kinds <= {"host-dram"} else "vllm-lmcache-connector"
    if name is None:
        raise SpecError(f"no KV-offload mechanism recorded for engine {engine!r}", field="cache.tiers")
    mechanism = load_kv_offload().get(name)
    offered = set(mechanism.tiers.value or [])
    if not kinds <= offered:
        raise SpecError(
            f"{mechanism.display_name} keeps {', '.join(sorted(offered))}; the scenario asks for "
            f"{', '.join(sorted(kinds - offered))}",
            field="cache.tiers",
        )
    return mechanism
