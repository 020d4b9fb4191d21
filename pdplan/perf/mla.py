"""DeepSeek multi-head latent attention (MLA) as vLLM runs it, and its fitted module cost.

One MLA layer on a GPU holding n = ⌈heads/tp⌉ query heads (latent rank r = ``kv_lora_rank``, rope part ρ,
q/k head size d_qk = nope + ρ, value head size d_v; the down-projections are replicated, the latent cache is
not sharded):

* both phases: the fused down-projection ``qkv_a`` [h → q_lora + r + ρ] (replicated), ``q_b``
  [q_lora → n·d_qk] and ``o`` [n·d_v → h];
* prefill (decompressed, as multi-head attention): ``kv_b`` [r → n·(nope + d_v)] over the prompt's tokens,
  then causal attention of n heads with d_qk-wide queries/keys and d_v-wide values:
  FLOPs B·n·S²·(d_qk + d_v) (half of the dense 2·2·S² products), bytes B·S·n·(2·d_qk + 2·d_v)·2;
* decode (absorbed, FlashMLA / FlashAttention-MLA / FlashInfer-MLA): W_UK folds into the query
  (``uk_bmm`` [nope → n·r], bf16: vLLM keeps the absorbed weights in the activation dtype) and W_UV into the
  output (``uv_bmm`` [r → n·d_v], bf16); attention runs over the compressed latent as multi-query attention
  with (r + ρ)-wide keys and r-wide values: FLOPs 2·B·n·c·(2r + ρ), bytes B·c·(r + ρ)·kv_bytes (the latent
  is read once for all n heads).

The fitted module cost (:class:`pdplan.specs.kernel_table.MlaParams`, per phase × GEMM dtype × KV dtype)
scales the projection GEMMs (priced by the table's dense GEMM family) by ``gemm_scale`` and prices the core
as overhead_s + per_token_s·T + per_sequence_s·B + smooth_max(compute, memory; 4) with
compute = FLOPs·(x + ramp)/x / (bf16 peak·compute_fraction) (x = S in prefill, a ramp of short prompts'
tiles; x = n in decode, a ramp of few heads per CTA) and memory = bytes / (HBM·memory_fraction).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from pdplan.perf.kernels import gemm_time_s, smooth_max
from pdplan.specs.kernel_table import GemmFlavour, GpuPeaks, KernelTable, MlaParams
from pdplan.specs.model_parts import MlaSpec
from pdplan.types import FloatArray

MlaPhase = Literal["prefill", "decode"]


def mla_key(phase: str, gemm: GemmFlavour, kv_bytes: float) -> str:
    """The kernel-table key of an MLA entry: ``phase.gemm.kv`` (e.g. ``decode.fp8.bf16``)."""
    return f"{phase}.{gemm}.{'fp8' if kv_bytes <= 1.0 else 'bf16'}"


def mla_params(table: KernelTable, phase: str, gemm: GemmFlavour, kv_bytes: float) -> MlaParams | None:
    """The table's fitted MLA entry for this phase and dtypes, or None (then the generic families price MLA)."""
    key = mla_key(phase, gemm, kv_bytes)
    for k, p in table.mla.items():
        if k == key:
            return p
    return None


def mla_gemms(
    mla: MlaSpec, hidden: int, heads: FloatArray, phase: str, m: FloatArray
) -> list[tuple[str, dict[str, FloatArray], bool]]:
    """(name, {m, n, k}, runs in bf16) of one layer's projection GEMMs on a GPU with ``heads`` query heads."""
    d_qk = float(mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    r, rope = float(mla.kv_lora_rank), float(mla.qk_rope_head_dim)
    one = np.ones_like(heads)

    def dims(n: FloatArray, k: FloatArray) -> dict[str, FloatArray]:
        return {"m": m + 0.0 * heads, "n": n + 0.0 * m, "k": k + 0.0 * m}

    q_lora = mla.q_lora_rank
    out = [("attn.qkv_a_proj", dims(one * ((q_lora or 0) + r + rope), one * hidden), False)]
    if q_lora is None:
        out.append(("attn.q_proj", dims(heads * d_qk, one * hidden), False))
    else:
        out.append(("attn.q_b_proj", dims(heads * d_qk, one * q_lora), False))
    if phase == "prefill":
        out.append(("attn.kv_b_proj", dims(heads * (mla.qk_nope_head_dim + mla.v_head_dim), one * r), False))
    else:
        out.append(("attn.uk_bmm", dims(heads * r, one * mla.qk_nope_head_dim), True))
        out.append(("attn.uv_bmm", dims(heads * mla.v_head_dim, one * r), True))
    out.append(("attn.o_proj", dims(one * hidden, heads * mla.v_head_dim), False))
    return out


def mla_core_flops(mla: MlaSpec, phase: str, batch: FloatArray, context: FloatArray, heads: FloatArray) -> FloatArray:
    """Ideal FLOPs of the attention core (module docstring): B·n·S²·(d_qk + d_v) in prefill, 2·B·n·c·(2r + ρ) in
    decode."""
    r, rope = float(mla.kv_lora_rank), float(mla.qk_rope_head_dim)
    d_qk, d_v = float(mla.qk_nope_head_dim) + rope, float(mla.v_head_dim)
    if phase == "prefill":
        prefill: FloatArray = batch * heads * context**2 * (d_qk + d_v)
        return prefill
    decode: FloatArray = 2.0 * batch * heads * context * (2.0 * r + rope)
    return decode


def mla_core_flops_bytes(
    mla: MlaSpec, phase: str, batch: FloatArray, context: FloatArray, heads: FloatArray, kv_bytes: float
) -> tuple[FloatArray, FloatArray]:
    """Ideal FLOPs (:func:`mla_core_flops`) and bytes of the attention core (module docstring)."""
    r, rope = float(mla.kv_lora_rank), float(mla.qk_rope_head_dim)
    d_qk, d_v = float(mla.qk_nope_head_dim) + rope, float(mla.v_head_dim)
    flops = mla_core_flops(mla, phase, batch, context, heads)
    if phase == "prefill":
        bytes_: FloatArray = batch * context * heads * (2.0 * d_qk + 2.0 * d_v) * 2.0
        return flops, bytes_
    return flops, batch * context * (r + rope) * kv_bytes


def mla_core_time_s(
    mla: MlaSpec,
    phase: str,
    batch: FloatArray,
    context: FloatArray,
    heads: FloatArray,
    kv_bytes: float,
    p: MlaParams,
    gpu: GpuPeaks,
) -> FloatArray:
    """Seconds of one layer's MLA attention core under a fitted entry (module docstring)."""
    flops, bytes_ = mla_core_flops_bytes(mla, phase, batch, context, heads, kv_bytes)
    x = context if phase == "prefill" else heads
    tokens = batch * context if phase == "prefill" else batch
    compute = flops * (x + p.ramp) / np.maximum(x, 1e-9) / (gpu.bf16_flops_per_s * p.compute_fraction)
    memory = bytes_ / (gpu.memory_bytes_per_s * p.memory_fraction)
    t: FloatArray = p.overhead_s + p.per_token_s * tokens + p.per_sequence_s * batch
    t = t + smooth_max(compute, memory, p.smooth_q)
    return np.where(batch > 0.0, t, 0.0)


def mla_module_time_s(
    mla: MlaSpec,
    hidden: int,
    phase: MlaPhase,
    batch: FloatArray,
    context: FloatArray,
    heads: FloatArray,
    gemm: GemmFlavour,
    kv_bytes: float,
    gpu: GpuPeaks,
    table: KernelTable,
    *,
    warm_l2: bool = False,
) -> FloatArray:
    """One layer's whole MLA module (projections and core) under the table's fitted entry (raises without one)."""
    p = mla_params(table, phase, gemm, kv_bytes)
    if p is None:
        from pdplan.errors import SpecError

        raise SpecError(f"kernel table {table.gpu!r} has no mla entry {mla_key(phase, gemm, kv_bytes)!r}", field="mla")
    m = batch * context if phase == "prefill" else batch
    total = np.zeros(np.broadcast_shapes(np.shape(m), np.shape(heads)))
    for _, d, bf16 in mla_gemms(mla, hidden, heads, phase, m):
        total = total + gemm_time_s(d["m"], d["n"], d["k"], "bf16" if bf16 else gemm, gpu, table, warm_l2=warm_l2)
    return p.gemm_scale * total + mla_core_time_s(mla, phase, batch, context, heads, kv_bytes, p, gpu)
