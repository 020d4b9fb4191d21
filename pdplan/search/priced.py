"""What an exactly evaluated plan was priced with, recorded in its JSON (``priced``) so that an export can deploy it
as priced and refuse it where the target cannot (issue #25, "a plan records everything it priced").

Plan level: the engine profile (``engine``, ``engine_version``), the routing of each pool, the KV-transfer
granularity and ``transfer_backend``: the KV data plane's backend the transfer was priced with
(:func:`pdplan.transfer.plane_setup.resolve_data_plane` of the scenario's ``kv_backend`` / ``kv_block_tokens``, or of
the optimiser's ``search.kv_backends`` choice, under the engine profile: ``nixl-ucx`` for vLLM's NIXL connector,
``mooncake-te`` for SGLang's), null where the transfer was priced on the link alone (no data plane: ``kv_backend:
none``, or an engine profile with no connector) and for colocated plans (no transfer). Per role (``roles.prefill``
/ ``roles.decode`` / ``roles.colocated``, and a PrfaaS plan's ``roles.remote-prefill``: :func:`prfaas_priced_record`):

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
A PrfaaS plan's remote prefill pool is priced with the scenario's routing too (``pdplan/serving/prfaas/queue.py``:
``N_r`` FCFS instances under the scenario's policy); its KV crosses the ``prfaas.link`` priced on that link alone
(line rate × efficiency and RTT, ``pdplan/serving/prfaas/build.py``), so ``transfer_backend`` names the local
prefill → decode transfer only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pdplan.serving.deployment import Colocated, Disaggregated, local_part
from pdplan.serving.engine_bind import engine_limits
from pdplan.serving.resolve import ResolvedScenario
from pdplan.serving.role_hardware import RoleHardware, instance_budget
from pdplan.transfer.plane_setup import resolve_data_plane

REMOTE_ROLE = "remote-prefill"
"""The role name of a PrfaaS plan's remote prefill cluster (as ``pdplan export`` names it:
:meth:`pdplan.specs.export.ExportPlan.roles`)."""


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
        "transfer_backend": transfer_backend(res) if isinstance(local, Disaggregated) else None,
        "roles": {name: role_record(res, name, hw, local) for name, hw in res.roles},
    }


def prfaas_priced_record(res: ResolvedScenario[Any], remote_hw: RoleHardware, remote_routing: str) -> dict[str, Any]:
    """The ``priced`` object of a PrfaaS plan: the local xPyD's (:func:`priced_record`) plus the remote prefill
    cluster as role ``remote-prefill`` (its settings as a prefill role's, on ``remote_hw``) and its pool's
    ``remote_routing`` (module docstring)."""
    out = priced_record(res)
    local = local_part(res.hardware.deployment)
    out["routing"][REMOTE_ROLE] = remote_routing
    out["roles"][REMOTE_ROLE] = role_record(res, "prefill", remote_hw, local)
    return out


def transfer_backend(res: ResolvedScenario[Any]) -> str | None:
    """The KV data plane's backend the plan's transfer was priced with (module docstring); None: the link alone."""
    plane = resolve_data_plane(res.scenario.kv_backend, res.scenario.kv_block_tokens, res.engine)
    return None if plane is None else plane.backend


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
