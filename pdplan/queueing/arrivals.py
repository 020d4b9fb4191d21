"""Non-Poisson arrivals: the G/G/1 and G/G/c corrections of a Poisson queue's wait, and inter-arrival sampling.

Arrival processes are specs (:mod:`pdplan.specs.arrivals`: ``poisson``, ``constant``, ``gamma`` with a ``cv``,
``trace``); each has the squared coefficient of variation c_a² = Var[A]/E[A]² of its inter-arrival times A
(Poisson 1, constant 0, gamma cv²; a trace's is measured, :func:`empirical_ca2`). The serving model corrects every
prefill queue with it (:func:`gg_prefill_wait_distribution`, through :func:`pdplan.serving.ttft.prefill_wait`; the
colocated prompt queue in :mod:`pdplan.queueing.colocated_queue`; PrfaaS's two paths), the simulator draws its
open-loop gaps from the same process (:func:`interarrival_times_s`); docs/reuse_workloads.md §4. Poisson arrivals
(c_a² = 1) take exactly the Poisson code: no factor is applied.

**What each prefill instance sees** (:func:`instance_ca2`). A renewal stream of gaps A (mean 1/λ, c_a²) split over
N instances:

* *random* (each request to instance i with probability p = 1/N, independently of everything else): an instance's
  gap is a sum of K stream gaps with K ~ Geometric(p) (mean 1/p, variance (1 − p)/p²) independent of them, so
  ``E = E[A]/p``, ``Var = Var(A)/p + (1 − p)E[A]²/p²`` and

      c² = p·c_a² + 1 − p                                                   (:func:`split_ca2`)

  (exact, and the thinned stream is again renewal; W. Whitt, "The Queueing Network Analyzer", Bell System
  Technical Journal 62(9), 1983, its splitting operation, which this derivation reproduces; Poisson stays Poisson:
  c² = 1);
* *round-robin* (request k to instance k mod N): an instance's gap is the sum of N consecutive stream gaps,
  ``E = N·E[A]``, ``Var = N·Var(A)``, so ``c² = c_a²/N`` (exact for a renewal stream; Poisson gives the Erlang-N
  gaps, 1/N, of :func:`pdplan.queueing.mgc.round_robin_wait_distribution`);
* *least-work* (a central FCFS queue served by the first free instance): no split; one G/G/c queue fed by the whole
  stream, c² = c_a², corrected by Allen–Cunneen (below) on the M/G/c law of
  :func:`pdplan.queueing.mgc.least_work_wait_distribution`.

A split by prompt length (PrfaaS' threshold: a request goes to the remote path when L > t, with probability
p = P(L > t)) is a random split too, lengths being drawn independently of the arrival times: the path's stream has
``c² = p·c_a² + 1 − p`` and is split again over the path's instances by the routing policy. A trace's c_a² is that
of its gaps' marginal law; correlation between successive gaps (bursts that last longer than one gap) is not in a
two-moment formula, so a correlated trace waits longer than its c_a² says.

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

**The wait distribution** (issue #22). Kingman's and Allen–Cunneen's means are heavy-traffic forms; below
saturation smooth arrivals (c² < 1) wait less often than the Poisson queue's ρ (C(c, a) for c servers) and bursty
ones more often. Until then pdplan kept the Poisson probability of waiting and stretched the wait lattice by k
(mean exactly Kingman's): against a G/G/1 Lindley recursion at ρ = 0.7 the probability of waiting was 0.70 where
constant arrivals wait 0.46 of the time and gamma (cv 2) ones 0.87, the mean +33 % / −14 %. Every queue with c² ≠ 1
now takes the GI/G/1 law of :mod:`pdplan.queueing.gig1` (Whitt's QNA delay probability, Kingman's mean times
Krämer–Langenbach-Belz's g for c² ≤ 1 and times π/ρ for c² > 1, the M/G/1 conditional wait stretched to it):
random and round-robin instances (:func:`pdplan.queueing.gig1.gig1_wait` at the c² each sees) and the colocated
prompt queue; least-work its c-server form (:func:`pdplan.queueing.gig1.gigc_wait`: the same correction carried to
Erlang C at the per-server load). The measured errors against Lindley and Kiefer–Wolfowitz simulations are in
``tests/unit/test_arrivals.py`` and ``tests/unit/test_gig1.py``, those of the serving model's TTFT against the
simulator over 1P1D, 4P2D and colocated deployments at 50–90 % load in docs/reuse_workloads.md §4
(``benchmarks/arrivals_closed_form_vs_sim.py``).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pdplan.numerics.special import gammainc
from pdplan.queueing.distributions import WaitDistribution, as_rates
from pdplan.queueing.erlang import erlang_c
from pdplan.queueing.gig1 import gig1_wait, gigc_wait
from pdplan.queueing.mg1 import service_moments
from pdplan.queueing.mgc import ROUTING_POLICIES, prefill_wait_distribution
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


def split_ca2(ca2: float, p: float) -> float:
    """``p·c_a² + 1 − p``: the c² of a renewal stream thinned at random with probability ``p`` (module docstring).

    Example: constant arrivals (c_a² = 0) split at random over 4 instances: 0.25·0 + 0.75 = 0.75.
    """
    _check_scv(ca2, 0.0)
    if not 0.0 < p <= 1.0:
        raise ValueError(f"split probability must lie in (0, 1], got {p}")
    return float(1.0 + p * (ca2 - 1.0))  # = p·c_a² + 1 − p, exactly 1 for Poisson


def instance_ca2(policy: str, ca2: float, instances: int) -> float:
    """The c² of the arrivals one of ``instances`` prefill instances sees under ``policy`` (module docstring):
    random ``split_ca2(c_a², 1/N)``, round-robin ``c_a²/N``, least-work ``c_a²`` (one G/G/c queue), least-loaded and
    power-of-two ``c_a²`` (the whole stream, as least-work: a count-aware router splits it by state, not at random).

    Example: gamma arrivals with cv = 2 (c_a² = 4) over 4 instances: random 1.75, round-robin 1.0, least-work 4.0.
    """
    _check_scv(ca2, 0.0)
    if instances < 1:
        raise ValueError(f"instances must be >= 1, got {instances}")
    if policy == "random":
        return split_ca2(ca2, 1.0 / instances)
    if policy == "round-robin":
        return float(ca2 / instances)
    if policy in ("least-work", "least-loaded", "power-of-two"):
        return float(ca2)
    raise ValueError(f"unknown routing policy {policy!r}; valid: {', '.join(ROUTING_POLICIES)}")


def window_count_mean(rate_per_s: float, window_s: ArrayLike, ca2: float) -> FloatArray:
    """Mean number of *other* arrivals in a window of length t that holds a tagged arrival at a uniform place in it,
    for a renewal stream of rate λ and gaps of c² (the gaps taken gamma: shape 1/c², scale c²/λ, the two-moment fit;
    c² = 0 constant gaps).

    With the tag at Ut (U uniform), the others are the arrivals in the Ut before it and the (1 − U)t after it. After
    an arrival a renewal stream's count in (0, x] has mean H(x) = Σ_n F_n(x) (F_n the law of n gaps' sum; the renewal
    function), and before it the same (the gaps are i.i.d., so the stream read backwards is the same renewal stream),
    so the mean is ``E[H(Ut)] + E[H((1 − U)t)] = (2/t)∫_0^t H(u) du``. For gamma gaps F_n(x) = P(nα, x/θ) (α = 1/c²,
    θ = c²/λ, P the regularised lower incomplete gamma) and ``∫_0^t P(a, u/θ) du = t·P(a, t/θ) − aθ·P(a + 1, t/θ)``;
    for constant gaps H(u) = ⌊λu⌋ and ``∫_0^t H = Kt − K(K + 1)/(2λ)``, K = ⌊λt⌋. Poisson (c² = 1) gives λt.

    Example: constant gaps, λ = 1/s, t = 2.5 s: K = 2, (2/2.5)·(5 − 3) = 1.6 (a tag placed uniformly in the window
    has 1.6 others in it on average against Poisson's 2.5).
    """
    _check_scv(ca2, 0.0)
    t = np.asarray(window_s, dtype=np.float64)
    if not (rate_per_s > 0 and np.isfinite(rate_per_s)) or np.any(t < 0.0) or not np.all(np.isfinite(t)):
        raise ValueError(f"need a rate > 0 and finite windows >= 0, got {rate_per_s}, {t}")
    safe = np.where(t > 0.0, t, 1.0)
    if ca2 == 1.0:
        return np.asarray(rate_per_s * t, dtype=np.float64)
    if ca2 == 0.0:
        k = np.floor(rate_per_s * t)
        return np.asarray(np.where(t > 0.0, 2.0 / safe * (k * t - k * (k + 1.0) / (2.0 * rate_per_s)), 0.0))
    alpha, theta = 1.0 / ca2, ca2 / rate_per_s
    x = t / theta
    top = float(np.max(x, initial=0.0))
    n = np.arange(1, int(np.ceil((top + 10.0 * np.sqrt(top) + 40.0) / alpha)) + 2)[:, None]  # P(nα, x) < 1e-15 past
    a = n * alpha
    integral = (t * gammainc(a, x) - a * theta * gammainc(a + 1.0, x)).sum(axis=0)
    return np.asarray(np.where(t > 0.0, 2.0 / safe * integral, 0.0), dtype=np.float64)


def service_scv(service_s: ArrayLike, prob: ArrayLike) -> float:
    """c_s² = E[S²]/E[S]² − 1 of a discretised service time (rounding below 0 clipped: a constant service)."""
    m1, m2, _ = service_moments(service_s, prob)
    return max(m2 / m1**2 - 1.0, 0.0)


def gg_prefill_wait_distribution(
    policy: str,
    rate_per_s: ArrayLike,
    service_s: ArrayLike,
    prob: ArrayLike,
    instances: int,
    ca2: float,
    *,
    max_cells: int,
) -> WaitDistribution:
    """The prefill wait of :func:`pdplan.queueing.mgc.prefill_wait_distribution` for a renewal stream with c_a².

    ``ca2 == 1`` (Poisson) returns that function's law untouched. Otherwise the Poisson law of one instance (random
    and round-robin: the M/G/1 at λ/N; least-work: the M/G/c) is corrected for the c² that instance sees
    (:func:`instance_ca2`): random and round-robin by :func:`pdplan.queueing.gig1.gig1_wait` (Whitt's GI/G/1 delay
    probability, the mean Kingman's times Krämer–Langenbach-Belz's g for c² ≤ 1, times π/ρ for c² > 1), least-work
    by :func:`pdplan.queueing.gig1.gigc_wait` (the same correction carried to Erlang C at the per-server load),
    least-loaded and power-of-two by the same ``gigc_wait`` on their Poisson law (its delay probability π in Erlang
    C's place: pdplan's extension, not measured against a renewal-arrival simulation).
    """
    if ca2 == 1.0:
        return prefill_wait_distribution(policy, rate_per_s, service_s, prob, instances, max_cells=max_cells)
    seen = instance_ca2(policy, ca2, instances)  # also rejects an unknown policy
    base = "random" if policy == "round-robin" else policy  # round-robin: the M/G/1 at λ/N, its c² set here
    wait = prefill_wait_distribution(base, rate_per_s, service_s, prob, instances, max_cells=max_cells)
    cs2 = service_scv(service_s, prob)
    if policy in ("least-work", "least-loaded", "power-of-two"):
        rho = as_rates(rate_per_s) * service_moments(service_s, prob)[0] / instances
        return gigc_wait(wait, rho, seen, cs2)
    return gig1_wait(wait, seen, cs2)


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
