"""The per-sequence host cost of a decode step (engine profile ``step_s_per_seq``; kernel table
``framework.decode_step_overhead_s_per_seq``), by hand: what it adds to a decode pass, to nothing else, and how an
engine profile and a calibration carry it."""

from collections.abc import Mapping

import numpy as np
import pytest

from pdplan.calibrate.benchmarks import term_value, with_terms
from pdplan.calibrate.engine_fit import fit_overheads
from pdplan.io.catalog import open_catalog
from pdplan.io.engines import load_engine
from pdplan.perf.precision import Precision
from pdplan.perf.roofline import phase_time
from pdplan.serving.engine_bind import with_engine
from pdplan.serving.role_hardware import RoleHardware
from pdplan.specs.engine import Sourced
from pdplan.specs.kernel_table import KernelTable
from pdplan.types import FloatArray

CATALOG = open_catalog()


def _table_with(per_seq_s: float, step_s: float = 0.0) -> KernelTable:
    table = CATALOG.kernel_table("h100-sxm")
    fw = table.framework.model_copy(
        update={"decode_step_overhead_s": step_s, "decode_step_overhead_s_per_seq": per_seq_s}
    )
    return table.model_copy(update={"framework": fw})


def test_a_decode_step_pays_the_per_sequence_cost_once_per_running_sequence() -> None:
    """Llama-3.1-8B on an H100, decode at B = 1, 8, 64 (context 1,024): 40 µs per sequence adds 0.04, 0.32 and
    2.56 ms to the step, on top of the 1 ms per step; a prefill pass of 8 prompts pays the per-step 1 ms only."""
    model, gpu = CATALOG.model("llama-3.1-8b"), CATALOG.gpu("h100-sxm")
    base, extra = _table_with(0.0), _table_with(4e-5, step_s=1e-3)
    batch = np.array([1.0, 8.0, 64.0])
    t0 = phase_time(model, gpu, base, phase="decode", batch=batch, tokens=1024, detail=False).time_s
    t1 = phase_time(model, gpu, extra, phase="decode", batch=batch, tokens=1024, detail=False).time_s
    assert t1 - t0 == pytest.approx([1e-3 + 4e-5, 1e-3 + 3.2e-4, 1e-3 + 2.56e-3], rel=1e-9)
    p0 = phase_time(model, gpu, base, phase="prefill", batch=8, tokens=1024, detail=False).time_s
    p1 = phase_time(model, gpu, extra, phase="prefill", batch=8, tokens=1024, detail=False).time_s
    assert float(p1 - p0) == pytest.approx(1e-3, rel=1e-9)


def test_the_per_op_view_shows_the_framework_cost_of_the_first_batch() -> None:
    """With the per-op detail the framework record is the overhead at the first batch of the call: 1 ms + 16 x
    40 µs = 1.64 ms at B = 16; bound() still reads one number."""
    model, gpu = CATALOG.model("llama-3.1-8b"), CATALOG.gpu("h100-sxm")
    t = phase_time(model, gpu, _table_with(4e-5, step_s=1e-3), phase="decode", batch=16, tokens=1024)
    assert float(np.ravel(t.framework_overhead_s)[0]) == pytest.approx(1.64e-3)
    assert t.bound() in ("memory", "overhead")


def test_an_engine_profile_puts_its_per_sequence_cost_on_the_table() -> None:
    """No shipped profile carries a per-sequence cost since issue #23 (vLLM's 49 µs, fitted on its 0.12.0 H100 rows,
    did not improve the cross-GPU error); a profile with step_s_per_seq = 43 µs puts 43 µs per sequence on the bound
    instance's table beside its per-step constant."""
    engine = load_engine("vllm")
    assert engine.overheads.seq_overhead_s() == 0.0
    assert load_engine("sglang").overheads.seq_overhead_s() == 0.0
    tuned = with_terms(engine, {"step_s_per_seq": 4.3e-5}, "test")
    assert tuned.overheads.step_s_per_seq == Sourced(value=4.3e-5, source="test")
    assert term_value(engine, "step_s_per_seq") == 0.0
    assert term_value(tuned, "step_s_per_seq") == pytest.approx(4.3e-5)
    model, gpu = CATALOG.model("qwen3-32b"), CATALOG.gpu("h100-sxm")
    hw = RoleHardware(model, gpu, CATALOG.kernel_table("h100-sxm"), 2, 1, Precision(), None)
    bound = with_engine(hw, tuned)
    assert bound.table.framework.decode_step_overhead_s_per_seq == pytest.approx(4.3e-5)
    assert bound.table.framework.decode_step_overhead_s == pytest.approx(engine.overheads.step_s.value)
    assert with_engine(hw, load_engine("sglang")).table.framework.decode_step_overhead_s_per_seq == 0.0


def test_the_fit_separates_the_per_sequence_cost_from_the_per_step_one() -> None:
    """Six runs at batch 8-128 and kernel steps 5-30 ms; truth 1 ms per step and 40 µs per sequence. TPOT = kernel +
    step + B·seq (5 + 1 + 0.32 = 6.32 ms at B = 8, 30 + 1 + 5.12 = 36.12 ms at B = 128); TTFT = 3 steps + 30 ms.
    Both are recovered; the per-step constant alone could not follow B (it would miss the B = 8 and 128 runs)."""
    batch = np.array([8.0, 16.0, 32.0, 64.0, 128.0, 128.0])
    kernel = np.array([0.005, 0.006, 0.009, 0.015, 0.030, 0.020])

    def predict(terms: Mapping[str, float]) -> tuple[FloatArray, FloatArray]:
        step = kernel + terms["step_s"] + batch * terms["step_s_per_seq"]
        return 3 * step + terms["request_s"], step

    truth = {"step_s": 1e-3, "step_s_per_seq": 4e-5, "request_s": 0.03}
    ttft, tpot = predict(truth)
    assert tpot[0] == pytest.approx(6.32e-3)
    assert tpot[4] == pytest.approx(36.12e-3)
    fit = fit_overheads(predict, dict.fromkeys(truth, 0.0), ttft, tpot)
    for term in fit.terms:
        assert term.value_s == pytest.approx(truth[term.name], rel=1e-3), term.name
        assert term.status == "fitted"
