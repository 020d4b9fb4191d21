"""Memory of one instance: weights per GPU, activation workspace, KV-cache token capacity, max sequences.

Per GPU of an instance with tensor parallelism t and pipeline parallelism p (docs/architecture.md §2):

    usable      = HBM · gpu_memory_utilization                    (vLLM's budget for weights + activations + KV)
    weights     = total_params · b_w / (t · p)                    (every weight sharded; vocab-parallel embedding)
    workspace   = T_max · (4·h + 2·I/t) · b_a                     (peak activations of a T_max-token forward pass:
                                                                   residual, norm output, QKV/attention output and
                                                                   the gate/up intermediate; vLLM sizes its profile run
                                                                   with max_num_batched_tokens = T_max)
    kv_free     = usable − weights − workspace                    (must be > 0, else the configuration does not fit)

An engine whose fraction already leaves the activations outside its budget (SGLang: ``mem_fraction_static`` is
"(model weights + KV cache pool) / GPU memory capacity", activations and CUDA-graph buffers sit in the reserve
``1 − mem_fraction_static``; sgl-project/sglang ``python/sglang/srt/server_args.py``) has
``kv_free = usable − weights``: the workspace is reported but not subtracted a second time
(``workspace_in_budget=False``).

With attention data parallelism d and expert parallelism e (:mod:`pdplan.perf.expert_parallel`) an instance has
t·d·p GPUs: the non-expert weights are replicated over the d ranks and sharded t ways within one, the routed experts
(E + r slots, r redundant EPLB copies) are spread over all t·d GPUs of a stage (E/e experts per GPU, each split
moe_tp = t·d/e ways), so

    weights     = (W_dense / t + W_experts · (E + r)/E / (t · d)) / p

which never rises with e and falls with d. ZeRO-Prefill's weight gather (``expert_gather``) adds a double buffer of
one MoE layer's experts (the layer computing and the next one arriving) to the workspace. Each DP rank holds its own
sequences' KV, sharded over its t GPUs as below, so the KV capacity multiplies by d.

KV bytes per token *per instance* = kv_bytes_per_token · r, with r the replication factor: GQA ranks beyond
n_kv heads hold copies (r = t / n_kv when t > n_kv), MLA's latent cache is not sharded (r = t). So

    kv_capacity_tokens = t · p · kv_free / (kv_bytes_per_token · r)

Hybrid and sliding-window models also hold a fixed state per sequence whatever its length (linear-attention
recurrent + conv state, the window layers' K/V: :meth:`pdplan.specs.model.ModelSpec.sequence_state_bytes`),
S = t · sequence_state_bytes(t) bytes per instance (per DP rank). A sequence of L tokens then holds L·k + S bytes
(k = kv_bytes_per_token · r), so N sequences fit iff Σ_i (L_i·k + S) ≤ kv_capacity_tokens · k, i.e.

    Σ_i (L_i + s) ≤ kv_capacity_tokens,   s = state_tokens_per_seq = S / k

every sequence costs s token slots on top of its context (Qwen3-Next, bf16 KV, t = 1: 77,266,944 / 24,576 =
3,144 slots). Token-based KV checks add s per sequence; dense and MLA models have s = 0 and are unchanged.
The memory utilisation and T_max a caller leaves out are the serving defaults it passes
(:class:`~pdplan.specs.serving_defaults.ServingDefaults`, ``pdplan/data/serving_defaults.yaml`` with sources).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.specs.model import ModelSpec
from pdplan.specs.serving_defaults import ServingDefaults
from pdplan.types import ArrayLike, FloatArray


@dataclass(frozen=True)
class InstanceMemory:
    """Memory budget of one instance (arrays broadcast over candidates). Bytes are per GPU unless named."""

    usable_bytes: FloatArray
    weight_bytes: FloatArray
    workspace_bytes: FloatArray
    kv_free_bytes: FloatArray
    kv_bytes_per_token_instance: FloatArray
    kv_capacity_tokens: FloatArray
    fits: npt.NDArray[np.bool_]
    gpus_per_instance: FloatArray
    state_bytes_per_seq_instance: FloatArray | float = 0.0  # S of the module docstring, per DP rank

    @property
    def state_tokens_per_seq(self) -> FloatArray:
        """s = S / k: the token slots a sequence's fixed state takes (module docstring; 0 for dense and MLA)."""
        return np.asarray(self.state_bytes_per_seq_instance / self.kv_bytes_per_token_instance, dtype=np.float64)

    def max_sequences(self, context_tokens: ArrayLike) -> FloatArray:
        """Sequences that fit at mean context ``context_tokens``, kv_capacity_tokens / (c + s), each paying its fixed
        state (0 where the configuration does not fit)."""
        per_seq = np.asarray(context_tokens, dtype=np.float64) * self.kv_bytes_per_token_instance
        per_seq = per_seq + self.state_bytes_per_seq_instance
        total_free = self.kv_free_bytes * self.gpus_per_instance
        result: FloatArray = np.where(self.fits, np.floor(total_free / per_seq), 0.0)
        return result


def kv_replication(model: ModelSpec, tp: ArrayLike) -> FloatArray:
    """How many copies of each KV head an instance holds: max(1, t/n_kv) for GQA/MHA, t for MLA."""
    t = np.asarray(tp, dtype=np.float64)
    if model.mla is not None:
        return t
    return np.maximum(1.0, t / model.num_kv_heads)


def instance_memory(
    model: ModelSpec,
    memory_bytes: float,
    *,
    defaults: ServingDefaults,
    tp: ArrayLike = 1,
    pp: ArrayLike = 1,
    weight_dtype_bytes: float = 2.0,
    kv_dtype_bytes: float = 2.0,
    act_dtype_bytes: float = 2.0,
    gpu_memory_utilization: float | None = None,
    max_num_batched_tokens: int | None = None,
    kv_free_fraction: float = 1.0,
    dp: int = 1,
    ep: int = 1,
    redundant_experts: int = 0,
    expert_gather: bool = False,
    workspace_in_budget: bool = True,
) -> InstanceMemory:
    """Memory budget per GPU and KV capacity per instance (formulas in the module docstring); the memory utilisation
    and the workspace's token budget left as None are ``defaults``'. ``workspace_in_budget=False``: the usable
    share holds weights and KV only (SGLang's ``mem_fraction_static``, module docstring).

    Example: Llama-3.1-70B BF16 on one 80 GiB H100 (t=p=1): weights 141 GB > 77 GB usable → does not fit.
    """
    util = defaults.gpu_memory_utilization if gpu_memory_utilization is None else gpu_memory_utilization
    t_max = defaults.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    t, p = np.broadcast_arrays(np.asarray(tp, dtype=np.float64), np.asarray(pp, dtype=np.float64))
    usable = np.full_like(t, memory_bytes * util)
    del ep  # the expert bytes per GPU depend on t·d only (module docstring); ep only sets how they are split
    expert_bytes = expert_weight_bytes(model, weight_dtype_bytes)
    slots = 1.0 + (redundant_experts / model.moe.num_experts if model.moe else 0.0)
    dense_bytes = model.weight_bytes(weight_dtype_bytes) - expert_bytes
    if dp == 1 and redundant_experts == 0:
        weights = model.weight_bytes(weight_dtype_bytes) / (t * p)  # the same bytes, the plain TP expression
    else:
        weights = (dense_bytes / t + expert_bytes * slots / (t * dp)) / p
    width = model.moe.expert_intermediate_size if model.moe else model.intermediate_size
    workspace = t_max * (4.0 * model.hidden_size + 2.0 * width / t) * act_dtype_bytes
    if expert_gather and model.moe is not None:  # ZeRO-Prefill: the layer computing and the one being gathered
        workspace = workspace + 2.0 * expert_weight_bytes(model, weight_dtype_bytes) / len(model.moe_layer_indices)
    in_budget = workspace if workspace_in_budget else 0.0
    kv_free = (usable - weights - in_budget) * kv_free_fraction  # TensorRT-LLM: a share of the free memory
    per_token = model.kv_bytes_per_token(kv_dtype_bytes) * kv_replication(model, t)
    per_token = np.maximum(per_token, 1e-30)  # hybrids always have KV layers; guards a 0/0 only
    capacity = np.where(kv_free > 0.0, t * p * kv_free / per_token, 0.0)
    capacity = capacity * dp
    state = sequence_state_bytes_instance(model, t, kv_dtype_bytes)
    return InstanceMemory(usable, weights, workspace, kv_free, per_token, capacity, kv_free > 0.0, t * p * dp, state)


def sequence_state_bytes_instance(model: ModelSpec, tp: ArrayLike, kv_dtype_bytes: float) -> FloatArray | float:
    """S: fixed bytes one sequence holds over the t GPUs of a TP group, t · sequence_state_bytes(t) (module
    docstring); pipeline stages split the layers, so the sum over all t·p GPUs is the same. 0.0 for dense/MLA."""
    if model.linear_attention is None and model.sliding_window is None:
        return 0.0
    t = np.asarray(tp, dtype=np.float64)
    per_gpu = np.vectorize(lambda x: model.sequence_state_bytes(kv_dtype_bytes, float(x)), otypes=[np.float64])(t)
    return np.asarray(t * per_gpu, dtype=np.float64)


def expert_weight_bytes(model: ModelSpec, dtype_bytes: float) -> float:
    """Bytes of all routed experts of all MoE layers (0 for a dense model)."""
    if model.moe is None:
        return 0.0
    counts = model.layer_param_counts()
    return float(counts.num_moe_layers * model.moe.num_experts * counts.expert) * model.expert_bytes(dtype_bytes)
