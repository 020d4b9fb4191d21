"""Convergence of the tandem link chain (:mod:`pdplan.queueing.tandem_chain`): plain power steps of its
Markov operator, Anderson mixing (:func:`anderson_run`) for a chain the first plain steps do not settle, and restarted
GMRES (:func:`krylov`) where that does not settle either.

**Slow mixing.** On the non-negative iterates it is applied to, a step is a linear Markov operator
T, so ``g_n − g*`` has zero mass and decays like ``λ₂ⁿ`` (λ₂: T's second eigenvalue), as does the
L1 change, which understates the distance to g* by ~1/(1 − λ₂). λ₂ nears 1 as W's drift per
request, ``E[a − b′ − I]``, nears 0: near link saturation (which nearest-cell rounding also
brought nearer: the hypothesis case of the tandem chain's **Lattice** section had λ₂ = 0.998 with it
and 2,000 plain steps did not reach the change test; with the split it needs 651). Link-bound deployments are
evaluated up to link load 0.99, and near 0.9 with a busy prefill queue 2,000 plain steps are still too few.

**Anderson mixing** (:func:`anderson_run`) reaches the fixed point in far fewer steps than plain ones where λ₂ nears 1,
and takes over from the first plain steps where they have not settled the chain. On the 61 chains of ``pdplan
optimize examples/chat-ppd.yaml`` (2026-12-06): the plain iteration's 5,725 calls of the step became 1,493 (the
slowest chain 657 → 94: the empty start, 10 plain steps and 83 mixed ones to an L1 change of 1e-8), and the laws
came out 1e-6 (L1) from the fixed point where the plain stop at 1e-6 left 1e-4; on the three-bin hypothesis case of
tests/unit/test_link_delay.py 651 plain steps became 239. Closer to saturation (decay ratios 0.9997, the
shared-system-prompt example's link at half its bandwidth) it takes 400–750 steps, and now and then its residual
stalls near the stop (one chain: 7.7e-9, 7.2e-9 and 7.3e-9 at steps 600, 650 and 700 against a stop at 1e-8), where
GMRES goes on from its last mixture (:func:`krylov`). Before GMRES, the plain iteration from the empty link ran there
with Aitken's extrapolation: 4,000 steps, 3–5 CPU s a chain, and no convergence from link load 0.972.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdplan.types import FloatArray

Step = Callable[[FloatArray], FloatArray]


@dataclass(frozen=True, slots=True)
class Run:
    """The last two iterates ``g_{n−1}``, ``g_n`` of a run of plain steps; per rate the L1 change
    ``‖d‖`` (``d = g_n − g_{n−1}``) and the decay ``‖d‖/‖d⁻‖`` from the change before, signed by
    ``⟨d, d⁻⟩`` (negative: the iterates swing; 0 after a single step)."""

    prev: FloatArray
    last: FloatArray
    change: FloatArray
    ratio: FloatArray


def power(step: Step, g: FloatArray, tol: float, steps: int) -> Run:
    """Up to ``steps`` plain steps from ``g``, stopping once every rate's L1 change is below ``tol``."""
    prev, d = g, np.zeros_like(g)
    d_before, before, change = d, np.zeros(g.shape[0]), np.full(g.shape[0], np.inf)
    for _ in range(steps):
        prev, g, before, d_before = g, step(g), change, d
        d = g - prev
        change = np.abs(d).sum(axis=(1, 2, 3))
        if float(change.max()) < tol:
            break
    ratio = np.divide(change, before, out=np.zeros_like(change), where=np.isfinite(before) & (before > 0.0))
    return Run(prev, g, change, np.copysign(ratio, (d * d_before).sum(axis=(1, 2, 3))))


ANDERSON_DEPTH = 12
"""Past differences :func:`anderson` mixes. On the 61 chains of ``pdplan optimize examples/chat-ppd.yaml`` (after 8
plain steps, to an L1 change of 1e-8) depths 5, 8, 12 and 20 took 2,289, 1,546, 1,474 and 1,376 calls of the step in
all (plain ones included); 12: the gain beyond it is small, and each step costs ``2·depth`` vectors of the law's
size."""


def anderson(step: Step, g: FloatArray, tol: float, budget: int) -> FloatArray | None:
    """:func:`anderson_run`'s law where every rate stopped, else None."""
    law, settled = anderson_run(step, g, tol, budget)
    return law if settled else None


def anderson_run(step: Step, g: FloatArray, tol: float, budget: int) -> tuple[FloatArray, bool]:
    """Fixed point of ``step`` by Anderson mixing (Walker & Ni, SIAM J. Numer. Anal. 49(4), 2011, eq. 2.2, type II):
    from the last :data:`ANDERSON_DEPTH` iterates ``x_i`` with images ``T x_i`` and residuals ``f_i = T x_i − x_i``,
    the next iterate is ``T x_n − ΔG γ`` with ``γ = argmin ‖f_n − ΔF γ‖₂`` (ΔF, ΔG: the differences of successive
    residuals and images). On a linear operator that is GMRES on ``(I − T) x = 0`` (their §4), which needs far
    fewer steps than the plain iteration when the second eigenvalue λ₂ nears 1 (module docstring, **Slow
    mixing**). The mixture is clipped at 0 with the mass of ``T x_n`` kept (as :func:`aitken`), so each ``x`` is a
    law and ``T x`` one plain step from it.

    Stops per rate at the first ``x`` whose plain step changes it by less than ``tol`` in L1 (the test of
    :func:`power`, on any law rather than on a plain iterate) and returns that step ``T x``; None if some rate has
    not stopped after ``budget`` steps. Returns (that law, True) where every rate stopped, else (per rate the law it
    stopped on or its last mixture, a law to go on from: :func:`krylov`; False).
    """
    n_rates = g.shape[0]
    d_f = np.zeros((n_rates, ANDERSON_DEPTH, g[0].size))  # the last differences, oldest overwritten
    d_g = np.zeros_like(d_f)
    x, out, done = g, np.empty_like(g), np.zeros(n_rates, dtype=bool)
    before: tuple[FloatArray, FloatArray] | None = None
    for n in range(budget + 1):
        image = step(x)
        f = (image - x).reshape(n_rates, -1)
        stop = (np.abs(f).sum(axis=1) < tol) & ~done
        out[stop], done = image[stop], done | stop
        if bool(done.all()):
            return out, True
        flat = image.reshape(n_rates, -1)
        if before is not None:
            slot = (n - 1) % ANDERSON_DEPTH
            np.subtract(f, before[0], out=d_f[:, slot])
            np.subtract(flat, before[1], out=d_g[:, slot])
        before = (f, flat)
        used = min(n, ANDERSON_DEPTH)
        x = _mixed(flat, f, d_f[:, :used], d_g[:, :used]).reshape(g.shape)
    return np.where(done[:, None, None, None], out, x), False


def _mixed(image: FloatArray, resid: FloatArray, d_f: FloatArray, d_g: FloatArray) -> FloatArray:
    """Anderson's next iterate per rate (:func:`anderson`), ``[R, n]`` from the image and residual ``[R, n]`` and
    ``m`` differences ``[R, m, n]``: the least squares on unit-scaled differences by its normal equations (``m × m``;
    a pseudo-inverse drops directions below 1e-13 of the largest)."""
    if d_f.shape[1] == 0:
        return image
    nxt = np.empty_like(image)
    for r in range(image.shape[0]):
        scale = np.sqrt(np.einsum("mn,mn->m", d_f[r], d_f[r]))
        scale[scale == 0.0] = 1.0
        a = d_f[r] / scale[:, None]
        gamma = np.linalg.lstsq(a @ a.T, a @ resid[r], rcond=1e-13)[0] / scale
        nxt[r] = image[r] - gamma @ d_g[r]
    nxt = np.maximum(nxt, 0.0)
    empty = nxt.sum(axis=1) <= 0.0  # every entry clipped: no law to rescale, take the plain step instead
    nxt[empty] = image[empty]
    return np.asarray(nxt * (image.sum(axis=1) / nxt.sum(axis=1))[:, None], dtype=np.float64)


KRYLOV_RESTART = 100
"""Krylov vectors :func:`krylov` keeps before it restarts (GMRES(m)). On a chain of the shared-system-prompt example's
link at half its bandwidth (link load 0.97, decay ratio 0.99966; 2026-12-07) m = 100, 200 and 400 took 770, 818 and
676 steps from its 10th plain iterate and 1.3, 1.9 and 2.2 CPU s: past 100 the orthogonalisation costs more than the
steps it saves."""
KRYLOV_CHECK = 10
"""Krylov steps between the estimates of the residual (a small least squares each)."""


def krylov(step: Step, linear: Step, g: FloatArray, tol: float, budget: int) -> FloatArray | None:
    """Fixed point of a Markov operator T by restarted GMRES (Saad & Schultz, SIAM J. Sci. Stat. Comput. 7(3), 1986;
    :data:`KRYLOV_RESTART` vectors) on ``(I − T) x = T g − g``, the correction that takes the law ``g`` to the fixed
    point. ``linear`` is T on signed vectors (``step`` clips round-off below 0, so it is linear on laws only). T keeps
    the mass, so the right-hand side and every Krylov vector have zero mass, a subspace where ``I − T`` is invertible
    for an irreducible chain: the fixed point of ``g``'s mass is the one solution there. Where λ₂ nears 1 the plain
    iteration needs ~1/(1 − λ₂) steps per decade of its change, GMRES ~1/√(1 − λ₂) (the Chebyshev bound on a
    spectrum in ``[1 − λ₂, 2]``: Saad, *Iterative Methods for Sparse Linear Systems*, 2nd ed., 2003, §6.11.4).

    Stops per rate, as :func:`anderson_run` does, at the first law (``g + x`` clipped at 0 with its mass kept) whose
    plain step changes it by less than ``tol`` in L1, and returns that step; None if some rate has not stopped after
    ``budget`` calls of ``linear`` and ``step``."""
    n_rates, shape = g.shape[0], g.shape
    done, out, used = np.zeros(n_rates, dtype=bool), np.empty_like(g), 0
    while used < budget:
        image = step(g)
        resid = (image - g).reshape(n_rates, -1)
        stop = (np.abs(resid).sum(axis=1) < tol) & ~done
        out[stop], done = image[stop], done | stop
        if bool(done.all()):
            return out
        x, spent = _gmres_cycle(linear, resid, shape, tol, max(1, min(KRYLOV_RESTART, budget - used - 1)))
        used += spent + 1
        flat = g.reshape(n_rates, -1)
        nxt = np.maximum(flat + x, 0.0)
        nxt *= (flat.sum(axis=1) / nxt.sum(axis=1))[:, None]
        g = np.where(done[:, None, None, None], g, nxt.reshape(shape))
    return None


def _gmres_cycle(
    linear: Step, rhs: FloatArray, shape: tuple[int, ...], tol: float, steps: int
) -> tuple[FloatArray, int]:
    """One GMRES cycle from x = 0 on ``(I − T) x = rhs`` per rate (``rhs`` ``[R, n]``): Arnoldi with classical
    Gram–Schmidt done twice (the basis orthonormal to round-off), the least squares on the Hessenberg matrix every
    :data:`KRYLOV_CHECK` steps, stopping once every rate's L2 residual is below ``tol/√n`` (which bounds its L1 norm
    by ``tol``) or after ``steps``. Returns (x ``[R, n]``, calls of ``linear``)."""
    n_rates, n = rhs.shape
    beta = np.sqrt(np.einsum("rn,rn->r", rhs, rhs))
    basis = np.zeros((n_rates, steps + 1, n))
    hess = np.zeros((n_rates, steps + 1, steps))
    basis[:, 0] = rhs / np.where(beta > 0.0, beta, 1.0)[:, None]
    coef, j = np.zeros((n_rates, 0)), 0
    for j in range(1, steps + 1):
        w = basis[:, j - 1] - linear(basis[:, j - 1].reshape(shape)).reshape(n_rates, n)
        for _ in range(2):
            h = np.einsum("rjn,rn->rj", basis[:, :j], w)
            w -= np.einsum("rjn,rj->rn", basis[:, :j], h)
            hess[:, :j, j - 1] += h
        norm = np.sqrt(np.einsum("rn,rn->r", w, w))
        hess[:, j, j - 1] = norm
        basis[:, j] = w / np.where(norm > 0.0, norm, 1.0)[:, None]
        broke = bool(np.any(norm == 0.0))
        if j % KRYLOV_CHECK == 0 or j == steps or broke:
            coef, left = _hessenberg_lstsq(hess[:, : j + 1, :j], beta)
            if broke or float(left.max()) < tol / np.sqrt(n):
                break
    return np.asarray(np.einsum("rjn,rj->rn", basis[:, : coef.shape[1]], coef), dtype=np.float64), j


def _hessenberg_lstsq(hess: FloatArray, beta: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per rate ``y = argmin ‖β e₁ − H y‖₂`` and that minimum (GMRES's residual norm), H ``[R, j + 1, j]``."""
    n_rates, rows, cols = hess.shape
    coef, left = np.zeros((n_rates, cols)), np.zeros(n_rates)
    for r in range(n_rates):
        e1 = np.zeros(rows)
        e1[0] = beta[r]
        coef[r] = np.linalg.lstsq(hess[r], e1, rcond=None)[0]
        left[r] = float(np.linalg.norm(e1 - hess[r] @ coef[r]))
    return coef, left
