"""SciPy's special-function ufuncs that pdplan's serving model calls, without ``import scipy.special``.

``gammainc``/``gammaincc``/``gammaincinv`` (regularised incomplete gamma and its inverse: the Erlang and gamma laws
of the queueing model), ``gammaln`` (the tandem chain's Poisson terms) and ``ndtr``/``ndtri`` (the length laws'
normal cdf and its inverse) are the ufuncs of SciPy's compiled ``scipy.special._ufuncs``, the very objects that
``scipy.special`` re-exports, so every result is SciPy's to the bit. Importing them from that module alone skips
``scipy/special/__init__.py``'s array-API layer, about 0.2 s of CPU (:mod:`pdplan.numerics.scipy_parts` says how and
for which SciPy versions; with another SciPy these names are imported from ``scipy.special`` itself).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np

from pdplan.numerics.scipy_parts import import_without_package_init, private_layout_known

__all__ = ["gammainc", "gammaincc", "gammaincinv", "gammaln", "ndtr", "ndtri"]


def _ufunc_module() -> ModuleType:
    """``scipy.special._ufuncs`` on its own, or ``scipy.special`` itself for a SciPy whose private layout was not
    checked (the same ufuncs, the slower import)."""
    if private_layout_known():
        return import_without_package_init("scipy.special", "_ufuncs")
    return importlib.import_module("scipy.special")


_ufuncs = _ufunc_module()

gammainc: np.ufunc = _ufuncs.gammainc
gammaincc: np.ufunc = _ufuncs.gammaincc
gammaincinv: np.ufunc = _ufuncs.gammaincinv
gammaln: np.ufunc = _ufuncs.gammaln
ndtr: np.ufunc = _ufuncs.ndtr
ndtri: np.ufunc = _ufuncs.ndtri
