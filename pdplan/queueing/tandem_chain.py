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

**Lattice.** W lives on the lattice ``{0, h, 2h, …}`` of ``cells`` cells per rate (one step: **One step**
below). The iteration runs to an L1 change below ``tol``. A shift x (a carry or a clearance) is rarely a whole
number of cells: with ``x/h = i + f``, ``i = ⌊x/h⌋``, ``0 ≤ f < 1``, each shift moves a cell's mass i cells with
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

**One step.** The iterate is ``Y``, the law of ``W_k + a_k`` (before the idle gap and the next clearance) on
``width = cells + ⌊max a⌋ + 1`` cells per level N, summed over k's bin: that is all the next request depends on,
and it is ``levels × width`` numbers where the per-bin laws are ``K`` times more. From Y:

1. Z by base level ``m = (N − 1)⁺``: N = 0 takes the idle gap ``Exp(θ)`` off (an FFT correlation), the lump
   splits by r (:func:`_base_levels`);
2. for each next bin k, ``W' = max(0, Z − b_k)`` as a cdf: a window of Z's cdf starting ``⌊b_k⌋`` cells up,
   with the split's weight f on the next cell (:func:`_clear_cdf`);
3. the far side's wait: ``P(max(W', V) ≤ j) = P(W' ≤ j)·P(V ≤ j)`` (:func:`_later`);
4. N mixes by bin k's Poisson matrix, times ``p_k``, and the carry's split weights ``1 − f``, f are folded into
   that matrix (one batched matrix product, :attr:`_Lattice.mix_split`);
5. each bin's two parts are added ``⌊a_k⌋`` and ``⌊a_k⌋ + 1`` cells up, as cdfs (a cdf past its last cell stays
   at its total), and Y' is their difference (:func:`_carried`).

Bins with ``p_k = 0`` (a class a cache tier can never serve, say) add nothing to Y' and are not iterated; their
row of the result is zero, as the per-bin law's mass is ``p_k``. The L1 change of Y bounds that of the per-bin
laws of the next step (both maps are Markov operators, which never expand L1), so the stop on Y's change is at
least as strict. Rewritten from an iteration on the per-bin laws (a bincount for the carry, a sliding-window
gather for the clearance): the same fixed point (on the chat-sessions example's 133 chains, per-bin laws within
2e-8 in L1, mean waits within 4e-7 relative, P90 cells identical) at 2.6× less CPU.

**Slow mixing** near link saturation: :mod:`pdplan.queueing.chain_accel` (power steps; Anderson mixing once
:data:`PLAIN_FIRST` plain steps have not settled the chain, to a 100× stricter change; GMRES where that does not
settle within :data:`ANDERSON_STEPS`, and an error where even that does not within ``max_iter`` steps in all).
``pdplan optimize examples/chat-ppd.yaml``'s 61 chains: 5,725 calls of the step → 1,493, CPU 5.8–6.0 s → 1.85–1.89 s
(a shared 2-core machine, 2026-12-06); chat-sessions.yaml's chains all settle in their first 8 plain steps and are
unchanged, bit for bit. Nearer saturation (the shared-system-prompt example's link at half its bandwidth, link loads
0.93–0.99; 2026-12-07) Anderson mixing settles most chains within 400–750 steps and GMRES the few whose residual stalls
near the stop: its 113 chain solves 45 → 15 CPU s (``docs/queueing.md`` §1.5).

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

from pdplan.errors import UnsettledWaitError
from pdplan.numerics.gamma import gammaln, xlogy
from pdplan.numerics.sorted_stats import sorted_unique
from pdplan.queueing.chain_accel import Step, anderson_run, krylov, power
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
    """What one solve keeps fixed (**One step**): the live bins (``p_k > 0``), their carries (whole cells
    ``a_cell = ⌊a/h⌋`` and split weight ``a_frac`` of the cell above), the start of each clearance's window into
    Z's cdf (``start = width + ⌊b/h⌋``, capped) and its split weight ``b_frac``, the level mixing with the bin's
    probability and the carry's split folded in, and the idle gap's transform."""

    live: IntArray
    a_cell: IntArray
    a_frac: FloatArray
    start: IntArray
    b_frac: FloatArray
    mix_split: FloatArray
    """``[R, K', 2·levels, levels]``: ``(1 − f_a)·p_k·P_k`` over ``f_a·p_k·P_k`` (rows n, columns m)."""
    mix_p_cols: FloatArray
    """``[R, K', levels]``: ``p_k·Σ_n P_k[n, m]``, each level's mass after the mixing (1 up to round-off)."""
    width: int
    size: int
    idle_fft: npt.NDArray[np.complex128]


def split_cells(x_s: FloatArray, h: FloatArray) -> tuple[IntArray, FloatArray]:
    """``x / h = i + f`` per rate and bin: ``(i, f)``, ``i = ⌊x/h⌋``, ``0 ≤ f < 1``. A shift by x
    moves mass to i cells with weight ``1 − f`` and to ``i + 1`` with weight f: mean ``(i + f)·h = x``
    exactly, variance ``f(1 − f)·h² ≤ h²/4`` (module docstring)."""
    cells = np.asarray(x_s, dtype=np.float64)[None, :] / h[:, None]
    whole = np.floor(cells)
    return whole.astype(np.intp), np.asarray(cells - whole, dtype=np.float64)


def _lattice(inputs: ChainInputs, theta: FloatArray, h: FloatArray, cells: int, lump: int) -> _Lattice:
    """The fixed parts of one solve over the live bins (:class:`_Lattice`)."""
    live = np.flatnonzero(inputs.prob > 0.0)
    a_cell, a_frac = split_cells(np.maximum(inputs.carry_s[live], 0.0), h)
    b_cell, b_frac = split_cells(inputs.clear_s[live], h)
    width = cells + int(a_cell.max()) + 1  # the top cell, shifted by ⌊a⌋ + 1, lands on width − 1
    size = 1 << int(np.ceil(np.log2(2 * width)))
    idle_fft = np.fft.rfft(idle_exp_pmf(theta, h, width), size)
    mix = level_matrix(theta, inputs.service_s[live], lump) * inputs.prob[live][None, :, None, None]
    f = a_frac[:, :, None, None]
    mix_split = np.concatenate([mix - f * mix, f * mix], axis=2)
    start = np.minimum(width + b_cell, 2 * width)  # Z ≤ ⌊b⌋ for all of Z's lattice beyond 2·width
    return _Lattice(live, a_cell, a_frac, start, b_frac, mix_split, mix.sum(axis=2), width, size, idle_fft)


def drift_s(inputs: ChainInputs, theta: FloatArray) -> FloatArray:
    """W's mean change per request per rate, ``E[a⁺] − E[b] − (1 − ρ)/θ`` (module docstring, **Saturation**; ρ
    clipped as :func:`embedded_head` clips it); ≥ 0: the link cannot keep up, no stationary law."""
    p = inputs.prob
    rho = np.clip(theta * float(p @ inputs.service_s), 0.0, 0.999)
    idle = np.divide(1.0 - rho, theta, out=np.full_like(rho, np.inf), where=theta > 0.0)
    return np.asarray(float(p @ np.maximum(inputs.carry_s, 0.0)) - float(p @ inputs.clear_s) - idle, np.float64)


class _PastLattice(Exception):
    """A plain iterate from the empty link put more than ``tail_max`` on the last cell (module docstring)."""


PLAIN_FIRST = 10
"""Plain steps before Anderson mixing takes over. The chains that settle within them keep the plain iterate (the
answer of the plain iteration, bit for bit): all of ``pdplan optimize`` on examples/chat-sessions.yaml (at most 8
steps) and shared-system-prompt.yaml (at most 7), and those of chat-ppd.yaml up to 0.14 of its top rate (9); its
others took 16–656 plain steps and go on mixed."""
ANDERSON_TOL_SHARE = 0.01
"""Anderson mixing (:func:`pdplan.queueing.chain_accel.anderson`) stops at an L1 change of this share of ``tol``.
On the slowest chains of ``pdplan optimize examples/chat-ppd.yaml`` (656 plain steps to a change of 1e-6: λ₂ ≈ 0.98)
the plain stop at
``tol`` = 1e-6 leaves the law 1.0e-4 (L1) from the fixed point (plain steps to an L1 change of 1e-11), Anderson's at
1e-8 1.1e-6; at 1e-6 it left 1.8e-4 (the change understates the distance by ~1/(1 − λ₂) whatever the law)."""
ANDERSON_STEPS = 1000
"""Anderson steps before GMRES takes over (:func:`_slow`). ``pdplan optimize`` on examples/chat-ppd.yaml needed at
most 83 (its slowest chain), the hypothesis case of tests/unit/test_link_delay.py 228, the KV link of
examples/shared-system-prompt.yaml's pick at half its bandwidth (the sensitivity row "link bandwidth x0.5": link loads
0.93–0.976, decay ratios to 0.9997) 396–747 where it settles (2026-12-07). With 300, those fell to the plain iteration
from the empty link: 2,000 plain and up to 2,000 extrapolated steps, 3–4 CPU s a chain, and from link load 0.972 no
convergence (an error, which the goodput search counts as a missed SLO)."""


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
    """Per-bin sub-pmf ``[R, K, cells]`` of each stream's start wait, of mass ``p_k`` (module docstring).

    ``far_cdf`` ``[R, cells]``: cdf of an independent wait V the stream must also clear (the far
    side's NICs); the stream starts after ``max(W, V)`` and holds the link from then. Up to
    :data:`PLAIN_FIRST` plain steps from the empty link to an L1 change below ``tol``; a chain that mixes slower
    goes on by Anderson mixing to an L1 change below ``tol·``:data:`ANDERSON_TOL_SHARE` (a stricter stop,
    :func:`pdplan.queueing.chain_accel.anderson`), and where that does not settle within :data:`ANDERSON_STEPS`
    steps, by GMRES from its last mixture (:func:`pdplan.queueing.chain_accel.krylov`) to the same stop, within
    ``max_iter`` steps in all, Anderson's included; :class:`~pdplan.errors.UnsettledWaitError` where that does not
    settle either. ``tail_max``: None as soon as a plain iterate holds more than this on the last cell, for any rate
    (W's mass there only grows, module docstring: the law would run past the lattice), or where the law the chain
    settles on does.
    """
    head = embedded_head(theta, inputs.prob, inputs.service_s, lump)
    share = head[:, -1]
    lat = _lattice(inputs, theta, h, cells, lump)
    prob = inputs.prob[lat.live]

    def step(y: FloatArray) -> FloatArray:
        return _carried(np.matmul(lat.mix_split, _later(_cleared_cdf(y, share, lat, cells), far_cdf)), lat)

    def linear(y: FloatArray) -> FloatArray:  # the step on signed vectors (Krylov directions): no clipping
        return _carried(np.matmul(lat.mix_split, _later(_cleared_cdf(y, share, lat, cells, clip=False), far_cdf)), lat)

    def watched(y: FloatArray) -> FloatArray:
        cleared = _cleared_cdf(y, share, lat, cells)
        if tail_max is not None and float(_top_mass(cleared, prob).max()) > tail_max:
            raise _PastLattice
        return _carried(np.matmul(lat.mix_split, _later(cleared, far_cdf)), lat)

    empty = _carried(_empty(head, prob, lat, cells, far_cdf), lat)
    try:  # the plain iterates from the empty link: Loynes-monotone
        run = power(watched, empty, tol, min(PLAIN_FIRST, max_iter))
    except _PastLattice:
        return None
    y = run.last if float(run.change.max()) < tol else _slow(step, linear, run.last, tol, max_iter)
    cleared = _cleared_cdf(y, share, lat, cells)  # [R, K', m, cells]
    if tail_max is not None and float(_top_mass(cleared, prob).max()) > tail_max:
        return None
    _later(cleared, far_cdf)
    out = np.zeros((theta.size, inputs.prob.size, cells))
    out[:, lat.live] = np.diff(np.einsum("rkm,rkmc->rkc", lat.mix_p_cols, cleared), axis=2, prepend=0.0)
    return out


def _slow(step: Step, linear: Step, start: FloatArray, tol: float, max_iter: int) -> FloatArray:
    """A chain the first plain steps did not settle (:func:`stationary_wait`): Anderson mixing from the last plain
    iterate ``start``; where that does not settle within :data:`ANDERSON_STEPS`, GMRES from its last mixture
    (:func:`pdplan.queueing.chain_accel.krylov`: ``linear`` is ``step`` without its clipping) for the rest of
    ``max_iter`` steps, to the same stop; where that does not settle either, an error (never a silent estimate)."""
    stop, mixing = tol * ANDERSON_TOL_SHARE, min(ANDERSON_STEPS, max_iter)
    mixed, settled = anderson_run(step, start, stop, mixing)
    solved = mixed if settled else krylov(step, linear, mixed, stop, max_iter - mixing)
    if solved is not None:
        return solved
    raise UnsettledWaitError(
        f"KV link chain: no convergence in {max_iter} Anderson ({mixing}) and GMRES steps (to an L1 change of "
        f"{stop:.0e}): the KV link wait this near saturation cannot be computed; evaluate a lower rate"
    )


def _empty(head: FloatArray, prob: FloatArray, lat: _Lattice, cells: int, far_cdf: FloatArray | None) -> FloatArray:
    """The empty link (W = 0, N at its stationary law ``head``) as the split start-wait cdfs
    ``[R, K', 2·levels, cells]`` that :func:`_carried` takes: ``max(0, V) = V``. Without a far side every cdf is
    flat (1 on every cell): a read-only view of one value per row, stride 0 along the cells, which :func:`_carried`
    sums by segments (:func:`_carried_flat`)."""
    levels = lat.mix_split.shape[3]
    f = lat.a_frac[:, :, None]
    mass = prob[None, :, None] * head[:, None, :levels]  # [R, K', levels]
    split = np.concatenate([mass - f * mass, f * mass], axis=2)[..., None]
    if far_cdf is None:
        return np.broadcast_to(split, (*split.shape[:3], cells))
    far = far_cdf.copy()
    far[:, -1] = 1.0  # mass at or beyond the last cell stays there (:func:`_later`)
    return np.asarray(split * far[:, None, None, :], dtype=np.float64)


def _cleared_cdf(y: FloatArray, share: FloatArray, lat: _Lattice, cells: int, *, clip: bool = True) -> FloatArray:
    """The start waits' cdfs ``[R, K', levels, cells]`` from Y (``[R, levels, 1, width]``): Z by base level
    (:func:`_base_levels`), cleared by each live next bin's b (:func:`_clear_cdf`). ``clip``: as :func:`_minus_idle`."""
    z, total = _base_levels(y[:, :, 0], share, lat, cells, clip=clip)
    return _clear_cdf(z, total, lat, cells)


def _clear_cdf(z: FloatArray, total: FloatArray, lat: _Lattice, cells: int) -> FloatArray:
    """cdf of ``W' = max(0, Z − b_k)`` per live next bin k and base level m, ``[R, K', levels, cells]``, with b_k
    split between ``⌊b_k⌋`` (weight ``1 − f``) and ``⌊b_k⌋ + 1`` cells (weight f = ``b_frac``):
    ``P(W' ≤ j) = P(Z ≤ j + ⌊b⌋) + f·P(Z = j + ⌊b⌋ + 1)`` below the last cell, which holds Z's whole mass
    ``total[r, m]`` (mass at or beyond it is kept there; the caller checks it stays small).

    ``z[r, m, i]`` is ``P(Z = i − width)``, zero-padded by ``cells`` at the top. Mass it lacks against ``total``
    (the idle gaps past the FFT's span) lies below the lattice, ≤ every clearance: it joins the atom at 0.
    """
    cum = np.cumsum(z, axis=2)
    cum += (total - cum[:, :, -1])[:, :, None]
    n_rates, n_live, levels = lat.start.shape[0], lat.start.shape[1], z.shape[1]
    out = np.empty((n_rates, n_live, levels, cells))
    for r in range(n_rates):
        for k, (s, f) in enumerate(zip(lat.start[r].tolist(), lat.b_frac[r].tolist(), strict=True)):
            body = out[r, k, :, :-1]
            np.multiply(z[r, :, s + 1 : s + cells], f, out=body)
            body += cum[r, :, s : s + cells - 1]
    out[..., -1] = total[:, None, :]
    return out


def _top_mass(cleared: FloatArray, prob: FloatArray) -> FloatArray:
    """Per rate, the start waits' mass on the lattice's last cell, ``Σ_k p_k Σ_m (total_m − P(W'_km ≤ last − 1))``
    (the level mixing keeps each column's mass)."""
    gap = cleared[..., -1] - cleared[..., -2]  # [R, K', m]
    return np.asarray(np.einsum("k,rkm->r", prob, gap), dtype=np.float64)


def _carried(split: FloatArray, lat: _Lattice) -> FloatArray:
    """Y' (``[R, levels, 1, width]``): each live bin's start-wait cdfs (``split``: ``(1 − f_a)·`` over ``f_a·``
    its mixed cdf, ``[R, K', 2·levels, cells]``) shifted by ``⌊a_k⌋`` and ``⌊a_k⌋ + 1`` cells and summed, in cdf
    form (a cdf past its last cell stays at its total: added once as a step), then differenced. A ``split`` that is
    flat along the cells by construction (stride 0 there: the empty link, :func:`_empty`) is summed by segments
    (:func:`_carried_flat`), with the same result."""
    n_rates, _, two_levels, cells = split.shape
    levels = two_levels // 2
    cdf = np.zeros((n_rates, levels, lat.width + 1))
    tops = np.zeros((n_rates, lat.width + 1, levels))  # where each shifted cdf's flat top starts: its total
    for r in range(n_rates):
        if split.strides[3] == 0:
            cdf[r] = _carried_flat(split[r, :, :, 0], lat.a_cell[r], cells, lat.width + 1)
        else:
            for k, shift in enumerate(lat.a_cell[r].tolist()):
                cdf[r, :, shift : shift + cells] += split[r, k, :levels]
                cdf[r, :, shift + 1 : shift + cells + 1] += split[r, k, levels:]
        np.add.at(tops[r], lat.a_cell[r] + cells, split[r, :, :levels, -1])
        np.add.at(tops[r], lat.a_cell[r] + cells + 1, split[r, :, levels:, -1])
    cdf += np.cumsum(tops, axis=1).transpose(0, 2, 1)
    return np.diff(cdf[:, :, None, : lat.width], axis=3, prepend=0.0)


def _carried_flat(values: FloatArray, a_cell: IntArray, cells: int, size: int) -> FloatArray:
    """The bin-by-bin sum of :func:`_carried` for one rate whose cdfs are flat (``values[k, i]`` on each of the
    ``cells`` cells of bin k's part i, ``[K', 2·levels]``), on ``size`` cells, ``[levels, size]``. Between two
    consecutive window ends (a part's first cell, ``⌊a_k⌋`` or ``⌊a_k⌋ + 1``, and the cell after its last) the same
    parts are summed, so each segment is summed once, in the loop's order (bin by bin, part 0 before part 1) and from
    0 as the loop starts. A part outside its window adds an exact 0 (the values are ≥ 0), so the running sum of every
    part, masked, is the loop's sum bit for bit: a cumulative sum adds in sequence."""
    n_live, two_levels = values.shape
    first = (a_cell[:, None] + np.arange(2)[None, :]).ravel()  # [K'·2], in the loop's order
    cuts = sorted_unique(np.concatenate([[0], first, first + cells]))
    cuts = cuts[cuts < size]
    inside = (first[None, :] <= cuts[:, None]) & (cuts[:, None] < first[None, :] + cells)  # [segments, K'·2]
    parts = values.reshape(n_live * 2, two_levels // 2)
    sums = np.cumsum(np.where(inside[:, :, None], parts[None, :, :], 0.0), axis=1)[:, -1, :]  # [segments, levels]
    return np.repeat(sums.T, np.diff(np.append(cuts, size)), axis=1)


def _base_levels(
    y: FloatArray, share: FloatArray, lat: _Lattice, cells: int, *, clip: bool = True
) -> tuple[FloatArray, FloatArray]:
    """Z by base level ``m = (N − 1)⁺`` (N = 0 less the idle gap; the lump N ≥ L splits by r),
    on ``2·width + cells`` cells with Z = 0 at index ``width``; and each level's mass. ``clip``: as
    :func:`_minus_idle`."""
    n_rates, levels, width = y.shape
    lump = levels - 1
    z = np.zeros((n_rates, levels, 2 * width + cells))
    z[:, 0, : 2 * width] = _minus_idle(y[:, 0], lat.idle_fft, lat.size, clip=clip)
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


def _minus_idle(y: FloatArray, idle_fft: npt.NDArray[np.complex128], size: int, *, clip: bool = True) -> FloatArray:
    """Law of ``Y − I`` on cells ``−width … width−1`` (zero at index ``width``) by FFT, its round-off below 0
    clipped; ``clip`` False: the correlation as it comes, linear in ``y`` (which may then be signed:
    :func:`pdplan.queueing.chain_accel.krylov`)."""
    width = y.shape[1]
    corr = np.fft.irfft(np.fft.rfft(y[:, ::-1], size) * idle_fft, size)[:, : 2 * width]
    if not clip:
        return np.asarray(corr[:, ::-1], dtype=np.float64)
    return np.asarray(np.maximum(corr[:, ::-1], 0.0), dtype=np.float64)  # P(Y − I = i − width)


def _later(starts: FloatArray, far_cdf: FloatArray | None) -> FloatArray:
    """cdfs of ``max(W, V)`` on the lattice: ``P(max ≤ i) = P(W ≤ i)·P(V ≤ i)``; mass at or beyond the last cell
    stays there (``starts``: cdfs ``[R, K', levels, cells]``, changed in place)."""
    if far_cdf is not None:
        starts[..., :-1] *= far_cdf[:, None, None, :-1]
    return starts
