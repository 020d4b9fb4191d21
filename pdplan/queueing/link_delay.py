"""What a busy KV link adds to a request's KV-ready time, per prompt bin (docs/queueing.md §1.5).

A transfer stream of a request with prompt bin ``k`` may start ``lead_k`` before its prefill ends
(``overlap − pipe``: layer and chunk granularity stream while the prefill runs, request
granularity waits for the end), holds the link for ``busy_k`` and, on a free link, ends no later
than the KV would be ready anyway. A link wait ``W`` counted from the stream start therefore delays
the KV by ``D_k = max(0, W − slack_k)`` (``slack = exposed + overlap − time``,
:attr:`pdplan.transfer.kv.TransferResult.slack_s`; 0 for request granularity). Two models of ``W``:

* :func:`slack_delay` — the link is fed by many prefill instances (the decode side of an x→y
  fan-in): an M/G/1 wait (Poisson stream starts; :func:`pdplan.queueing.mg1_wait_distribution`)
  shifted per bin.
* :func:`tandem_delay` — the link is fed by one prefill server (each prefill instance's own
  NICs): its stream starts are that server's output, serialised, so a Poisson model is wrong both
  ways (a layer-wise stream that keeps up with the compute never waits; a short prompt right behind
  a long request-granularity transfer waits for most of it). Lindley's recursion over the
  server's consecutive requests with ``a_k = busy_k − lead_k`` and ``b_k = S_k − lead_k``
  (S = prefill service; the next stream starts ``S_{k+1} + I_{k+1} + lead_k − lead_{k+1}`` after
  this one): ``W_{k+1} = max(0, W_k + a_k − b_{k+1} − I_{k+1})``, solved as a Markov chain with
  the server's embedded M/G/1 chain (:mod:`pdplan.queueing.tandem_chain`). When no carry exceeds
  any clearance (``max a ≤ min b``: a layer stream that keeps up with its compute) W ≡ 0 exactly
  and the chain is skipped.

Both return a :class:`BinDelay`: per rate and bin an atom at 0 plus ``points`` conditional
quantiles of the positive part at the middles of probability bands that refine toward the tail
(:func:`tail_bands`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pdplan.errors import UnsettledWaitError
from pdplan.numerics.digest import array_digest
from pdplan.queueing.distributions import WaitDistribution
from pdplan.types import FloatArray

if TYPE_CHECKING:
    from pdplan.queueing.tandem_chain import ChainInputs

DELAY_POINTS = 16
TANDEM_CELLS = 1024
"""Lattice cells of the tandem chain (span: 4 max a + 30 M/G/1 mean waits on a)."""
TANDEM_TOL = 1e-6
"""L1 change between successive iterates that stops the iteration. The change understates the L1
distance to the fixed point by ~1/(1 − λ₂) (:mod:`pdplan.queueing.tandem_chain`): on the
benchmarks' request-wise links 15–18 iterations from an empty link leave 2e-7 at link loads up to
0.5 (RoCE 100G); over 25 GbE, 63, 197 and 1,617 iterations leave 7e-6, 3e-5 and 3e-4 at link
loads 0.5, 0.7 and 0.9 (mean wait within 1e-4, 1e-4 and 7e-4 relative, P99 unchanged): far below
the 1e-2 tail a P99 reads. Those are plain iterations; a chain that its first
:data:`~pdplan.queueing.tandem_chain.PLAIN_FIRST` plain steps do not settle goes on by Anderson mixing to a change of
``tol/100`` (:mod:`pdplan.queueing.chain_accel`): on chat-ppd's slowest chain 1e-6 from the fixed point, not 1e-4."""
TANDEM_MAX_ITER = 2000
TAIL_MAX = 1e-4
"""Largest probability mass allowed to fall off the lattice's end."""
WIDENINGS = (1.0, 4.0, 16.0)
"""Cell widths tried, as multiples of :func:`_lattice_step`'s, narrowest first; all rates of one call share one."""


@dataclass(frozen=True, slots=True)
class BinDelay:
    """Per rate and bin a discrete delay: ``points_s[r, k, p]`` with ``weights[r, k, p]``.

    A bin axis of length 1 applies to every bin.
    """

    points_s: FloatArray
    weights: FloatArray

    @property
    def bin_mean_s(self) -> FloatArray:
        """``E[D | k]`` per rate and bin, shape ``[R, K]``."""
        return np.asarray(np.sum(self.points_s * self.weights, axis=2), dtype=np.float64)

    def row(self, r: int) -> BinDelay:
        return BinDelay(self.points_s[r : r + 1], self.weights[r : r + 1])


def no_delay(n_rates: int) -> BinDelay:
    """No link queue: D ≡ 0."""
    return BinDelay(np.zeros((n_rates, 1, 1)), np.ones((n_rates, 1, 1)))


def tail_bands(points: int) -> tuple[FloatArray, FloatArray]:
    """(mid-levels, widths) of ``points`` probability bands of a delay's positive part, finer toward
    the tail: edges ``1 − (1 − j/P)²`` (the top band holds 1/P² of the mass). Equal bands put the
    top point at the 1 − 1/(2P) quantile, which cuts off the tail a P99 reads when the delay *is*
    the latency (short outputs under convention B)."""
    edges = 1.0 - (1.0 - np.linspace(0.0, 1.0, points + 1)) ** 2
    return (edges[:-1] + edges[1:]) / 2.0, np.diff(edges)


def discretise(atom: float, cdf: FloatArray, values_s: FloatArray, points: int) -> tuple[FloatArray, FloatArray]:
    """Atom plus ``points`` band quantiles (:func:`tail_bands`) of one cdf row over ``values_s``."""
    mids, widths = tail_bands(points)
    top = float(cdf[-1])
    lv = np.clip(atom + (1.0 - atom) * mids, atom, top - 1e-12)
    pts = np.concatenate(([0.0], np.interp(lv, cdf, values_s)))
    wts = np.concatenate(([atom], (1.0 - atom) * widths))
    return pts, wts


def discretise_rows(cdf: FloatArray, values_s: FloatArray, points: int) -> tuple[FloatArray, FloatArray]:
    """:func:`discretise` of every row of ``cdf`` ``[K, C]`` over the same ``values_s``, each row's atom its first
    cell, ``[K, points + 1]`` twice: the same numbers, bit for bit, at one pass over the rows' cells instead of one
    call per row. The band levels are those of :func:`discretise`; each row's :func:`numpy.interp` is done by its
    own steps (:func:`_interp_rows`) on the rows that never fall (a cdf; a row that falls by a round-off takes
    :func:`numpy.interp`, whose bisection such a row could steer elsewhere)."""
    mids, widths = tail_bands(points)
    atom, top = cdf[:, :1], cdf[:, -1:]
    levels = np.clip(atom + (1.0 - atom) * mids[None, :], atom, top - 1e-12)
    pts = np.zeros((cdf.shape[0], points + 1))
    rising = np.all(cdf[:, 1:] >= cdf[:, :-1], axis=1)
    if rising.any():
        pts[rising, 1:] = _interp_rows(levels[rising], cdf[rising], values_s)
    for k in np.flatnonzero(~rising).tolist():
        pts[k, 1:] = np.interp(levels[k], cdf[k], values_s)
    wts = np.concatenate([atom, (1.0 - atom) * widths[None, :]], axis=1)
    return pts, wts


def _interp_rows(x: FloatArray, xp: FloatArray, fp: FloatArray) -> FloatArray:
    """``numpy.interp(x[k], xp[k], fp)`` per row k of non-decreasing ``xp`` ``[K, C]`` (``x`` ``[K, P]``), by
    NumPy's own steps (``arr_interp``, numpy/_core/src/multiarray/compiled_base.c). j: the last cell with ``xp[j] ≤
    x`` (what its bisection finds on a non-decreasing row). ``fp[0]`` left of the row, ``fp[−1]`` right of it and
    at its last cell, ``fp[j]`` where ``xp[j] = x``, NaN at a NaN x; else ``s·(x − xp[j]) + fp[j]`` with the slope
    ``s = (fp[j+1] − fp[j]) / (xp[j+1] − xp[j])``, where that is NaN ``s·(x − xp[j+1]) + fp[j+1]``, and where that
    is NaN too and ``fp[j] = fp[j+1]``, ``fp[j]``."""
    n_cells = xp.shape[1]
    j = np.stack([np.searchsorted(row, at, side="right") for row, at in zip(xp, x, strict=True)]) - 1  # [K, P]
    at = np.clip(j, 0, n_cells - 2)
    x0, x1 = np.take_along_axis(xp, at, axis=1), np.take_along_axis(xp, at + 1, axis=1)
    f0, f1 = fp[at], fp[at + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (f1 - f0) / (x1 - x0)
        out = slope * (x - x0) + f0
        other = slope * (x - x1) + f1
    other = np.where(np.isnan(other) & (f0 == f1), f0, other)
    out = np.where(np.isnan(out), other, out)
    out = np.where(x0 == x, f0, out)
    out = np.where(j >= n_cells - 1, fp[-1], out)
    out = np.where(j < 0, fp[0], out)
    return np.asarray(np.where(np.isnan(x), x, out), dtype=np.float64)


def slack_delay(wait: WaitDistribution, slack_s: FloatArray, points: int = DELAY_POINTS) -> BinDelay:
    """``D_k = max(0, W − slack_k)`` for an M/G/1 link wait W, shape ``[R, K, points + 1]``."""
    n_rates, cells = wait.cdf_grid.shape
    pts = np.zeros((n_rates, points + 1))
    wts = np.zeros((n_rates, points + 1))
    for r in range(n_rates):
        grid = np.arange(cells) * wait.h_s[r]
        pts[r], wts[r] = discretise(float(wait.atom[r]), wait.cdf_grid[r], grid, points)
    shifted = np.maximum(0.0, pts[:, None, :] - np.asarray(slack_s)[None, :, None])
    return BinDelay(shifted, np.broadcast_to(wts[:, None, :], shifted.shape).copy())


@dataclass(frozen=True, slots=True)
class TandemLink:
    """One prefill server feeding its link, per prompt bin (module docstring)."""

    prob: FloatArray
    service_s: FloatArray
    carry_s: FloatArray
    """``a_k = busy_k − lead_k``."""
    clear_s: FloatArray
    """``b_k = S_k − lead_k``."""
    slack_s: FloatArray


def tandem_delay(
    link: TandemLink,
    theta: FloatArray,
    points: int = DELAY_POINTS,
    cells: int = TANDEM_CELLS,
    other: WaitDistribution | None = None,
) -> BinDelay:
    """Stationary per-bin ``D_k`` of the one-server-fed link at per-instance rates ``θ``.

    ``other``: an independent wait V the stream must also clear (the far side's NICs, busy with
    other servers' streams): each stream starts after ``max(W, V)`` and holds this link from then,
    so V also lengthens what the next request finds.
    """
    theta = np.asarray(theta, dtype=np.float64)
    if float(link.carry_s.max()) <= float(link.clear_s.min()):  # W_{k+1} ≤ W_k + a_k − b_{k+1}
        if other is None:  # never carries over: a stream that keeps up never waits
            return no_delay(theta.size)
        return slack_delay(other, link.slack_s, points)
    from pdplan.queueing.tandem_chain import ChainInputs, drift_s  # lazy: a link that carries over (issue #27)

    inputs = ChainInputs(link.prob, link.service_s, link.carry_s, link.clear_s)
    base_h = _lattice_step(link, theta, cells)
    stable = drift_s(inputs, theta) < 0.0
    for widen in WIDENINGS:
        h = widen * base_h
        far = None if other is None else other.cdf_rowwise(np.arange(cells)[None, :] * h[:, None])
        pmf = _on_lattice(inputs, theta, h, cells, far, stable)
        if pmf is not None:
            break
    else:
        raise UnsettledWaitError("KV link wait: the tandem chain's tail runs past its lattice; evaluate a lower rate")
    n_rates, n_bins = theta.size, link.prob.size
    pts = np.zeros((n_rates, n_bins, points + 1))
    wts = np.zeros_like(pts)
    mass = pmf.sum(axis=2)
    cdf = np.cumsum(pmf / np.maximum(mass, 1e-300)[:, :, None], axis=2)
    for r in range(n_rates):
        pts[r], wts[r] = discretise_rows(cdf[r], np.arange(cells) * h[r], points)
    return BinDelay(np.maximum(0.0, pts - link.slack_s[None, :, None]), wts)


def _on_lattice(
    inputs: ChainInputs,
    theta: FloatArray,
    h: FloatArray,
    cells: int,
    far: FloatArray | None,
    stable: npt.NDArray[np.bool_],
) -> FloatArray | None:
    """Every rate's stationary wait ``[R, K, cells]`` on the lattices ``h``, one rate at a time in order (each
    stops at its own convergence); None as soon as one rate's law runs past its lattice (more than
    :data:`TAIL_MAX` on the last cell): the caller widens every rate's lattice and starts again. A saturated link
    (``stable`` False: drift ≥ 0, :func:`pdplan.queueing.tandem_chain.drift_s`) runs past every lattice and is not
    iterated; a plain iterate already past (:mod:`pdplan.queueing.tandem_chain`, **A tail past the lattice**) stops
    its chain and the rates after it are not solved on this lattice."""
    out = np.empty((theta.size, inputs.prob.size, cells))
    for r in range(theta.size):
        if not stable[r]:
            return None
        try:
            pmf = _solved(inputs, theta[r : r + 1], h[r : r + 1], cells, None if far is None else far[r : r + 1])
        except UnsettledWaitError as err:
            raise UnsettledWaitError(str(err), rate_index=r) from None
        if pmf is None or float(pmf[0, :, -1].sum()) > TAIL_MAX:
            return None
        out[r] = pmf[0]
    return out


SOLVED_KEPT = 32
"""Single-rate chain solves :func:`_solved` keeps (each ``K × cells`` floats: ~0.4 MB at 48 bins)."""
NEAR_RTOL = 1e-11
"""Relative distance, element by element, within which :func:`_solved` takes a kept solve's law for a chain whose
inputs are not those bytes (:func:`_near`)."""


@dataclass(frozen=True, slots=True)
class _Solve:
    """One kept solve: copies of what it depended on (:func:`_solved`'s parts, in order) and its outcome."""

    parts: tuple[FloatArray, ...]
    found: FloatArray | UnsettledWaitError | None


_SOLVED: OrderedDict[bytes, _Solve] = OrderedDict()


def _solved(
    inputs: ChainInputs, theta: FloatArray, h: FloatArray, cells: int, far: FloatArray | None
) -> FloatArray | None:
    """:func:`~pdplan.queueing.tandem_chain.stationary_wait` of one rate, remembered by the exact bytes of what it
    depends on (the last :data:`SOLVED_KEPT`, its error included). A goodput search asks for the same chain again:
    the top grid interval and then the whole grid, the rates below one that did not settle
    (:func:`pdplan.serving.goodput.find_goodput`), and near saturation one chain that does not settle costs its whole
    iteration budget (2,000 steps: 1,000 Anderson ones, then GMRES) each time. The same bytes give the
    same law, so the answer is the one a new solve would give. Where the bytes differ but every input lies within
    :data:`NEAR_RTOL` of a kept solve's, that solve's outcome is the answer (:func:`_near`)."""
    from pdplan.queueing.tandem_chain import stationary_wait  # lazy: start-up (issue #27)

    settings = np.array([inputs.prob.size, cells, TANDEM_TOL, TANDEM_MAX_ITER, TAIL_MAX], dtype=np.float64)
    # the settings read now (tests change them); the far side's cdf last, where there is one
    parts: tuple[FloatArray, ...] = (inputs.prob, inputs.service_s, inputs.carry_s, inputs.clear_s, theta, h, settings)
    parts = parts if far is None else (*parts, far)
    digest = array_digest(*parts)
    entry = _SOLVED.get(digest) or _near(parts)
    if entry is None:
        try:
            solved: FloatArray | UnsettledWaitError | None = stationary_wait(
                inputs, theta, h, cells, far_cdf=far, tol=TANDEM_TOL, max_iter=TANDEM_MAX_ITER, tail_max=TAIL_MAX
            )
        except UnsettledWaitError as err:
            solved = err
        entry = _Solve(tuple(np.array(part, dtype=np.float64) for part in parts), solved)
    _SOLVED[digest] = entry  # a near hit is kept under these bytes too: the same call again finds it at once
    _SOLVED.move_to_end(digest)
    if len(_SOLVED) > SOLVED_KEPT:
        _SOLVED.popitem(last=False)
    found = entry.found
    if isinstance(found, UnsettledWaitError):
        raise UnsettledWaitError(str(found), rate_index=found.rate_index)
    return found


def _near(parts: tuple[FloatArray, ...]) -> _Solve | None:
    """The latest kept solve whose parts all lie within :data:`NEAR_RTOL` of ``parts``, element by element (the
    settings and any zero alike exactly); None if there is none.

    Such inputs come from one deployment's model at two cache rates where the hit rates barely move with the rate
    (the cache keeps nearly every history at both): on examples/chat-ppd.yaml the 1P1D plan with ``pd`` at its own
    fixed point's probes (2.69 and 0.894 req/s) and as the ``pd`` comparison of the 256-token threshold plan (2.09
    req/s) has prefill service times, carries and clearances within 1.1e-12 relative of one another, and the same
    rates: 16 of the search's 40 chain solves. A change of 1e-11 relative in the inputs moves the stationary law by
    that times the chain's sensitivity, far below the L1 change of :data:`TANDEM_TOL` the solve stops at, so the law
    kept is the one a fresh solve gives to that tolerance: a fresh solve of the three-bin link of
    tests/unit/test_link_delay_near.py with every time 1e-13 longer differs from the first by 1.8e-8 relative (the
    Anderson mixing's path), the kept law by 1e-13. examples/chat-ppd.yaml: every number of ``optimize -f json``
    within 1.2e-12 relative of the solves done afresh."""
    theta = float(parts[4][0])
    for entry in reversed(_SOLVED.values()):
        kept = entry.parts
        if len(kept) != len(parts) or abs(float(kept[4][0]) - theta) > NEAR_RTOL * abs(float(kept[4][0])):
            continue
        if not np.array_equal(kept[6], parts[6]):
            continue
        if all(a.shape == b.shape and _within(a, b) for a, b in zip(parts, kept, strict=True)):
            return entry
    return None


def _within(a: npt.ArrayLike, kept: FloatArray) -> bool:
    """Every element of ``a`` within :data:`NEAR_RTOL` of ``kept``'s, relative to ``kept``'s."""
    return bool(np.all(np.abs(np.asarray(a, dtype=np.float64) - kept) <= NEAR_RTOL * np.abs(kept)))


def _lattice_step(link: TandemLink, theta: FloatArray, cells: int) -> FloatArray:
    """Cell width per rate: 4·max a + 30 Pollaczek–Khinchine means of an M/G/1 on a."""
    a = np.maximum(link.carry_s, 0.0)
    ea, ea2 = float(link.prob @ a), float(link.prob @ a**2)
    rho = np.minimum(theta * ea, 0.99)
    span = 4.0 * float(a.max()) + 30.0 * theta * ea2 / (2.0 * (1.0 - rho))
    return np.asarray(np.maximum(span, 1e-12) / cells, dtype=np.float64)
