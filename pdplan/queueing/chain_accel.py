"""Convergence of the tandem link chain (:mod:`pdplan.queueing.tandem_chain`): plain power steps of its
Markov operator, Anderson mixing (:func:`anderson`) for a chain the first plain steps do not settle, and Aitken's
extrapolation where that does not settle either.

**Slow mixing.** On the non-negative iterates it is applied to, a step is a linear Markov operator
T, so ``g_n − g*`` has zero mass and decays like ``λ₂ⁿ`` (λ₂: T's second eigenvalue), as does the
L1 change, which understates the distance to g* by ~1/(1 − λ₂). λ₂ nears 1 as W's drift per
request, ``E[a − b′ − I]``, nears 0: near link saturation (which nearest-cell rounding also
brought nearer: the hypothesis case of the tandem chain's **Lattice** section had λ₂ = 0.998 with it
and 2,000 plain steps did not reach the change test; with the split it needs 651). Link-bound deployments are
evaluated up to link load 0.99, and near 0.9 with a busy prefill queue 2,000 plain steps are still too few: two
five-bin cases found by hypothesis, link loads 0.89 (prefill load 0.56) and 0.95, need 320 and 440
extrapolated steps more. There the changes
keep one direction (on the hypothesis case, successive changes at cosine 1 − 1e-8: λ₂ real and
positive, no oscillation, no rounding floor: the change keeps falling to 1e-13), the regime in
which Aitken's extrapolation removes the slow mode (:func:`accelerated`). Only runs that fail the
change test within ``max_iter`` steps get there. Closer still to saturation even that can fail,
and then it raises: on the links of benchmarks/link_configs_vs_sim.py over 25 GbE at link loads
0.95 and 0.99 (the goodput search's top) and layer-wise over 10 GbE from 0.9 (decay ratios
0.9998–0.99995: after 4,000 steps the law is still spreading over the lattice).

**Anderson mixing** (:func:`anderson`) reaches the fixed point in far fewer steps than plain ones where λ₂ nears 1,
and takes over from the first plain steps where they have not settled the chain. On the 61 chains of ``pdplan
optimize examples/chat-ppd.yaml`` (2026-12-06): the plain iteration's 5,725 calls of the step became 1,493 (the
slowest chain 657 → 94: the empty start, 10 plain steps and 83 mixed ones to an L1 change of 1e-8), and the laws
came out 1e-6 (L1) from the fixed point where the plain stop at 1e-6 left 1e-4; on the three-bin hypothesis case of
tests/unit/test_link_delay.py 651 plain steps became 239. Where it does not settle within its budget the plain
iteration and Aitken's extrapolation run as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.errors import UnsettledWaitError
from pdplan.types import FloatArray

SETTLE_STEPS = 40
"""Plain steps after each extrapolation: modes with |λ| ≤ 0.8 that a jump stirs up shrink by 1e-4,
so the last two changes measure the slow modes again."""
GAP_MARGIN = 2.0
"""The distance estimate divides the spectral gap 1 − q (q: the largest decay ratio measured) by
this. Measured ratios approach λ₂ from below as faster modes fade: after 2,000 plain steps the
measured gap was 1.2–1.8× the true one on the four slow cases found with nearest-cell rounding
(link loads 0.84–0.9), 1.2–1.5× on the two still slow with split shifts (0.89 and 0.95); at the
stop the true distance was 0.05–0.3 of ``tol`` (split: 0.06–0.18)."""

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


def accelerated(step: Step, run: Run, tol: float, budget: int) -> FloatArray:
    """Stationary law of a slowly mixing chain by Aitken's extrapolation of plain iterates.

    When one real mode leads, ``g_n − g* ≈ c λⁿ v``, the changes ``d_n = g_{n+1} − g_n`` are
    geometric and ``g* = g_{n+1} + Σ_{j≥1} d_{n+j} = g_{n+1} + λ/(1 − λ)·d_n``: one jump removes the
    mode (λ < 0, a period-2 swing, makes it the average of the last two iterates: Cesàro). λ is the
    measured signed decay; cells a jump leaves negative (the law is ≥ 0) are clipped, the mass kept.
    Slow modes come in a cluster below λ₂, so :data:`SETTLE_STEPS` plain steps follow each jump
    and the next jump takes the mode that then leads.

    The stop is tested on plain iterates: as ``‖d_{n+j}‖ ≤ q^j‖d_n‖`` for a decay rate q,
    ``‖g_{n+1} − g*‖ ≤ Σ_{j≥1} ‖d_{n+j}‖ ≤ q/(1 − q)·‖d_n‖``. A Markov operator never expands L1,
    so ``‖d‖`` never grows; its rate tends to |λ₂|, taken as the largest measured |decay| with the
    gap 1 − q narrowed by :data:`GAP_MARGIN` (an estimate, not a proof: measured decays approach
    λ₂ from below). Returns once the distance so estimated is below ``tol``; raises after
    ``budget`` more steps (a chain so near criticality is better refused than returned). Rates
    (independent chains) whose change is already below ``tol`` keep their law: their changes are
    round-off, whose ratios mean nothing.
    """
    live, settled = run.change >= tol, run.last
    slowest = np.where(live, np.abs(run.ratio), 0.0)
    q, bound = np.ones_like(slowest), np.full_like(slowest, np.inf)
    rounds = -(-budget // SETTLE_STEPS)
    for _ in range(rounds):
        run = power(step, aitken(run, live), 0.0, SETTLE_STEPS)
        slowest = np.where(live, np.maximum(slowest, np.abs(run.ratio)), 0.0)
        q = 1.0 - (1.0 - np.minimum(slowest, 1.0)) / GAP_MARGIN
        bound = np.divide(run.change * q, 1.0 - q, out=np.full_like(q, np.inf), where=q < 1.0)
        if float(bound[live].max()) < tol:
            return np.where(live[:, None, None, None], run.last, settled)
    raise UnsettledWaitError(
        f"KV link chain: no convergence in {budget} plain and {rounds * SETTLE_STEPS} extrapolated iterations "
        f"(decay ratio {float(q[live].max()):.6f}, L1 distance estimated at {float(bound[live].max()):.2e}): "
        "the KV link wait this near saturation cannot be computed; evaluate a lower rate"
    )


def aitken(run: Run, live: npt.NDArray[np.bool_]) -> FloatArray:
    """``g_n + λ/(1 − λ)·(g_n − g_{n−1})`` per ``live`` rate (the others: ``g_n``), λ the signed
    decay (:func:`accelerated`), clipped at 0 with the mass kept."""
    lam = np.where(live, np.minimum(run.ratio, 1.0), 0.0)
    factor = np.divide(lam, 1.0 - lam, out=np.zeros_like(lam), where=lam < 1.0)
    jump = np.maximum(run.last + factor[:, None, None, None] * (run.last - run.prev), 0.0)
    mass = run.last.sum(axis=(1, 2, 3)) / jump.sum(axis=(1, 2, 3))
    return np.asarray(jump * mass[:, None, None, None], dtype=np.float64)


ANDERSON_DEPTH = 12
"""Past differences :func:`anderson` mixes. On the 61 chains of ``pdplan optimize examples/chat-ppd.yaml`` (after 8
plain steps, to an L1 change of 1e-8) depths 5, 8, 12 and 20 took 2,289, 1,546, 1,474 and 1,376 calls of the step in
all (plain ones included); 12: the gain beyond it is small, and each step costs ``2·depth`` vectors of the law's
size."""


def anderson(step: Step, g: FloatArray, tol: float, budget: int) -> FloatArray | None:
    """Fixed point of ``step`` by Anderson mixing (Walker & Ni, SIAM J. Numer. Anal. 49(4), 2011, eq. 2.2, type II):
    from the last :data:`ANDERSON_DEPTH` iterates ``x_i`` with images ``T x_i`` and residuals ``f_i = T x_i − x_i``,
    the next iterate is ``T x_n − ΔG γ`` with ``γ = argmin ‖f_n − ΔF γ‖₂`` (ΔF, ΔG: the differences of successive
    residuals and images). On a linear operator that is GMRES on ``(I − T) x = 0`` (their §4), which needs far
    fewer steps than the plain iteration when the second eigenvalue λ₂ nears 1 (module docstring, **Slow
    mixing**). The mixture is clipped at 0 with the mass of ``T x_n`` kept (as :func:`aitken`), so each ``x`` is a
    law and ``T x`` one plain step from it.

    Stops per rate at the first ``x`` whose plain step changes it by less than ``tol`` in L1 (the test of
    :func:`power`, on any law rather than on a plain iterate) and returns that step ``T x``; None if some rate has
    not stopped after ``budget`` steps (the caller then runs the plain iteration).
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
            return out
        flat = image.reshape(n_rates, -1)
        if before is not None:
            slot = (n - 1) % ANDERSON_DEPTH
            np.subtract(f, before[0], out=d_f[:, slot])
            np.subtract(flat, before[1], out=d_g[:, slot])
        before = (f, flat)
        used = min(n, ANDERSON_DEPTH)
        x = _mixed(flat, f, d_f[:, :used], d_g[:, :used]).reshape(g.shape)
    return None


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
