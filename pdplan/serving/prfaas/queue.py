"""Per-path queueing of a PrfaaS deployment: TTFT of the remote and the local path, their mixture, goodput.

At aggregate Poisson rate λ and threshold ``t`` (``p = P(L > t)``), Poisson thinning gives two independent
Poisson streams (QUEUEING §1.3 machinery, :func:`pdplan.queueing.mgc.prefill_wait_distribution`):

* **remote path**, rate ``λp``: ``N_r`` FCFS prefill instances (the scenario's routing policy), service
  ``T_r(l)``; then the KV crosses the shared cross-DC link, layer-wise pipelined with the prefill
  (:func:`pdplan.transfer.kv.pipeline_exposed_s` with ``n`` layers, ``c = T_r/n``, ``s = S(l)/(B·n)``:
  only the last layer's share, or the accumulated lag, is exposed). The link is an M/G/1 queue of service
  ``S(l)/B`` at rate ``λp`` (Pollaczek–Khinchine mean wait, added as a constant: the link runs at low
  utilisation in every PrfaaS design point, 12 % in the paper's case study) plus one round trip ``RTT``.
  ``TTFT_r = W_r + T_r(l) + E[W_link] + exposed(l) + RTT``.
* **local path**, rate ``λ(1−p)``: ``N_p`` instances, ``TTFT_l = W_l + T_l(l)`` (intra-cluster RDMA is not
  on the TTFT path here, as the paper's Eq. 4 assumes).
* the **mixture**: ``P(TTFT ≤ a) = p·F_r(a) + (1−p)·F_l(a)``; its quantiles by root finding, never by mixing
  quantiles (:mod:`pdplan.queueing.distributions`).

**Goodput**: the largest λ at which the mixture meets the TTFT SLO for the target attainment, below every
pool's and the link's stability limit and below the decode capacity ``Θ_pd-d`` (whose per-instance
``C_d`` is taken at the TPOT SLO, :mod:`.build`; decode latency percentiles are not modelled on this path).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdplan.queueing.distributions import ShiftedMixture, mixture_quantile
from pdplan.queueing.mg1 import pk_wait_moments
from pdplan.queueing.mgc import prefill_wait_distribution
from pdplan.serving.prfaas.build import PrfaasSetup
from pdplan.serving.prfaas.capacity import capacity_at, search_threshold
from pdplan.transfer.kv import pipeline_exposed_s
from pdplan.types import FloatArray

RATE_XTOL = 1e-3
"""Relative tolerance of the goodput root (as :mod:`pdplan.serving.goodput`)."""
STABLE = 0.999
"""Largest utilisation the FFT wait lattice is asked for."""
WAIT_CELLS = 2**13
"""FFT lattice cells of each pool's wait law (the serving model uses up to 2**16). On the PrfaaS example the
P90 TTFTs move < 0.5 % against 2**16 (tests/unit/test_prfaas_units.py) at an eighth of the cost."""


@dataclass(frozen=True)
class PathMixture:
    """TTFT law of both paths at one rate: ``remote``/``local`` None when that path carries nothing."""

    offload_fraction: float
    remote: ShiftedMixture | None
    local: ShiftedMixture | None

    def cdf(self, a_s: float) -> float:
        p = self.offload_fraction
        out = p * self.remote.first_cdf(a_s) if self.remote is not None else 0.0
        return out + ((1 - p) * self.local.first_cdf(a_s) if self.local is not None else 0.0)

    def _hi(self) -> float:
        return max(
            float(m.offsets_s.max() + m.wait.h_s[0] * (m.wait.cdf_grid.shape[1] - 1))
            for m in (self.remote, self.local)
            if m is not None
        )

    def quantile(self, q: float) -> float:
        return mixture_quantile(self.cdf, q, 0.0, self._hi(), "PrfaaS TTFT")


def _pool(
    rate: float, service_s: FloatArray, prob: FloatArray, extra_s: FloatArray, servers: int, policy: str, cells: int
) -> ShiftedMixture:
    wait = prefill_wait_distribution(policy, rate, service_s, prob, servers, max_cells=cells)
    return ShiftedMixture(wait, service_s + extra_s, prob)


def path_mixture(setup: PrfaasSetup, threshold_tokens: float, rate_rps: float, cells: int = WAIT_CELLS) -> PathMixture:
    """Both paths' TTFT laws at aggregate rate ``rate_rps`` (ValueError when a queue is unstable)."""
    inp, t = setup.capacity, float(threshold_tokens)
    p = inp.law.tail_mass(t)
    remote = local = None
    if p > 0:
        tok, w = inp.law.points(t, above=True)
        prob = w / w.sum()
        t_r = inp.remote.curves.prefill_s(tok)
        send_s = inp.remote.curves.kv_bytes(tok) / inp.link_bytes_per_s
        link_wait, _ = pk_wait_moments(rate_rps * p, send_s, prob)
        n = float(setup.num_layers)
        exposed = pipeline_exposed_s(n, t_r / n, send_s / n)
        extra = exposed + float(link_wait[0]) + setup.rtt_s
        remote = _pool(rate_rps * p, t_r, prob, extra, inp.remote.instances, setup.routing, cells)
    if p < 1:
        tok, w = inp.law.points(t, above=False)
        prob = w / w.sum()
        t_l = inp.local.curves.prefill_s(tok)
        local = _pool(rate_rps * (1 - p), t_l, prob, np.zeros_like(t_l), inp.local.instances, setup.routing, cells)
    return PathMixture(p, remote, local)


@dataclass(frozen=True)
class PathGoodput:
    threshold_tokens: float
    goodput_rps: float
    binding: str
    stability_rps: float


def goodput(setup: PrfaasSetup, threshold_tokens: float, ttft_slo_s: float, attainment: float) -> PathGoodput:
    """Largest rate meeting the TTFT SLO at ``attainment`` (module docstring); 0 when even light load misses it."""
    from scipy import optimize  # lazy

    cap = capacity_at(setup.capacity, threshold_tokens)
    hi = cap.lambda_max_rps * STABLE

    def gap(rate: float) -> float:
        try:
            return path_mixture(setup, threshold_tokens, rate).cdf(ttft_slo_s) - attainment
        except ValueError:  # beyond the wait lattice: the SLO is missed there
            return -1.0

    if gap(hi) >= 0:
        return PathGoodput(threshold_tokens, hi, cap.binding, cap.lambda_max_rps)
    lo = hi * 1e-4
    if gap(lo) < 0:
        return PathGoodput(threshold_tokens, 0.0, "TTFT", cap.lambda_max_rps)
    rate = float(optimize.brentq(gap, lo, hi, rtol=RATE_XTOL, xtol=hi * 1e-6))
    return PathGoodput(threshold_tokens, rate, "TTFT", cap.lambda_max_rps)


def search_goodput_threshold(
    setup: PrfaasSetup, ttft_slo_s: float, attainment: float, xatol_tokens: float
) -> PathGoodput:
    """The threshold maximising goodput: bounded scalar search between the law's bounds.

    The ends (offload everything / nothing) and the capacity optimum ``t*`` of Eq. 7 are compared too; when
    goodput is flat in ``t`` (decode binds) the candidate nearest ``t*`` wins, so the reported threshold is the
    one that balances the two prefill paths.
    """
    from scipy import optimize  # lazy

    law = setup.capacity.law
    lo, hi = law.lower - 1.0, law.upper
    t_star = search_threshold(setup.capacity).threshold_tokens
    seen: dict[float, PathGoodput] = {}

    def at(t: float) -> PathGoodput:  # each threshold's goodput root once (the search revisits its best point)
        if t not in seen:
            seen[t] = goodput(setup, t, ttft_slo_s, attainment)
        return seen[t]

    res = optimize.minimize_scalar(
        lambda t: -at(float(t)).goodput_rps, bounds=(lo, hi), method="bounded", options={"xatol": xatol_tokens}
    )
    trials = [at(float(t)) for t in (t_star, float(res.x), lo, hi)]
    top = max(g.goodput_rps for g in trials)
    near_top = [g for g in trials if g.goodput_rps >= top * (1.0 - RATE_XTOL)]
    return min(near_top, key=lambda g: abs(g.threshold_tokens - t_star))


def percentile_s(mixture: PathMixture, which: str, q: float) -> float:
    """``q``-quantile of one path's TTFT (``"remote"``/``"local"``) or the mixture (``"all"``); NaN if empty."""
    if which == "all":
        return mixture.quantile(q)
    part = mixture.remote if which == "remote" else mixture.local
    if part is None:
        return math.nan
    return float(part.quantile(q)[0])
