"""EPLB's prefill routing in serving (pdplan.serving.engine_bind.eplb_prefill_routing): the SGLang profile's
``eplb_prefill_routing`` law where the scenario holds redundant expert slots on the DeepGEMM wide-EP kernel."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pdplan.io.catalog import open_catalog
from pdplan.perf.precision import Precision
from pdplan.serving.engine_bind import eplb_prefill_routing, with_engine
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import prefill_pass_time
from pdplan.specs.routing_law import RoutingLaw


def _hw(ep: int, redundant: int) -> RoleHardware:
    c = open_catalog()
    prec = Precision(weight_bytes=1.0, act_bytes=2.0, kv_bytes=1.0)
    return RoleHardware(
        c.model("deepseek-v3"), c.gpu("h100-sxm"), c.kernel_table("h100-sxm"), 1, 1, prec, dp=ep, ep=ep,
        redundant_experts=redundant,
    )  # fmt: skip


def test_rule() -> None:
    c = open_catalog()
    sglang, vllm = c.engine("sglang"), c.engine("vllm")
    law = RoutingLaw("power_law", 0.6, 0.8)  # AIConfigurator's SGLang EPLB prefill rule
    assert eplb_prefill_routing(sglang, "deepgemm_wideep", 32) == law
    assert eplb_prefill_routing(sglang, "deepgemm_wideep", 0) is None  # no EPLB slots: uniform
    assert eplb_prefill_routing(sglang, "fused", 32) is None  # the law was measured on the DeepGEMM layer
    assert eplb_prefill_routing(vllm, "deepgemm_wideep", 32) is None  # vLLM's profile states no such law
    assert with_engine(_hw(32, 32), sglang).prefill_routing == law
    assert with_engine(_hw(32, 0), sglang).prefill_routing is None


def test_eplb_prices_the_busiest_gpu_in_prefill_only() -> None:
    sglang = open_catalog().engine("sglang")
    on, off = with_engine(_hw(32, 32), sglang), with_engine(_hw(32, 0), sglang)
    tokens = np.array([4096.0])
    slow = float(prefill_pass_time(on, batch=128.0, tokens=tokens, detail=False).time_s[0])
    even = float(prefill_pass_time(off, batch=128.0, tokens=tokens, detail=False).time_s[0])
    assert slow > even  # the busiest GPU carries 1.44x the mean load (0.8 x 1.80)


def test_the_wide_ep_example_runs_eplb_in_prefill() -> None:
    from pdplan.io.scenario import load_scenario
    from pdplan.serving.resolve import role_hardware

    c = open_catalog()
    sc = load_scenario(Path(__file__).resolve().parents[2] / "examples" / "deepseek-v3-wide-ep.yaml")
    hw = role_hardware(c, c.model(sc.model), sc.prefill, sc)
    assert hw is not None
    assert hw.prefill_routing == RoutingLaw("power_law", 0.6, 0.8)
