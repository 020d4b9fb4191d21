"""A scenario's prefix cache resolved once (:class:`pdplan.serving.prefix_cache.CacheSetup`): whether the workload
reuses KV, the engine mechanism that keeps the tiers below HBM, and the tiers' catalogue entries and sizes.

* The workload reuses KV when it has ``sessions``, a ``shared_prefix`` or a trace with block hashes (Mooncake); any
  other workload has no cache model (each prompt is new), whatever ``cache:`` says.
* ``cache.prefix_caching: false`` turns it off (the engines turn it on by default: vLLM's automatic prefix caching
  since V1, SGLang's RadixAttention; docs/prefix_cache.md).
* Tiers below HBM need an offload mechanism of the scenario's engine (``pdplan/data/kv_offload.yaml``): the first of
  the engine's mechanisms that keeps every kind of tier asked for, with a known inclusion; none is a clear error
  naming what the engine's mechanisms keep.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.specs.cache import CacheSpec
from pdplan.specs.engine import EngineProfile
from pdplan.specs.scenario import Scenario

if TYPE_CHECKING:  # annotations only: the default path loads neither spec (start-up, issue #27)
    from pdplan.serving.prefix_cache import CacheSetup, Reuse
    from pdplan.specs.kv_offload import OffloadMechanism
    from pdplan.specs.storage import StorageSpec

MECHANISM_ENGINE = {"vllm": "vllm", "sglang": "sglang", "trtllm": "trtllm"}
"""Which mechanisms of ``kv_offload.yaml`` an engine profile runs (by the engine the profile describes)."""


def reuses_kv(scenario: Scenario) -> bool:
    """Whether the scenario's workload reuses KV across requests (sessions, shared prefixes, hashed traces)."""
    wl = scenario.workload
    hashed = wl.trace is not None and wl.trace.format == "mooncake"
    return wl.sessions is not None or wl.shared_prefix is not None or hashed


def resolve_reuse(scenario: Scenario) -> Reuse | None:
    """What the scenario's workload reuses (a hashed trace read once), None when every prompt is new."""
    if not reuses_kv(scenario):
        return None
    from pdplan.cache.trace import BlockTrace  # lazy: only a workload that reuses KV (start-up, issue #27)
    from pdplan.io.traces_mooncake import load_mooncake_trace
    from pdplan.serving.prefix_cache import Reuse

    wl = scenario.workload
    trace = None
    if wl.trace is not None and wl.trace.block_tokens is not None:
        raw = load_mooncake_trace(wl.trace.file, wl.trace.block_tokens)
        trace = BlockTrace(raw.hash_offsets, raw.hash_ids, wl.trace.block_tokens, prompt_tokens=raw.input_tokens)
    return Reuse(wl.sessions, wl.shared_prefix, trace)


def cache_setup(
    reuse: Reuse | None, spec: CacheSpec | None, catalog: Catalog, engine: EngineProfile
) -> CacheSetup | None:
    """A deployment's prefix cache (None: the workload reuses nothing, or prefix caching is off)."""
    spec = spec or CacheSpec()
    if reuse is None or not spec.prefix_caching:
        return None
    from pdplan.serving.prefix_cache import CacheSetup  # lazy: only a prefix cache (start-up, issue #27)

    storages = tuple(catalog.storage(t.storage) for t in spec.tiers)
    capacities = tuple(_capacity(t.capacity, s) for t, s in zip(spec.tiers, storages, strict=True))
    mechanism = _mechanism(storages, engine.engine) if storages else None
    return CacheSetup(spec, mechanism, storages, capacities, reuse)


def _capacity(given: float | None, spec: StorageSpec) -> float:
    if given is not None:
        return given
    if spec.capacity_bytes is None:
        raise SpecError(f"storage tier {spec.name} records no capacity: give cache.tiers[].capacity", field="cache")
    return spec.capacity_bytes


def _mechanism(storages: tuple[StorageSpec, ...], engine: str) -> OffloadMechanism:
    """The engine's first mechanism that keeps every tier kind asked for and says whether it is inclusive."""
    from pdplan.io.kv_offload import load_kv_offload  # lazy: start-up (issue #27)

    kinds = {s.kind for s in storages}
    runs = MECHANISM_ENGINE.get(engine)
    offered = [m for m in load_kv_offload().mechanisms if m.engine == runs]
    for m in offered:
        keeps = set(m.tiers.value or ())
        if kinds <= keeps and m.inclusion.value is not None:
            return m
    what = "; ".join(f"{m.name}: {', '.join(m.tiers.value or [])}" for m in offered) or "none"
    raise SpecError(
        f"engine {engine} has no KV-offload mechanism keeping {', '.join(sorted(kinds))} "
        f"(its mechanisms keep: {what}; pdplan/data/kv_offload.yaml)",
        field="cache.tiers",
    )


GIB = 2.0**30


def cache_cost_usd_per_hour(setup: CacheSetup | None, caching_gpus: float, gpus_per_node: int) -> float | None:
    """What the cache's lower tiers cost per hour (``price_usd_per_gib_hour`` of each storage entry × its size): a
    host-DRAM or local-SSD size is per node, so the caching instances (``caching_gpus``: the prefill GPUs of xPyD, the
    colocated GPUs) pay their share of their nodes, ``caching_gpus / gpus_per_node`` nodes' worth; a remote pool is
    paid once. 0 without lower tiers; None when a tier has no price (as a GPU without one)."""
    if setup is None:
        return 0.0
    total = 0.0
    for storage, size_bytes in zip(setup.storages, setup.capacities_bytes, strict=True):
        if storage.price_usd_per_gib_hour is None:
            return None
        nodes = 1.0 if storage.kind == "remote-pool" else caching_gpus / gpus_per_node
        total += storage.price_usd_per_gib_hour * size_bytes / GIB * nodes
    return total
