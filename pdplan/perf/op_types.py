"""The records of an operator list: :class:`Op`, :class:`PassShape`, and the per-GPU GEMM shape helpers.

Split out of :mod:`pdplan.perf.ops` so that the attention and MoE op
builders (:mod:`pdplan.perf.ops_attention`, :mod:`pdplan.perf.ops_moe`) share them; the sharding rules are those of
the :mod:`pdplan.perf.ops` docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from pdplan.perf.moe import MoeLayerShape
from pdplan.perf.moe_routing import UNIFORM, RoutingLaw
from pdplan.specs.model import ModelSpec
from pdplan.specs.model_parts import GemmShape
from pdplan.types import FloatArray

OpKind = Literal[
    "gemm", "attn_prefill", "attn_decode", "linear_attn", "elementwise", "allreduce", "moe", "alltoall", "weight_gather"
]
Phase = Literal["prefill", "decode"]

# Column-parallel weights (output features split over tp); row-parallel ones split input features.
_COLUMN_PARALLEL = {
    "q",
    "k",
    "v",
    "q_b",
    "kv_b",
    "gate",
    "up",
    "in_proj_qkvz",
    "in_proj_ba",
    # KDA (vLLM kimi_linear: ColumnParallelLinear q/k/v, f_b, g_b, b; RowParallelLinear o; ReplicatedLinear f_a, g_a)
    "qkv_proj",
    "f_b_proj",
    "g_b_proj",
    "b_proj",
}
_ROW_PARALLEL = {"o", "down", "out_proj", "o_proj"}
_REPLICATED = {"q_a", "kv_a", "f_a_proj", "g_a_proj"}


@dataclass(frozen=True)
class Op:
    """One operator of a forward pass: kernel family, shape arrays, and runs per pass (per GPU)."""

    name: str
    kind: OpKind
    count: float
    dims: dict[str, FloatArray] = field(default_factory=dict)
    moe: MoeLayerShape | None = None  # kind "moe": the grouped expert GEMM's per-GPU shape


@dataclass(frozen=True)
class PassShape:
    """What one forward pass processes, as broadcastable arrays.

    prefill: ``batch`` prompts of ``tokens`` tokens each (new tokens; ``context`` = tokens).
    decode: one step for ``batch`` sequences at mean context ``tokens`` (one new token each).
    """

    phase: Phase
    batch: FloatArray
    tokens: FloatArray
    tp: FloatArray
    act_bytes: float = 2.0
    weight_bytes: float = 2.0
    kv_bytes: float = 2.0
    # MoE layers (pdplan.perf.moe): expert-parallel size, moe-TP split of the expert intermediate size
    # (None: tp, i.e. experts TP-sharded like dense layers), tokens of how many attention-DP ranks meet in
    # one MoE layer, and the routing law. Defaults reproduce plain tensor parallelism.
    ep: FloatArray | float = 1.0
    moe_tp: FloatArray | float | None = None
    moe_dp: FloatArray | float = 1.0
    routing: RoutingLaw = UNIFORM
    dp: float = 1.0
    """Attention data-parallel ranks; ``batch`` is the instance's, split evenly over them (:mod:`.expert_parallel`)."""
    expert_gather: bool = False
    """ZeRO-Prefill: all-gather expert weights instead of the EP all-to-all (prefill only)."""

    @property
    def new_tokens(self) -> FloatArray:
        """Tokens entering the GEMMs: batch·tokens in prefill, batch in decode (the whole instance)."""
        if self.phase == "prefill":
            return np.asarray(self.batch * self.tokens, dtype=np.float64)
        return np.asarray(self.batch, dtype=np.float64)


def gemm_dims(shape: GemmShape, m: FloatArray, tp: FloatArray) -> dict[str, FloatArray]:
    """(m, n, k) per GPU for one weight under tensor parallelism."""
    n = np.full_like(tp, float(shape.out_features))
    k = np.full_like(tp, float(shape.in_features))
    if shape.name in _COLUMN_PARALLEL:
        n = np.ceil(n / tp)
    elif shape.name in _ROW_PARALLEL:
        k = np.ceil(k / tp)
    return {"m": m if tp.ndim == 0 else m + 0.0 * tp, "n": n, "k": k}


def kv_heads_per_gpu(model: ModelSpec, tp: FloatArray, kv_heads: int | None = None) -> FloatArray:
    """ceil(n_kv / tp): KV heads each rank holds (replicated once tp > n_kv); ``kv_heads``: another layer kind's."""
    return np.ceil((model.num_kv_heads if kv_heads is None else kv_heads) / tp)


def fused_gemms(ops: list[Op], names: tuple[str, ...], fused_name: str) -> list[Op]:
    """Merge GEMMs that read the same input into one wider GEMM (n summed), as engines do.

    vLLM/SGLang run Q, K, V as one ``QKVParallelLinear`` and gate/up as one ``MergedColumnParallelLinear``;
    a single wide GEMM is more efficient than three narrow ones, so pricing them separately would overstate time.
    """
    parts = [op for op in ops if op.name.rsplit(".", 1)[-1].removesuffix("_proj") in names]
    if len(parts) < 2:
        return ops
    first = parts[0]
    dims = {**first.dims, "n": sum((op.dims["n"] for op in parts), np.zeros_like(first.dims["n"]))}
    merged = Op(fused_name, first.kind, first.count, dims)
    rest = [op for op in ops if op not in parts]
    return [merged, *rest]


MLA_PHASE = {"prefill": 0.0, "decode": 1.0}
"""``dims["mla_phase"]`` of MLA ops: which fitted MLA entry (:mod:`pdplan.perf.mla`) prices them."""
