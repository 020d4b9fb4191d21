"""Refit a shipped engine profile's closed-loop terms on the H100 runs of its own engine version.

``pdplan calibrate``'s two-stage fit (:func:`pdplan.calibrate.engine_fit.fit_overheads`: the step terms on TPOT,
then ``request_s`` and ``startup_cohorts`` on TTFT) on every colocated dense row of
``../shared/calibration/aiconfigurator-silicon/h100_sxm.csv`` whose engine and version match the shipped profile
(vLLM: the 93 rows of 0.12.0; the unversioned Llama-3.1-70B rows are another version). ``collective_s`` is held at 0:
the kernel table's all-reduce already matches the measured custom all-reduce within ~1 µs at TP 2/4/8
(docs/accuracy_engines_calibration.md, findings), and nearly every row has TP > 1, so a per-collective term would
only relabel the per-step constant (14 ± 37 µs when left free). ``launch_gap_s_per_layer`` keeps the profile's value
(CUDA graphs). Prints each term with its 1σ and status and the in-sample median errors; the profile's ``source``
texts quote them. Run: ``python benchmarks/fit_shipped_profile.py vllm``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from silicon_runs import DEFAULT_DATA, silicon_runs

from pdplan.calibrate import benchmarks as cb
from pdplan.calibrate.engine_fit import fit_overheads
from pdplan.io.catalog import open_catalog
from pdplan.types import FloatArray

HELD = {"collective_s": 0.0, "launch_gap_s_per_layer": 0.0}


def main() -> None:
    engine = sys.argv[1] if len(sys.argv) > 1 else "vllm"
    catalog = open_catalog()
    base = catalog.engine(engine)
    runs = [r for r in silicon_runs(DEFAULT_DATA) if r.engine == engine and r.extra.get("version") == base.version]
    trials = cb.TrialProfiles(base)
    try:

        def predict(terms: Mapping[str, float]) -> tuple[FloatArray, FloatArray]:
            return cb.predict_runs(runs, trials.path_for(terms), catalog)

        start = {k: cb.term_value(base, k) for k in ("step_s", "step_s_per_seq", "request_s", "startup_cohorts")}
        meas = [np.array([getattr(r, k) for r in runs]) for k in ("ttft_s", "tpot_s")]
        fit = fit_overheads(predict, start, meas[0], meas[1], fixed=HELD)
    finally:
        trials.close()
    print(f"{engine} {base.version}: {len(runs)} rows; held {HELD}")
    for term in fit.terms:
        print(f"  {term.name}: {term.value_s!r} ± {term.std_s!r} ({term.status})")
    for name, pred, m in (("TTFT", fit.ttft_s, meas[0]), ("TPOT", fit.tpot_s, meas[1])):
        err = np.abs(pred / m - 1.0) * 100.0
        print(f"  in-sample {name} median |err| {np.median(err):.1f} %")


if __name__ == "__main__":
    main()
