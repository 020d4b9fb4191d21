"""The prefill pool of a PPD model and what the placement found (docs/prefix_cache.md §11; the placement itself is
:mod:`pdplan.serving.ppd_model`).

:class:`PpdPool` is the prefill pool of a model whose turns :func:`pdplan.serving.ppd_model.place_turns` placed:
its arrays run over every row, prompt bin × prefix-cache class, the ``decode`` class included; ``bin_prob`` is the
prefill-side rows' own law and rates are the whole deployment's.

* **Prefill-side rows** wait in the FCFS queue of the thinned stream ``λ·(1 − s_D)`` (the decode rows have no service
  and join no queue).
* **Decode rows** wait for the decode step in flight (:mod:`pdplan.serving.ppd_boundary`), not for a prefill: their
  wait law is that step's residual, on the same lattice as the pool's, whose step grows where needed so that the
  lattice spans the longest such wait (the pool's own law read there by linear interpolation, held at its last value
  beyond its span, as :class:`~pdplan.queueing.distributions.WaitDistribution` does).

:class:`TurnPlacement` is what the placement found at the hit rates' rate: the reports' source
(:mod:`pdplan.serving.ppd_report`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdplan.queueing import WaitDistribution
from pdplan.queueing.batched_ttft import PerBinWait
from pdplan.serving.ppd_boundary import BoundaryLaw
from pdplan.serving.prefill_pool import PrefillPool
from pdplan.serving.ttft import prefill_wait
from pdplan.types import FloatArray


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
        """The thinned stream's FCFS wait on the prefill-side rows; on the decode rows the wait for the decode step
        in flight (:mod:`pdplan.serving.ppd_boundary`), on one lattice long enough for both."""
        service, prob = self.point_service_s.ravel(), self.point_prob
        thinned = np.asarray(rates, dtype=np.float64) * self.prefill_share
        base = prefill_wait(self.routing, thinned, service, prob, self.instances, arrival_ca2=self.arrival_ca2)
        on_pool = 1.0 - (np.zeros(self.bin_prob.size) if self.decode_rows is None else self.decode_rows)
        law = None if self.placement is None else self.placement.boundary
        h, pool, decode = _lattice(base, law)
        grid = np.where(on_pool[None, :, None] > 0, pool[:, None, :], decode[:, None, :])
        mean_decode = 0.0 if law is None else law.mean_s
        mean = np.where(on_pool[None, :] > 0, base.mean_s[:, None], mean_decode)
        load = self.load(rates)
        return PerBinWait(h, grid, mean, load), load


def _lattice(base: WaitDistribution, law: BoundaryLaw | None) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(h [R], pool cdf [R, n], decode cdf [R, n])`` on one lattice per rate of the pool's n cells, its step grown
    to span the decode rows' longest wait where needed (module docstring)."""
    cells = base.cdf_grid.shape[1]
    span = 0.0 if law is None or not math.isfinite(law.span_s) else law.span_s
    h = np.maximum(base.h_s, span / (cells - 1))
    if np.array_equal(h, base.h_s):
        pool = np.asarray(base.cdf_grid, dtype=np.float64)
    else:
        index = np.arange(cells, dtype=np.float64)
        pool = np.stack(
            [np.interp(index * hr, index * hb, g) for hr, hb, g in zip(h, base.h_s, base.cdf_grid, strict=True)]
        )
    decode = np.ones(pool.shape) if law is None else np.stack([law.on_lattice(float(hr), cells) for hr in h])
    return np.asarray(h, dtype=np.float64), pool, decode
