"""What ``pdplan calibrate`` runs: the generic log-residual fit (:mod:`~pdplan.calibrate.fit`), the fit on measured
phase times (:mod:`~pdplan.calibrate.phase_times`), and on closed-loop benchmark results: engine-profile overhead
terms (:mod:`~pdplan.calibrate.benchmarks`, :mod:`~pdplan.calibrate.engine_fit`). Nothing here runs when pdplan
predicts. The offline fitters of the shipped kernel tables and their accuracy checks are not part of the package:
``tools/fitting/`` in the source tree."""
