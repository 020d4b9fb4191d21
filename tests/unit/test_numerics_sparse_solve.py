"""pdplan.numerics.sparse_solve: SciPy's ``spsolve`` of a triplet-given system through the compiled SuperLU, the same
doubles, and a fresh process that uses it imports no ``scipy.sparse``."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.numerics.sparse_solve import solve_triplets
from pdplan.queueing import jsq


def test_hand_worked() -> None:
    """[[2, 0], [1, 4]] x = [2, 9] → x = [1, 2]; a repeated pair, a singular matrix and an index outside refused."""
    x = solve_triplets([0, 1, 1], [0, 0, 1], [2.0, 1.0, 4.0], [2.0, 9.0], "MMD_AT_PLUS_A")
    assert x.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="twice"):
        solve_triplets([0, 0, 1], [0, 0, 1], [1.0, 1.0, 1.0], [1.0, 1.0], "MMD_AT_PLUS_A")
    with pytest.raises(ValueError, match="singular"):
        solve_triplets([0, 1], [0, 0], [1.0, 1.0], [1.0, 1.0], "MMD_AT_PLUS_A")
    with pytest.raises(ValueError, match="outside"):
        solve_triplets([0, 2], [0, 1], [1.0, 1.0], [1.0, 1.0], "MMD_AT_PLUS_A")


@st.composite
def systems(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """A diagonally dominant n×n system with random off-diagonal entries in a shuffled triplet order."""
    n = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    density = draw(st.floats(0.0, 0.5))
    dense = np.where(rng.random((n, n)) < density, rng.normal(size=(n, n)), 0.0)
    dense[np.arange(n), np.arange(n)] = np.abs(dense).sum(axis=1) + rng.random(n) + 0.5
    rows, cols = np.nonzero(dense)
    order = rng.permutation(rows.size)
    order_name = draw(st.sampled_from(["MMD_AT_PLUS_A", "COLAMD", "NATURAL", "MMD_ATA"]))
    return rows[order], cols[order], dense[rows, cols][order], rng.normal(size=n), order_name


@settings(max_examples=200, deadline=None)
@given(systems())
def test_same_doubles_as_spsolve(system: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]) -> None:
    rows, cols, values, rhs, order = system
    n = rhs.size
    theirs = spl.spsolve(sp.csc_matrix((values, (rows, cols)), shape=(n, n)), rhs.copy(), permc_spec=order)
    ours = solve_triplets(rows, cols, values, rhs.copy(), order)
    assert np.asarray(theirs, dtype=np.float64).ravel().tobytes() == ours.tobytes()


@pytest.mark.parametrize(("servers", "rho"), [(17, 0.5), (24, 0.9), (40, 0.99)])
def test_jsq_chain_as_before(servers: int, rho: float) -> None:
    """The least-loaded chain's π_c above the dense limit: the value the scipy.sparse solve gave, to the bit."""
    frm, to, lam_coef, mu_coef, busy, level = jsq._chain_cached(servers)
    n = int(frm.max()) + 1
    rates = lam_coef * (servers * rho) + mu_coef
    rates[-1] *= 1.0 - rho
    out = np.bincount(frm, weights=rates, minlength=n)
    pin = int(level[min(servers, round(servers * (1.0 - rho)))])
    row, col = np.concatenate([to, np.arange(n)]), np.concatenate([frm, np.arange(n)])
    val = np.concatenate([rates, -out])
    kept = row != pin
    row, col, val = np.append(row[kept], pin), np.append(col[kept], pin), np.append(val[kept], 1.0)
    rhs = np.zeros(n)
    rhs[pin] = 1.0
    p = np.asarray(spl.spsolve(sp.csc_matrix((val, (row, col)), shape=(n, n)), rhs, permc_spec="MMD_AT_PLUS_A"))
    p /= p.sum()
    assert jsq._all_busy.__wrapped__(servers, rho) == float(p[busy].sum())


def test_no_scipy_sparse_import() -> None:
    code = (
        "import sys; from pdplan.numerics.sparse_solve import solve_triplets; "
        "print(solve_triplets([0, 1], [0, 1], [2.0, 4.0], [2.0, 4.0], 'MMD_AT_PLUS_A').tolist(), "
        "'scipy.sparse' in sys.modules, 'scipy.linalg' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[1.0, 1.0] False False"
