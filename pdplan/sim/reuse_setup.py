"""A resolved scenario's prefix cache as the simulator's inputs (:mod:`pdplan.sim.reuse`): the caches' sizes, the
tiers' load time, the routing. What ``pdplan simulate`` uses when the workload reuses KV; a library caller may build
the same :class:`~pdplan.sim.reuse.CacheLayout` and load callable with its own figures.

The simulator and the closed form share these INPUTS, not the hit rates under test: the deployment's cache as
resolved once (:func:`pdplan.serving.cache_setup.cache_setup`: on or off, routing, the engine mechanism and its
inclusion, the tiers' catalogue entries and sizes), the cache domain's HBM
(:func:`pdplan.serving.cache_domain.prefill_domain` / :func:`~pdplan.serving.cache_domain.colocated_domain`) and the
tiers' physics (:func:`pdplan.serving.prefix_cache.lower_tiers`: sizes per instance, read paths, latencies).

* **HBM per instance**: the instance's KV capacity less what its running work holds: a disaggregated prefill
  instance the longest prompt it prefills (one prompt at a time); a colocated one the mean resident KV of its
  decoding sequences at the rate, taken from the cached deployment's model
  (:func:`pdplan.serving.colocated_build.resident_tokens`, the closed form's own figure, an input the simulator's
  cache is sized with, not a piece under test; a rate past the mean-field pole leaves no HBM to the cache). It
  depends on the rate, so a run at another rate takes its inputs anew.
* **Tiers** (``cache.tiers``): host DRAM and local SSD are per node, each instance holding its share
  ``capacity / instances per node`` as its own LRU (each engine process keeps its own offload store: vLLM's
  offloading connector, SGLang HiCache; scope ``"instance"``); a remote pool is one LRU of the pool's capacity shared
  by every instance (scope ``"pool"``).
* **Inclusion and layer-wise loading**: the engine mechanism's (``pdplan/data/kv_offload.yaml``).
* **Load time**: :meth:`pdplan.cache.tiers.CacheTier.exposed_load_s` of each lower tier, summed over the tiers a
  request's hit came from (loads from different tiers one after the other), over the prefill compute of the cached
  prompt.
* **Storage read paths** (a ``remote-pool`` tier, read over each node's storage NIC, on xPyD): its reads are queues
  on the nodes' resources (:mod:`pdplan.sim.storage_paths`), not its exposed load. Nodes: the prefill pool's GPUs over
  the prefill GPU's ``gpus_per_node`` (whole nodes, each holding whole simulated instances, else refused) and the
  decode pool's over the decode GPU's; S the tier's ``read_bytes_per_s`` per node (the catalogue's convention), M
  the ``cache.staging_dram`` entry's, B the P→D link's achievable bandwidth per GPU, p the tier's
  ``gpu_path_bytes_per_s``, the tier's latency and layer-wise loading. The policy: ``read_paths: prefill`` every read
  over the prefill node; ``dual`` with ``dual_split: snic-balanced`` DualPath's shorter-queue rule, with ``optimal``
  or a share, a seeded draw with the closed form's share (:func:`pdplan.serving.dual_path_setup.dual_path_setting`:
  the simulator checks that share, not how it is found).
* **Turn placement** (``cache: turn_placement:``, PPD): the scenario's policy, as it is; the decode instances'
  kept KV is their prefix cache, so with prefix caching off no turn finds its history on decode and none is placed
  there (:mod:`pdplan.sim.turn_placement`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pdplan.cache.tiers import CacheTier, Inclusion
from pdplan.errors import SpecError
from pdplan.serving.cache_domain import colocated_domain, prefill_domain
from pdplan.serving.cache_mechanisms import SNIC_KINDS
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.colocated_build import resident_tokens
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.dual_path_setup import dual_path_setting
from pdplan.serving.prefix_cache import CacheSetup, Domain, lower_tiers
from pdplan.serving.resolve import DisaggregatedHardware
from pdplan.sim.deployment import StepModel
from pdplan.sim.reuse import (
    WARMUP_FRACTION,
    CacheLayout,
    CacheRouting,
    ExposedLoadFn,
    ReuseResult,
    SimTier,
    simulate_reuse,
)
from pdplan.sim.storage_paths import ReadPathNodes, ReadPolicy
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.specs.workload import WorkloadSpec


@dataclass(frozen=True, slots=True)
class ReuseInputs:
    """What :func:`pdplan.sim.reuse.simulate_reuse` takes besides the model and the workload."""

    layout: CacheLayout
    exposed_load_s: ExposedLoadFn | None
    routing: CacheRouting
    placement: TurnPlacementSpec | None = None

    def simulate(
        self,
        model: DisaggregatedModel | ColocatedModel,
        workload: WorkloadSpec,
        *,
        rate_rps: float,
        n_requests: int,
        seed: int = 0,
        step: StepModel = "linear",
        warmup_fraction: float = WARMUP_FRACTION,
        turn_latency_s: float | None = 0.0,
    ) -> ReuseResult:
        """:func:`pdplan.sim.reuse.simulate_reuse` of ``model`` serving ``workload`` at ``rate_rps`` with these
        inputs (its layout, routing, exposed load and turn placement); the other arguments are that function's."""
        return simulate_reuse(
            model, workload, self.layout, rate_rps=rate_rps, routing=self.routing, exposed_load_s=self.exposed_load_s,
            n_requests=n_requests, seed=seed, step=step, warmup_fraction=warmup_fraction, placement=self.placement,
            turn_latency_s=turn_latency_s,
        )  # fmt: skip


def reuse_inputs(model: DisaggregatedModel | ColocatedModel, rate_rps: float) -> ReuseInputs:
    """The model's prefix cache (module docstring); caching off where the resolved scenario has no cache."""
    res = model.res
    setup = res.cache
    if setup is None:
        return ReuseInputs(CacheLayout(0.0, prefix_caching=False), None, "affinity")
    domain = _domain(model, rate_rps)
    tiers = lower_tiers(setup, domain)
    sims = tuple(
        SimTier(t.name, t.capacity_tokens, "pool" if s.kind == "remote-pool" else "instance")
        for t, s in zip(tiers, setup.storages, strict=True)
    )
    inclusion: Inclusion = "inclusive" if setup.inclusive else "exclusive"
    storage = read_path_nodes(model, setup, tiers, domain) if isinstance(model, DisaggregatedModel) else None
    layout = CacheLayout(domain.hbm_tokens, sims, inclusion, domain.instances_per_node, storage=storage)
    load = tier_load(tiers, domain.kv_bytes_per_token, domain.layers) if tiers else None
    return ReuseInputs(layout, load, setup.spec.routing, setup.spec.turn_placement)


def read_path_nodes(
    model: DisaggregatedModel, setup: CacheSetup, tiers: list[CacheTier], domain: Domain
) -> ReadPathNodes | None:
    """The first tier behind a storage NIC as read-path queues (module docstring); None without one."""
    found = [(t, s) for t, s in zip(tiers, setup.storages, strict=True) if s.kind in SNIC_KINDS]
    if not found:
        return None
    tier, storage = found[0]
    res = model.res
    hw = res.hardware
    assert isinstance(hw, DisaggregatedHardware)
    g, counts = hw.prefill.gpu.gpus_per_node, hw.deployment
    prefill_gpus = counts.prefill.count * hw.prefill.gpus_per_instance
    per_instance = prefill_gpus // model.x
    decode_gpus = counts.decode.count * hw.decode.gpus_per_instance
    g_decode = hw.decode.gpu.gpus_per_node
    if per_instance * model.x != prefill_gpus or g % per_instance or decode_gpus % g_decode:
        raise SpecError(
            "storage read paths are simulated on whole nodes holding whole prefill instances: "
            f"{model.x} prefill instances on {prefill_gpus} GPUs, {decode_gpus} decode GPUs, {g} GPUs per node",
            field="cache",
        )
    per_node = g // per_instance
    policy, share = _policy(model, setup)
    return ReadPathNodes(
        tier=tier.name,
        prefill_nodes=-(-model.x // per_node),
        decode_nodes=decode_gpus // g_decode,
        prefill_instances_per_node=per_node,
        gpus_per_prefill_instance=per_instance,
        gpus_per_node=g,
        snic_bytes_per_s=storage.read_bytes_per_s,
        dram_bytes_per_s=res.catalog.storage(setup.spec.staging_dram).read_bytes_per_s,
        cnic_bytes_per_s=hw.link.achievable_bytes_per_s,
        pcie_bytes_per_s=storage.gpu_path_bytes_per_s,
        latency_s=tier.latency_s,
        layerwise=tier.layerwise_overlap,
        n_layers=domain.layers,
        policy=policy,
        de_fraction=share,
    )


def _policy(model: DisaggregatedModel, setup: CacheSetup) -> tuple[ReadPolicy, float]:
    """The read-path policy and the decode path's share (module docstring)."""
    if setup.spec.read_paths == "prefill":
        return "prefill", 0.0
    if setup.spec.dual_split == "snic-balanced":
        return "shorter-queue", 0.0
    setting = dual_path_setting(model.res)
    assert setting is not None
    return "split", setting.de_fraction()


def tier_load(tiers: list[CacheTier], kv_bytes_per_token: float, n_layers: int) -> ExposedLoadFn:
    """The exposed load of a hit, summed over the tiers it came from (module docstring)."""

    def exposed_load_s(tokens: Sequence[int], compute_s: float) -> float:
        total = 0.0
        for tier, n in zip(tiers, tokens, strict=True):
            if n:
                total += float(np.ravel(tier.exposed_load_s(float(n), kv_bytes_per_token, compute_s, n_layers))[0])
        return total

    return exposed_load_s


def _domain(model: DisaggregatedModel | ColocatedModel, rate_rps: float) -> Domain:
    """The caching instances' domain: HBM less the running work (module docstring)."""
    if isinstance(model, DisaggregatedModel):
        return prefill_domain(model.res)
    return colocated_domain(model.res, resident_tokens(model, rate_rps))
