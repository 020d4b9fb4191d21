"""pdplan.numerics.nnls is scipy.optimize.nnls to the last bit, without importing scipy.optimize where SciPy's private
layout is known."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from pdplan.numerics import nnls as nnls_module
from pdplan.numerics import scipy_parts
from pdplan.numerics.nnls import nnls

PRIVATE = scipy_parts.private_layout_known()


def _same(a: np.ndarray, b: np.ndarray) -> None:
    x, rnorm = nnls(a, b)
    x_ref, rnorm_ref = optimize.nnls(a, b)
    assert x.tobytes() == np.asarray(x_ref, dtype=np.float64).tobytes()
    assert rnorm == rnorm_ref


def test_hand_worked_problem() -> None:
    """SciPy's docstring example: A = [[1, 0], [1, 0], [0, 1]], b = [2, 1, 1] → x = (1.5, 1), residual √½; with
    b = −1 everywhere the constraint binds: x = 0, residual √3."""
    a = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    x, rnorm = nnls(a, np.array([2.0, 1.0, 1.0]))
    np.testing.assert_allclose(x, [1.5, 1.0], rtol=1e-15)
    assert rnorm == pytest.approx(np.sqrt(0.5), rel=1e-15)
    x, rnorm = nnls(a, -np.ones(3))
    assert x.tolist() == [0.0, 0.0]
    assert rnorm == pytest.approx(np.sqrt(3.0), rel=1e-15)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(3, 60),
    cols=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    shift=st.floats(-1.0, 1.0),
)
def test_bit_for_bit_scipy(rows: int, cols: int, seed: int, shift: float) -> None:
    """Random problems, some with active constraints (negative entries, shifted right-hand sides): x and the residual
    are SciPy's doubles."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, cols)) * rng.uniform(0.1, 1e3, size=cols)
    _same(a, rng.standard_normal(rows) + shift)


def test_decode_fit_shape() -> None:
    """The decode-step fit's problem: the columns 1, B, B·K over τ, scaled to unit maxima; b = 1."""
    batch = np.repeat(np.unique(np.round(np.geomspace(1.0, 256.0, 12))), 4)
    ctx = np.tile([0.5, 1.0, 2.0, 4.0], batch.size // 4) * 1500.0
    tau = 0.012 + 4e-5 * batch + 2e-9 * batch * ctx
    design = np.stack([np.ones_like(batch), batch, batch * ctx], axis=1) / tau[:, None]
    _same(design / np.abs(design).max(axis=0), np.ones_like(batch))


def test_column_right_hand_side_and_errors() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
    b = np.array([[1.0], [2.0], [3.0]])
    assert nnls(a, b)[0].tobytes() == optimize.nnls(a, b.ravel())[0].tobytes()
    with pytest.raises(ValueError, match="2-D A"):
        nnls(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="does not match"):
        nnls(a, np.ones(4))
    with pytest.raises(ValueError, match="infs or NaNs"):
        nnls(a, np.array([1.0, np.nan, 0.0]))


def test_unknown_scipy_uses_the_public_function(monkeypatch: pytest.MonkeyPatch) -> None:
    """A SciPy whose private layout was not checked gets scipy.optimize.nnls itself (same answers)."""
    monkeypatch.setattr(nnls_module, "private_layout_known", lambda: False)
    nnls_module._solver.cache_clear()
    try:
        a = np.array([[1.0, 0.5], [0.2, 1.0], [1.0, 1.0]])
        _same(a, np.array([1.0, -0.5, 2.0]))
        assert nnls_module._solver().__name__ == "public"
    finally:
        nnls_module._solver.cache_clear()


@pytest.mark.skipif(not PRIVATE, reason=f"SciPy {scipy.__version__}: the public scipy.optimize.nnls is used")
def test_does_not_import_scipy_optimize() -> None:
    """In a fresh process the compiled routine is loaded from its file: scipy.optimize stays unimported, and the
    answers are those of scipy.optimize.nnls imported afterwards."""
    code = (
        "import sys, numpy as np\n"
        "from pdplan.numerics.nnls import nnls\n"
        "rng = np.random.default_rng(7)\n"
        "a, b = rng.standard_normal((40, 3)), rng.standard_normal(40) + 0.3\n"
        "x, r = nnls(a, b)\n"
        "print('scipy.optimize' in sys.modules, 'scipy.linalg' in sys.modules)\n"
        "from scipy.optimize import nnls as public\n"
        "x_ref, r_ref = public(a, b)\n"
        "print(x.tobytes() == x_ref.tobytes() and r == r_ref)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "False", "True"]
