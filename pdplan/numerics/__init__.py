"""Small numerical routines of pdplan's own, in place of the SciPy functions the default ``evaluate`` and ``optimize``
paths call, so that those commands need not pay SciPy's import (issue #27: ``scipy.optimize`` pulls in
``scipy.special``, ``scipy.linalg``, ``scipy.fft`` and ``scipy.sparse``, about 0.5–0.7 s of CPU).

One concept per module, each tested against SciPy (``tests/unit/test_numerics_*.py``):

* :mod:`~pdplan.numerics.roots`: Brent's root finder, bit for bit :func:`scipy.optimize.brentq`;
* :mod:`~pdplan.numerics.normal`: the standard normal cdf, its log and its inverse (``ndtr``, ``log_ndtr``,
  ``ndtri``);
* :mod:`~pdplan.numerics.gamma`: log-gamma, ``xlogy`` and the regularized lower incomplete gamma function
  ``gammainc`` (Temme's coefficients in :mod:`~pdplan.numerics.temme_coefficients`). ``gammainc`` matches SciPy
  to 1e-13 (closer to 50-digit values than SciPy where the two differ) but runs about 4× slower than SciPy's C on
  the default search's 780,000 arguments (0.6 s against 0.15 s), so the queueing model still calls SciPy's
  until that is closed (docs/accuracy.md, start-up section);
* :mod:`~pdplan.numerics.nnls`: non-negative least squares for a few columns, by enumerating supports. Not yet
  called: the decode fit's coefficients must stay SciPy's to the last bit while the Pareto screen splits exact ties
  by rounding (the module's docstring).

Pure numpy and the standard library; imports nothing from pdplan.
"""
