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
attention DP, no EP, each checked against the wheel above only for TP per rank), a dense model the catalogue knows.
Its z · T GPUs on one node (``--gpus-per-node``, else the catalogue's node) run one ``vllm serve``; on more, the
same front spans the nodes as the wide instances below do: c = ⌊G / T⌋ engines fit a node, so m = ⌈z / c⌉ nodes,
node 0 serving the API and balancing over all z engines, the others ``--headless``. These sources, as data:
``engines.vllm.sources.colocated_front`` and ``multinode_dp`` in ``pdplan/data/export/targets.yaml``.

**Ranks a node** (:func:`node_split`). z ranks over m nodes: q, r = divmod(z, m); nodes 0..r − 1 hold q + 1 ranks,
the others q (an even split when r = 0: the case vLLM's docs show). vLLM 0.20.1 runs any such split
(read in the wheel): ``vllm/v1/engine/utils.py`` ``launch_core_engines`` makes rank 0's node handshake with every
engine, ``CoreEngine(index=i, local=(i < local_engine_count))`` for i < ``--data-parallel-size`` (its own
``--data-parallel-size-local`` engines are ranks 0..L₀ − 1, the rest may come from any node); a ``--headless`` node
(``vllm/entrypoints/cli/serve.py`` ``run_headless``) starts its ``data_parallel_size_local`` engines as ranks
``data_parallel_rank`` .. + L − 1 (``CoreEngineProcManager(start_index=data_parallel_rank, local_start_index=0)``),
its rank being ``--data-parallel-start-rank`` (``vllm/engine/arg_utils.py`` ``create_engine_config``). Nothing there
asks every node for the same L: ``ParallelConfig`` checks only L ≤ ``data_parallel_size`` (``vllm/config/
parallel.py``), ``run_headless`` L > 0, and ``nnodes_within_dp`` (which divides by L) is read only with
``--nnodes`` > 1, which is not written. So node j writes L_j = q + [j < r] and start rank Σ_{i<j} L_i
= j·q + min(j, r): the ranks 0..z − 1, each once. Every node is given the GPUs of q + [r > 0] ranks
(``CUDA_VISIBLE_DEVICES``): a node of q ranks uses the first q·T (``get_device_indices``).

**One instance over several nodes** (:func:`spans_nodes`, :func:`node_flags`). An instance of d > 1 data-parallel
ranks of TP T (attention DP with EP, as priced) wider than a node of G GPUs runs on m = ⌈d·T / G⌉ nodes (T ≤ G, no
PP, and m = ⌈d / ⌊G / T⌋⌋, so that no node holds more ranks than fit), split as above, one ``vllm serve`` a node:
every node ``--data-parallel-size d --data-parallel-size-local L_j --data-parallel-address FIRST
--data-parallel-rpc-port R``; node 0 serves the API on the instance's port, node j > 0 runs ``--headless
--data-parallel-start-rank`` (vLLM 0.20.1 ``vllm/engine/arg_utils.py`` ``create_engine_config``; a start rank
without ``--headless`` would turn on hybrid load balancing, an API server a node, so node 0 writes none;
``vllm/entrypoints/cli/serve.py`` ``run_headless``). ``engines.vllm.sources.multinode_dp`` in targets.yaml.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdplan.report.export.common import Chosen, ExportContext, GpuFacts, gpu_facts
from pdplan.specs.export import PlanRole

Flags = list[tuple[str, str | None]]

BALANCER = (
    "vLLM's data-parallel load balancer sends each request to the engine with the lowest 4 x waiting + running "
    "(vllm/v1/engine/core_client.py, DPLBAsyncMPClient)"
)


SPANS_WORDS = "data-parallel ranks (DP > 1, no PP, whole ranks on each node)"
"""Which instances vLLM runs over several nodes (:func:`spans_nodes`), for the refusal of the others."""


@dataclass(frozen=True)
class DpFront:
    """``size``: the ``--data-parallel-size`` that serves the colocated plan with vLLM's own balancer, or None where
    it does not apply; ``why_not``: the reason in that case (empty otherwise); ``nodes``: the nodes it spans, each
    with ``size / nodes`` engines."""

    size: int | None
    why_not: str = ""
    nodes: int = 1


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
    elif role.gpus_per_instance > node:
        why = f"one instance's {role.gpus_per_instance} GPUs do not fit one node of {node}"
    else:
        return DpFront(role.count, nodes=_nodes(role.count, role.gpus_per_instance, node))
    return DpFront(None, why)


def _nodes(count: int, gpus: int, node: int) -> int:
    """Nodes of ``node`` GPUs that ``count`` ranks of ``gpus`` GPUs need, whole ranks on each: ⌈count / ⌊node /
    gpus⌋⌉ (``gpus`` ≤ ``node``)."""
    return -(-count // (node // gpus))


@dataclass(frozen=True)
class NodeSplit:
    """``ranks`` data-parallel ranks over ``nodes`` nodes (module docstring, "Ranks a node"): q, r = divmod; nodes
    0..r − 1 hold q + 1, the others q."""

    ranks: int
    nodes: int

    @property
    def most(self) -> int:
        """The ranks of node 0, the most any node holds."""
        return -(-self.ranks // self.nodes)

    def local(self) -> str:
        """``--data-parallel-size-local`` of node ``NODE`` > 0 (a shell expansion where the split is uneven)."""
        q, r = divmod(self.ranks, self.nodes)
        return str(q) if r == 0 else f'"$(({q} + (NODE < {r})))"'

    def start(self) -> str:
        """``--data-parallel-start-rank`` of node ``NODE`` > 0: NODE·q + min(NODE, r), as shell arithmetic."""
        q, r = divmod(self.ranks, self.nodes)
        return f'"$((NODE * {q}))"' if r == 0 else f'"$((NODE * {q} + (NODE < {r} ? NODE : {r})))"'

    def words(self) -> str:
        """``4 a node`` or ``3 on nodes 0..0, 2 on the rest``."""
        q, r = divmod(self.ranks, self.nodes)
        return f"{q} a node" if r == 0 else f"{q + 1} on nodes 0..{r - 1}, {q} on the rest"


def node_split(ranks: int, nodes: int) -> NodeSplit:
    """:class:`NodeSplit` of ``ranks`` over ``nodes``."""
    return NodeSplit(ranks, nodes)


def spans_nodes(role: PlanRole, facts: GpuFacts) -> bool:
    """Whether vLLM runs one instance of ``role`` over several nodes as its data-parallel ranks (module docstring):
    wider than a node, DP > 1, no PP, each rank within a node, and its ⌈GPUs / G⌉ nodes hold its ranks whole."""
    gpus, node = role.gpus_per_instance, facts.gpus_per_node
    if gpus <= node or role.dp <= 1 or role.pp > 1 or role.tp > node:
        return False
    return _nodes(role.dp, role.tp, node) == -(-gpus // node)


def node_flags(engine_flags: Flags, local: str, head: str, rpc_port: int, start_rank: str) -> Flags:
    """One node's ``vllm serve`` flags for its ``local`` data-parallel ranks (an instance's, or a colocated front's
    instances; a number, or a shell expansion of ``NODE``): ``engine_flags`` with ``--data-parallel-size-local``,
    ``--data-parallel-address`` ``head`` and ``--data-parallel-rpc-port`` after ``--data-parallel-size``;
    ``start_rank`` (a shell expansion, or empty on node 0) adds ``--headless`` first and
    ``--data-parallel-start-rank`` (module docstring)."""
    at = next(i for i, (flag, _) in enumerate(engine_flags) if flag == "--data-parallel-size") + 1
    ranks: Flags = [
        ("--data-parallel-size-local", local),
        ("--data-parallel-address", head),
        ("--data-parallel-rpc-port", str(rpc_port)),
    ]
    if start_rank:
        ranks.append(("--data-parallel-start-rank", start_rank))
    out = [*engine_flags[:at], *ranks, *engine_flags[at:]]
    return [("--headless", None), *out] if start_rank else out
