"""vLLM's own front for a colocated plan: one ``vllm serve --data-parallel-size z`` over the plan's z instances.

vLLM 0.20.1 (read in its wheel) ships no load balancer for separate ``vllm serve`` processes (its toy proxy pairs
prefillers with decoders), but its data parallelism is one: ``vllm serve MODEL --tensor-parallel-size T
--data-parallel-size z`` on one node starts z engines of T GPUs each behind one API server and port.

* **One engine per instance.** ``vllm/engine/arg_utils.py`` (``EngineArgs.create_engine_config``): without
  ``--data-parallel-size-local`` or a rank, all z ranks are local; ``vllm/v1/engine/utils.py``
  (``get_device_indices``) gives local rank i the devices ``i·T .. i·T + T − 1`` of ``CUDA_VISIBLE_DEVICES``.
  ``vllm/v1/engine/core.py`` (``EngineCoreProc.run_engine_core``): "Non-MoE DP ranks are completely independent, so
  treat like DP=1": each rank is a plain TP-T engine with its own scheduler and ``--max-num-seqs``, which is the
  instance pdplan priced. For an MoE model the ranks run in lockstep (``DPEngineCoreProc``) and its MoE layers are
  sharded over TP × DP (``vllm/config/parallel.py``, ``data_parallel_size``): not z independent instances, so the
  front is not written.
* **The balancer.** ``vllm/v1/engine/core_client.py`` (``DPLBAsyncMPClient.get_core_engine_for_request``): each
  request goes to the engine with the lowest ``4 · waiting + running`` (queue counts the DP coordinator publishes),
  a load-aware split; pdplan prices colocated instances with a random split of the arrivals
  (:mod:`pdplan.report.export.routing`), so this front splits at least as evenly as priced.

The front is written only where the plan's instance is exactly that rank: z > 1 instances of TP only (no PP, no
attention DP, no EP, each checked against the wheel above only for TP per rank), a dense model the catalogue knows,
and z · T GPUs on one node (``--gpus-per-node``, else the catalogue's node). Multi-node data parallelism
(``--data-parallel-size-local``, ``--data-parallel-address``, ``--headless`` on the other nodes) is not written.
These sources, as data: ``engines.vllm.sources.colocated_front`` in ``pdplan/data/export/targets.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdplan.report.export.common import Chosen, ExportContext, gpu_facts

BALANCER = (
    "vLLM's data-parallel load balancer sends each request to the engine with the lowest 4 x waiting + running "
    "(vllm/v1/engine/core_client.py, DPLBAsyncMPClient)"
)


@dataclass(frozen=True)
class DpFront:
    """``size``: the ``--data-parallel-size`` that serves the colocated plan with vLLM's own balancer, or None where
    it does not apply; ``why_not``: the reason in that case (empty otherwise)."""

    size: int | None
    why_not: str = ""


def vllm_dp_front(chosen: Chosen, ctx: ExportContext) -> DpFront:
    """Whether vLLM's data parallelism serves the colocated plan's instances as priced (module docstring)."""
    plan = chosen.plan
    if plan.mode != "colocated":
        return DpFront(None, "not a colocated plan")
    role = plan.roles()[0][1]
    node = gpu_facts(ctx, role).gpus_per_node
    if role.count == 1:
        return DpFront(None, "one instance: no load balancer needed")
    if role.pp > 1 or role.dp > 1 or role.ep > 1:
        why = "its instances are not TP-only (PP, attention DP or EP), for which vLLM's ranks are not checked"
    elif ctx.model_is_moe is None:
        why = "the catalogue does not hold the model, so whether vLLM would run its ranks in lockstep is unknown"
    elif ctx.model_is_moe:
        why = "an MoE model's data-parallel ranks run in lockstep, experts sharded over TP x DP, unlike the priced ones"
    elif role.count * role.gpus_per_instance > node:
        why = f"its {role.count} x {role.gpus_per_instance} GPUs do not fit one node of {node}"
    else:
        return DpFront(role.count)
    return DpFront(None, why)
