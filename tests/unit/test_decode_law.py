"""The decode-law warning (pdplan.serving.checks.decode_law): when it fires, what it says, and that reports carry it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.optimized import Optimized

from pdplan import evaluate, load_scenario
from pdplan.queueing import LinearStepTime
from pdplan.serving.checks.decode_law import LAW_WARN_MAX_REL_ERR, LAW_WARN_MEDIAN_REL_ERR, decode_law_warning
from pdplan.serving.roles import DecodePerf

ROOT = Path(__file__).resolve().parents[2]


def _perf(median: float, largest: float) -> DecodePerf:
    return DecodePerf(LinearStepTime(0.01, 1e-4, 1e-8), median, largest, 1e6, 256.0)


def test_thresholds_are_the_kernel_targets() -> None:
    assert (LAW_WARN_MEDIAN_REL_ERR, LAW_WARN_MAX_REL_ERR) == (0.10, 0.25)


@pytest.mark.parametrize(
    ("median", "largest", "fires"),
    [
        (0.007, 0.054, False),  # Llama-3.1-70B TP4 (README): well inside
        (0.10, 0.25, False),  # on both targets: inside
        (0.11, 0.20, True),  # median over 10 %
        (0.05, 0.26, True),  # max over 25 %
        (0.14, 0.38, True),  # Qwen3-235B FP8 TP4 EP4 (README)
    ],
)
def test_fires_only_past_a_target(median: float, largest: float, fires: bool) -> None:
    text = decode_law_warning(_perf(median, largest), "h100-sxm TP4 EP4")
    assert (text is not None) is fires


def test_says_the_instance_and_both_errors() -> None:
    text = decode_law_warning(_perf(0.164, 0.271), "h200-sxm TP1 DP16 EP16")
    assert text is not None
    assert "h200-sxm TP1 DP16 EP16" in text
    assert "16 % median, 27 % max" in text
    assert "docs/decode_law.md" in text


@pytest.mark.xdist_group("optimized")
def test_reports_carry_the_law_the_plan_prices(optimized: Optimized) -> None:
    # optimize's pick for the wide-EP example decodes on H200 DP16 EP16, where one line errs 15 / 26 % (which warned
    # until 2026-12-07); its step is now the minimum of two lines (1.8 / 8.2 %), whose errors the report carries, and
    # no warning; the example's own H100 DP72 EP72 decode and the default's dense decode stay inside the targets too
    wide = load_scenario(ROOT / "examples" / "deepseek-v3-wide-ep.yaml")
    picked = optimized("deepseek-v3-wide-ep")  # optimize(wide), shared
    assert picked.best.decode is not None
    assert picked.best.decode.gpu == "h200-sxm"
    assert not any(w.startswith("decode step law") for w in picked.warnings)
    own = evaluate(wide)
    assert own.assumptions.decode_fit_max_rel_err <= LAW_WARN_MAX_REL_ERR
    assert not any(w.startswith("decode step law") for w in own.warnings)
