"""KV admission read from the engine profile (issue #23): SGLang's ratio reservation (pdplan.queueing.kv_admission
``kv_ratio_held``, ``admission_footprint``), the benchmark loop's admitted clients under it, and the profiles as the
one source of truth (every shipped profile states its rule)."""

from __future__ import annotations

import dataclasses

import pytest

from pdplan.benchmark.colocated_loop import LoopInputs, admitted
from pdplan.errors import SpecError
from pdplan.io.engines import ENGINE_DIR, load_engine, load_engine_file
from pdplan.queueing import LinearStepTime, decode_workload
from pdplan.queueing.kv_admission import (
    admission_footprint,
    kv_held,
    kv_mean_rate,
    kv_ratio_held,
    ratio_reserve_mean_tokens,
)
from pdplan.specs.base import validate_spec
from pdplan.specs.engine import EngineProfile

STEP = LinearStepTime(8e-3, 50e-6, 3.9e-8)  # docs/queueing.md §6.3 coefficients
NO_CLIP = 1e9


def test_ratio_footprint_hand_worked() -> None:
    # L = 100, n = 4, r = 0.5: f_j = 100 + j + 0.5 (4 - j) = 102, 102.5, 103, 103.5
    held = kv_ratio_held(decode_workload([100.0], [4.0], [1.0]), 0.0, 0.5, NO_CLIP)
    assert held.work == pytest.approx(411.0)
    assert held.square_sum == pytest.approx(102.0**2 + 102.5**2 + 103.0**2 + 103.5**2)  # 42,231.5
    assert held.scv == pytest.approx(0.0, abs=1e-12)


def test_ratio_footprint_with_the_clip() -> None:
    # L = 10, n = 6, c = 2, r = 0.5: remaining min(6 - j, 2) = 2, 2, 2, 2, 2, 1 -> f = 11, 12, 13, 14, 15, 15.5
    held = kv_ratio_held(decode_workload([10.0], [6.0], [1.0]), 0.0, 0.5, 2.0)
    assert held.work == pytest.approx(80.5)
    assert held.square_sum == pytest.approx(1095.25)


def test_ratio_footprint_with_window_state_and_clip() -> None:
    # L = 10, s = 2, w = 14 (so b = 12, top 16), n = 8, c = 3, r = 0.25:
    # held min(12 + j, 16) = 12, 13, 14, 15, 16, 16, 16, 16; remaining min(8 - j, 3) = 3, 3, 3, 3, 3, 3, 2, 1
    f = [12.75, 13.75, 14.75, 15.75, 16.75, 16.75, 16.5, 16.25]
    held = kv_ratio_held(decode_workload([10.0], [8.0], [1.0], window_tokens=14.0), 2.0, 0.25, 3.0)
    assert held.work == pytest.approx(sum(f)) == pytest.approx(123.25)
    assert held.square_sum == pytest.approx(sum(x * x for x in f)) == pytest.approx(1914.6875)


def test_ratio_zero_and_one_are_the_growing_and_reserved_footprints() -> None:
    wl = decode_workload([500.0, 3000.0], [50.0, 300.0], [0.7, 0.3])
    for ratio, reserve in ((0.0, False), (1.0, True)):
        mine, theirs = kv_ratio_held(wl, 16.0, ratio, NO_CLIP), kv_held(wl, 16.0, reserve=reserve)
        assert mine.work == pytest.approx(theirs.work, rel=1e-12)
        assert mine.square_sum == pytest.approx(theirs.square_sum, rel=1e-12)
        assert mine.scv == pytest.approx(theirs.scv, rel=1e-9)


def test_ratio_limit_lies_between_growing_and_reserved() -> None:
    # W = E[nb + n(n - 1)/2 + r n(n + 1)/2], b = L + s:
    # 0.7 x (50 x 516 + 1225 + 0.1 x 1275) + 0.3 x (300 x 3016 + 44850 + 0.1 x 45150)
    wl = decode_workload([500.0, 3000.0], [50.0, 300.0], [0.7, 0.3])
    held = kv_ratio_held(wl, 16.0, 0.1, NO_CLIP)
    assert held.work == pytest.approx(0.7 * (25800 + 1225 + 127.5) + 0.3 * (904800 + 44850 + 4515))
    grow, keep = kv_held(wl, 16.0, reserve=False), kv_held(wl, 16.0, reserve=True)
    rates = [kv_mean_rate(wl, h, STEP, 2e5) for h in (keep, held, grow)]
    assert rates[0] < rates[1] < rates[2]


def test_admission_follows_the_profile() -> None:
    wl = decode_workload([1000.0], [200.0], [1.0])
    sglang = load_engine("sglang").scheduling
    assert sglang.kv_admission == "ratio"
    assert sglang.kv_reserve_ratio is not None
    assert (sglang.kv_reserve_ratio.ratio, sglang.kv_reserve_ratio.clip_tokens) == (0.098, 4096)
    assert admission_footprint(wl, 0.0, sglang) == kv_ratio_held(wl, 0.0, 0.098, 4096.0)
    assert admission_footprint(wl, 0.0, load_engine("trtllm").scheduling) == kv_held(wl, 0.0, reserve=True)
    for name in ("vllm", "vllm-0.18", "kernels"):
        assert admission_footprint(wl, 0.0, load_engine(name).scheduling) == kv_held(wl, 0.0, reserve=False)


def test_ratio_admission_needs_its_share_and_only_it() -> None:
    doc = load_engine("sglang").model_dump()
    without = {**doc, "scheduling": {**doc["scheduling"], "kv_reserve_ratio": None}}
    with pytest.raises(SpecError, match="kv_reserve_ratio"):
        validate_spec(EngineProfile, without, source="test")
    stray = {**doc, "scheduling": {**doc["scheduling"], "kv_admission": "on_demand"}}
    with pytest.raises(SpecError, match="kv_reserve_ratio"):
        validate_spec(EngineProfile, stray, source="test")


def test_ratio_reserve_mean_tokens() -> None:
    assert ratio_reserve_mean_tokens(0.0, 4096.0) == 0.0
    assert ratio_reserve_mean_tokens(1024.0, 4096.0) == 512.0
    # mean of min(u, 4) over u uniform on [0, 10]: (8 + 6 x 4)/10 = 3.2
    assert ratio_reserve_mean_tokens(10.0, 4.0) == pytest.approx(3.2)


def _loop(**kw: object) -> LoopInputs:
    base = LoopInputs(
        step=LinearStepTime(1e-3, 1e-4, 0.0),
        prompt_s=0.01,
        input_tokens=1024.0,
        output_tokens=1025.0,
        budget_tokens=8192,
        seats=1024,
        kv_tokens=100_000.0,
        mixed=False,
        request_delay_s=0.0,
        overlap_steps=1.0,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_loop_admits_on_the_ratio_footprint() -> None:
    # ISL 1,024, 1,024 decoded, 100,000 KV tokens: reserved 2,048 each -> 48; on demand 1,024 + 512 = 1,536 -> 65;
    # r = 0.1: + 0.1 x 512 = 1,587.2 -> 63; clip 256: + 0.1 x (256 - 256^2/2,048) = 22.4 -> 1,558.4 -> 64
    assert admitted(_loop(), 128) == 48
    assert admitted(_loop(kv_on_demand=True), 128) == 65
    assert admitted(_loop(kv_on_demand=True, kv_reserve_ratio=0.1, kv_reserve_clip_tokens=4096.0), 128) == 63
    assert admitted(_loop(kv_on_demand=True, kv_reserve_ratio=0.1, kv_reserve_clip_tokens=256.0), 128) == 64


def test_every_shipped_profile_states_its_admission_rule() -> None:
    """No shipped profile leans on the spec's default: each names ``kv_admission`` in its own YAML, and the families
    read as the engines' sources say (TensorRT-LLM reserves, vLLM on demand, SGLang by its ratio)."""
    rules = {}
    for path in sorted(ENGINE_DIR.glob("*.yaml")):
        assert "kv_admission:" in path.read_text(), path.name
        profile = load_engine_file(path)
        rules.setdefault(profile.engine, set()).add(profile.scheduling.kv_admission)
    assert rules["trtllm"] == {"reserve"}
    assert rules["vllm"] == {"on_demand"}
    assert rules["sglang"] == {"ratio"}
