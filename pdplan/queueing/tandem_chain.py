"""Stationary wait of a link fed by one FCFS M/G/1 server: the chain behind the tandem link model.

Requests k = 1, 2, … of one prefill server (Poisson rate θ, service ``S_k``) each hand a stream
to the server's link, which it holds for ``busy_k`` from the stream start; the stream may start
``lead_k`` before the prefill ends (:mod:`pdplan.queueing.link_delay`). With carry ``a_k = busy_k
− lead_k`` and clearance ``b_k = S_k − lead_k`` Lindley's recursion gives the link wait at the
next stream start, ``W_{k+1} = max(0, W_k + a_k − b_{k+1} − I_{k+1})``, where ``I_{k+1}`` is the
server's idle gap before request k+1.

**Exact state.** Let ``N_k`` be the number of requests k leaves behind at its departure: the M/G/1
embedded chain ``N_{k+1} = (N_k − 1)⁺ + A_{k+1}`` with ``A | S ~ Poisson(θS)`` arrivals during
the next service. The gap ``I_{k+1}`` is ``Exp(θ)`` (memoryless) when ``N_k = 0`` and 0
otherwise. So (W_k, N_k, bin of k) is a Markov chain, and the next bin is drawn independently.
(Conditioning the idle gap only on whether k itself found the server idle, with the prefill wait
taken independent of W, put the mean link wait 8–12 % low: long transfers come from long prompts,
whose service lets a queue build, so the link's backlog and the prefill queue rise together.)

**Truncation.** N is kept exactly for 0 … L−1 and lumped at ≥ L (``LEVELS = L + 1``). From the
lump, N = L exactly with its stationary share ``r = π_L / Σ_{n≥L} π_n`` of the embedded chain
(``π_0 = 1 − ρ``, ``π_{n+1} = (π_n − π_0 a_n − Σ_{j=1..n} π_j a_{n+1−j}) / a_0`` with ``a_j =
P(A = j)``), the only approximation besides the lattice. Against a direct simulation of the
recursion (10⁶ requests): splitwise-coding prompts, Llama-3.1-8B on an H100, request-wise
transfers over RoCE 100G, prefill loads 0.3–0.95 (link loads 0.16–0.51): mean wait −0.8…0.0 %,
P90 −2.4…+1.2 %, P99 within 0.4 %; the same over 25 GbE at link loads 0.5–0.9: mean −0.2…+4.0 %,
P99 −1.2…+2.7 %. On the three-bin case of tests/unit/test_link_delay.py (prefill loads 0.3–0.9)
P(W > 0) within 0.005, means −1.5…−0.6 %, P90 within 1.1 %. The lump costs most when a busy
prefill queue meets a nearly saturated link: at prefill loads 0.55–0.64 with link loads 0.84–0.9
means come out 9–15 % low with L = 3 (within 1 % with L = 8 on two of them).

**Lattice.** W lives on the lattice ``{0, h, 2h, …}`` of ``cells`` cells per rate; one step shifts
by ``a_k`` (a bincount), takes the idle branch's ``Exp(θ)`` off by an FFT correlation, clears
``b_k'`` for each next bin and mixes N by the Poisson matrix of that bin. The iteration runs to an
L1 change below ``tol``. A shift x (a carry or a clearance) is rarely a whole number of cells:
with ``x/h = i + f``, ``i = ⌊x/h⌋``, ``0 ≤ f < 1``, each shift moves a cell's mass i cells with
weight ``1 − f`` and ``i + 1`` cells with weight f (:func:`split_cells`), a two-point shift x̃ with

* the exact mean: ``E[x̃] = (1 − f)·ih + f·(i + 1)h = (i + f)·h = x``. So ``E[ã_k] = a_k`` and
  ``E[b̃_k'] = b_k'`` for every bin, and W's drift per request ``E[a − b′ − I]`` and the link load
  ``θ·E[a]`` are those of the continuous recursion. The clearance is even exact after the
  reflection: for Z = jh on the lattice both points ``ih``, ``(i + 1)h`` lie on one side of Z, where
  ``max(0, Z − ·)`` is linear, so ``E[max(0, Z − b̃)] = max(0, Z − b)``;
* variance ``f(1 − f)·h² ≤ h²/4`` per shift (at most h²/2 per step, carry and clearance), added to
  the increment's σ² whatever the state.

Rounding to the nearest cell instead keeps σ² but moves every request of a bin by the same error,
up to h/2, so when carries are a few cells long (the lattice spans 30 M/G/1 means, so that happens
near link saturation) the errors of the bins that carry most do not average out and the drift μ
moves by O(h). Near saturation μ is itself small and the wait scales like ``σ²/(2|μ|)`` (Kingman):
a first-order relative error ``δμ/μ`` there, against ``h²/(2σ²)`` (second order in h/σ) from the
split. The split is the linear-interpolation (hat-function) projection of the shifted point mass
onto the lattice, the only law on the two cells around x with its mass and mean. Measured against a
direct simulation of the recursion: the hypothesis case of tests/property/test_link_delay_props.py
(carries 0.6 and 13.7 cells: nearest-cell rounding takes the drift from −0.049 to −0.022 s per
request and the link load from 0.84 to 0.89) moves from 2.2–2.4× the simulated mean wait to
−9…−11 % (the lump above); the 25 GbE link of benchmarks/link_configs_vs_sim.py at link load 0.9
(3.4 cells per mean carry) from +90 % to +4 %. Dividing h by 4 moves the split's mean wait by
< 0.01 % on the three-bin case of tests/unit/test_link_delay.py (carries 1.6–170 cells) and by
0.9–5 % (down: its added variance) on hypothesis cases with carries of 0.2–14 cells, where
nearest-cell rounding's mean changes by factors up to 3, in either direction. The idle gap, a
continuous law, is rounded to the nearest cell (:func:`idle_exp_pmf`): its mean
``h/(2 sinh(θh/2))`` is 1/θ to a relative ``(θh)²/24``. The far side's wait V enters by its cdf at
the lattice points, i.e. rounded up to the next cell (up to h high).

**Slow mixing** near link saturation: :mod:`pdplan.queueing.chain_accel` (power steps, Aitken's extrapolation,
and the error it raises when even that does not settle).

**Saturation, told without iterating.** W's mean change per request is ``μ = E[a⁺] − E[b] − (1 − ρ)/θ``
(:func:`drift_s`: the carry as the lattice shifts it, the clearance, and the idle gap ``Exp(θ)`` taken when k leaves
the server empty, probability ``π_0 = 1 − ρ``). With ``μ ≥ 0`` the recursion has no stationary law (Lindley;
Asmussen, *Applied Probability and Queues*, 2nd ed., §III.6 and §X.1 for a Markov-modulated drive); on the lattice
the idle gap's mean is below 1/θ (**Lattice**), so its drift is larger still. :mod:`pdplan.queueing.link_delay`
refuses such a rate up front. **A tail past the lattice, told early.** From an empty link (W₀ = 0, N₀ drawn from its
stationary law, so the drive (N_k, bin, I) is stationary) each step is a non-decreasing map of W, and Loynes'
argument gives ``W_n`` stochastically non-decreasing in n: the mass at the lattice's last cell only grows along the
plain iterates (measured on the shared-system-prompt example's saturated link: never falling by more than 1e-17,
round-off). So once a plain iterate holds more than ``tail_max`` there, the stationary law does too, and
:func:`stationary_wait` stops (the caller widens the lattice) instead of iterating to a law it would discard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.numerics.gamma import gammaln, xlogy
from pdplan.queueing.chain_accel import accelerated, power
from pdplan.types import FloatArray, IntArray

LUMP_LEVEL = 3
"""L: N = 0, 1, 2 kept exactly, N ≥ 3 lumped (module docstring)."""


@dataclass(frozen=True, slots=True)
class ChainInputs:
    """Per prompt bin: probability, server service ``S``, carry ``a`` and clearance ``b`` (s)."""

    prob: FloatArray
    service_s: FloatArray
    carry_s: FloatArray
    clear_s: FloatArray


def poisson_pmf(k: npt.ArrayLike, mean: npt.ArrayLike) -> FloatArray:
    """``P(A = k)`` for A ~ Poisson(mean): exp(k·ln mean − mean − ln k!), with 0·ln 0 = 0 (the formula of
    ``scipy.stats.poisson.pmf``, here without importing ``scipy.stats``, which costs ~0.5 s of start-up)."""
    k_arr, mu = np.asarray(k, dtype=np.float64), np.asarray(mean, dtype=np.float64)
    return np.asarray(np.exp(xlogy(k_arr, mu) - mu - gammaln(k_arr + 1.0)), dtype=np.float64)


def arrivals_pmf(theta: FloatArray, prob: FloatArray, service_s: FloatArray, top: int) -> FloatArray:
    """``a_j = P(A = j)`` for j = 0 … top, A the arrivals during one service; ``[R, top + 1]``."""
    j = np.arange(top + 1)
    pmf = poisson_pmf(j[None, None, :], theta[:, None, None] * service_s[None, :, None])
    return np.asarray(np.einsum("k,rkj->rj", prob, pmf), dtype=np.float64)


def embedded_head(theta: FloatArray, prob: FloatArray, service_s: FloatArray, lump: int) -> FloatArray:
    """Stationary ``π_0 … π_{L−1}`` and the lump ``Σ_{n≥L} π_n`` of the embedded chain, ``[R, L+1]``,
    plus (as the last column) ``r = π_L / Σ_{n≥L} π_n``: shape ``[R, L + 2]``."""
    a = arrivals_pmf(theta, prob, service_s, lump)
    rho = np.clip(theta * float(prob @ service_s), 0.0, 0.999)
    pi = np.zeros((theta.size, lump + 1))
    pi[:, 0] = 1.0 - rho
    for n in range(lump):
        tail = sum(pi[:, j] * a[:, n + 1 - j] for j in range(1, n + 1)) if n else 0.0
        pi[:, n + 1] = (pi[:, n] - pi[:, 0] * a[:, n] - tail) / np.maximum(a[:, 0], 1e-300)
    pi = np.clip(pi, 0.0, 1.0)
    lumped = np.maximum(1.0 - pi[:, :lump].sum(axis=1), 0.0)
    share = np.where(lumped > 1e-15, np.minimum(pi[:, lump] / np.maximum(lumped, 1e-300), 1.0), 1.0)
    return np.asarray(np.column_stack([pi[:, :lump], lumped, share]), dtype=np.float64)


def level_matrix(theta: FloatArray, service_s: FloatArray, lump: int) -> FloatArray:
    """``P[r, k, n', m]``: base level m (m = L: the lump) to N' = m + A, A ~ Poisson(θ S_k),
    with N' ≥ L lumped; ``[R, K, L + 1, L + 1]``."""
    levels = lump + 1
    pmf = poisson_pmf(
        np.arange(levels)[None, None, :], theta[:, None, None] * service_s[None, :, None]
    )  # [R, K, levels]
    out = np.zeros((theta.size, service_s.size, levels, levels))
    for m in range(lump):
        out[:, :, m:lump, m] = pmf[:, :, : lump - m]
        out[:, :, lump, m] = np.maximum(1.0 - out[:, :, :lump, m].sum(axis=2), 0.0)
    out[:, :, lump, lump] = 1.0
    return out


def idle_exp_pmf(theta: FloatArray, h_s: FloatArray, cells: int) -> FloatArray:
    """``P(round(I/h) = m)`` for ``I ~ Exp(θ)``, shape ``[R, cells]``."""
    edges = (np.arange(cells + 1) - 0.5).clip(0.0)[None, :] * h_s[:, None]
    surv = np.exp(-theta[:, None] * edges)
    return np.asarray(surv[:, :-1] - surv[:, 1:], dtype=np.float64)


@dataclass(frozen=True, slots=True)
class _Lattice:
    """Cell shifts (whole cells ``a_cell = ⌊a/h⌋``, ``b_cell = ⌊b/h⌋`` and the split weights of the
    cell above, ``a_frac``, ``b_frac``: module docstring) and the fixed transforms of one solve."""

    a_cell: IntArray
    a_frac: FloatArray
    b_cell: IntArray
    b_frac: FloatArray
    width: int
    size: int
    idle_fft: npt.NDArray[np.complex128]
    flat: IntArray
    """Target cell of each ``[r, k, n, i]`` (bin-major; i = 0 … cells: the spread law, :func:`_carry`)
    after the ``⌊a⌋`` shift."""


def split_cells(x_s: FloatArray, h: FloatArray) -> tuple[IntArray, FloatArray]:
    """``x / h = i + f`` per rate and bin: ``(i, f)``, ``i = ⌊x/h⌋``, ``0 ≤ f < 1``. A shift by x
    moves mass to i cells with weight ``1 − f`` and to ``i + 1`` with weight f: mean ``(i + f)·h = x``
    exactly, variance ``f(1 − f)·h² ≤ h²/4`` (module docstring)."""
    cells = np.asarray(x_s, dtype=np.float64)[None, :] / h[:, None]
    whole = np.floor(cells)
    return whole.astype(np.intp), np.asarray(cells - whole, dtype=np.float64)


def _lattice(inputs: ChainInputs, theta: FloatArray, h: FloatArray, cells: int, levels: int) -> _Lattice:
    n_rates = theta.size
    a_cell, a_frac = split_cells(np.maximum(inputs.carry_s, 0.0), h)
    b_cell, b_frac = split_cells(inputs.clear_s, h)
    width = cells + int(a_cell.max()) + 1  # the top cell, shifted by ⌊a⌋ + 1, lands on width − 1
    size = 1 << int(np.ceil(np.log2(2 * width)))
    idle_fft = np.fft.rfft(idle_exp_pmf(theta, h, width), size)
    row = np.arange(n_rates * levels).reshape(n_rates, 1, levels, 1)  # bin-major: [R, K, levels, cells + 1]
    flat = row * width + a_cell[:, :, None, None] + np.arange(cells + 1)[None, None, None, :]
    return _Lattice(a_cell, a_frac, b_cell, b_frac, width, size, idle_fft, flat.ravel())


def drift_s(inputs: ChainInputs, theta: FloatArray) -> FloatArray:
    """W's mean change per request per rate, ``E[a⁺] − E[b] − (1 − ρ)/θ`` (module docstring, **Saturation**; ρ
    clipped as :func:`embedded_head` clips it); ≥ 0: the link cannot keep up, no stationary law."""
    p = inputs.prob
    rho = np.clip(theta * float(p @ inputs.service_s), 0.0, 0.999)
    idle = np.divide(1.0 - rho, theta, out=np.full_like(rho, np.inf), where=theta > 0.0)
    return np.asarray(float(p @ np.maximum(inputs.carry_s, 0.0)) - float(p @ inputs.clear_s) - idle, np.float64)


class _PastLattice(Exception):
    """A plain iterate from the empty link put more than ``tail_max`` on the last cell (module docstring)."""


def stationary_wait(
    inputs: ChainInputs,
    theta: FloatArray,
    h: FloatArray,
    cells: int,
    *,
    far_cdf: FloatArray | None = None,
    lump: int = LUMP_LEVEL,
    tol: float = 1e-6,
    max_iter: int = 2000,
    tail_max: float | None = None,
) -> FloatArray | None:
    """Per-bin sub-pmf ``[R, K, cells]`` of each stream's start wait (module docstring).

    ``far_cdf`` ``[R, cells]``: cdf of an independent wait V the stream must also clear (the far
    side's NICs); the stream starts after ``max(W, V)`` and holds the link from then. Up to
    ``max_iter`` plain steps to an L1 change below ``tol``; a chain that mixes slower gets up to
    ``max_iter`` more, extrapolated, to an estimated L1 distance below ``tol``
    (:func:`pdplan.queueing.chain_accel.accelerated`). ``tail_max``: None as soon as a plain iterate holds more
    than this on the last cell, for any rate (W's mass there only grows, module docstring: the law would run past
    the lattice).
    """
    n_rates, levels, p = theta.size, lump + 1, inputs.prob
    head = embedded_head(theta, p, inputs.service_s, lump)
    share = head[:, -1]
    mix = level_matrix(theta, inputs.service_s, lump)
    lat = _lattice(inputs, theta, h, cells, levels)
    mix_p = mix * p[None, :, None, None]  # and the next bin's probability

    def step(g: FloatArray) -> FloatArray:
        y = _carry(g if far_cdf is None else _later(g, far_cdf), lat, n_rates, levels)
        z, totals = _base_levels(y, share, lat, cells)
        cleared = _clear(z, lat.width, totals, lat, cells)  # [R, m, K, cells]
        return _mix(mix_p, cleared)

    g = _bin_major((n_rates, levels, p.size, cells))
    g[:, :, :, 0] = head[:, :levels, None] * p[None, None, :]

    def watched(g: FloatArray) -> FloatArray:
        nxt = step(g)
        if tail_max is not None and float(nxt[..., -1].sum(axis=(1, 2)).max()) > tail_max:
            raise _PastLattice
        return nxt

    try:
        run = power(watched, g, tol, max_iter)  # the plain iterates from the empty link: Loynes-monotone
    except _PastLattice:
        return None
    # Slow mixing near link saturation (module docstring): extrapolate, never a silent estimate.
    g = run.last if float(run.change.max()) < tol else accelerated(step, run, tol, max_iter)
    out = g if far_cdf is None else _later(g, far_cdf)
    return np.asarray(out.sum(axis=1), dtype=np.float64)


def _bin_major(shape: tuple[int, int, int, int]) -> FloatArray:
    """Zeros of logical shape ``[R, levels, K, c]`` stored bin-major, ``[R, K, levels, c]`` in memory:
    the layout :func:`_mix` writes the iterates in, so that their element-wise steps run in order."""
    n_rates, levels, n_bins, c = shape
    return np.zeros((n_rates, n_bins, levels, c)).transpose(0, 2, 1, 3)


def _mix(mix_p: FloatArray, cleared: FloatArray) -> FloatArray:
    """``g'[r, n, k, c] = Σ_m mix_p[r, k, n, m]·cleared[r, m, k, c]`` (one small matrix product per
    rate and bin), stored bin-major (:func:`_bin_major`)."""
    return np.asarray(np.matmul(mix_p, cleared.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3), dtype=np.float64)


def _carry(g: FloatArray, lat: _Lattice, n_rates: int, levels: int) -> FloatArray:
    """``Y[r, n, i] = Σ_k (1 − f_rk)·g[r, n, k, i − ⌊a_rk⌋] + f_rk·g[r, n, k, i − ⌊a_rk⌋ − 1]`` on
    ``width`` cells (``f = a_frac``: the mean-preserving split of the carry): each bin's law is
    first spread over one more cell (``(1 − f)·g`` in place, ``f·g`` a cell up), then shifted by
    ``⌊a⌋`` in one bincount (bin-major, as :data:`_Lattice.flat`)."""
    up = g * lat.a_frac[:, None, :, None]
    spread = _bin_major((*g.shape[:-1], g.shape[-1] + 1))
    np.subtract(g, up, out=spread[..., :-1])
    spread[..., 1:] += up
    weights = spread.transpose(0, 2, 1, 3).ravel()  # memory order: a view
    out = np.bincount(lat.flat, weights=weights, minlength=n_rates * levels * lat.width)
    return np.asarray(out.reshape(n_rates, levels, lat.width), dtype=np.float64)


def _base_levels(y: FloatArray, share: FloatArray, lat: _Lattice, cells: int) -> tuple[FloatArray, FloatArray]:
    """Z by base level ``m = (N − 1)⁺`` (N = 0 less the idle gap; the lump N ≥ L splits by r),
    on ``2·width + cells`` cells with Z = 0 at index ``width``; and each level's mass."""
    n_rates, levels, width = y.shape
    lump = levels - 1
    z = np.zeros((n_rates, levels, 2 * width + cells))
    z[:, 0, : 2 * width] = _minus_idle(y[:, 0], lat.idle_fft, lat.size)
    z[:, 0, width : 2 * width] += y[:, 1]
    z[:, 1 : lump - 1, width : 2 * width] = y[:, 2:lump]
    z[:, lump - 1, width : 2 * width] += share[:, None] * y[:, lump]
    z[:, lump, width : 2 * width] = (1.0 - share[:, None]) * y[:, lump]
    mass = y.sum(axis=2)
    totals = np.zeros((n_rates, levels))
    totals[:, 0] = mass[:, 0] + mass[:, 1]
    totals[:, 1 : lump - 1] = mass[:, 2:lump]
    totals[:, lump - 1] += share * mass[:, lump]
    totals[:, lump] = (1.0 - share) * mass[:, lump]
    return z, totals


def _minus_idle(y: FloatArray, idle_fft: npt.NDArray[np.complex128], size: int) -> FloatArray:
    """Law of ``Y − I`` on cells ``−width … width−1`` (zero at index ``width``) by FFT."""
    width = y.shape[1]
    corr = np.fft.irfft(np.fft.rfft(y[:, ::-1], size) * idle_fft, size)[:, : 2 * width]
    return np.asarray(np.maximum(corr[:, ::-1], 0.0), dtype=np.float64)  # P(Y − I = i − width)


def _clear(z: FloatArray, zero_index: int, total: FloatArray, lat: _Lattice, cells: int) -> FloatArray:
    """``W' = max(0, Z − b_k)`` per level and next bin k, shape ``[R, levels, K, cells]``, with b_k
    split between ``⌊b_k⌋`` (weight ``1 − f``) and ``⌊b_k⌋ + 1`` cells (weight f = ``b_frac``).

    ``z[r, m, i]`` is ``P(Z = i − zero_index)`` (zero-padded by ``cells`` at the top) and
    ``total[r, m]`` Z's whole mass (any part below the lattice is ≤ b_k: the atom). Mass at or
    beyond the last cell is kept there (the caller checks it stays small).
    """
    n_rates, levels, length = z.shape
    n = length - cells
    start = np.minimum(zero_index + lat.b_cell, n - 1)[:, None, :]  # [R, 1, K]: index of Z = ⌊b_k⌋
    win = np.lib.stride_tricks.sliding_window_view(z, cells - 1, axis=2)
    rows, lv = np.arange(n_rates)[:, None, None], np.arange(levels)[None, :, None]
    low = win[rows, lv, start + 1]  # P(Z − ⌊b_k⌋ = j), j = 1 … cells − 1
    body = win[rows, lv, start + 2]  # P(Z − ⌊b_k⌋ − 1 = j), then in place (a contiguous copy: fast)
    f = lat.b_frac[:, None, :]
    body -= low
    body *= f[..., None]
    body += low  # (1 − f)·P(Z − ⌊b⌋ = j) + f·P(Z − ⌊b⌋ − 1 = j)
    out = np.empty((n_rates, levels, lat.b_cell.shape[1], cells))
    out[..., 1:] = body
    cum = np.cumsum(z, axis=2)
    beyond = cum[:, :, -1:] - (1.0 - f) * cum[rows, lv, start + cells - 1] - f * cum[rows, lv, start + cells]
    out[..., -1] += np.maximum(beyond, 0.0)
    out[..., 0] = np.maximum(total[:, :, None] - out[..., 1:].sum(axis=3), 0.0)
    return out


def _later(g: FloatArray, far_cdf: FloatArray) -> FloatArray:
    """Sub-pmfs of ``max(W, V)`` on the lattice: ``P(max ≤ i) = P(W ≤ i)·P(V ≤ i)``."""
    cdf = np.cumsum(g, axis=3) * far_cdf[:, None, None, :]
    cdf[..., -1] = g.sum(axis=3)  # mass at or beyond the last cell stays there
    return np.asarray(np.diff(cdf, axis=3, prepend=0.0), dtype=np.float64)
