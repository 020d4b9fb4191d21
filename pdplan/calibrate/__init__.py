"""Offline fitting: kernel cost tables from measured kernels (:mod:`~pdplan.calibrate.fit`,
:mod:`~pdplan.calibrate.fit_families`, :mod:`~pdplan.calibrate.fit_allreduce`), their accuracy
(:mod:`~pdplan.calibrate.accuracy`), ``pdplan calibrate`` on measured phase times
(:mod:`~pdplan.calibrate.phase_times`), and on closed-loop benchmark results: engine-profile overhead terms
(:mod:`~pdplan.calibrate.benchmarks`, :mod:`~pdplan.calibrate.engine_fit`). Nothing here runs when pdplan predicts."""
