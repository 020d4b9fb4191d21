"""One compiled module of a SciPy subpackage, imported without running that subpackage's ``__init__.py``.

Why: pdplan's default ``evaluate`` and ``optimize`` call a handful of SciPy's compiled routines (the incomplete-gamma
and normal ufuncs, one NNLS), and the subpackages' ``__init__`` files import far more than those routines.
``import scipy.special`` (SciPy 1.17) runs ``scipy/special/_support_alternative_backends.py``, whose array-API layer
imports ``numpy.testing`` (with ``unittest`` and ``concurrent.futures``), ``numpy.random``, ``numpy.ma``,
``numpy.f2py`` and ``numpy.polynomial``: about 0.2 s of CPU on top of numpy, against 0.05 s for the compiled
``scipy.special._ufuncs`` alone (``benchmarks/command_speed.py``-style fresh processes, median of 7; issue #27).
``import scipy.fft`` runs the same array-API layer (about 0.17 s of CPU) for the compiled pocketfft module, which
imports in under 1 ms.
``from scipy.optimize import nnls`` imports ``scipy.linalg``, ``scipy.sparse`` and the optimizer family, about
0.14 s, for one routine in ``scipy.optimize._slsqplib``.

How: while the submodule is imported, a bare module object with the subpackage's ``__path__`` stands in for the
subpackage in :data:`sys.modules`, so the import system finds the submodule's file (and any sibling compiled modules
it imports) without executing ``__init__.py``; the stand-in is removed right after. The submodules stay in
:data:`sys.modules` under their own names, so a later ``import scipy.special`` runs the real ``__init__``, which
imports the same module objects: ``scipy.special.gammainc`` is then the very ufunc pdplan called
(``tests/unit/test_numerics_scipy_parts.py``). Where the subpackage is already imported, the submodule is imported
the ordinary way.

The layout read here (which functions live in which private module, and that those modules import nothing from their
package's ``__init__``) is SciPy's own and not part of its public API, so it is used only for the SciPy versions it
was checked on (:data:`CHECKED_SCIPY_VERSIONS`). With any other SciPy, :func:`private_layout_known` is False and the
callers import SciPy's public names: the same functions, only the slower start-up.
"""

from __future__ import annotations

import importlib
import sys
import types
from functools import cache

CHECKED_SCIPY_VERSIONS = frozenset({(1, 17)})
"""SciPy ``(major, minor)`` versions whose private layout :mod:`pdplan.numerics.special` and
:mod:`pdplan.numerics.nnls` rely on, read in SciPy 1.17.1: ``scipy/special/_ufuncs`` holds the ufuncs
``scipy.special`` re-exports (the same objects), ``scipy/optimize/_nnls.py`` calls
``scipy.optimize._slsqplib.nnls(A, b, maxiter) -> (x, rnorm, info)``, and ``scipy/fft/_pocketfft/basic.py``'s
``rfft``/``irfft`` call ``scipy.fft._pocketfft.pypocketfft.r2c(x, axes, forward, norm, out, workers)`` and
``c2r(x, axes, n, forward, norm, out, workers)``, ``next_fast_len(n, real=True)`` its ``good_size(n, True)``
(:mod:`pdplan.numerics.fft`), and ``scipy/sparse/linalg/_dsolve/linsolve.py``'s ``spsolve`` calls
``scipy.sparse.linalg._dsolve._superlu.gssv(N, nnz, data, indices, indptr, b, flag, options={"ColPerm": ...})``
(:mod:`pdplan.numerics.sparse_solve`)."""


def scipy_version(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a SciPy version string (``"1.17.1"``, ``"1.18.0rc1"``)."""
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or "0")


@cache
def private_layout_known() -> bool:
    """Whether the installed SciPy is one of :data:`CHECKED_SCIPY_VERSIONS` (``import scipy`` alone is light: its
    ``__init__`` imports no subpackage)."""
    import scipy

    return scipy_version(scipy.__version__) in CHECKED_SCIPY_VERSIONS


def import_without_package_init(package: str, submodule: str) -> types.ModuleType:
    """``package.submodule`` (e.g. ``"scipy.special"``, ``"_ufuncs"``; ``"scipy.fft._pocketfft"``,
    ``"pypocketfft"``) imported without executing the ``__init__.py`` of ``package`` or of any of its not yet imported
    parents below the top-level package (module docstring)."""
    full = f"{package}.{submodule}"
    if full in sys.modules:
        return sys.modules[full]
    if package in sys.modules:
        return importlib.import_module(full)
    stand_ins: list[tuple[str, types.ModuleType]] = []
    try:
        _stand_in(package, stand_ins)
        return importlib.import_module(full)
    finally:
        for name, stand_in in stand_ins:
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]


def _stand_in(package: str, made: list[tuple[str, types.ModuleType]]) -> types.ModuleType:
    """``package`` from :data:`sys.modules`, imported if it is top-level, else a stand-in module with the package's
    ``__path__`` (parents first, recursively), put in :data:`sys.modules` and appended to ``made``."""
    if package in sys.modules or "." not in package:
        return importlib.import_module(package)
    parent_name, _, leaf = package.rpartition(".")
    parent = _stand_in(parent_name, made)
    stand_in = types.ModuleType(package, f"stand-in for {package} while pdplan imports one of its modules")
    stand_in.__path__ = [f"{path}/{leaf}" for path in parent.__path__]
    stand_in.__package__ = package
    sys.modules[package] = stand_in
    made.append((package, stand_in))
    return stand_in
