"""The vllm-0.18 profile: vLLM with async scheduling (one extra step before a token returns, host time hidden)."""

from __future__ import annotations

from pdplan.io.catalog import open_catalog
from pdplan.io.engines import packaged_engine_names

CAT = open_catalog()


def test_vllm_018_profile_loads_with_async_scheduling() -> None:
    p = CAT.engine("vllm-0.18")
    assert p.engine == "vllm"
    assert p.version == "0.18.0"
    assert p.scheduling.overlap_scheduling
    assert p.scheduling.overlap_extra_steps == 1.0
    assert p.overheads.step_overhead_s(36, 2) == 0.000179  # fitted on the 0.18 rows of both GPUs: hidden by async
    assert "vllm-0.18" in packaged_engine_names()


def test_vllm_018_keeps_the_012_limits_and_has_its_own_request_cost() -> None:
    """Seats and budget are 0.12's; the per-request cost is 5 ms ('a few ms', vLLM issue #22161) with no per-layer
    term (AIC's 0.8 ms per layer, docs/engines.md §1.5, scanned on the 0.18 rows: 0 fits best, 0.34 ms at most), as
    0.12's since issue #23 removed the 24.9 ms fitted on its H100 rows; 0.12's step time is its own (2.16 ms)."""
    old, new = CAT.engine("vllm"), CAT.engine("vllm-0.18")
    assert new.limits == old.limits
    per_layer = new.overheads.request_s_per_layer
    assert (new.overheads.request_s.value, per_layer.value if per_layer else None) == (0.005, 0.0)
    assert old.overheads.request_s.value == 0.005
    assert old.overheads.step_overhead_s(36, 2) == 0.00216
