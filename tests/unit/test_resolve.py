"""Smaller wrong outputs of issue #12 item 9, each pinned by a test."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdplan import load_scenario, optimize
from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.serving.resolve import _share

ROOT = Path(__file__).parents[2]


def test_a_small_clipped_share_is_not_printed_as_zero() -> None:
    """mooncake-leval used to warn that "0.00% of requests exceed the context window"."""
    assert _share(0.0231) == "2.31%"
    assert _share(4.2e-5) == "0.0042%"
    assert _share(1e-9) != "0.00%"


def test_an_unchanged_goodput_meets_the_target_in_the_sensitivity_rows() -> None:
    """The default pick's link x0.5 row used to read "meets target: no" at 55.5353 vs 55.5354 (the link does not
    bind; the two goodputs differ by the root's tolerance)."""
    result = optimize(load_scenario(ROOT / "examples" / "default.yaml"), catalog=open_catalog(), top=1)
    link = next(s for s in result.sensitivity if s.change.startswith("link"))
    assert link.goodput_rps == pytest.approx(result.best.goodput_rps, rel=3e-3)
    assert link.meets_target


def test_calibrate_refuses_a_fit_with_fewer_rows_than_parameters(tmp_path: Path) -> None:
    from pdplan.calibrate.phase_times import fit, read_measurements

    csv = tmp_path / "one.csv"
    csv.write_text("gpu,model,tp,phase,batch,tokens,time_ms\nh100-sxm,llama-3.1-8b,1,prefill,1,1024,40\n")
    with pytest.raises(SpecError, match="cannot fit 3 parameters"):
        fit(read_measurements(csv), open_catalog())
