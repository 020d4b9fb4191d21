"""pdplan calibrate on phase times (pdplan.calibrate.phase_times): recover known perturbations from synthetic phase
measurements, report errors per group, refuse a fit with fewer rows than parameters."""

from pathlib import Path

import numpy as np
import pytest

from pdplan.calibrate.phase_times import check, fit, read_measurements, scaled_table
from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.kernel_tables import load_kernel_table
from pdplan.perf.roofline import phase_time

CATALOG = open_catalog()
POINTS = [
    ("prefill", 1, 512),
    ("prefill", 1, 2048),
    ("prefill", 4, 1024),
    ("prefill", 1, 8192),
    ("decode", 1, 1024),
    ("decode", 16, 2048),
    ("decode", 64, 1024),
    ("decode", 128, 4096),
]


def _write_csv(
    path: Path, knobs: dict[str, float], model: str = "llama-3.1-8b", tp: int = 1, more: tuple[str, ...] = ()
) -> None:
    """Measurements 'taken' on an H100 whose kernels differ from the shipped table by ``knobs`` (``more`` models
    measured at the same points)."""
    gpu = CATALOG.gpu("h100-sxm")
    truth = scaled_table(load_kernel_table("h100-sxm"), knobs)
    lines = ["gpu,model,tp,phase,batch,tokens,time_ms,run"]
    for name in (model, *more):
        for i, (phase, batch, tokens) in enumerate(POINTS):
            t = phase_time(CATALOG.model(name), gpu, truth, phase=phase, batch=batch, tokens=tokens, tp=tp)  # type: ignore[arg-type]
            lines.append(f"h100-sxm,{name},{tp},{phase},{batch},{tokens},{float(t.time_s[()]) * 1e3!r},r{i}")
    path.write_text("\n".join(lines) + "\n")


def test_check_of_the_table_against_its_own_predictions_is_exact(tmp_path: Path) -> None:
    csv = tmp_path / "m.csv"
    _write_csv(csv, {})
    report = check(read_measurements(csv), CATALOG)
    assert report.stats.median_abs_pct == pytest.approx(0.0, abs=1e-9)
    assert report.stats.n == len(POINTS)
    assert set(report.by_phase) == {"prefill", "decode"}
    assert report.rows[0]["run"] == "r0"  # extra CSV columns are echoed
    assert {"predicted_ms", "error_pct"} <= set(report.rows[0])


def test_fit_recovers_a_slower_stack_with_framework_overhead(tmp_path: Path) -> None:
    # the "measured" stack runs GEMMs at 80% of the table's efficiency and pays 2 ms per step
    knobs = {"gemm_scale": 0.8, "decode_step_overhead_s": 2e-3}
    csv = tmp_path / "m.csv"
    # two depths (32 and 64 layers): with one model a per-step cost and a per-kernel gap are the same constant
    _write_csv(csv, knobs, more=("qwen3-32b",))
    rows = read_measurements(csv)
    before = check(rows, CATALOG)
    after = fit(rows, CATALOG)
    assert before.stats.median_abs_pct > 5.0
    assert after.stats.median_abs_pct < 1.0
    assert after.table is not None
    assert after.table.framework.decode_step_overhead_s == pytest.approx(2e-3, rel=0.05)
    assert after.table.gemm["bf16"].peak_fraction == pytest.approx(
        0.8 * load_kernel_table("h100-sxm").gemm["bf16"].peak_fraction, rel=0.05
    )


def test_fit_refuses_rows_of_two_gpus(tmp_path: Path) -> None:
    csv = tmp_path / "m.csv"
    csv.write_text(
        "gpu,model,tp,phase,batch,tokens,time_ms\n"
        "h100-sxm,llama-3.1-8b,1,prefill,1,512,40\na100-sxm-80gb,llama-3.1-8b,1,prefill,1,512,90\n"
    )
    rows = read_measurements(csv)
    with pytest.raises(SpecError, match="one GPU"):
        fit(rows, CATALOG)
    assert np.isfinite(check(rows, CATALOG).stats.median_abs_pct)


BAD = sorted((Path(__file__).parents[1] / "bad_inputs" / "calibrate").glob("*.csv"))


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_measurement_files_are_one_line_spec_errors(path: Path) -> None:
    with pytest.raises(SpecError) as info:
        check(read_measurements(path), CATALOG)
    assert "\n" not in str(info.value)
    assert path.name in str(info.value) or "unknown" in str(info.value)


def test_calibrate_refuses_a_fit_with_fewer_rows_than_parameters(tmp_path: Path) -> None:
    from pdplan.calibrate.phase_times import fit, read_measurements

    csv = tmp_path / "one.csv"
    csv.write_text("gpu,model,tp,phase,batch,tokens,time_ms\nh100-sxm,llama-3.1-8b,1,prefill,1,1024,40\n")
    with pytest.raises(SpecError, match="cannot fit 3 parameters"):
        fit(read_measurements(csv), open_catalog())
