"""Non-Poisson arrivals: the G/G/1 and G/G/c corrections of a Poisson queue's wait, and inter-arrival sampling.

Arrival processes are specs (:mod:`pdplan.specs.arrivals`: ``poisson``, ``constant``, ``gamma`` with a ``cv``,
``trace``); each has the squared coefficient of variation c_a² = Var[A]/E[A]² of its inter-arrival times A
(Poisson 1, constant 0, gamma cv²; a trace's is measured, :func:`empirical_ca2`). Nothing here is wired into the
serving model yet (docs/reuse_workloads.md §4).

**Mean wait, one server.** The M/G/1 Pollaczek–Khinchine mean (docs/queueing.md §1.2) is
``E[W_M/G/1] = (1 + c_s²)/2 · ρ/(1 − ρ) · E[S]``. Kingman's G/G/1 approximation (J. F. C. Kingman, "The single
server queue in heavy traffic", Proc. Cambridge Phil. Soc. 57, 1961; exact as ρ → 1, and exact for every ρ when
c_a² = 1) replaces the Poisson arrivals' 1 by c_a²: ``E[W_G/G/1] ≈ (c_a² + c_s²)/2 · ρ/(1 − ρ) · E[S]``. Dividing
the two, a Poisson wait becomes a G/G/1 wait when scaled by

    k = (c_a² + c_s²)/(1 + c_s²)                                             (:func:`gg1_wait_scale`)

(k = 1 for Poisson arrivals; k = 0 for constant arrivals and constant service, D/D/1, which never waits).

**Mean wait, c servers.** The Allen–Cunneen approximation (A. O. Allen, *Probability, Statistics, and Queueing
Theory with Computer Science Applications*, 2nd ed., Academic Press 1990; its M/G/c case is docs/queueing.md §1.3
and :func:`pdplan.queueing.mgc.allen_cunneen_wait_s`) scales the M/M/c (Erlang-C) wait the same way:
``E[W_G/G/c] ≈ (c_a² + c_s²)/2 · C(c, a)·E[S]/(c(1 − ρ))``, a = λE[S], ρ = a/c (:func:`allen_cunneen_ggc_wait_s`).
Against the M/G/c form ((1 + c_s²)/2 instead of (c_a² + c_s²)/2) the factor is the same k.

**The wait distribution** (:func:`non_poisson_wait`), an approximation of pdplan's choice, the one its round-robin
router already uses for Erlang arrivals (docs/queueing.md §1.3): keep the Poisson queue's probability of not
waiting (1 − ρ for M/G/1, 1 − C(c, a) for least-work M/G/c) and the shape of its conditional wait, and stretch the
wait lattice's time axis by k, so the mean is exactly Kingman's (Allen–Cunneen's). The truth differs in the atom:
smoother arrivals (c_a² < 1) wait less often than ρ, burstier ones (c_a² > 1) more often, so this law is
pessimistic at the median for smooth arrivals and puts too little mass on short waits for bursty ones; the
measured errors against a Lindley-recursion simulation are in ``tests/unit/test_arrivals.py``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pdplan.queueing.distributions import WaitDistribution, as_rates
from pdplan.queueing.mgc import erlang_c
from pdplan.specs.arrivals import ArrivalProcess, ConstantArrival, GammaArrival, PoissonArrival
from pdplan.types import FloatArray


def _check_scv(ca2: float, cs2: float) -> None:
    for name, value in (("ca2", ca2), ("cs2", cs2)):
        if not (np.isfinite(value) and value >= 0.0):
            raise ValueError(f"{name} (a squared coefficient of variation) must be finite and >= 0, got {value}")


def gg1_wait_scale(ca2: float, cs2: float) -> float:
    """``k = (c_a² + c_s²)/(1 + c_s²)``: G/G/1 over M/G/1 mean wait (module docstring)."""
    _check_scv(ca2, cs2)
    return float((ca2 + cs2) / (1.0 + cs2))


def kingman_wait_s(rate_per_s: ArrayLike, mean_service_s: float, ca2: float, cs2: float) -> FloatArray:
    """Kingman's G/G/1 mean wait ``(c_a² + c_s²)/2 · ρ/(1 − ρ) · E[S]`` per rate; ValueError if ρ ≥ 1.

    Example: c_a² = c_s² = 1 (M/M/1), E[S] = 1 s, λ = 0.5/s: 1 · 0.5/0.5 · 1 = 1 s, the M/M/1 wait.
    """
    _check_scv(ca2, cs2)
    rate = as_rates(rate_per_s)
    rho = rate * mean_service_s
    if mean_service_s <= 0 or np.any(rho >= 1.0):
        raise ValueError(f"G/G/1: needs E[S] > 0 and utilisation < 1, got E[S] = {mean_service_s}, rho max {rho.max()}")
    return np.asarray((ca2 + cs2) / 2.0 * rho / (1.0 - rho) * mean_service_s, dtype=np.float64)


def allen_cunneen_ggc_wait_s(
    rate_per_s: ArrayLike, mean_service_s: float, servers: int, ca2: float, cs2: float
) -> FloatArray:
    """Allen–Cunneen G/G/c mean wait ``(c_a² + c_s²)/2 · C(c, a)·E[S]/(c(1 − ρ))`` per rate (module docstring).

    With c = 1 it is Kingman's formula (C(1, a) = a = ρ).
    """
    _check_scv(ca2, cs2)
    rate = as_rates(rate_per_s)
    if mean_service_s <= 0:
        raise ValueError(f"G/G/c: E[S] must be > 0, got {mean_service_s}")
    a = rate * mean_service_s
    c = erlang_c(servers, a)  # ValueError unless a < c
    rho = a / servers
    return np.asarray((ca2 + cs2) / 2.0 * c * mean_service_s / (servers * (1.0 - rho)), dtype=np.float64)


def non_poisson_wait(wait: WaitDistribution, ca2: float, cs2: float) -> WaitDistribution:
    """A Poisson queue's wait law corrected for arrivals with c_a²: the atom kept, the lattice stretched by k."""
    k = gg1_wait_scale(ca2, cs2)
    if k == 0.0:  # D/D/x: no wait at all
        return WaitDistribution(
            h_s=wait.h_s,
            cdf_grid=np.ones_like(wait.cdf_grid),
            atom=np.ones_like(wait.atom),
            mean_s=np.zeros_like(wait.mean_s),
        )
    return WaitDistribution(h_s=wait.h_s * k, cdf_grid=wait.cdf_grid, atom=wait.atom, mean_s=wait.mean_s * k)


def empirical_ca2(arrival_s: ArrayLike) -> float:
    """Squared coefficient of variation of the gaps between sorted arrival times (sample variance over mean²)."""
    t = np.asarray(arrival_s, dtype=np.float64)
    if t.ndim != 1 or t.size < 3:
        raise ValueError("need at least 3 arrival times (2 gaps)")
    gaps = np.diff(t)
    if np.any(gaps < 0) or gaps.mean() <= 0:
        raise ValueError("arrival times must be non-decreasing and not all equal")
    return float(gaps.var(ddof=1) / gaps.mean() ** 2)


def interarrival_times_s(process: ArrivalProcess, rate_per_s: float, n: int, rng: np.random.Generator) -> FloatArray:
    """``n`` gaps of mean 1/``rate_per_s`` for a modelled process (a trace brings its own times).

    Gamma gaps have shape 1/cv² and scale cv²/λ (mean 1/λ, squared CV cv²).
    """
    if not (rate_per_s > 0 and np.isfinite(rate_per_s)):
        raise ValueError(f"rate must be finite and > 0, got {rate_per_s}")
    mean = 1.0 / rate_per_s
    if isinstance(process, PoissonArrival):
        return rng.exponential(mean, size=n)
    if isinstance(process, ConstantArrival):
        return np.full(n, mean)
    if isinstance(process, GammaArrival):
        cv2 = float(process.cv) ** 2
        return rng.gamma(1.0 / cv2, mean * cv2, size=n)
    raise ValueError("arrival: trace replays the trace's own times; there is nothing to sample")
