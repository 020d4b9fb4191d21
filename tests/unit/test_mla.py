"""The MLA module (absorbed decode, decompressed prefill) and its fitted cost, hand-worked."""

from __future__ import annotations

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.perf.mla import mla_core_flops_bytes, mla_core_time_s, mla_gemms, mla_key, mla_module_time_s
from pdplan.perf.op_types import PassShape
from pdplan.perf.ops import forward_ops
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.specs.kernel_table import MlaParams

CAT = open_catalog()
DSV3 = CAT.model("deepseek-v3")


def test_decode_runs_the_absorbed_projections() -> None:
    assert DSV3.mla is not None
    g = {name: (d, bf16) for name, d, bf16 in mla_gemms(DSV3.mla, 7168, np.asarray(16.0), "decode", np.asarray(8.0))}
    assert list(g) == ["attn.qkv_a_proj", "attn.q_b_proj", "attn.uk_bmm", "attn.uv_bmm", "attn.o_proj"]
    assert float(g["attn.qkv_a_proj"][0]["n"]) == 1536 + 512 + 64  # replicated down-projections
    assert float(g["attn.q_b_proj"][0]["n"]) == 16 * 192
    assert float(g["attn.uk_bmm"][0]["n"]) == 16 * 512
    assert g["attn.uk_bmm"][1]
    assert float(g["attn.uv_bmm"][0]["k"]) == 512
    assert g["attn.uv_bmm"][1]
    assert float(g["attn.o_proj"][0]["k"]) == 16 * 128


def test_prefill_decompresses_kv() -> None:
    assert DSV3.mla is not None
    names = [n for n, _, _ in mla_gemms(DSV3.mla, 7168, np.asarray(16.0), "prefill", np.asarray(4096.0))]
    assert "attn.kv_b_proj" in names
    assert "attn.uk_bmm" not in names


def test_core_flops_and_bytes() -> None:
    assert DSV3.mla is not None
    b, c, n = np.asarray(4.0), np.asarray(1000.0), np.asarray(16.0)
    flops, bytes_ = mla_core_flops_bytes(DSV3.mla, "decode", b, c, n, 1.0)
    assert float(flops) == 2 * 4 * 16 * 1000 * (2 * 512 + 64)  # MQA over the latent: keys 576, values 512
    assert float(bytes_) == 4 * 1000 * 576 * 1.0  # the latent, read once for all heads
    flops, _ = mla_core_flops_bytes(DSV3.mla, "prefill", b, c, n, 2.0)
    assert float(flops) == 4 * 16 * 1000**2 * (192 + 128)  # causal half of 2·2·S²


def test_core_time_formula() -> None:
    assert DSV3.mla is not None
    gpu = CAT.gpu("h200-sxm")
    p = MlaParams(
        overhead_s=1e-5,
        per_token_s=1e-8,
        per_sequence_s=1e-7,
        compute_fraction=0.5,
        memory_fraction=0.8,
        ramp=16.0,
        smooth_q=1.0,
    )
    b, c, n = np.asarray(4.0), np.asarray(1000.0), np.asarray(16.0)
    flops, bytes_ = mla_core_flops_bytes(DSV3.mla, "decode", b, c, n, 1.0)
    want = 1e-5 + 4e-8 + 4e-7 + flops * 2.0 / (gpu.bf16_flops_per_s * 0.5) + bytes_ / (gpu.memory_bytes_per_s * 0.8)
    assert float(mla_core_time_s(DSV3.mla, "decode", b, c, n, 1.0, p, gpu)) == pytest.approx(float(want))


def test_roofline_prices_mla_with_the_fitted_entry() -> None:
    gpu, table = CAT.gpu("h200-sxm"), CAT.kernel_table("h200-sxm")
    assert mla_key("decode", "fp8", 1.0) in table.mla
    prec = Precision(weight_bytes=1.0, kv_bytes=1.0)
    kw = {"phase": "decode", "batch": 32.0, "tokens": 4096.0, "tp": 8.0, "precision": prec}
    fitted = phase_time(DSV3, gpu, table, **kw)  # type: ignore[arg-type]
    generic = phase_time(DSV3, gpu, table.model_copy(update={"mla": {}}), **kw)  # type: ignore[arg-type]
    per_layer = sum(float(o.time_s) / o.count for o in fitted.ops if o.name.startswith("attn."))
    assert DSV3.mla is not None
    module = mla_module_time_s(
        DSV3.mla, 7168, "decode", np.asarray(32.0), np.asarray(4096.0), np.asarray(16.0), "fp8", 1.0, gpu, table
    )
    assert per_layer == pytest.approx(float(module))
    assert float(fitted.time_s) != pytest.approx(float(generic.time_s))


def test_mla_ops_keep_their_kinds() -> None:
    shape = PassShape("decode", np.array(32.0), np.array(4096.0), np.array(8.0))
    kinds = {o.name: o.kind for o in forward_ops(DSV3, shape) if o.name.startswith("attn.")}
    assert kinds["attn.core"] == "attn_decode"
    assert kinds["attn.o_proj"] == "gemm"
