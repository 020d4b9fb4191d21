"""The prefill pool of a PPD model and what the placement found (docs/prefix_cache.md §11; the placement itself is
:mod:`pdplan.serving.ppd_model`).

:class:`PpdPool` is the prefill pool of a model whose turns :func:`pdplan.serving.ppd_model.place_turns` placed:
its arrays run over every row, prompt bin × prefix-cache class, the ``decode`` class included; ``bin_prob`` is the
prefill-side rows' own law and rates are the whole deployment's.

* **Prefill-side rows** wait in the FCFS queue of the thinned stream ``λ·(1 − s_D)`` (the decode rows have no service
  and join no queue); under convention A their wait adds their decode side's law, the step in flight and the first
  step's excess over a plain one (:meth:`~pdplan.serving.ppd_boundary.StepBoundary.arrival_law`), independent of the
  prefill queue: the two cdfs are convolved on the lattice.
* **Decode rows** wait for the decode step in flight (:mod:`pdplan.serving.ppd_boundary`), not for a prefill, plus
  their append's excess over the shortest placed append group (a discrete law per prompt bin, independent of R).
* **One lattice**: the pool's cells, their step grown where needed so that the lattice spans the longest decode-side
  wait (the pool's own law read there by linear interpolation, held at its last value beyond its span, as
  :class:`~pdplan.queueing.distributions.WaitDistribution` does).

:class:`TurnPlacement` is what the placement found at the hit rates' rate: the reports' source
(:mod:`pdplan.serving.ppd_report`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pdplan.queueing import WaitDistribution
from pdplan.queueing.batched_ttft import PerBinWait
from pdplan.serving.ppd_boundary import BoundaryLaw
from pdplan.serving.prefill_pool import PrefillPool
from pdplan.serving.ttft import prefill_wait
from pdplan.types import FloatArray

if TYPE_CHECKING:
    from pdplan.serving.ppd_hits import LeftHits


@dataclass(frozen=True, slots=True)
class TurnPlacement:
    """What the placement found at the hit rates' rate (the reports' source)."""

    policy: str
    affine: bool
    domains: int
    rate_rps: float
    free_tokens: float
    """One decode domain's free KV: the histories' LRU capacity, tokens (filled by them: the occupancy they add)."""
    held: FloatArray
    """``[N]`` f_k: P(the decode instance holds turn k's previous history)."""
    placed: FloatArray
    """``[N]`` s_k = f_k·π_k: P(turn k runs on decode)."""
    turn_share: FloatArray
    """``[N]`` P(a request is turn k)."""
    share_on_decode: float
    append_tokens: float
    work_s: float
    rho_append: float
    steps_with_append: float
    tpot_factor: float
    bytes_per_request: float
    """Mean P→D bytes per request without PPD."""
    bytes_saved_per_request: float
    turn1_bins: FloatArray
    """``[K]`` P(prompt bin | turn 1)."""
    decode_by_bin: FloatArray
    """``[K]`` d_k: the share of bin k's requests placed on decode."""
    decode_rows: FloatArray
    """``[K·(H+1)]`` 1.0 on the decode class's rows."""
    boundary: BoundaryLaw
    """A decode row's wait for the decode step in flight (:mod:`pdplan.serving.ppd_boundary`)."""
    append_prob: FloatArray
    """``[K, G]`` per prompt bin, the law of the appends placed on decode from it, in the placed law's groups
    (:func:`pdplan.serving.ppd_model._bin_appends`)."""
    append_excess_s: FloatArray
    """``[K, G]`` per prompt bin, each group's time on decode beyond the shortest group's (in the row's offset)."""
    arrival: BoundaryLaw | None
    """Convention A: the decode side's law of a request whose KV came over the link (its step in flight and its first
    step's excess over a plain one), part of the prefill-side rows' wait; None under B."""
    as_ppd: bool = False
    """Whether the placement is ``ppd``'s by the same expressions: the policy ``ppd``, or ``score`` placing every
    append of every turn (:func:`pdplan.serving.ppd.places_every_append`). The model is then the ``ppd`` model of the
    same deployment and bypass threshold but for :attr:`policy` (tests/unit/test_ppd_score.py), so its goodput search
    is that model's (:class:`pdplan.serving.build.PpdProbes`)."""
    prefill_hit_scale: FloatArray | None = None
    """``[K]`` ρ_b: per prompt bin, a prefill-pool turn's expected hit tokens under the placement over plain
    disaggregation's (:mod:`pdplan.serving.ppd_hits`); None: 1 (nothing scaled)."""
    prefill_hits: LeftHits | None = None
    """Per prompt bin, the share of the prefill-pool turns that hit, the scale of its hit classes' tokens and a hit's
    mean tokens turn by turn (:func:`pdplan.serving.ppd_hits.left_bin_hits`); None: the hit mass scaled by
    :attr:`prefill_hit_scale`, tokens kept."""
    prefill_hit_share: float | None = None
    """The prefill pool's hit tokens per request under the placement over plain disaggregation's, turn
    by turn (:func:`pdplan.serving.ppd_hits.remaining_share`); None: the per-bin scaling alone."""

    @property
    def transfer_reduction(self) -> float:
        """Share of the P→D bytes the placement saves."""
        return self.bytes_saved_per_request / self.bytes_per_request if self.bytes_per_request > 0 else 0.0


@dataclass(frozen=True, slots=True)
class PpdPool(PrefillPool):
    """The prefill pool of a PPD model: its arrays over every row (the decode rows with their append as latency and
    no service), ``bin_prob`` the prefill-side rows' own law; rates are the whole deployment's (module docstring;
    :mod:`pdplan.serving.ppd_model` for the decode rows' latency)."""

    prefill_share: float = 1.0
    """1 − s_D: the share of requests the pool serves."""
    decode_rows: FloatArray | None = None
    placement: TurnPlacement | None = None

    @property
    def capacity_rps(self) -> float:
        """The whole deployment's rate at which the pool's share saturates it."""
        return self.instances / float(self.point_prob @ self.point_service_s.ravel()) / self.prefill_share

    def wait(self, rates: FloatArray) -> tuple[WaitDistribution | PerBinWait, FloatArray]:
        """The thinned stream's FCFS wait on the prefill-side rows (with, under convention A, their decode side's
        law: :meth:`pdplan.serving.ppd_boundary.StepBoundary.arrival_law`); on the decode rows the wait for the decode
        step in flight and the append's excess (:mod:`pdplan.serving.ppd_boundary`), on one lattice (module
        docstring)."""
        service, prob = self.point_service_s.ravel(), self.point_prob
        thinned = np.asarray(rates, dtype=np.float64) * self.prefill_share
        base = prefill_wait(self.routing, thinned, service, prob, self.instances, arrival_ca2=self.arrival_ca2)
        load = self.load(rates)
        p, n = self.placement, self.bin_prob.size
        if p is None or self.decode_rows is None:
            grid = np.broadcast_to(base.cdf_grid[:, None, :], (base.h_s.size, n, base.cdf_grid.shape[1]))
            mean = np.repeat(base.mean_s[:, None], n, axis=1)
            return PerBinWait(base.h_s, np.asarray(grid, dtype=np.float64), mean, load), load
        rows = np.flatnonzero(self.decode_rows)
        arrival = p.arrival
        span = p.boundary.span_s + float(p.append_excess_s.max(initial=0.0))
        h, pool = _lattice(base, max(span, 0.0 if arrival is None else arrival.span_s))
        cells = pool.shape[1]
        mean_pool = base.mean_s
        if arrival is not None:
            pool = np.stack(
                [_convolved(g, arrival.on_lattice(float(hr), cells)) for hr, g in zip(h, pool, strict=True)]
            )
            mean_pool = base.mean_s + arrival.mean_s
        grid = np.repeat(pool[:, None, :], n, axis=1)
        grid[:, rows, :] = np.stack([p.boundary.shifted_on_lattice(float(hr), cells, p.append_excess_s,
                                                                     p.append_prob) for hr in h])  # fmt: skip
        mean = np.repeat(mean_pool[:, None], n, axis=1)
        mean[:, rows] = p.boundary.mean_s + np.sum(p.append_excess_s * p.append_prob, axis=1)
        return PerBinWait(h, grid, mean, load), load


def _convolved(cdf: FloatArray, other: FloatArray) -> FloatArray:
    """The cdf of the sum of two independent waits given by their cdfs on one lattice (``other``'s mass in cell
    ((j − 1)h, jh] taken at jh; both held at their last value beyond it)."""
    pmf = np.diff(other, prepend=0.0)
    return np.asarray(np.convolve(cdf, pmf)[: cdf.size], dtype=np.float64)


def _lattice(base: WaitDistribution, span_s: float) -> tuple[FloatArray, FloatArray]:
    """``(h [R], pool cdf [R, n])``: the pool's n cells per rate, their step grown to span ``span_s`` where needed
    (module docstring)."""
    cells = base.cdf_grid.shape[1]
    h = np.maximum(base.h_s, span_s / (cells - 1) if math.isfinite(span_s) else 0.0)
    if np.array_equal(h, base.h_s):
        return np.asarray(h, dtype=np.float64), np.asarray(base.cdf_grid, dtype=np.float64)
    index = np.arange(cells, dtype=np.float64)
    pool = np.stack(
        [np.interp(index * hr, index * hb, g) for hr, hb, g in zip(h, base.h_s, base.cdf_grid, strict=True)]
    )
    return np.asarray(h, dtype=np.float64), pool
