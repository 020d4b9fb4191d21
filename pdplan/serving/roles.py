"""Per-role performance characteristics from the perf model: prefill S(l), decode τ(B, K), memory.

* **Prefill service** (QUEUEING §1.1, §1.2): one prompt at a time (batch 1) on an instance with
  TP = t, PP = p, priced by the roofline (:func:`pdplan.perf.roofline.phase_time`) per input-length
  bin. ``latency_s`` is the pass latency (all stages plus p − 1 hand-offs); ``service_s`` is what
  the FCFS queue sees: the bottleneck stage time, because with p stages p prompts are in flight
  (DistServe's inter-op model waits on D_m ≈ D/2 for p = 2; PUBLISHED_RESULTS §1.2 (2)). For p = 1
  both are the same. The KV-transfer granularity may add prefill work (``prefill_extra_s``: per-layer
  sync, chunk launches and the chunked re-read of earlier KV; :mod:`pdplan.transfer.kv`), added to both.
* **Decode step** (QUEUEING §2.1): the roofline step τ(B, c) for B sequences at mean context c is
  linearised as ``τ = t0 + t1·B + t2·K`` (K = B·c) by a relative least-squares fit (non-negative
  coefficients, :func:`scipy.optimize.nnls`) over the operating range B ∈ [1, B_max] (B_max the seat
  and KV limit) and c ∈ [κ/4, 4κ] around κ, the mean context of an in-flight sequence. The linear
  form is what the closed-form fixed point and the §2.4 TPOT model use; the fit's median and worst
  relative error over that grid are reported as an assumption (typically a few per cent: the
  roofline is memory-bound and nearly linear there). With PP = p a decode instance runs p
  micro-batches of B/p; a sequence gets one token per pipeline cycle, so
  ``τ(B, K) = p · stage_time(B/p, K/B)``.
* **Memory** (:mod:`pdplan.perf.memory`): weights, workspace and KV capacity per instance; an
  instance whose weights do not fit raises :class:`~pdplan.errors.NoFeasiblePlanError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from pdplan.errors import NoFeasiblePlanError
from pdplan.perf.kernels import KernelTable
from pdplan.perf.memory import InstanceMemory, instance_memory
from pdplan.perf.roofline import Precision, phase_time
from pdplan.queueing import LinearStepTime
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.model import ModelSpec
from pdplan.types import FloatArray
from pdplan.units import GIB

_FIT_BATCHES = 12
_FIT_CONTEXT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True, slots=True)
class RoleHardware:
    """A resolved instance type: model, GPU spec, kernel table, parallelism, precision."""

    model: ModelSpec
    gpu: GpuSpec
    table: KernelTable
    tp: int
    pp: int
    precision: Precision
    gpu_memory_utilization: float | None = None

    @property
    def label(self) -> str:
        return f"{self.gpu.name} TP{self.tp}" + (f" PP{self.pp}" if self.pp > 1 else "")


def instance_budget(hw: RoleHardware, role: str) -> InstanceMemory:
    """Memory of one instance; NoFeasiblePlanError (binding "memory") when weights do not fit."""
    mem = instance_memory(
        hw.model,
        hw.gpu.memory_bytes,
        tp=hw.tp,
        pp=hw.pp,
        weight_dtype_bytes=hw.precision.weight_bytes,
        kv_dtype_bytes=hw.precision.kv_bytes,
        act_dtype_bytes=hw.precision.act_bytes,
        gpu_memory_utilization=hw.gpu_memory_utilization,
    )
    if not bool(np.all(mem.fits)):
        need = float((mem.weight_bytes + mem.workspace_bytes).max()) / GIB
        have = float(mem.usable_bytes.max()) / GIB
        raise NoFeasiblePlanError(
            f"{role} instance {hw.label} does not fit {hw.model.name}: weights + workspace "
            f"{need:.1f} GiB per GPU exceed the usable {have:.1f} GiB; raise TP/PP or use fp8",
            binding_constraint="memory",
        )
    return mem


@dataclass(frozen=True, slots=True)
class PrefillPerf:
    """Batch-1 prefill per input-length bin (arrays ``[K]``, seconds)."""

    input_tokens: FloatArray
    latency_s: FloatArray
    service_s: FloatArray


def prefill_perf(hw: RoleHardware, input_tokens: FloatArray) -> PrefillPerf:
    """Roofline latency and queue service time of one prompt per bin (module docstring)."""
    pt = phase_time(
        hw.model,
        hw.gpu,
        hw.table,
        phase="prefill",
        batch=1.0,
        tokens=input_tokens,
        tp=hw.tp,
        pp=hw.pp,
        precision=hw.precision,
    )
    latency = np.broadcast_to(pt.time_s, input_tokens.shape).astype(np.float64)
    stage = np.broadcast_to(pt.stage_time_s, input_tokens.shape).astype(np.float64)
    return PrefillPerf(input_tokens, latency, stage)


_TABLE_TOKENS = 256
_TABLE_PROMPTS = 64


@dataclass(frozen=True, slots=True)
class PrefillBatchTime:
    """Roofline stage time of one prefill batch as a function of ``(Σl, Σl²)`` (vectorised).

    A batch of prompts l_i costs what the roofline (:func:`pdplan.perf.roofline.phase_time`) gives
    for ``B_eq = (Σl)²/Σl²`` prompts of ``l_eq = Σl²/Σl`` tokens: the same token count Σl (GEMMs,
    norms, all-reduces) and the same causal-attention work Σl² (``B_eq·l_eq = Σl``,
    ``B_eq·l_eq² = Σl²``); one prompt gives exactly its batch-1 time. The roofline is tabulated
    once on a log grid of Σl (``_TABLE_TOKENS`` points up to ``max_tokens``) × B_eq
    (``_TABLE_PROMPTS`` points) and read by bilinear interpolation in (log Σl, log B_eq): against
    direct calls the P99 relative error is < 1 %, the worst a few per cent next to the roofline's
    tile-wave steps (tests/unit/test_batched_prefill.py). ``extra_s`` is added
    once per batch (the transfer granularity's per-pass prefill work, e.g. per-layer syncs). The
    simulator and the closed form both price batches with this one function.
    """

    log_tokens: FloatArray
    log_prompts: FloatArray
    table_s: FloatArray
    extra_s: float

    def __call__(self, tokens: FloatArray, sum_sq_tokens: FloatArray) -> FloatArray:
        """Batch time (s) for Σl = ``tokens`` and Σl² = ``sum_sq_tokens`` (broadcast)."""
        tok = np.maximum(np.asarray(tokens, dtype=np.float64), 1.0)
        sq = np.clip(np.asarray(sum_sq_tokens, dtype=np.float64), tok, tok**2)
        x = _grid_pos(np.log(tok), self.log_tokens)
        y = _grid_pos(np.log(tok**2 / sq), self.log_prompts)
        i, j = np.floor(x).astype(np.intp), np.floor(y).astype(np.intp)
        fx, fy = x - i, y - j
        t = self.table_s
        out = (
            (1 - fx) * (1 - fy) * t[i, j]
            + fx * (1 - fy) * t[i + 1, j]
            + (1 - fx) * fy * t[i, j + 1]
            + fx * fy * t[i + 1, j + 1]
        )
        return np.asarray(out + self.extra_s, dtype=np.float64)

    def single_s(self, tokens: FloatArray) -> FloatArray:
        """One prompt of ``tokens`` tokens alone."""
        tok = np.asarray(tokens, dtype=np.float64)
        return self(tok, tok**2)


def _grid_pos(value: FloatArray, grid: FloatArray) -> FloatArray:
    """Fractional index of ``value`` on a uniform ``grid`` (clamped to [0, n − 1 − 1e-9])."""
    step = grid[1] - grid[0]
    return np.asarray(np.clip((value - grid[0]) / step, 0.0, grid.size - 1 - 1e-9), dtype=np.float64)


def prefill_batch_time(hw: RoleHardware, max_tokens: float, extra_s: float) -> PrefillBatchTime:
    """Tabulate the roofline batch *stage* time up to ``max_tokens`` per batch (class docstring)."""
    log_tok = np.linspace(0.0, np.log(max(max_tokens, 2.0) * 1.01), _TABLE_TOKENS)
    log_b = np.linspace(0.0, log_tok[-1], _TABLE_PROMPTS)
    tok, prompts = np.exp(log_tok)[:, None], np.exp(log_b)[None, :]
    per_prompt = np.maximum(tok / prompts, 1.0)
    pt = phase_time(
        hw.model,
        hw.gpu,
        hw.table,
        phase="prefill",
        batch=tok / per_prompt,
        tokens=per_prompt,
        tp=hw.tp,
        pp=hw.pp,
        precision=hw.precision,
        detail=False,
    )
    table = np.broadcast_to(pt.stage_time_s, per_prompt.shape).astype(np.float64)
    return PrefillBatchTime(log_tok, log_b, table, float(extra_s))


def fit_quadratic(tokens: FloatArray, time_s: FloatArray) -> tuple[float, float, float]:
    """Non-negative relative least squares ``S(l) ≈ a + b·l + c·l²`` (QUEUEING §1.1)."""
    design = np.stack([np.ones_like(tokens), tokens, tokens**2], axis=1) / time_s[:, None]
    scale = np.abs(design).max(axis=0)
    coef, _ = nnls(design / scale, np.ones_like(tokens))
    a, b, c = coef / scale
    return float(a), float(b), float(c)


@dataclass(frozen=True, slots=True)
class DecodePerf:
    """Linearised decode step, its fit error, and the instance's KV/seat limits."""

    step: LinearStepTime
    fit_median_rel_err: float
    fit_max_rel_err: float
    kv_capacity_tokens: float
    max_num_seqs: float


def decode_step_fn(hw: RoleHardware, batch: FloatArray, context_tokens: FloatArray) -> FloatArray:
    """Roofline token interval ``p·stage_time(B/p, K/B)`` (vectorised; module docstring)."""
    b = np.maximum(batch, 1e-9)
    per_seq = context_tokens / b
    pt = phase_time(
        hw.model,
        hw.gpu,
        hw.table,
        phase="decode",
        batch=b / hw.pp,
        tokens=np.maximum(per_seq, 1.0),
        tp=hw.tp,
        pp=hw.pp,
        precision=hw.precision,
    )
    return np.asarray(hw.pp * pt.stage_time_s, dtype=np.float64)


def decode_perf(hw: RoleHardware, mean_context_tokens: float, max_num_seqs: float) -> DecodePerf:
    """Fit ``τ = t0 + t1·B + t2·K`` to the roofline over the operating range (module docstring)."""
    mem = instance_budget(hw, "decode")
    kv_cap = float(np.ravel(mem.kv_capacity_tokens)[0])
    kappa = max(mean_context_tokens, 1.0)
    b_max = max(2.0, min(max_num_seqs, kv_cap / kappa))
    batch = np.unique(np.round(np.geomspace(1.0, b_max, _FIT_BATCHES)))
    ctx = kappa * np.asarray(_FIT_CONTEXT_FACTORS)
    bb, cc = (g.ravel() for g in np.meshgrid(batch, ctx))
    keep = bb * cc <= kv_cap
    bb, cc = bb[keep], cc[keep]
    tau = decode_step_fn(hw, bb, bb * cc)
    design = np.stack([np.ones_like(bb), bb, bb * cc], axis=1) / tau[:, None]
    scale = np.abs(design).max(axis=0)
    coef, _ = nnls(design / scale, np.ones_like(bb))
    t0, t1, t2 = coef / scale
    if t0 <= 0.0:  # a pure-overhead floor is needed by the fixed point; keep the smallest step
        t0 = float(tau.min()) * 0.5
    fit = t0 + t1 * bb + t2 * bb * cc
    rel = np.abs(fit / tau - 1.0)
    return DecodePerf(
        LinearStepTime(float(t0), float(t1), float(t2)),
        float(np.median(rel)),
        float(rel.max()),
        kv_cap,
        float(max_num_seqs),
    )
