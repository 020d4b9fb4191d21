"""Small numerical routines of pdplan's own, in place of the SciPy functions the default ``evaluate`` and ``optimize``
paths call, so that those commands need not pay SciPy's import (issue #27: ``scipy.optimize`` pulls in
``scipy.special``, ``scipy.linalg``, ``scipy.fft`` and ``scipy.sparse``, about 0.5–0.7 s of CPU).

One concept per module, each tested against SciPy (``tests/unit/test_numerics_*.py``):

* :mod:`~pdplan.numerics.roots`: Brent's root finder, bit for bit :func:`scipy.optimize.brentq`;
* :mod:`~pdplan.numerics.brent_rows`: the same root finder on many brackets at once, each row bit for bit ``roots``;
* :mod:`~pdplan.numerics.normal`: the standard normal cdf, its log and its inverse (``ndtr``, ``log_ndtr``,
  ``ndtri``);
* :mod:`~pdplan.numerics.gamma`: log-gamma and ``xlogy``;
* :mod:`~pdplan.numerics.digest`: a memo key for numpy arrays (the chain solves and trace distances kept);
* :mod:`~pdplan.numerics.nnls`: SciPy's compiled NNLS (the decode-step fit), loaded without ``scipy.optimize``;
* :mod:`~pdplan.numerics.fft`: SciPy's compiled real FFT (the session laws' convolutions), loaded without
  ``scipy.fft``;
* :mod:`~pdplan.numerics.pchip`: SciPy's PCHIP interpolant (a PrfaaS measured profile), its doubles, without
  ``scipy.interpolate``;
* :mod:`~pdplan.numerics.bounded_min`: SciPy's bounded Brent minimiser (``minimize_scalar(method="bounded")``, the
  PrfaaS threshold searches), the same points and answer;
* :mod:`~pdplan.numerics.sparse_solve`: SciPy's ``spsolve`` (SuperLU) of a triplet-given system (the JSQ chain
  above 16 instances), loaded without ``scipy.sparse``;
* :mod:`~pdplan.numerics.sorted_stats`: ``numpy.unique`` and ``numpy.median`` of an array, without the ``numpy.ma``
  import that numpy's own functions make.

SciPy's ``gammainc`` stays, and so does SciPy's NNLS routine (docs/accuracy.md §7 says why and what numpy twins of
them measured).

Pure numpy and the standard library; imports nothing from pdplan outside this package.
"""
