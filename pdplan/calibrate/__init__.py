"""Offline fitting: kernel cost tables from measured kernels (:mod:`~pdplan.calibrate.fit`,
:mod:`~pdplan.calibrate.fit_families`, :mod:`~pdplan.calibrate.fit_allreduce`), their accuracy
(:mod:`~pdplan.calibrate.accuracy`), and ``pdplan calibrate`` on measured phase times
(:mod:`~pdplan.calibrate.phase_times`). Nothing here runs when pdplan predicts."""
