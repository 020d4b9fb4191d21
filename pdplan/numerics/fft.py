"""SciPy's real FFT (``scipy.fft.rfft``, ``irfft``, ``next_fast_len(n, real=True)``) without ``import scipy.fft``.

The session workloads' token laws are sums of independent parts, convolved on a grid through real FFTs
(:mod:`pdplan.specs.token_pmf`). ``import scipy.fft`` (SciPy 1.17) runs the array-API layer that ``scipy.special``'s
``__init__`` also runs (``numpy.testing``, ``numpy.random``, ...: about 0.17 s of CPU, fresh processes on the 2-core
machine, 2026-12-07) for a compiled module, ``scipy.fft._pocketfft.pypocketfft``, that imports in under 1 ms.

For a 1-D float64 input ``x`` and a length ``n`` at least ``len(x)``, ``scipy.fft.rfft(x, n)`` (SciPy 1.17.1,
``scipy/fft/_pocketfft/basic.py``, ``r2c``) zero-pads ``x`` to ``n`` and calls
``pypocketfft.r2c(x, (-1,), True, 0, None, 1)``: forward, norm ``"backward"`` (code 0: no scaling), one worker.
``scipy.fft.irfft(X, n)`` (``c2r``) takes ``X``'s first ``n // 2 + 1`` terms (zero-padding a shorter ``X``) and calls
``pypocketfft.c2r(X, (-1,), n, False, 2, None, 1)``: inverse, norm code ``2 - 0`` (scaled by 1/n). The functions
below make those same calls on the same arrays, so their results are SciPy's to the bit
(``tests/unit/test_numerics_fft.py``). :mod:`pdplan.numerics.scipy_parts` says how the compiled module is loaded and
for which SciPy versions; with any other SciPy, these functions call ``scipy.fft`` itself.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from pdplan.numerics.scipy_parts import import_without_package_init, private_layout_known

__all__ = ["irfft", "next_fast_len", "rfft"]

_AXES = (-1,)
_NORM_BACKWARD = 0
"""pocketfft's normalisation code for SciPy's default ``norm="backward"`` on a forward transform; the inverse's is
``2 - 0`` (SciPy's ``_normalization``)."""
_NORM_BACKWARD_INVERSE = 2
_WORKERS = 1
"""SciPy's default worker count outside a ``scipy.fft.set_workers`` context."""


@cache
def _pocketfft() -> ModuleType | None:
    """The compiled ``pypocketfft``, or None for a SciPy whose private layout was not checked."""
    if private_layout_known():
        return import_without_package_init("scipy.fft._pocketfft", "pypocketfft")
    return None


def _public() -> Any:
    return importlib.import_module("scipy.fft")


def _fit(x: npt.NDArray[Any], n: int, dtype: type) -> npt.NDArray[Any]:
    """``x`` (1-D, cast to ``dtype``) cut or zero-padded to ``n`` terms, as SciPy's ``_fix_shape_1d``."""
    if n < 1:
        raise ValueError(f"invalid number of data points ({n}) specified")
    arr: npt.NDArray[Any] = np.asarray(x, dtype=dtype)
    if arr.ndim != 1:
        raise ValueError(f"a 1-D array is needed, got shape {arr.shape}")
    if arr.shape[0] >= n:
        return arr[:n]
    padded: npt.NDArray[Any] = np.zeros(n, dtype)
    padded[: arr.shape[0]] = arr
    return padded


def next_fast_len(target: int) -> int:
    """``scipy.fft.next_fast_len(target, real=True)``: the least n ≥ ``target`` whose factors pocketfft
    transforms fast (2, 3, 5)."""
    module = _pocketfft()
    if module is None:
        return int(_public().next_fast_len(target, real=True))
    return int(module.good_size(target, True))


def rfft(x: npt.NDArray[np.float64], n: int) -> npt.NDArray[np.complex128]:
    """``scipy.fft.rfft(x, n)`` of a 1-D real array (module docstring): ``n // 2 + 1`` complex terms, unscaled."""
    module = _pocketfft()
    if module is None:
        return np.asarray(_public().rfft(x, n), dtype=np.complex128)
    out: npt.NDArray[np.complex128] = module.r2c(_fit(x, n, np.float64), _AXES, True, _NORM_BACKWARD, None, _WORKERS)
    return out


def irfft(spectrum: npt.NDArray[np.complex128], n: int) -> npt.NDArray[np.float64]:
    """``scipy.fft.irfft(spectrum, n)``: the ``n`` real terms whose :func:`rfft` is ``spectrum`` (scaled by 1/n)."""
    module = _pocketfft()
    if module is None:
        return np.asarray(_public().irfft(spectrum, n), dtype=np.float64)
    half = _fit(spectrum, n // 2 + 1, np.complex128)
    out: npt.NDArray[np.float64] = module.c2r(half, _AXES, n, False, _NORM_BACKWARD_INVERSE, None, _WORKERS)
    return out
