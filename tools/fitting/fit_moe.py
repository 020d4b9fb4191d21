"""Fit the fused-MoE kernel entry (:class:`pdplan.specs.kernel_table.MoeParams`) to AIConfigurator's MoE tables.

``moe_vllm.csv`` rows are one fused MoE layer for ``num_tokens`` tokens on one GPU holding its
``moe_tp_size``/``moe_ep_size`` shard; ``distribution`` names the routing the benchmark generated
(``balanced``, ``power_law_<alpha>``: AIConfigurator's ``balanced_logits`` / ``power_law_logits_v3``, with
the busiest EP rank on the measured GPU), which maps onto :class:`pdplan.perf.moe_routing.RoutingLaw`.
One kernel family per dtype is fitted (the engine's default kernel for that dtype, ``MOE_KERNELS``);
the discrete choices (tile set, whether all T·k pairs are materialised) are chosen by the lowest P90 on the
fit subsample, as for GEMMs. :func:`held_out` checks generalisation: fit on 3/4 of the model shapes,
score the unseen quarter.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Protocol

import numpy as np

from fitting.moe_grouped import GROUPED_ROUTING, grouped_balanced_routing
from pdplan.calibrate.fit import ErrorStats, error_stats, fit_parameters, subsample_index
from pdplan.errors import SpecError
from pdplan.perf.moe import MoeLayerShape, moe_shape, moe_time_s
from pdplan.perf.moe_routing import Routing
from pdplan.specs.kernel_table import GemmFlavour, GpuPeaks, KernelTable, MoeParams
from pdplan.specs.routing_law import RoutingLaw
from pdplan.types import FloatArray

MOE_KERNELS: dict[str, dict[GemmFlavour, tuple[str, str]]] = {
    # (moe_dtype, kernel_source) fitted per GPU and pdplan dtype: vLLM 0.24's default path for BF16 and for
    # block-scaled FP8 checkpoints (DeepSeek-V3/R1, Qwen3-FP8, the form FP8 MoE models ship in): the Triton
    # fused MoE on Hopper (FlashInfer's CUTLASS path is opt-in there), TRT-LLM kernels via FlashInfer on B200
    "h100_sxm": {
        "bf16": ("bfloat16", "vllm_unquantizedfusedmoe_triton_tritonexperts"),
        "fp8": ("fp8_block", "vllm_fp8moe_triton_tritonexperts"),
    },
    "h200_sxm": {
        "bf16": ("bfloat16", "vllm_unquantizedfusedmoe_triton_tritonexperts"),
        "fp8": ("fp8_block", "vllm_fp8moe_triton_tritonexperts"),
    },
    "b200_sxm": {
        "bf16": ("bfloat16", "vllm_unquantizedfusedmoe_flashinfer_trtllm_trtllmbf16experts"),
        "fp8": ("fp8_block", "vllm_fp8moe_flashinfer_trtllm_trtllmfp8expertsmonolithic"),
    },
}

NON_GATED = {(2688.0, 1856.0, 6.0, 128.0), (2048.0, 5120.0, 22.0, 512.0), (1024.0, 2688.0, 22.0, 512.0)}
"""(hidden, inter, top-k, experts) priced as two-matrix (non-gated) experts: as three-matrix SwiGLU experts
their measured times fall below the HBM floor of their weights; NVIDIA Nemotron-3's MoE layers use
non-gated ReLU² experts (up, down), and these are Nemotron-3 shapes (Nano: hidden 2688, 128 experts, top-6)."""

MAX_MOE_FIT_ROWS = 2500
_COLS = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size", "latency")


@dataclass(frozen=True)
class MoeRows:
    """Measured MoE layers: shape columns (arrays), routing law per row, latency in seconds."""

    cols: dict[str, FloatArray]
    laws: tuple[RoutingLaw, ...]
    measured_s: FloatArray


def law_of(distribution: str) -> RoutingLaw:
    """AIConfigurator's ``distribution`` label as a routing law (``uniform`` = SGLang's random routing)."""
    if distribution == "balanced":
        return RoutingLaw("balanced")
    if distribution == "uniform":
        return RoutingLaw("uniform")
    if distribution.startswith("power_law_"):
        return RoutingLaw("power_law", float(distribution.removeprefix("power_law_")))
    raise SpecError(f"unknown MoE distribution {distribution!r}", field="distribution")


def rerouted(row: dict[str, str]) -> bool:
    """Whether a row measures a routing no priced law describes; only group-limited shapes
    (:data:`fitting.moe_grouped.GROUPED_ROUTING`, DeepSeek-V3/R1) have such rows.

    The collector routes its synthetic logits with the model's group-limited top-k (8 groups, top-4) before or
    inside every experts kernel, which re-routes them (:mod:`fitting.moe_grouped`). Its ``balanced`` rows
    are deterministic and priced as what they measure, except where the count hinges on a tie rule the times do
    not confirm: below ⌈E/k⌉ tokens (and above one) on kernels fed by vLLM's router (not ``...monolithic``), whose
    cold-expert fills do not follow the lowest-index rule. The ``power_law`` rows (random draws whose group ties
    and cold fills are not derived here) are left out on every kernel and EP size.
    """
    shape = tuple(float(row[k]) for k in ("hidden_size", "inter_size", "topk", "num_experts"))
    if shape not in GROUPED_ROUTING:
        return False
    if row["distribution"] != "balanced":
        return True
    stride = np.ceil(shape[3] / shape[2])
    tokens = float(row["num_tokens"])
    return not row["kernel_source"].endswith("monolithic") and 1.0 < tokens < stride


def read_moe(path: Path, moe_dtype: str, kernel_source: str | None = None, *, keep_rerouted: bool = False) -> MoeRows:
    """Rows of one dtype (and kernel) from a ``moe_vllm.csv``-style file, without the rows whose routing no priced
    law describes (:func:`rerouted`) unless ``keep_rerouted``."""
    if not path.is_file():
        raise SpecError("file not found", source=str(path))
    with path.open(newline="") as fh:
        rows = [
            r
            for r in csv.DictReader(fh)
            if r["moe_dtype"] == moe_dtype
            and (kernel_source is None or r["kernel_source"] == kernel_source)
            and (keep_rerouted or not rerouted(r))
        ]
    cols = {c: np.array([float(r[c]) for r in rows]) for c in _COLS}
    laws = tuple(law_of(r["distribution"]) for r in rows)
    return MoeRows(cols, laws, cols["latency"] * 1e-3)


class LayerRows(Protocol):
    """Measured MoE layer rows of any kernel family: shape columns, routing law per row, latency in seconds."""

    @property
    def cols(self) -> dict[str, FloatArray]: ...
    @property
    def laws(self) -> tuple[RoutingLaw, ...]: ...


def _groups(rows: LayerRows) -> dict[tuple[float, ...], np.ndarray]:
    """Row indices per (shape, routing law): each group shares scalars, so one vectorised call prices it."""
    keys: dict[tuple[float, ...], list[int]] = {}
    c = rows.cols
    for i, law in enumerate(rows.laws):
        kind = ("balanced", "uniform", "power_law", "eplb").index(law.kind)
        key = (c["hidden_size"][i], c["inter_size"][i], c["topk"][i], c["num_experts"][i], float(kind), law.alpha)
        keys.setdefault(key, []).append(i)
    return {k: np.array(v) for k, v in keys.items()}


def layer_shapes(rows: MoeRows, flavour: GemmFlavour) -> list[tuple[np.ndarray, MoeLayerShape]]:
    """Row indices and their layer shape (weights at 2 B for bf16, 1 B plus block scales for fp8), per group;
    balanced rows of :data:`GROUPED_ROUTING` shapes with the routing they measure (the vLLM collector routes its
    synthetic logits through the model's router; SGLang's wide-EP collector sets the loads directly and is not
    re-routed, so :func:`row_shapes` leaves them)."""
    weight_bytes = 2.0 if flavour == "bf16" else 1.0 + 4.0 / (128.0 * 128.0)
    return [(idx, _priced_as_measured(shape)) for idx, shape in row_shapes(rows, weight_bytes)]


@dataclass(frozen=True)
class MeasuredRoutingShape(MoeLayerShape):
    """A measured layer whose routing is known exactly (:mod:`fitting.moe_grouped`), not drawn from its law."""

    given: Routing | None = None

    def routing(self) -> Routing:
        if self.given is None:
            raise SpecError("MeasuredRoutingShape needs its routing", field="given")
        return self.given


def _priced_as_measured(shape: MoeLayerShape) -> MoeLayerShape:
    """Balanced rows of group-limited shapes priced with the routing they measure; other shapes as they are."""
    groups = GROUPED_ROUTING.get((shape.hidden, shape.intermediate, float(shape.top_k), float(shape.num_experts)))
    if groups is None or shape.law.kind != "balanced":
        return shape
    given = grouped_balanced_routing(shape.tokens, shape.num_experts, shape.top_k, shape.ep, *groups)
    return MeasuredRoutingShape(**{f.name: getattr(shape, f.name) for f in fields(shape)}, given=given)


def row_shapes(rows: LayerRows, weight_bytes: float) -> list[tuple[np.ndarray, MoeLayerShape]]:
    """Row indices and their layer shape at ``weight_bytes`` per expert weight, per (shape, routing law) group
    (:data:`NON_GATED` shapes as two-matrix experts); shared by every MoE kernel family's fit."""
    c = rows.cols
    return [
        (
            idx,
            moe_shape(
                c["num_tokens"][idx],
                h,
                inter,
                int(e),
                int(k),
                ep=c["moe_ep_size"][idx],
                moe_tp=c["moe_tp_size"][idx],
                weight_bytes=weight_bytes,
                law=rows.laws[int(idx[0])],
                gated=(h, inter, k, e) not in NON_GATED,
            ),
        )
        for (h, inter, k, e, _, _), idx in _groups(rows).items()
    ]


def _predict(
    shapes: list[tuple[np.ndarray, MoeLayerShape]],
    n: int,
    params: MoeParams,
    flavour: GemmFlavour,
    gpu: GpuPeaks,
    table: KernelTable,
) -> FloatArray:
    out = np.empty(n)
    for idx, shape in shapes:
        out[idx] = moe_time_s(shape, flavour, gpu, table, params, warm_l2=True)
    return out


def predict_moe_s(
    rows: MoeRows, params: MoeParams, flavour: GemmFlavour, gpu: GpuPeaks, table: KernelTable
) -> FloatArray:
    """Model seconds for every row, with warm L2 as the benchmark measured (it repeats one call)."""
    return _predict(layer_shapes(rows, flavour), rows.measured_s.size, params, flavour, gpu, table)


TILES: tuple[dict[str, int], ...] = (
    # vLLM's fused_moe default configuration (get_default_config): 64-row M tiles with 64-wide N and 32-deep K
    # tiles, 16-row x 32-wide tiles at small batch. 128-wide tiles (the block-FP8 default, 128x128 weight blocks)
    # and 128-row M tiles fitted within 1 point of P90 on every cell (checked, not shipped: one set keeps the
    # fit fast and the tiles the same on every GPU).
    {"m_tile": 64, "n_tile": 64, "n_tile_small": 32, "k_tile": 32},
)
FIXED = {"m0_tokens": 0.0, "per_expert_s": 0.0, "smooth_q": 4.0}
X0 = {
    "peak_fraction": 0.5,
    "memory_fraction": 0.8,
    "pair_memory_fraction": 0.5,
    "overhead_s": 3e-5,
    "per_token_s": 1e-10,
    "cta_bytes_per_s": 2e10,
    "cta_s": 3e-7,
    "l2_bytes": 3e7,
    "l2_speedup": 2.0,
    "reread_fraction": 0.1,
    "unaligned_penalty": 0.5,
}
BOUNDS = {
    "peak_fraction": (0.05, 1.0),
    "memory_fraction": (0.1, 1.0),
    "pair_memory_fraction": (0.05, 1.0),
    "overhead_s": (1e-7, 1e-3),
    "per_token_s": (1e-13, 1e-6),
    "cta_bytes_per_s": (1e9, 1e12),
    "cta_s": (1e-9, 1e-4),
    "l2_bytes": (1e6, 3e8),
    "l2_speedup": (1.01, 11.0),
    "reread_fraction": (1e-5, 1.0),
    "unaligned_penalty": (1e-3, 10.0),
}


def _subset(rows: MoeRows, idx: np.ndarray) -> MoeRows:
    return MoeRows({k: v[idx] for k, v in rows.cols.items()}, tuple(rows.laws[i] for i in idx), rows.measured_s[idx])


def fit_moe(rows: MoeRows, flavour: GemmFlavour, gpu: GpuPeaks, table: KernelTable) -> tuple[MoeParams, ErrorStats]:
    """Least-squares fit of one dtype's MoE entry: each tile set and pair rule tried (all-pairs only where no row has
    EP > 1), lowest fit-subsample P90 kept."""
    sub = _subset(rows, subsample_index(rows.measured_s.size, MAX_MOE_FIT_ROWS))
    shapes, n = layer_shapes(sub, flavour), sub.measured_s.size
    inter = np.ceil(rows.cols["inter_size"] / rows.cols["moe_tp_size"])
    fixed, x0 = dict(FIXED), dict(X0)
    if not np.any(np.mod(inter, 16.0) != 0.0):  # no misaligned shard measured (block-FP8 needs 128 | I/tp)
        fixed["unaligned_penalty"] = x0.pop("unaligned_penalty") * 0.0
    best: tuple[float, MoeParams] | None = None
    # without EP > 1 rows every pair is local and the two pair rules price the rows alike: keep the Triton path's
    # all-pairs rule (:class:`pdplan.specs.kernel_table.MoeParams`) rather than the optimiser's noise
    rules = (True, False) if np.any(rows.cols["moe_ep_size"] > 1.0) else (True,)
    for tiles in TILES:
        for all_pairs in rules:

            def predict(p: dict[str, float], tiles: dict[str, int] = tiles, all_pairs: bool = all_pairs) -> FloatArray:
                params = MoeParams(**p, **fixed, **tiles, all_pairs=all_pairs)
                return _predict(shapes, n, params, flavour, gpu, table)

            res = fit_parameters(predict, x0, BOUNDS, sub.measured_s, f_scale=0.05)
            if best is None or res.stats.p90_abs_pct < best[0]:
                best = (res.stats.p90_abs_pct, MoeParams(**res.params, **fixed, **tiles, all_pairs=all_pairs))
    assert best is not None
    params = best[1]
    return params, error_stats(predict_moe_s(rows, params, flavour, gpu, table), rows.measured_s)


def shape_keys(rows: MoeRows) -> list[tuple[float, float, float, float]]:
    """(hidden, inter, top-k, experts) of every row: the model shape a held-out split keeps together."""
    c = rows.cols
    return list(zip(c["hidden_size"], c["inter_size"], c["topk"], c["num_experts"], strict=True))


def held_out(
    rows: MoeRows, flavour: GemmFlavour, gpu: GpuPeaks, table: KernelTable, *, seed: int = 0, share: float = 0.25
) -> tuple[int, int, ErrorStats]:
    """Fit on a random 1 − ``share`` of the model shapes, score the rest: (shapes, held-out shapes, their errors)."""
    keys = shape_keys(rows)
    shapes = sorted(set(keys))
    rng = np.random.default_rng(seed)
    held = {shapes[i] for i in rng.choice(len(shapes), size=max(1, round(share * len(shapes))), replace=False)}
    test = np.array([k in held for k in keys])
    params, _ = fit_moe(_subset(rows, np.flatnonzero(~test)), flavour, gpu, table)
    unseen = _subset(rows, np.flatnonzero(test))
    return len(shapes), len(held), error_stats(predict_moe_s(unseen, params, flavour, gpu, table), unseen.measured_s)
