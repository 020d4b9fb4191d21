"""One FCFS server fed by a renewal stream of squared coefficient of variation c²: the GI/G/1 wait law.

Used for every single-server queue whose arrivals are not Poisson: a prefill instance behind a round-robin router
(:func:`pdplan.queueing.mgc.round_robin_wait_distribution`; non-Poisson arrivals,
:func:`pdplan.queueing.arrivals.gg_prefill_wait_distribution`), where request k goes to instance k mod N, so an
instance's gap is the sum of N stream gaps, c² = c_a²/N (Erlang-N gaps, c² = 1/N, for a Poisson stream;
:func:`pdplan.queueing.arrivals.instance_ca2`); one behind a random split of a renewal stream (c² = 1 + (c_a² − 1)/N);
the colocated prompt queue (:mod:`pdplan.queueing.colocated_queue`). ρ = λE[S] < 1 is the instance's load, c_s² its
service's. Least-work routing (one queue, c servers) takes :func:`gigc_wait`.

**Why not the Poisson law's atom** (issue #22; docs/prefix_cache.md §9, The Mooncake trace). The M/G/1 law at
the instance's rate waits with probability ρ. Smoother arrivals wait less often: on the Mooncake trace on 2P1D
(round-robin, c² 0.51, c_s² 2.43, ρ 0.20-0.33) the simulator's requests waited 12-25 % of the time where ρ says
20-33 %, and an E_2/G/1 Lindley recursion on the closed form's own service law gives the same 11-23 %
(``tests/unit/test_gig1.py``). Kingman's mean is a heavy-traffic limit and, for smooth arrivals, too high at
light load (there +25…+47 % over the Lindley mean). Both terms are corrected here.

**Delay probability** (W. Whitt, "The Queueing Network Analyzer", Bell System Technical Journal 62(9), 1983,
its GI/G/1 probability of delay; exact for Poisson arrivals, where it is ρ)::

    π = P(W > 0) ≈ ρ + (c² − 1)·ρ(1 − ρ)·h(ρ, c², c_s²)
    h = (1 + c² + ρc_s²)/(1 + ρ(c_s² − 1) + ρ²(4c² + c_s²))     c² ≤ 1
    h = 4ρ/(c² + ρ²(4c² + c_s²))                                  c² ≥ 1

(:func:`delay_probability`; with c² = c_s² = 0, D/D/1, π = ρ − ρ(1 − ρ)/(1 − ρ) = 0: it never waits.)

**Mean wait, smooth arrivals (c² ≤ 1)** (W. Krämer and M. Langenbach-Belz, "Approximate formulae for the delay in
the queueing system GI/G/1", Proc. 8th International Teletraffic Congress, Melbourne 1976, 235.1-235.8): Kingman's
``(c² + c_s²)/2 · ρ/(1 − ρ) · E[S]`` times

    g = exp(−2(1 − ρ)(1 − c²)²/(3ρ(c² + c_s²)))    c² ≤ 1

(:func:`klb_factor`; g = 1 for Poisson arrivals, and g → 1 as ρ → 1, where Kingman's limit is exact).

**The law** (:func:`gig1_wait`, pdplan's choice): W = 0 with probability 1 − π; given W > 0 it is the M/G/1
conditional wait at the same λ and S, its time axis stretched by σ. With m₁ the Pollaczek–Khinchine mean (so
E[W₁ | W₁ > 0] = m₁/ρ) and k = (c² + c_s²)/(1 + c_s²) Kingman's factor on it:

* c² ≤ 1: the mean is Kingman's times g, ``π·σ·m₁/ρ = k·g·m₁ ⇒ σ = k·g·ρ/π``;
* c² > 1: the conditional wait is Kingman's stretch of the M/G/1 one, ``σ = k``, so the mean is ``(π/ρ)·k·m₁``,
  Kingman's times π/ρ ≥ 1 (→ Kingman's as ρ → 1, where π → 1). Krämer–Langenbach-Belz's factor for c² > 1,
  ``exp(−(1 − ρ)(c² − 1)/(c² + 4c_s²))`` ≤ 1 (:func:`klb_factor`), lowers a mean that Kingman's already puts too
  low for gamma gaps (the bursty process of pdplan's workloads and of ``vllm bench serve --burstiness``; its mass of
  short gaps sends bursts into the queue together): against a Lindley recursion with the lognormal prefill of
  docs/queueing.md §6.2 (σ 0.6) and gamma gaps of c² = 4, Kingman's mean is −27 % / −14 % / +3 % at ρ = 0.5 / 0.7 /
  0.9 and the KLB factor takes it to −45 % / −28 % / −3 %; this law's mean is +1 % / +4 % / +10 %
  (``tests/unit/test_gig1.py``; at ρ = 0.9 one run moves by several per cent with the seed).

Both give the M/G/1 law itself for Poisson arrivals (c² = 1: π = ρ, g = 1, k = 1), and ``P(W > t) = (π/ρ)·P(W₁ >
t/σ)``. Against a Lindley simulation of the Mooncake trace's instance (above), of the lognormal prefill of
docs/queueing.md §6.2 and of gamma arrivals, the measured errors are in ``tests/unit/test_gig1.py``.

**c servers, one queue** (:func:`gigc_wait`, least-work routing fed by a renewal stream; pdplan's choice, no
published form used): the M/G/c law (:func:`pdplan.queueing.mgc.least_work_wait_distribution`: delay probability
C = Erlang C, conditional wait the M/G/1's at service S/c) takes Whitt's GI/G/1 correction at the per-server load
ρ = λE[S]/c on the probability it shrinks, which keeps it in [0, 1]:

    π_c = C·π/ρ                            c² ≤ 1  (smooth arrivals wait less often)
    π_c = 1 − (1 − C)·(1 − π)/(1 − ρ)      c² > 1  (bursty arrivals find a free server less often)

and the conditional wait is stretched by the GI/G/1 σ at that ρ. With c = 1 (C = ρ) both give the GI/G/1 law above,
with Poisson arrivals the M/G/c law. For c² ≤ 1 the mean is ``π_c·σ·E[W_M/G/c]/C = k·g·E[W_M/G/c]``: the
Allen–Cunneen mean (A. O. Allen, *Probability, Statistics, and Queueing Theory*, 2nd ed., 1990) times g; for c² > 1
(σ = k) it is ``(π_c/C)·k·E[W_M/G/c]``, the Allen–Cunneen mean times π_c/C. Against a Kiefer–Wolfowitz simulation
(c = 2, 4; constant and gamma cv 2 gaps; ρ 0.5-0.9; ``tests/unit/test_arrivals.py``) the delay probability is within
0.033 where Erlang C was off by up to 0.28, the mean +2…+23 % where Allen–Cunneen's was −55…+48 %: pessimistic
for bursty arrivals (+13…+23 %; a central queue drains a burst on all c servers, which a per-server stretch misses).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pdplan.queueing.distributions import WaitDistribution
from pdplan.types import FloatArray


def _check(rho: FloatArray, ca2: float, cs2: float) -> None:
    for name, value in (("ca2", ca2), ("cs2", cs2)):
        if not (np.isfinite(value) and value >= 0.0):
            raise ValueError(f"{name} (a squared coefficient of variation) must be finite and >= 0, got {value}")
    if np.any(rho < 0.0) or np.any(rho >= 1.0):
        raise ValueError(f"GI/G/1: utilisation must lie in [0, 1), got {rho}")


def delay_probability(rho: ArrayLike, ca2: float, cs2: float) -> FloatArray:
    """Whitt's (QNA) GI/G/1 probability of delay π per load ρ (module docstring).

    Example: ρ = 0.5, c² = 0.5, c_s² = 1: h = 2/(1 + 0 + 0.25·3) = 8/7, π = 0.5 − 0.5·0.25·8/7 = 5/14.
    """
    r = np.asarray(rho, dtype=np.float64)
    _check(r, ca2, cs2)
    if ca2 <= 1.0:
        h = (1.0 + ca2 + r * cs2) / (1.0 + r * (cs2 - 1.0) + r**2 * (4.0 * ca2 + cs2))
    else:
        h = 4.0 * r / (ca2 + r**2 * (4.0 * ca2 + cs2))
    return np.asarray(np.maximum(r + (ca2 - 1.0) * r * (1.0 - r) * h, 0.0), dtype=np.float64)  # D/D/1's −1e-17: 0


def klb_factor(rho: ArrayLike, ca2: float, cs2: float) -> FloatArray:
    """Krämer–Langenbach-Belz's factor g on Kingman's GI/G/1 mean wait per load ρ (module docstring); 0 at ρ = 0
    for c² < 1 (nothing waits), 1 for Poisson arrivals.

    Example: ρ = 0.5, c² = 0.5, c_s² = 1: g = exp(−2·0.5·0.25/(3·0.5·1.5)) = exp(−1/9).
    """
    r = np.asarray(rho, dtype=np.float64)
    _check(r, ca2, cs2)
    if ca2 > 1.0:
        return np.asarray(np.exp(-(1.0 - r) * (ca2 - 1.0) / (ca2 + 4.0 * cs2)), dtype=np.float64)
    if ca2 == 1.0 or ca2 + cs2 == 0.0:  # Poisson: Kingman's mean is exact; D/D/1: k = 0 already
        return np.ones_like(r)
    busy = r > 0.0
    exponent = -2.0 * (1.0 - r) * (1.0 - ca2) ** 2 / (3.0 * np.where(busy, r, 1.0) * (ca2 + cs2))
    return np.asarray(np.where(busy, np.exp(exponent), 0.0), dtype=np.float64)


def stretch(rho: ArrayLike, ca2: float, cs2: float) -> FloatArray:
    """σ per load ρ (module docstring): the time stretch of the M/G/1 conditional wait, k·g·ρ/π for c² ≤ 1 and k for
    c² > 1; 1 where nothing waits (π = 0 or k·g = 0: then the law is W ≡ 0, its atom 1).

    Example: ρ = 0.5, c² = 0.5, c_s² = 1: k = 0.75, g = exp(−1/9), π = 5/14: σ = 0.75·exp(−1/9)·0.5·14/5.
    """
    r = np.asarray(rho, dtype=np.float64)
    pi = delay_probability(r, ca2, cs2)
    k = (ca2 + cs2) / (1.0 + cs2)
    if ca2 > 1.0:
        return np.asarray(np.where(pi > 0.0, k, 1.0), dtype=np.float64)
    kg = k * klb_factor(r, ca2, cs2)
    waits = (pi > 0.0) & (kg > 0.0)
    return np.asarray(np.where(waits, kg * r / np.where(waits, pi, 1.0), 1.0), dtype=np.float64)


def gig1_wait(mg1: WaitDistribution, ca2: float, cs2: float) -> WaitDistribution:
    """The GI/G/1 wait law from the M/G/1 law ``mg1`` at the same rate and service (module docstring).

    ``mg1``'s atom is 1 − ρ and its mean the Pollaczek–Khinchine mean, per rate; c² = 1 returns ``mg1`` itself.
    """
    if ca2 == 1.0:
        return mg1
    rho = 1.0 - mg1.atom
    pi = delay_probability(rho, ca2, cs2)
    k = (ca2 + cs2) / (1.0 + cs2)
    if ca2 > 1.0:
        mean = pi / np.where(rho > 0.0, rho, 1.0) * k * mg1.mean_s  # (π/ρ)·k·m₁
    else:
        mean = k * klb_factor(rho, ca2, cs2) * mg1.mean_s
    waits = (pi > 0.0) & (mean > 0.0)  # D/D/1 (k = 0) and idle rates: W ≡ 0
    share = np.where(waits, pi / np.where(waits, rho, 1.0), 0.0)  # π/ρ
    cdf = 1.0 - share[:, None] * (1.0 - mg1.cdf_grid)
    return WaitDistribution(
        h_s=mg1.h_s * stretch(rho, ca2, cs2),
        cdf_grid=np.clip(cdf, 0.0, 1.0),
        atom=1.0 - np.where(waits, pi, 0.0),
        mean_s=np.where(waits, mean, 0.0),
    )


def gigc_delay_probability(erlang_c: ArrayLike, rho: ArrayLike, ca2: float, cs2: float) -> FloatArray:
    """π_c of c servers fed by a renewal stream with c², from the M/G/c delay probability C (Erlang C) and the
    per-server load ρ (module docstring, "c servers"): ``C·π/ρ`` (c² ≤ 1) or ``1 − (1 − C)(1 − π)/(1 − ρ)`` (c² > 1),
    π Whitt's GI/G/1 delay probability at ρ.

    Example: c = 2, a = 1 (ρ = 0.5, C = 1/3), c² = 0.5, c_s² = 1: π = 5/14, π_c = (1/3)·(5/14)/0.5 = 5/21.
    """
    c, r = np.asarray(erlang_c, dtype=np.float64), np.asarray(rho, dtype=np.float64)
    pi = delay_probability(r, ca2, cs2)
    if ca2 > 1.0:
        return np.asarray(1.0 - (1.0 - c) * (1.0 - pi) / (1.0 - r), dtype=np.float64)
    return np.asarray(np.where(r > 0.0, c * pi / np.where(r > 0.0, r, 1.0), 0.0), dtype=np.float64)


def gigc_wait(mgc: WaitDistribution, rho: ArrayLike, ca2: float, cs2: float) -> WaitDistribution:
    """The GI/G/c wait law from the M/G/c law ``mgc`` (atom 1 − C, per rate) at per-server load ``rho`` (module
    docstring, "c servers"): W = 0 with probability 1 − π_c, given W > 0 the M/G/c conditional wait stretched by the
    GI/G/1 σ at ρ. c² = 1 returns ``mgc`` itself.
    """
    if ca2 == 1.0:
        return mgc
    r = np.asarray(rho, dtype=np.float64)
    erl = 1.0 - mgc.atom
    pi_c = gigc_delay_probability(erl, r, ca2, cs2)
    k = (ca2 + cs2) / (1.0 + cs2)
    some = erl > 0.0
    share = np.where(some, pi_c / np.where(some, erl, 1.0), 0.0)  # π_c/C
    # c² ≤ 1: π_c·σ·E[W | W > 0] = k·g·(M/G/c mean); c² > 1: σ = k
    mean = share * k * mgc.mean_s if ca2 > 1.0 else k * klb_factor(r, ca2, cs2) * mgc.mean_s
    waits = (pi_c > 0.0) & some & (mean > 0.0)  # D/D/c (k = 0), g = 0 and idle rates: W ≡ 0
    cdf = 1.0 - np.where(waits, share, 0.0)[:, None] * (1.0 - mgc.cdf_grid)
    return WaitDistribution(
        h_s=mgc.h_s * stretch(r, ca2, cs2),
        cdf_grid=np.clip(cdf, 0.0, 1.0),
        atom=1.0 - np.where(waits, pi_c, 0.0),
        mean_s=np.where(waits, mean, 0.0),
    )
