"""The records of an operator list: one frozen type per op kind, :class:`PassShape`, and the per-GPU GEMM helpers.

Each op kind has its own shape with named, typed fields (arrays where they broadcast over candidates, flags as
``bool``, the MLA phase as a Literal) and the textbook roofline numerators of one run: :meth:`flops` (what the
physics check, :mod:`pdplan.serving.checks.physics`, divides by the datasheet peak) and :meth:`flops_bytes` (with
the HBM bytes :func:`pdplan.perf.roofline.phase_time` reports per op). Every op type is priced in one place,
:func:`pdplan.perf.op_pricing.op_time_s`.

* GEMM (:class:`GemmOp`): ``2·m·n·k`` FLOPs; bytes ``(m·k + k·n)·w + m·n·a`` (w the weight bytes, 2 for a
  never-quantized GEMM; a the activation bytes).
* Causal prefill attention (:class:`PrefillAttentionOp`): half of ``4·b·h·s²·d``, ``2·b·h·s²·d``; bytes
  ``b·s·d·(2h + 2h_kv)·a`` (Q, O, K, V once). Decode attention (:class:`DecodeAttentionOp`): ``4·b·h·c·d``; bytes the
  KV read ``b·c·kv_bytes_per_token``. An MLA core counts as :mod:`pdplan.perf.mla` derives.
* MoE experts (:class:`MoeOp`): :func:`pdplan.perf.moe.moe_flops_bytes` of the busiest GPU.
* Linear-attention scan (:class:`LinearAttentionOp`): ``tokens × FLOPs per token``; bytes read + write of the
  recurrent state.
* Elementwise kernels and all-reduces (:class:`ElementwiseOp`, :class:`AllReduceOp`): no FLOPs, their bytes; the EP
  all-to-all and weight gather (:class:`AllToAllOp`, :class:`WeightGatherOp`) are link traffic, no HBM roofline term.

Split out of :mod:`pdplan.perf.ops` so that the attention and MoE op builders (:mod:`pdplan.perf.ops_attention`,
:mod:`pdplan.perf.ops_moe`) share them; the sharding rules are those of the :mod:`pdplan.perf.ops` docstring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from pdplan.perf.mla import MlaPhase, mla_core_flops, mla_core_flops_bytes
from pdplan.perf.moe import MoeLayerShape, moe_flops_bytes
from pdplan.perf.precision import Precision
from pdplan.specs.model import ModelSpec
from pdplan.specs.model_parts import GemmShape, MlaSpec
from pdplan.specs.routing_law import UNIFORM, RoutingLaw
from pdplan.types import FloatArray

OpKind = Literal[
    "gemm", "attn_prefill", "attn_decode", "linear_attn", "elementwise", "allreduce", "moe", "alltoall", "weight_gather"
]
"""The op kinds reports name (``ops[].kind`` of ``pdplan roofline``): each op type's :attr:`kind`."""
Phase = Literal["prefill", "decode"]
COMMUNICATION_KINDS: tuple[OpKind, ...] = ("allreduce", "alltoall", "weight_gather")
"""Op kinds bound by a link rather than by compute or HBM."""

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


def _no_flops_bytes(like: FloatArray, bytes_: FloatArray) -> tuple[FloatArray, FloatArray]:
    return np.zeros_like(like), bytes_


@dataclass(frozen=True, slots=True)
class GemmOp:
    """``y = x·W`` per GPU: ``m`` tokens, ``k`` input and ``n`` output features. ``bf16``: never quantized, whatever
    the pass's dtype (LM head, MoE router: :func:`pdplan.specs.model_parts.unquantized_bytes`); ``mla_phase``: an MLA
    projection, priced with that phase's fitted MLA entry (:mod:`pdplan.perf.mla`)."""

    kind: ClassVar[OpKind] = "gemm"
    name: str
    count: float
    m: FloatArray
    n: FloatArray
    k: FloatArray
    bf16: bool = False
    mla_phase: MlaPhase | None = None

    def flops(self) -> FloatArray:
        return np.asarray(2.0 * self.m * self.n * self.k, dtype=np.float64)

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        w = 2.0 if self.bf16 else prec.weight_bytes
        return self.flops(), (self.m * self.k + self.k * self.n) * w + self.m * self.n * prec.act_bytes


@dataclass(frozen=True, slots=True)
class _AttentionCore:
    """One attention layer's core per GPU: ``batch`` sequences at ``context`` tokens, ``heads`` query and ``kv_heads``
    K/V heads of ``head_dim``, ``kv_bytes_per_token`` the GPU's KV bytes per token of the layer; ``mla``: the latent's
    sizes of an MLA core (priced by its fitted entry where the table has one, :mod:`pdplan.perf.mla`)."""

    name: str
    count: float
    batch: FloatArray
    context: FloatArray
    heads: FloatArray
    kv_heads: FloatArray
    head_dim: FloatArray
    kv_bytes_per_token: FloatArray
    mla: MlaSpec | None = None


@dataclass(frozen=True, slots=True)
class PrefillAttentionOp(_AttentionCore):
    """Causal attention over a prompt (module docstring)."""

    kind: ClassVar[OpKind] = "attn_prefill"

    def flops(self) -> FloatArray:
        if self.mla is not None:
            return mla_core_flops(self.mla, "prefill", self.batch, self.context, self.heads)
        return np.asarray(2.0 * self.batch * self.heads * self.context**2 * self.head_dim, dtype=np.float64)

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        if self.mla is not None:
            return mla_core_flops_bytes(self.mla, "prefill", self.batch, self.context, self.heads, prec.kv_bytes)
        bytes_ = self.batch * self.context * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        return self.flops(), bytes_ * prec.act_bytes


@dataclass(frozen=True, slots=True)
class DecodeAttentionOp(_AttentionCore):
    """One decode step's attention over each sequence's cached context (module docstring)."""

    kind: ClassVar[OpKind] = "attn_decode"

    def flops(self) -> FloatArray:
        if self.mla is not None:
            return mla_core_flops(self.mla, "decode", self.batch, self.context, self.heads)
        return np.asarray(4.0 * self.batch * self.heads * self.context * self.head_dim, dtype=np.float64)

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        if self.mla is not None:
            return mla_core_flops_bytes(self.mla, "decode", self.batch, self.context, self.heads, prec.kv_bytes)
        return self.flops(), self.batch * self.context * self.kv_bytes_per_token


@dataclass(frozen=True, slots=True)
class LinearAttentionOp:
    """A linear-attention layer's recurrent scan per GPU: ``tokens`` new tokens of ``batch`` sequences, the state of
    one sequence (``state_bytes``), FLOPs and q/k/v/o elements per token, the value heads on the GPU, and the pass's
    ``phase`` (which fitted entry prices it, :class:`pdplan.specs.kernel_table.LinearAttentionParams`)."""

    kind: ClassVar[OpKind] = "linear_attn"
    name: str
    count: float
    tokens: FloatArray
    batch: FloatArray
    state_bytes: FloatArray
    flops_per_token: FloatArray
    io_elems_per_token: FloatArray
    value_heads: FloatArray
    phase: Phase

    def flops(self) -> FloatArray:
        return np.asarray(self.tokens * self.flops_per_token, dtype=np.float64)

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        return self.flops(), 2.0 * self.batch * self.state_bytes


@dataclass(frozen=True, slots=True)
class ElementwiseOp:
    """A memory-bound kernel (norm, rotary, activation, embedding, quantisation) moving ``bytes`` per GPU."""

    kind: ClassVar[OpKind] = "elementwise"
    name: str
    count: float
    bytes: FloatArray

    def flops(self) -> FloatArray:
        return np.zeros_like(self.bytes)

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        return _no_flops_bytes(self.bytes, self.bytes)


@dataclass(frozen=True, slots=True)
class AllReduceOp:
    """An all-reduce of ``bytes`` per GPU over ``gpus`` GPUs."""

    kind: ClassVar[OpKind] = "allreduce"
    name: str
    count: float
    bytes: FloatArray
    gpus: FloatArray

    def flops(self) -> FloatArray:
        return np.zeros_like(self.bytes)

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        return _no_flops_bytes(self.bytes, self.bytes)


@dataclass(frozen=True, slots=True)
class MoeOp:
    """One MoE layer's routed experts as a grouped GEMM on the busiest GPU (:mod:`pdplan.perf.moe`); ``weight_bytes``:
    the expert weights that GPU reads (the experts its tokens hit)."""

    kind: ClassVar[OpKind] = "moe"
    name: str
    count: float
    layer: MoeLayerShape
    weight_bytes: FloatArray

    def flops(self) -> FloatArray:
        return moe_flops_bytes(self.layer)[0]

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        return moe_flops_bytes(self.layer)


@dataclass(frozen=True, slots=True)
class AllToAllOp:
    """One MoE layer's EP dispatch + combine (:mod:`pdplan.perf.expert_parallel`): ``tokens`` per GPU of an EP group
    of ``ep`` over ``group_gpus`` GPUs, each sent to ``top_k`` of ``num_experts`` experts of width ``hidden``;
    ``low_latency``: DeepEP's low-latency mode (decode), else its normal mode (prefill)."""

    kind: ClassVar[OpKind] = "alltoall"
    name: str
    count: float
    tokens: FloatArray
    ep: FloatArray
    group_gpus: FloatArray
    hidden: int
    top_k: int
    num_experts: int
    low_latency: bool

    def flops(self) -> FloatArray:
        return np.zeros_like(self.ep)

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        return _no_flops_bytes(self.ep, np.zeros_like(self.ep))


@dataclass(frozen=True, slots=True)
class WeightGatherOp:
    """ZeRO-Prefill: one MoE layer's expert all-gather (``layer_expert_bytes`` of experts, EP ``ep`` over
    ``group_gpus`` GPUs; :func:`pdplan.perf.expert_parallel.expert_gather_s`)."""

    kind: ClassVar[OpKind] = "weight_gather"
    name: str
    count: float
    ep: FloatArray
    group_gpus: FloatArray
    layer_expert_bytes: FloatArray

    def flops(self) -> FloatArray:
        return np.zeros_like(self.ep)

    def flops_bytes(self, prec: Precision) -> tuple[FloatArray, FloatArray]:
        return _no_flops_bytes(self.ep, np.zeros_like(self.ep))


Op = (
    GemmOp
    | PrefillAttentionOp
    | DecodeAttentionOp
    | LinearAttentionOp
    | ElementwiseOp
    | AllReduceOp
    | MoeOp
    | AllToAllOp
    | WeightGatherOp
)
"""One operator of a forward pass (per GPU), and how many times it runs per pass (``count``)."""


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


def gemm_op(
    name: str,
    count: float,
    shape: GemmShape,
    m: FloatArray,
    tp: FloatArray,
    *,
    bf16: bool = False,
    n: FloatArray | None = None,
) -> GemmOp:
    """The GEMM of one weight per GPU under tensor parallelism: (m, n, k) with n or k split over ``tp``; ``n``: the
    output features per GPU where the caller shards them otherwise (replicated K/V heads, the vocabulary)."""
    k = np.full_like(tp, float(shape.in_features))
    if n is None:
        n = np.full_like(tp, float(shape.out_features))
        if shape.name in _COLUMN_PARALLEL:
            n = np.ceil(n / tp)
    if shape.name in _ROW_PARALLEL:
        k = np.ceil(k / tp)
    return GemmOp(name, count, m if tp.ndim == 0 else m + 0.0 * tp, n, k, bf16=bf16)


def kv_heads_per_gpu(model: ModelSpec, tp: FloatArray, kv_heads: int | None = None) -> FloatArray:
    """ceil(n_kv / tp): KV heads each rank holds (replicated once tp > n_kv); ``kv_heads``: another layer kind's."""
    return np.ceil((model.num_kv_heads if kv_heads is None else kv_heads) / tp)


def fused_gemms(ops: list[GemmOp], names: tuple[str, ...], fused_name: str) -> list[GemmOp]:
    """Merge GEMMs that read the same input into one wider GEMM (n summed), as engines do.

    vLLM/SGLang run Q, K, V as one ``QKVParallelLinear`` and gate/up as one ``MergedColumnParallelLinear``;
    a single wide GEMM is more efficient than three narrow ones, so pricing them separately would overstate time.
    """
    parts = [op for op in ops if op.name.rsplit(".", 1)[-1].removesuffix("_proj") in names]
    if len(parts) < 2:
        return ops
    first = parts[0]
    n = sum((op.n for op in parts), np.zeros_like(first.n))
    merged = GemmOp(fused_name, first.count, first.m, n, first.k, bf16=first.bf16, mla_phase=first.mla_phase)
    fused = {id(op) for op in parts}
    return [merged, *(op for op in ops if id(op) not in fused)]
