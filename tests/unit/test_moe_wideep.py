"""SGLang's wide-EP MoE family (pdplan.perf.moe_wideep): the kernel-selection rule, the formula by hand, the fit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from fitting.fit_families import stub_table
from support.calibration import calibration_file

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.perf.moe import moe_shape
from pdplan.perf.moe_wideep import moe_kernel_for, received_rows, wideep_moe_time_s, wideep_params
from pdplan.perf.precision import Precision
from pdplan.serving.engine_bind import with_engine
from pdplan.serving.role_hardware import RoleHardware
from pdplan.specs.moe_wideep import MoeRuntime, WideEpMoeParams
from pdplan.specs.perf_data import PerfData
from pdplan.specs.routing_law import RoutingLaw


@dataclasses.dataclass(frozen=True)
class _Gpu:
    name: str = "toy"
    bf16_flops_per_s: float = 5e11
    fp8_flops_per_s: float | None = 1e12
    memory_bytes_per_s: float = 1e9


NO_DATA = PerfData()  # the DeepGEMM and fused rules read no per-GPU MoE entry


def test_rule_sglang_ep_fp8_runs_deepgemm() -> None:
    c = open_catalog()
    sglang, vllm = c.engine("sglang").moe, c.engine("vllm").moe
    h100 = c.kernel_table("h100-sxm")
    assert moe_kernel_for(sglang, 72, 1.0, h100, NO_DATA) == "deepgemm_wideep"
    assert moe_kernel_for(sglang, 1, 1.0, h100, NO_DATA) == "fused"  # no EP: SGLang's fused MoE
    assert moe_kernel_for(sglang, 8, 2.0, h100, NO_DATA) == "fused"  # BF16 experts: DeepGEMM's grouped GEMMs are FP8
    assert moe_kernel_for(vllm, 72, 1.0, h100, NO_DATA) == "fused"  # vLLM runs its fused MoE under EP too
    assert moe_kernel_for(None, 72, 1.0, h100, NO_DATA) == "fused"  # profiles without a moe block (trtllm, kernels)
    assert moe_kernel_for(sglang, 8, 1.0, c.kernel_table("l40s"), NO_DATA) == "fused"  # no DeepGEMM before Hopper


def test_rule_states_its_source() -> None:
    moe = open_catalog().engine("sglang").moe
    assert moe is not None
    assert "DeepGEMM" in moe.source
    assert not moe.two_batch_overlap


def _hw(ep: int, weight_bytes: float = 1.0, tbo: bool | None = None) -> RoleHardware:
    c = open_catalog()
    prec = Precision(weight_bytes=weight_bytes, act_bytes=2.0, kv_bytes=1.0)
    return RoleHardware(
        c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm"), 1, 1, prec, dp=ep, ep=ep,
        two_batch_overlap=tbo,
    )  # fmt: skip


def test_with_engine_binds_kernel_and_overlap() -> None:
    c = open_catalog()
    sglang, vllm = c.engine("sglang"), c.engine("vllm")
    assert with_engine(_hw(32), sglang).moe_kernel == "deepgemm_wideep"
    assert with_engine(_hw(32), vllm).moe_kernel == "fused"
    assert with_engine(_hw(32), sglang).two_batch_overlap is False  # off by default, as SGLang
    assert with_engine(_hw(32, tbo=True), sglang).two_batch_overlap is True  # the scenario's word wins
    on = sglang.model_copy(update={"moe": MoeRuntime(ep_kernel="deepgemm_wideep", two_batch_overlap=True, source="x")})
    assert with_engine(_hw(32), on).two_batch_overlap is True


def test_received_rows_hand_worked() -> None:
    # ep 32, k 8: ρ = 32·(1 − (31/32)^8)/8 = 0.89720; P = 131,072 -> R = 117,598
    assert float(received_rows(524_288, 131_072, 8, 32)) == pytest.approx(117_597.86, rel=1e-6)
    assert float(received_rows(100, 800, 8, 1)) == pytest.approx(100.0)  # EP 1: every token once
    assert float(received_rows(10, 1e6, 8, 4)) == pytest.approx(10.0)  # never more than the tokens


def test_formula_hand_worked() -> None:
    """T = 64 tokens, E = 8, k = 2, ep = 2, balanced: P = 64, H = 4; h = 1000, I = 100, FP8 (1 B), m_tile 16:
    P' = 4·⌈16/16⌉·16 = 64; compute = 2·3·1000·100·64 / (1e12·0.5) = 76.8 µs; memory = (4·3·1000·100·1
    + 64·(2000 + 600)·2) B / 1e9 B/s = 1532.8 µs; q = 16 -> max; R = min(64, 64·0.75) = 48:
    10 + 0.1·48 + 1·4 + 1532.8 = 1551.6 µs."""
    shape = moe_shape(64, 1000, 100, 8, 2, ep=2, weight_bytes=1.0, law=RoutingLaw("balanced"))
    p = WideEpMoeParams(
        peak_fraction=0.5, m0_tokens=0.0, memory_fraction=1.0, overhead_s=1e-5, smooth_q=16.0,
        per_row_s=1e-7, per_expert_s=1e-6, m_tile=16,
    )  # fmt: skip
    t = float(wideep_moe_time_s(shape, "prefill", _Gpu(), stub_table("toy"), p))
    assert t == pytest.approx(1551.6e-6, rel=1e-4)


def test_missing_entry_is_a_clear_error() -> None:
    with pytest.raises(SpecError, match="no moe_wideep entry"):
        wideep_params(open_catalog().kernel_table("l40s"), "decode")


def test_more_ep_never_slower_per_gpu() -> None:
    """At a fixed global batch, a wider EP group gives each GPU fewer experts and pairs: never more time."""
    table = open_catalog().kernel_table("h100-sxm")
    gpu = open_catalog().gpu("h100-sxm")
    for phase in ("prefill", "decode"):
        eps = np.array([8.0, 16.0, 32.0, 64.0, 128.0])
        shape = moe_shape(np.full(5, 16384.0), 7168, 2048, 256, 8, ep=eps, weight_bytes=1.0)
        t = wideep_moe_time_s(shape, phase, gpu, table)  # type: ignore[arg-type]
        assert np.all(np.diff(t) <= 0.0)


def test_shipped_fit_within_target() -> None:
    """The shipped entries against every measured row (docs/kernel_accuracy.md): median <= 10 %, P90 <= 25 %."""
    from fitting.fit_wideep import FILES, predict_wideep_s, read_wideep

    from pdplan.calibrate.fit import error_stats

    c = open_catalog()
    for gpu_id, sub in (("h100-sxm", "h100_sxm"), ("b200", "b200_sxm")):
        table, gpu = c.kernel_table(gpu_id), c.gpu(gpu_id)
        for phase in ("prefill", "decode"):
            data = calibration_file(f"aiconfigurator-moe/{sub}/{FILES[phase]}").parent
            rows = read_wideep(data, phase)  # type: ignore[arg-type]
            s = error_stats(predict_wideep_s(rows, table.moe_wideep[phase], phase, gpu, table), rows.measured_s)  # type: ignore[index, arg-type]
            assert s.median_abs_pct <= 10.0, (gpu_id, phase, s)
            assert s.p90_abs_pct <= 25.0, (gpu_id, phase, s)


def test_scenario_states_the_overlap() -> None:
    """The wide-EP example (engine sglang, two_batch_overlap true) binds DeepGEMM experts and TBO to both roles; the
    same scenario without the key keeps SGLang's default (off)."""
    from pdplan.io.scenario import load_scenario
    from pdplan.serving.resolve import role_hardware

    c = open_catalog()
    sc = load_scenario(Path(__file__).resolve().parents[2] / "examples" / "deepseek-v3-wide-ep.yaml")
    model = c.model(sc.model)
    for role in (sc.prefill, sc.decode):
        hw = role_hardware(c, model, role, sc)
        assert hw is not None
        assert (hw.moe_kernel, hw.two_batch_overlap) == ("deepgemm_wideep", True)
    default = role_hardware(c, model, sc.decode, sc.model_copy(update={"two_batch_overlap": None}))
    assert default is not None
    assert default.two_batch_overlap is False
