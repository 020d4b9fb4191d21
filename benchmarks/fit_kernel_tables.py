"""Regenerate pdplan/data/kernel_tables/*.yaml from the AIConfigurator kernel measurements.

Usage: python benchmarks/fit_kernel_tables.py [--data DIR]

Measured GPUs get calibrated tables (fitted per family, numbers rounded to 4 significant digits so the
output is deterministic); the others get derived tables: efficiencies copied from the nearest measured
architecture, peaks taken at run time from the GPU's own datasheet (hardware_db/gpus/<id>.yaml).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))  # tools/fitting: the offline fitters

import yaml
from data_root import KERNEL_DATA, calibration_path
from fitting import fit_allreduce as fa
from fitting import fit_families as ff
from fitting import fit_gemm as fg
from fitting import pcie_allreduce as pa

from pdplan.calibrate import fit
from pdplan.io.files import load_spec_file
from pdplan.io.kernel_tables import TABLE_DIR
from pdplan.specs.hardware import GpuSpec
from pdplan.specs.kernel_attention import DecodeTiling, PrefillTiling
from pdplan.specs.kernel_table import KERNEL_TABLE_SCHEMA_VERSION, GemmParams, KernelTable

REPO = Path(__file__).resolve().parents[1]
MEASURED = {
    "a100-sxm-80gb": "a100_sxm",
    "h100-sxm": "h100_sxm",
    "h200-sxm": "h200_sxm",
    "l40s": "l40s",
    "b200": "b200_sxm",
}
DERIVED = {
    "a100-sxm-40gb": "a100-sxm-80gb",
    "a100-pcie-80gb": "a100-sxm-80gb",
    "h100-pcie": "h100-sxm",
    "h800-sxm": "h100-sxm",
    "h20": "h100-sxm",
    "l40": "l40s",
    "l4": "l40s",
    "mi300x": "h100-sxm",
}
PCIE_REFERENCE = "l40s"  # the one measured PCIe-only part: its all-reduce α/β scale to other PCIe parts
# Attention kernels per (GPU, KV dtype), from AIConfigurator's kernel_source column, and their tiling.
KERNELS = {
    ("a100-sxm-80gb", "bf16"): "fa2",
    ("h100-sxm", "bf16"): "fa3",
    ("h100-sxm", "fp8"): "fa3",
    ("h200-sxm", "bf16"): "fa3",
    ("h200-sxm", "fp8"): "fa3",
    ("l40s", "bf16"): "fa2",
    ("l40s", "fp8"): "flashinfer",
    ("b200", "bf16"): "trtllm",
    ("b200", "fp8"): "trtllm",
}
_DECODE_FIT = {"cta_bytes_per_s": 2e10}  # placeholder, fitted
TILINGS: dict[str, tuple[PrefillTiling, DecodeTiling, str]] = {
    "fa2": (
        PrefillTiling(tile_q=64, tile_kv=64, pack_gqa=False, ctas_per_sm=2),
        DecodeTiling(tile_q=64, tile_kv=128, pack_gqa=True, ctas_per_sm=2, split_mha=False, **_DECODE_FIT),
        "FlashAttention-2 (vllm_flash_attn): causal prefill in 64x64 tiles (flash_fwd_launch_"
        "template.h: 'for sm86 or sm89, 64 x 64 is the fastest for causal'; on A100 64x64 and "
        "the split kernel's 64x128 fit alike), one head per CTA, 2 CTAs/SM (its split heuristic "
        "counts 2 per SM); decode: the paged split-KV kernel, 64-row tiles of the GQA group "
        "(seqlenq_ngroups_swapped), 128-key blocks; plain MHA takes the unswapped path and never "
        "splits",
    ),
    "fa3": (
        PrefillTiling(tile_q=128, tile_kv=128, pack_gqa=True),
        DecodeTiling(tile_q=64, tile_kv=128, pack_gqa=True, **_DECODE_FIT),
        "FlashAttention-3 (vllm_flash_attn_fa3): 128x128 causal tiles at head_dim 128 "
        "(hopper/tile_size.h), PackGQA always for varlen (hopper/heuristics.h), 1 CTA/SM; "
        "head_dim 512 rows run FA4 and share the fit",
    ),
    "flashinfer": (
        PrefillTiling(tile_q=64, tile_kv=32, pack_gqa=True),
        DecodeTiling(tile_q=64, tile_kv=128, pack_gqa=True, **_DECODE_FIT),
        "FlashInfer (fp8 KV on L40S): GQA packed into the query rows; prefill tiles "
        "64x32, the lowest fit P90 of 16/64/128 x 32/64/128 (its CTA_TILE_Q adapts to "
        "the packed length); head_dim 192 rows run Triton",
    ),
    "trtllm": (
        PrefillTiling(tile_q=128, tile_kv=128, pack_gqa=False),
        DecodeTiling(tile_q=64, tile_kv=128, pack_gqa=True, **_DECODE_FIT),
        "TensorRT-LLM FMHA via FlashInfer (trtllm-gen): prefill 128x128 tiles, one head per "
        "CTA (no GQA packing; the lowest fit P90 of 64/128/256 tiles, packed or not), decode "
        "packed; one-token prompts run the decode kernel; head_dim 192 fp8 rows run Triton",
    ),
}
FRAMEWORK_NOTE = (
    "ASSUMPTION, not fitted: kernel tables cannot show per-step framework time (scheduling, sampling, "
    "launch gaps). 0 s here so nothing is double counted; fit it with `pdplan calibrate` on "
    "phase-level step times."
)


def gpu_spec(gpu_id: str) -> GpuSpec:
    return load_spec_file(GpuSpec, REPO / "hardware_db" / "gpus" / f"{gpu_id}.yaml")


def _r(value: float) -> float:
    return float(f"{value:.4g}")


def _rounded(params: dict[str, Any]) -> dict[str, Any]:
    return {k: _r(v) if isinstance(v, float) else _rounded(v) if isinstance(v, dict) else v for k, v in params.items()}


def _round_allreduce(ar: dict[str, Any], scale: float = 1.0) -> dict[str, Any]:
    """Rounded all-reduce block with every bus bandwidth multiplied by ``scale``."""

    def ab(x: dict[str, Any]) -> dict[str, float]:
        return {"alpha_s": _r(x["alpha_s"]), "bus_bytes_per_s": _r(x["bus_bytes_per_s"] * scale)}

    return {
        **ab(ar),
        "custom": {n: ab(x) for n, x in ar.get("custom", {}).items()},
        "nccl": {n: ab(x) for n, x in ar.get("nccl", {}).items()},
    }


def _src(csv_name: str, what: str, stats: fit.ErrorStats) -> str:
    return (
        f"{csv_name} {what}: {stats.n} rows (fit on <= {fit.MAX_FIT_ROWS}, every k-th row), "
        f"log-residual soft-L1 (f_scale {ff.F_SCALE}) least squares, smooth_q then fixed at the nearest of "
        f"{'/'.join(f'{q:g}' for q in fit.FAST_EXPONENTS)} and the rest refitted; median |err| "
        f"{stats.median_abs_pct:.1f}%, P90 {stats.p90_abs_pct:.1f}%"
    )


def _pct(stats: fit.ErrorStats) -> str:
    return f"median {stats.median_abs_pct:.1f}%, P90 {stats.p90_abs_pct:.1f}%"


def _gemm_entry(params: GemmParams) -> dict[str, Any]:
    """Rounded GEMM entry; the small-M fields only where the entry has one (never inside it)."""
    unset = {"small_m", "small_m_tokens"}
    if params.small_m is None:
        return _rounded(params.model_dump(exclude=unset))
    return {
        **_rounded(params.model_dump(exclude=unset)),
        "small_m_tokens": params.small_m_tokens,
        "small_m": _rounded(params.small_m.model_dump(exclude=unset)),
    }


def _gemm_note(params: GemmParams) -> str:
    small = (
        f". small_m: rows with m <= {params.small_m_tokens} fitted alone (vLLM's CUTLASS FP8 small-tile kernels; "
        "tools/fitting/fit_gemm.py GEMM_SMALL_M_TOKENS)"
        if params.small_m is not None
        else ""
    )
    l2 = "" if params.l2_speedup > 1.0 else ". No warm-L2 term (no row streams its weights above the HBM rate)"
    return small + l2


def fit_measured(gpu_id: str, data_dir: Path) -> dict[str, Any]:
    """Fit every family available for one measured GPU into a table dictionary."""
    gpu, sources = gpu_spec(gpu_id), {}
    table: dict[str, Any] = {"gemm": {}, "prefill_attention": {}, "decode_attention": {}}
    for flavour in ("bf16", "fp8"):
        rows = fit.read_gemm(data_dir, flavour)  # type: ignore[arg-type]
        if rows["m"].size:
            params, stats = fg.fit_gemm(rows, flavour, gpu, gpu_id)  # type: ignore[arg-type]
            table["gemm"][flavour] = _gemm_entry(params)
            sources[f"gemm.{flavour}"] = _src("gemm.csv", f"gemm_dtype={flavour}", stats) + _gemm_note(params)
    for kv in ("bf16", "fp8"):
        prefill_tiling, decode_tiling, why = TILINGS[KERNELS.get((gpu_id, kv), "fa3")]
        for phase, key, fitter, tiling in (
            ("context", "prefill_attention", ff.fit_prefill, prefill_tiling),
            ("generation", "decode_attention", ff.fit_decode, decode_tiling),
        ):
            rows = fit.read_attention(data_dir, phase, kv)  # type: ignore[arg-type]
            if rows["isl"].size:
                params, stats = fitter(rows, kv, gpu, gpu_id, tiling)  # type: ignore[operator]
                table[key][kv] = _rounded(params.model_dump())
                sources[f"{key}.{kv}"] = (
                    _src(f"{phase}_attention.csv", f"kv_cache_dtype={kv}", stats) + f". Tiling: {why}"
                )
    for key in ("prefill_attention", "decode_attention"):
        if "fp8" not in table[key]:
            table[key]["fp8"] = table[key]["bf16"]
            sources[f"{key}.fp8"] = "NOT MEASURED (no fp8-KV rows): copied from the bf16-KV fit"
    custom = fit.read_allreduce(data_dir / "custom_allreduce.csv", "all_reduce", "bfloat16")
    nccl = fit.read_allreduce(data_dir / "nccl.csv", "all_reduce", "half")
    ar, ar_stats = fa.fit_allreduce(custom, nccl, gpu, gpu_id)
    table["allreduce"] = _round_allreduce(ar.model_dump())
    sources["allreduce"] = (
        "custom_allreduce.csv (TRT-LLM custom all_reduce, bf16) and nccl.csv (NCCL all_reduce, "
        "half); message_size read as ELEMENTS (x2 bytes). alpha-beta with ring factor 2(n-1)/n "
        "fitted per GPU count (2/4/8) and per implementation; time = the faster (engines switch "
        f"custom -> NCCL by size). custom: {_pct(ar_stats['custom'])}; NCCL: "
        f"{_pct(ar_stats['nccl'])}; faster-of-two vs measured min: {_pct(ar_stats['best'])}. "
        "Fallback alpha/bus (other GPU counts, PP hand-off alpha): NCCL over all counts"
    )
    if gpu.scale_up_fabric == "pcie":  # the box's 4- and 8-GPU rows are not what a PCIe server does (issue 23 item 7)
        table["allreduce"] = pa.published_pcie_allreduce(table["allreduce"], gpu.scale_up_bytes_per_s)
        sources["allreduce"] += pa.rule_note(gpu.scale_up_bytes_per_s)
    bf16 = table["gemm"]["bf16"]
    table["elementwise"] = {"memory_fraction": bf16["memory_fraction"], "overhead_s": bf16["overhead_s"]}
    sources["elementwise"] = (
        "NOT FITTED (no elementwise rows in aiconfigurator-kernels): memory "
        "fraction and overhead borrowed from this GPU's bf16 GEMM fit"
    )
    return _finish(gpu_id, True, None, table, sources, data_dir)


def _finish(
    gpu_id: str,
    calibrated: bool,
    derived_from: str | None,
    table: dict[str, Any],
    sources: dict[str, str],
    data_dir: Path,
) -> dict[str, Any]:
    version = "vLLM 0.24.0 (A100: 0.14.0)"
    stack = (
        f"AIConfigurator 0.12.0 kernel tables, {version} backend kernels; TRT-LLM custom all-reduce; NCCL cross-check"
    )
    sources["framework"] = FRAMEWORK_NOTE
    sources["sm_count"] = f"hardware_db/gpus/{gpu_id}.yaml (sm_count and its source)"
    return {
        "schema_version": KERNEL_TABLE_SCHEMA_VERSION,
        "gpu": gpu_id,
        "calibrated": calibrated,
        "stack": stack,
        "derived_from": derived_from,
        "sm_count": gpu_spec(gpu_id).sm_count,
        **table,
        "framework": {"decode_step_overhead_s": 0.0},
        "sources": dict(sorted(sources.items())),
    }


def derive(gpu_id: str, base_id: str, base: dict[str, Any], pcie_ref: dict[str, Any]) -> dict[str, Any]:
    """Efficiencies from the nearest measured part; all-reduce scaled by datasheet link ratios."""
    gpu, ref = gpu_spec(gpu_id), gpu_spec(base_id)
    table = {k: base[k] for k in ("gemm", "prefill_attention", "decode_attention", "elementwise")}
    sources = {k: f"DERIVED from {base_id}: {v}" for k, v in base["sources"].items() if k != "framework"}
    if gpu.fp8_flops_per_s is None:
        table["gemm"] = {"bf16": table["gemm"]["bf16"]}
        sources.pop("gemm.fp8", None)
    if gpu.scale_up_fabric == "pcie":
        pcie = gpu_spec(PCIE_REFERENCE)
        ratio = gpu.scale_up_bytes_per_s / pcie.scale_up_bytes_per_s
        ar = pcie_ref["allreduce"]
        why = (
            f"PCIe-only part: {PCIE_REFERENCE} fitted all-reduce (PCIe Gen{pcie.pcie_gen}) with β "
            f"scaled by PCIe per-direction bandwidth {gpu.scale_up_bytes_per_s / 1e9:.1f}/"
            f"{pcie.scale_up_bytes_per_s / 1e9:.1f} GB/s" + pa.rule_note(gpu.scale_up_bytes_per_s)
        )
    else:
        ratio = gpu.scale_up_bytes_per_s / ref.scale_up_bytes_per_s
        ar = base["allreduce"]
        why = (
            f"{base_id} fitted all-reduce with every β scaled by scale-up bandwidth "
            f"{gpu.scale_up_bytes_per_s / 1e9:.0f}/{ref.scale_up_bytes_per_s / 1e9:.0f} GB/s "
            f"({gpu.scale_up_fabric} vs {ref.scale_up_fabric})"
        )
    table["allreduce"] = _round_allreduce(ar, ratio)
    sources["allreduce"] = why
    return _finish(gpu_id, False, base_id, table, sources, Path())


def write(table: dict[str, Any]) -> None:
    old = TABLE_DIR / f"{table['gpu']}.yaml"
    if (
        old.is_file()
    ):  # fused-MoE / EP all-to-all (fit_moe_tables.py), wide-EP (fit_wideep_tables.py), GDN (fit_gdn_tables.py)
        previous = yaml.safe_load(old.read_text(encoding="utf-8"))
        for group in ("moe", "ep_a2a", "moe_wideep", "linear_attention"):
            if previous.get(group) and group not in table and previous.get("calibrated") == table.get("calibrated"):
                table[group] = previous[group]
                table["sources"] |= {k: v for k, v in previous["sources"].items() if k.startswith(f"{group}.")}
    KernelTable.model_validate(table)  # never ship a table the loader would refuse
    header = (
        "# Generated by benchmarks/fit_kernel_tables.py; do not edit by hand.\n"
        "# Efficiencies only: peaks come from hardware_db/gpus/<gpu>.yaml.\n"
    )
    text = yaml.safe_dump(table, sort_keys=False, width=100, allow_unicode=True)
    (TABLE_DIR / f"{table['gpu']}.yaml").write_text(header + text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, help=f"default: {KERNEL_DATA} of the calibration data (benchmarks/data_root.py)"
    )
    args = parser.parse_args()
    args.data = args.data or calibration_path(KERNEL_DATA)
    TABLE_DIR.mkdir(exist_ok=True)
    measured = {gid: fit_measured(gid, args.data / sub) for gid, sub in MEASURED.items()}
    for table in measured.values():
        write(table)
        print(f"wrote {table['gpu']} (calibrated)")
    for gid, base in DERIVED.items():
        write(derive(gid, base, measured[base], measured[PCIE_REFERENCE]))
        print(f"wrote {gid} (derived from {base})")


if __name__ == "__main__":
    main()
