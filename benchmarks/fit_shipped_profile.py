"""Refit a shipped engine profile's closed-loop terms on the H100 runs of its own engine version.

``pdplan calibrate``'s two-stage fit (:func:`pdplan.calibrate.engine_fit.fit_overheads`: the step terms on TPOT,
then ``request_s`` and ``startup_cohorts`` on TTFT; since issue #23 only ``step_s`` is free, :data:`HELD`) on every
colocated dense row of
the AIConfigurator 0.12.0 end-to-end sample, H100 rows (``aiconfigurator-silicon/h100_sxm.csv`` via
``benchmarks/data_root.py``) whose engine and version match the shipped profile
(vLLM: the 93 rows of 0.12.0; the unversioned Llama-3.1-70B rows are another version). ``collective_s`` is held at
the profile's 0: the kernel table's all-reduce already matches the measured custom all-reduce within ~1 µs at TP 2/4/8
(docs/accuracy_engines_calibration.md, findings), and nearly every row has TP > 1, so a per-collective term would
only relabel the per-step constant (14 ± 37 µs when left free). ``launch_gap_s_per_layer`` keeps the profile's value
(CUDA graphs). Prints each term with its 1σ and status and the in-sample median errors; the profile's ``source``
texts quote them. Run: ``python benchmarks/fit_shipped_profile.py vllm``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from data_root import SILICON_H100, calibration_path
from silicon_runs import silicon_runs

from pdplan.calibrate import benchmarks as cb
from pdplan.io.catalog import open_catalog

HELD = ("collective_s", "launch_gap_s_per_layer", "step_s_per_seq", "request_s", "startup_cohorts")
"""Terms kept at the shipped profile's values: ``collective_s`` and ``launch_gap_s_per_layer`` 0 s (module docstring);
``step_s_per_seq`` 0 s, ``request_s`` 5 ms and ``startup_cohorts`` 1, their unfitted values, since issue #23 removed
them (fitted on these rows they did not improve the cross-GPU error: docs/cross_gpu_accuracy.md §8.4)."""


def main() -> None:
    engine = sys.argv[1] if len(sys.argv) > 1 else "vllm"
    catalog = open_catalog()
    version = catalog.engine(engine).version
    data = calibration_path(SILICON_H100)
    runs = [r for r in silicon_runs(data) if r.engine == engine and r.extra.get("version") == version]
    report = cb.fit_runs(runs, catalog, engine, files=[data.name], name=engine, held=HELD)
    print(f"{engine} {version}: {len(runs)} rows; held at the profile's values: {', '.join(HELD)}")
    for term in report.terms:
        print(f"  {term.name}: {term.value_s!r} ± {term.std_s!r} ({term.status})")
    print(f"  in-sample median |err| TTFT {report.ttft.median_abs_pct:.1f} %, TPOT {report.tpot.median_abs_pct:.1f} %")


if __name__ == "__main__":
    main()
