"""What an exactly evaluated plan was priced with, recorded in its JSON (``priced``) so that an export can deploy it
as priced and refuse it where the target cannot (issue #25, "a plan records everything it priced").

Plan level: the engine profile (``engine``, ``engine_version``), the routing of each pool and the KV-transfer
granularity. Per role (``roles.prefill`` / ``roles.decode`` / ``roles.colocated``):

* ``gpu_memory_utilization``: the share of HBM the engine was given (:func:`pdplan.serving.engine_bind.with_engine`:
  vLLM's ``gpu_memory_utilization``, SGLang's ``mem_fraction_static`` from its reserve rule at this role's TP × PP);
* ``max_num_batched_tokens``: the step's token budget (the colocated chunk, else the engine's memory-class budget
  for this GPU, :meth:`pdplan.specs.engine.Limits.for_gpu`);
* ``kv_capacity_tokens``: KV token slots of one instance (:func:`pdplan.perf.memory.instance_memory`, as the serving
  model prices it: :func:`pdplan.serving.role_hardware.instance_budget`);
* ``max_model_len``: the longest context that fits one data-parallel rank's KV,
  ``min(floor(kv_capacity_tokens / dp − s), W)`` with ``W`` the window the workload was priced in (the scenario's
  ``max_model_len`` where set, else ``max_position_embeddings``: pdplan/serving/resolve.py) and ``s`` the token
  slots of a sequence's fixed state (0 for dense and MLA models;
  :attr:`pdplan.perf.memory.InstanceMemory.state_tokens_per_seq`). Each DP rank holds its own sequences' KV
  (pdplan/perf/memory.py), so one sequence can use only its rank's share; an engine refuses to start when one
  sequence of its configured length cannot fit (vLLM: ``max_model_len`` against the KV cache, issue #25);
* for an MoE role at EP > 1: ``moe_kernel`` (:data:`pdplan.types.MoeKernel`; ``deepgemm_wideep`` is DeepEP's
  all-to-all with DeepGEMM experts), ``two_batch_overlap``, ``redundant_experts`` and ``expert_gather``.

Routing (docs/queueing.md): the prefill pool as the deployment's ``routing``; the decode pool and colocated instances
are priced as a random split of the arrivals (``pdplan/serving/disaggregated.py``, ``pdplan/serving/colocated.py``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pdplan.serving.deployment import Colocated, Disaggregated, local_part
from pdplan.serving.engine_bind import engine_limits
from pdplan.serving.resolve import ResolvedScenario
from pdplan.serving.role_hardware import RoleHardware, instance_budget


def priced_record(res: ResolvedScenario[Any]) -> dict[str, Any]:
    """The ``priced`` JSON object of the plan bound in ``res`` (module docstring)."""
    local = local_part(res.hardware.deployment)
    if isinstance(local, Disaggregated):
        routing = {"prefill": local.routing, "decode": "random"}
        granularity: str | None = local.granularity
    else:
        routing = {"colocated": "random"}
        granularity = None
    return {
        "engine": res.engine.engine,
        "engine_version": res.engine.version,
        "routing": routing,
        "granularity": granularity,
        "roles": {name: role_record(res, name, hw, local) for name, hw in res.roles},
    }


def role_record(
    res: ResolvedScenario[Any], name: str, hw: RoleHardware, local: Disaggregated | Colocated
) -> dict[str, Any]:
    """One role's priced settings (module docstring)."""
    mem = instance_budget(hw, name)
    capacity = float(np.ravel(mem.kv_capacity_tokens)[0])
    state = float(np.ravel(mem.state_tokens_per_seq)[0])
    per_rank = math.floor(capacity / hw.dp - state)
    budget = res.chunk_tokens if name == "colocated" else engine_limits(res.engine, hw.gpu).max_batched_tokens
    window = min(hw.model.max_position_embeddings, res.scenario.max_model_len or hw.model.max_position_embeddings)
    out: dict[str, Any] = {
        "gpu_memory_utilization": hw.gpu_memory_utilization,
        "max_num_batched_tokens": (local.chunk_tokens or budget) if isinstance(local, Disaggregated) else budget,
        "kv_capacity_tokens": math.floor(capacity),
        "max_model_len": max(0, min(per_rank, window)),
    }
    if hw.model.moe is not None and hw.ep > 1:
        out |= {
            "moe_kernel": hw.moe_kernel,
            "two_batch_overlap": bool(hw.two_batch_overlap),
            "redundant_experts": hw.redundant_experts,
            "expert_gather": hw.expert_gather,
        }
    return out
