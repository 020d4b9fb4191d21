"""The KV cache a plan was priced with (its ``cache`` setting, docs/prefix_cache.md §8), written in each target's
terms: prefix caching on or off, the routing that keeps a prefix on the instance holding it (``affinity``), and a
host-DRAM tier below HBM. pdplan caches on the prefill instances of an xPyD plan and on the instances of a colocated
one, so only that role gets the settings; a decode role keeps its engine's defaults.

* **Prefix caching.** vLLM ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``; SGLang's radix cache is on
  unless ``--disable-radix-cache`` (SGLang 0.5.11 ``sglang/srt/server_args.py``).
* **Host-DRAM tier.** pdplan prices each caching domain (an instance, or one attention-DP rank of it) with its
  instance's share of a node's DRAM, ``capacity / max(1, ⌊node GPUs / instance GPUs⌋)``
  (:func:`pdplan.serving.prefix_cache.lower_tiers`, :func:`pdplan.serving.cache_domain.role_domain`), at the
  catalogue's node size. vLLM: a colocated role takes ``--kv-offloading-size`` (GiB, over the engine's TP × PP
  ranks); a prefill role cannot (the flag replaces the NIXL connector of its ``--kv-transfer-config``), so its
  transfer config becomes a ``MultiConnector`` of the transfer connector and ``OffloadingConnector`` with
  ``cpu_bytes_to_use`` (bytes over the engine's TP × PP ranks; each data-parallel engine has its own).
  SGLang: ``--enable-hierarchical-cache --hicache-size G`` with G the GB (10⁹ bytes) of one rank's process, the
  share over TP × PP, rounded down (an int flag). Sources: ``engines.*.sources`` in ``pdplan/data/export/targets.yaml``.
  Local-SSD and remote-pool tiers need a storage connector (LMCache, HiCache's storage backends) that the export does
  not write: it says so in one line.
* **Affinity.** Dynamo: the frontend's KV router (``--router-mode kv``) with the caching workers publishing KV events
  (``--kv-events-config``, ``dynamo.sources.kv_router``); the SGLang router's ``cache_aware`` policy for the caching
  pool; vLLM 0.20.1 has no prefix-affine router (``engines.vllm.sources.affinity``): a one-line warning.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from pdplan.errors import SpecError
from pdplan.report.export.common import Chosen, Engine, ExportContext
from pdplan.specs.base import validate_spec
from pdplan.specs.export import PlanCache, PlanRole

Flags = list[tuple[str, str | None]]
GIB = 2**30
GB = 1e9


@dataclass(frozen=True)
class CachePlan:
    """What an export writes of a plan's cache: on the ``role`` that caches (``prefill`` or ``colocated``)."""

    role: str
    prefix_caching: bool
    affinity: bool
    """Prefix caching on and priced with affinity routing: the router must keep a prefix on its instance."""
    host_bytes: float
    """The host-DRAM tier of one caching domain (module docstring); 0 without one."""
    unwritten: tuple[str, ...]
    """Tiers the export does not write (``storage (kind)``)."""


def cache_role(chosen: Chosen) -> str:
    """The role whose instances cache: prefill in an xPyD plan, else colocated."""
    return "prefill" if chosen.plan.mode == "disaggregated" else "colocated"


def cache_setting(chosen: Chosen) -> PlanCache | None:
    """The plan's validated ``cache`` setting; None for a plan priced without one (a workload with no reuse)."""
    if chosen.plan.cache is None:
        return None
    return validate_spec(PlanCache, chosen.plan.cache, f"{chosen.source}: plans[{chosen.rank - 1}].cache")


def cache_affinity(chosen: Chosen) -> bool:
    """Whether the plan was priced with prefix caching on and affinity routing (the router must keep it)."""
    setting = cache_setting(chosen)
    return setting is not None and setting.prefix_caching and setting.routing == "affinity"


def plan_cache(chosen: Chosen, ctx: ExportContext) -> CachePlan | None:
    """The plan's cache as :class:`CachePlan`; None for a plan priced without one (a workload with no reuse)."""
    setting = cache_setting(chosen)
    if setting is None:
        return None
    role_name = cache_role(chosen)
    role = dict(chosen.plan.roles())[role_name]
    facts = ctx.gpus[role.gpu]
    per_node = max(1, (facts.priced_gpus_per_node or facts.gpus_per_node) // role.gpus_per_instance)
    host, unwritten = 0.0, []
    for tier in setting.tier_sizes if setting.prefix_caching else []:
        kind = ctx.storage_kinds.get(tier.storage, "unknown")
        if tier.capacity_bytes <= 0:
            continue
        if kind == "host-dram":
            host += tier.capacity_bytes / per_node
        else:
            unwritten.append(f"{tier.storage} ({kind})")
    return CachePlan(role_name, setting.prefix_caching, cache_affinity(chosen), host, tuple(unwritten))


def cache_flags(cache: CachePlan | None, role_name: str, role: PlanRole, engine: Engine) -> Flags:
    """The caching role's prefix-caching and host-tier flags (module docstring); none for another role."""
    if cache is None or role_name != cache.role:
        return []
    if engine == "vllm":
        out: Flags = [("--enable-prefix-caching" if cache.prefix_caching else "--no-enable-prefix-caching", None)]
        if cache.host_bytes > 0 and role_name == "colocated":
            out.append(("--kv-offloading-size", f"{cache.host_bytes / GIB:.6g}"))
        return out
    if not cache.prefix_caching:
        return [("--disable-radix-cache", None)]
    if cache.host_bytes <= 0:
        return []
    return [("--enable-hierarchical-cache", None), ("--hicache-size", str(hicache_gb(cache, role)))]


def hicache_gb(cache: CachePlan, role: PlanRole) -> int:
    """SGLang's ``--hicache-size``: GB of host pool per rank process, ``⌊host / (TP × PP) / 10⁹⌋``."""
    return math.floor(cache.host_bytes / (role.tp * role.pp) / GB)


def vllm_transfer_config(
    base: dict[str, object], cache: CachePlan | None, ctx: ExportContext, role_name: str
) -> dict[str, object]:
    """A role's ``--kv-transfer-config``: ``base`` (the NIXL connector), or, for a prefill role with a host tier, a
    ``MultiConnector`` of ``base`` and vLLM's offloading connector holding the tier (module docstring)."""
    if cache is None or role_name != "prefill" or cache.role != "prefill" or cache.host_bytes <= 0:
        return base
    offload = {
        "kv_connector": ctx.targets.engines["vllm"].kv_offload_connector,
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": math.floor(cache.host_bytes)},
    }
    return {
        "kv_connector": "MultiConnector",
        "kv_role": base["kv_role"],
        "kv_connector_extra_config": {"connectors": [base, offload]},
    }


def kv_events_flags(cache: CachePlan | None, role_name: str, engine: Engine, ctx: ExportContext) -> Flags:
    """A Dynamo worker's ``--kv-events-config`` where the KV router needs its events: the caching role of an affine
    plan (``dynamo.sources.kv_router``)."""
    if cache is None or not cache.affinity or role_name != cache.role:
        return []
    return [("--kv-events-config", json.dumps(ctx.targets.dynamo.kv_events_config[engine], separators=(",", ":")))]


def check_cache(chosen: Chosen, ctx: ExportContext, engine: Engine) -> None:
    """Refuse (exit 2) a host tier SGLang cannot start with: under 1 GB per rank (``--hicache-size 0`` means a
    ratio of the device pool instead), or a host pool no larger than the device pool (HostKVCache asserts it)."""
    cache = plan_cache(chosen, ctx)
    if engine != "sglang" or cache is None or cache.host_bytes <= 0:
        return
    role = dict(chosen.plan.roles())[cache.role]
    where = f"{chosen.source}: plans[{chosen.rank - 1}]"
    if hicache_gb(cache, role) < 1:
        raise SpecError(
            f"plan {chosen.rank} ({chosen.plan.label}) prices a host-DRAM tier of {cache.host_bytes / GB:.3g} GB per "
            f"instance, under 1 GB per SGLang rank: --hicache-size takes whole GB; export another plan (--rank)",
            source=where,
        )
    device, host = _device_and_host_tokens(chosen, cache.role)
    if device is not None and host is not None and host <= device:
        raise SpecError(
            f"plan {chosen.rank} ({chosen.plan.label}) prices a host-DRAM tier of {host:.0f} tokens per instance, no "
            f"more than its {device:.0f}-token HBM pool; SGLang's HiCache refuses to start unless the host pool is "
            "larger (sglang/srt/mem_cache/memory_pool_host.py): export another plan (--rank)",
            source=where,
        )


def _device_and_host_tokens(chosen: Chosen, role_name: str) -> tuple[float | None, float | None]:
    """(HBM KV tokens of one caching domain as priced, its host-DRAM tier's tokens from the cache report)."""
    priced = chosen.plan.priced_role(role_name)
    role = dict(chosen.plan.roles())[role_name]
    raw = priced.kv_capacity_tokens if priced is not None else None
    device = raw / role.dp if raw is not None else None
    report = (chosen.plan.cache or {}).get("report") or {}
    tiers = [t for t in report.get("tiers") or [] if isinstance(t, dict) and t.get("name") != "hbm"]
    host = sum(float(t.get("capacity_tokens") or 0.0) for t in tiers) if tiers else None
    return device, host


def cache_warnings(chosen: Chosen, ctx: ExportContext, target: str, engine: Engine | None) -> list[str]:
    """One line for each part of the plan's cache the target does not run as priced (module docstring)."""
    cache = plan_cache(chosen, ctx)
    if cache is None:
        return []
    if target == "trtllm":
        return ["the plan's cache setting (prefix caching, affinity routing, tiers) is not written for TensorRT-LLM"]
    out = [
        f"cache tier {tier} is not written: configure its storage connector by hand (vLLM: LMCache; SGLang: "
        "--hicache-storage-backend)"
        for tier in cache.unwritten
    ]
    if cache.affinity and target == "vllm":
        out.append(
            f"the plan was priced with prefix-affinity routing, but vLLM {ctx.targets.engines['vllm'].version} has no "
            "prefix-affine router (its toy proxy and any load balancer spread requests): affinity is not enforced"
        )
    if cache.affinity and target == "dynamo" and engine == "sglang" and cache.role == "prefill":
        out.append(
            "Dynamo's frontend routes SGLang prefill workers without its KV router (its automatic prefill router is "
            "vLLM / TensorRT-LLM only): run a standalone `python -m dynamo.router` on the prefill endpoint by hand "
            "for the priced prefix affinity"
        )
    return out
