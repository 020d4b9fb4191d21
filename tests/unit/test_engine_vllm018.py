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
    assert p.overheads.step_overhead_s(36, 2) == 0.000739  # fitted on the 0.18 rows: mostly hidden by async scheduling
    assert "vllm-0.18" in packaged_engine_names()


def test_vllm_018_keeps_the_012_limits_and_request_costs() -> None:
    old, new = CAT.engine("vllm"), CAT.engine("vllm-0.18")
    assert new.limits == old.limits
    assert new.overheads.request_s == old.overheads.request_s
    assert old.overheads.step_overhead_s(36, 2) == 0.00223
