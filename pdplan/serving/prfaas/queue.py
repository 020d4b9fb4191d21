"""Per-path queueing of a PrfaaS deployment: TTFT of the remote and the local path, their mixture, goodput.

At aggregate Poisson rate λ and threshold ``t`` (``p = P(L > t)``), Poisson thinning gives two independent
Poisson streams (docs/queueing.md §1.3 machinery, :func:`pdplan.queueing.mgc.prefill_wait_distribution`):

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

**Non-Poisson arrivals** (the workload's ``arrival:``, c_a² = :attr:`.build.PrfaasSetup.arrival_ca2` ≠ 1): the split
by length is a random split (lengths are drawn independently of the arrival times), so the remote path's stream has
``c² = p·c_a² + 1 − p`` and the local path's ``(1 − p)·c_a² + p`` (:func:`pdplan.queueing.arrivals.split_ca2`); each
pool's wait is then the G/G-corrected law for its routing policy
(:func:`pdplan.queueing.arrivals.gg_prefill_wait_distribution`). The link's mean wait stays Poisson's: its arrivals
are remote prefill departures, and it runs at low utilisation. Poisson arrivals run exactly the Poisson code.

**Goodput**: the largest λ at which the mixture meets the TTFT SLO for the target attainment, below every
pool's and the link's stability limit and below the decode capacity ``Θ_pd-d`` (whose per-instance
``C_d`` is taken at the TPOT SLO, :mod:`.build`; decode latency percentiles are not modelled on this path).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pdplan.numerics.bounded_min import minimize_bounded
from pdplan.numerics.roots import brentq
from pdplan.queueing.arrivals import gg_prefill_wait_distribution, split_ca2
from pdplan.queueing.distributions import ShiftedMixture, mixture_quantile
from pdplan.queueing.mg1 import pk_wait_moments
from pdplan.serving.prfaas.build import PrfaasSetup
from pdplan.serving.prfaas.capacity import capacity_at, search_threshold
from pdplan.serving.ttft import TtftParts
from pdplan.transfer.kv import pipeline_exposed_s
from pdplan.types import FloatArray

RATE_XTOL = 1e-3
"""Relative tolerance of the goodput root (as :mod:`pdplan.serving.goodput`)."""
STABLE = 0.999
"""Largest utilisation the FFT wait lattice is asked for."""
HINT_BRACKET = 0.05
"""Half-width (relative) of the goodput root's bracket around a nearby threshold's goodput: neighbouring
thresholds' roots differ by a few per cent, and the narrower bracket halves the Brent iterations."""
SCAN_POINTS = 6
"""Log-spaced thresholds of the goodput search's coarse scan (a factor 4 apart on the case study's 128-131,072-token
range; 8 points find a goodput 0.15 % higher at a 4 s SLO for 40 % more time); :func:`search_goodput_threshold`."""
WAIT_CELLS = 2**13
"""FFT lattice cells of each pool's wait law (the serving model uses up to 2**16). On the PrfaaS example the
P90 TTFTs move < 0.5 % against 2**16 (tests/unit/test_prfaas_serving.py) at an eighth of the cost."""


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


@dataclass(frozen=True)
class _Path:
    """One path's prompts (quadrature points of its side of the threshold) and deterministic times."""

    rate_rps: float
    tokens: FloatArray
    prob: FloatArray
    prefill_s: FloatArray
    transfer_s: FloatArray
    """Remote: the exposed pipelined transfer + the link's mean wait + one round trip; local: 0."""
    arrival_ca2: float
    """c² of the path's arrival gaps: a random split of the workload's stream (module docstring)."""


def _pool(path: _Path, servers: int, policy: str, cells: int) -> ShiftedMixture:
    wait = gg_prefill_wait_distribution(
        policy, path.rate_rps, path.prefill_s, path.prob, servers, path.arrival_ca2, max_cells=cells
    )
    return ShiftedMixture(wait, path.prefill_s + path.transfer_s, path.prob)


def _paths(setup: PrfaasSetup, threshold_tokens: float, rate_rps: float) -> tuple[float, _Path | None, _Path | None]:
    """``(p, remote, local)``: the offloaded share and each path's prompts and times (None: the path is empty)."""
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
        remote = _Path(
            rate_rps * p, tok, prob, t_r, exposed + float(link_wait[0]) + setup.rtt_s, split_ca2(setup.arrival_ca2, p)
        )
    if p < 1:
        tok, w = inp.law.points(t, above=False)
        prob = w / w.sum()
        t_l = inp.local.curves.prefill_s(tok)
        local = _Path(rate_rps * (1 - p), tok, prob, t_l, np.zeros_like(t_l), split_ca2(setup.arrival_ca2, 1 - p))
    return p, remote, local


def path_mixture(setup: PrfaasSetup, threshold_tokens: float, rate_rps: float, cells: int = WAIT_CELLS) -> PathMixture:
    """Both paths' TTFT laws at aggregate rate ``rate_rps`` (ValueError when a queue is unstable)."""
    p, remote, local = _paths(setup, threshold_tokens, rate_rps)
    inp = setup.capacity

    def law(path: _Path | None, servers: int) -> ShiftedMixture | None:
        if path is None:
            return None
        return _pool(path, servers, setup.routing, cells)

    return PathMixture(p, law(remote, inp.remote.instances), law(local, inp.local.instances))


def path_ttft_parts(
    setup: PrfaasSetup, threshold_tokens: float, rate_rps: float, cells: int = WAIT_CELLS
) -> tuple[TtftParts | None, TtftParts | None]:
    """The mean TTFT's parts (:mod:`pdplan.serving.ttft`) of the remote and the local path at ``rate_rps`` (None: the
    path carries nothing). As the paper's Eq. 4 assumes, neither path counts the local KV hand-off to the decode pool
    or the first decode step, and no engine request time: the remote path's transfer part is the cross-datacenter one
    (exposed pipelined transfer, the link's mean wait, one round trip)."""
    mix = path_mixture(setup, threshold_tokens, rate_rps, cells)
    _, remote, local = _paths(setup, threshold_tokens, rate_rps)

    def parts(path: _Path | None, law: ShiftedMixture | None) -> TtftParts | None:
        if path is None or law is None:
            return None
        return TtftParts(
            queue_s=float(law.wait.mean_s[0]),
            prefill_s=float(path.prob @ path.prefill_s),
            kv_transfer_s=float(path.prob @ np.broadcast_to(path.transfer_s, path.prob.shape)),
            first_token_s=0.0,
            request_overhead_s=0.0,
        )

    return parts(remote, mix.remote), parts(local, mix.local)


@dataclass(frozen=True)
class PathGoodput:
    threshold_tokens: float
    goodput_rps: float
    binding: str
    stability_rps: float


def goodput(
    setup: PrfaasSetup, threshold_tokens: float, ttft_slo_s: float, attainment: float, hint_rps: float | None = None
) -> PathGoodput:
    """Largest rate meeting the TTFT SLO at ``attainment`` (module docstring); 0 when even light load misses it.

    The SLO-meeting share falls with the rate, so the goodput is the one root of ``share(λ) − attainment`` below
    the stability limit (Brent's method). ``hint_rps`` (a nearby threshold's goodput) only narrows the bracket
    to ``±HINT_BRACKET`` around it when the signs there allow; the root and its tolerance are the same.
    """
    cap = capacity_at(setup.capacity, threshold_tokens)
    hi = cap.lambda_max_rps * STABLE

    def gap(rate: float) -> float:
        try:
            return path_mixture(setup, threshold_tokens, rate).cdf(ttft_slo_s) - attainment
        except ValueError:  # beyond the wait lattice: the SLO is missed there
            return -1.0

    if gap(hi) >= 0:
        return PathGoodput(threshold_tokens, hi, cap.binding, cap.lambda_max_rps)
    a, b = _bracket(gap, hi * 1e-4, hi, hint_rps)
    if a is None:
        return PathGoodput(threshold_tokens, 0.0, "TTFT", cap.lambda_max_rps)
    rate = brentq(gap, a, b, rtol=RATE_XTOL, xtol=hi * 1e-6)
    if gap(rate) < 0.0:  # brentq's root lies within its tolerance on either side; a goodput must meet the SLO
        back = rate - 2.0 * (hi * 1e-6 + RATE_XTOL * rate)  # twice the tolerance, as pdplan.serving.goodput
        rate = back if back > a and gap(back) >= 0.0 else a
    return PathGoodput(threshold_tokens, rate, "TTFT", cap.lambda_max_rps)


def _bracket(gap: Callable[[float], float], lo: float, hi: float, hint: float | None) -> tuple[float | None, float]:
    """``(a, b)`` with ``gap(a) ≥ 0 > gap(b)`` inside ``[lo, hi]`` (``gap(hi) < 0`` is known), narrowed around
    ``hint`` when it lies inside; ``a`` None when even ``lo`` misses the SLO."""
    if hint is not None and lo < hint * (1 - HINT_BRACKET) and hint < hi:
        a = hint * (1 - HINT_BRACKET)
        if gap(a) < 0:
            hi = a
        else:
            b = hint * (1 + HINT_BRACKET)
            return a, (b if b < hi and gap(b) < 0 else hi)
    return (lo, hi) if gap(lo) >= 0 else (None, hi)


def search_goodput_threshold(
    setup: PrfaasSetup, ttft_slo_s: float, attainment: float, xatol_tokens: float
) -> PathGoodput:
    """The threshold maximising goodput: a coarse log-spaced scan, then a bounded scalar search in ``log t``.

    Goodput is not unimodal over the whole range: it is 0 wherever the remote path alone misses the TTFT SLO
    (long prompts at a tight SLO), a plateau on which a bounded Brent search over ``[lower, upper]`` stalls
    (it returned ``t*`` at 1.908 req/s where 16.5K tokens gives 1.935 on the case study at a 4 s SLO). So
    ``SCAN_POINTS`` thresholds, log-spaced over the law's range (the law is lognormal-like, so ``log t`` is its
    natural scale), plus ``t*`` locate the best cell; a bounded Brent search then refines ``log t``
    between that point's neighbours to ``xatol_tokens`` there.

    The ends (offload everything / nothing) are compared too; when goodput is flat in ``t`` (decode binds) the
    candidate nearest ``t*`` wins, so the reported threshold is the one that balances the two prefill paths.

    Early exit: goodput at any ``t`` is at most ``STABLE·Λ_max(t)``, and ``Λ_max(t) = min(prefill bound(t),
    Θ_pd-d)`` is largest at ``t*`` (Eq. 7 maximises the prefill bound; the decode bound does not depend on ``t``).
    So when the SLO still holds at ``t*``'s capacity ceiling (the goodput root is not TTFT-bound), no threshold
    does better and ``t*`` is also the tie-break's pick: the scan is skipped.
    """

    law = setup.capacity.law
    lo, hi = law.lower - 1.0, law.upper
    t_star = search_threshold(setup.capacity).threshold_tokens
    seen: dict[float, PathGoodput] = {}

    def at(t: float) -> PathGoodput:  # each threshold's goodput root once (the search revisits its best point)
        if t not in seen:
            near = [g for g in seen.values() if g.goodput_rps > 0]
            hint = (
                min(near, key=lambda g: abs(math.log(max(g.threshold_tokens, 1.0) / max(t, 1.0)))).goodput_rps
                if near
                else None
            )
            seen[t] = goodput(setup, t, ttft_slo_s, attainment, hint)
        return seen[t]

    if at(t_star).binding != "TTFT":  # at its capacity ceiling: no threshold can beat it (docstring)
        return at(t_star)
    trials = [at(t) for t in (t_star, _scan_and_refine(at, lo, hi, t_star, xatol_tokens), lo, hi)]
    top = max(g.goodput_rps for g in trials)
    near_top = [g for g in trials if g.goodput_rps >= top * (1.0 - RATE_XTOL)]
    return min(near_top, key=lambda g: abs(g.threshold_tokens - t_star))


def _scan_and_refine(
    at: Callable[[float], PathGoodput], lo: float, hi: float, t_star: float, xatol_tokens: float
) -> float:
    """The best of ``SCAN_POINTS`` log-spaced thresholds and ``t*``, refined by a bounded Brent search (SciPy's
    ``method="bounded"``, :mod:`pdplan.numerics.bounded_min`) in ``log t`` between its neighbours
    (:func:`search_goodput_threshold`); returns the best threshold seen."""
    scan = sorted({*np.geomspace(max(lo, 1.0), hi, SCAN_POINTS).tolist(), t_star})
    k = max(range(len(scan)), key=lambda i: at(scan[i]).goodput_rps)
    a, b = scan[max(k - 1, 0)], scan[min(k + 1, len(scan) - 1)]
    res = minimize_bounded(
        lambda u: -at(math.exp(u)).goodput_rps, math.log(a), math.log(b), xatol=xatol_tokens / scan[k]
    )
    refined = math.exp(res.x)
    return refined if at(refined).goodput_rps >= at(scan[k]).goodput_rps else scan[k]


def percentile_s(mixture: PathMixture, which: str, q: float) -> float:
    """``q``-quantile of one path's TTFT (``"remote"``/``"local"``) or the mixture (``"all"``); NaN if empty."""
    if which == "all":
        return mixture.quantile(q)
    part = mixture.remote if which == "remote" else mixture.local
    if part is None:
        return math.nan
    return float(part.quantile(q)[0])
