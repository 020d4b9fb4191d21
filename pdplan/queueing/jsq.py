"""x prefill instances behind a router that counts requests: ``least-loaded`` (JSQ) and ``power-of-two`` (JSQ(2)).

What the routers run (read from their sources):

* Dynamo's frontend ``--router-mode least-loaded`` (ai-dynamo/dynamo ``lib/runtime/src/pipeline/network/egress/
  push_router.rs`` at commit 020ac7fc2fd8cfcbacb6b1c8bc05d81cff19ed2c, ``PushRouter::least_loaded``): the worker with
  the fewest in-flight requests (``RoutingOccupancyState::select_exact_min_and_increment``); the count is the
  router's own, incremented when it routes a request and decremented when that request's response stream ends
  (``OccupancyPermit``), so it is exact and current at each arrival. For a prefill worker a request is in flight from
  its routing to the end of its prefill: the count is the requests queued at that worker plus the one it prefills.
* Dynamo's ``--router-mode power-of-two`` (same file, ``p2c_select_from``): two distinct workers drawn uniformly at
  random, the one with fewer in-flight requests (the first on a tie), counted as above.
* The SGLang router's ``power_of_two`` (sgl-project/sglang ``sgl-router/src/policies/power_of_two.rs`` at commit
  b6f20641ad6bafc1278db74d1e13b0e9da47bd64): two distinct workers at random, the lower load (the first on a tie),
  where the load is the last one its load monitor polled from the workers' ``/get_load`` (the tokens they hold,
  summed over DP ranks: ``sgl-router/src/core/worker_manager.rs`` at 526a623beaec7e4efe28c7fd9e096302f445451d,
  polled every ``--worker-load-check-interval`` s, 10 by default in ``router_args.py``), else the router's own
  in-flight count. Polled loads are stale between polls, and stale loads balance worse (Mitzenmacher, "How useful
  is old information?", IEEE TPDS 11(1), 2000): the law below prices the current count (Dynamo's rule), so it is
  optimistic for SGLang's router (the SGLang export says so: :mod:`pdplan.report.export.routing`).
* ``least-loaded`` is join-the-shortest-queue (JSQ) by *number* of requests, FCFS at each instance, no jockeying. It
  differs from pdplan's ``least-work`` (the least unfinished work, i.e. one central FCFS queue:
  :mod:`pdplan.queueing.mgc`): a short prompt can wait behind one long prompt on an instance whose count is lowest, and
  an instance can fall idle while requests wait at the others.

The law (Poisson arrivals at total rate λ, c identical FCFS instances, service S with E[S], E[S²], per-instance
load ρ = λE[S]/c < 1):

* **P(W > 0) = π_c(ρ)**, the probability that all c instances are busy (an arrival waits exactly when no instance is
  idle: the count of an idle instance is 0, the least), which arrivals see by PASTA. π_c is the stationary probability
  of i = 0 in a Markov chain of (i idle instances, q requests waiting) for exponential service at rate μ = 1/E[S]
  (the service law enters through E[S] only), in which JSQ keeps the waiting requests spread evenly over the busy
  instances (each holds ⌊q/(c−i)⌋ or ⌈q/(c−i)⌉ waiting): with q < c − i, q busy instances hold two requests and
  c − i − q hold one; with q ≥ c − i none holds one. Transitions: an arrival takes an idle instance (i → i − 1) or
  joins a shortest queue (q → q + 1) when i = 0; a one-request instance finishes (i → i + 1, rate (c − i − q)μ); a
  two-request instance finishes (q → q − 1, rate qμ, or cμ when all hold two or more). Once q ≥ c no instance holds
  one request, so i stays 0 and q moves as an M/M/1 of rates λ and cμ: those states are one aggregate state that
  leaves to q = c − 1 at rate cμ(1 − ρ) (its geometric tail, exact). c = 1 gives π = ρ (the M/G/1). An arrival at
  an idle instance is why π_c < the Erlang C of one central queue: an instance whose own queue empties idles while
  others hold waiting requests (Erlang C is the chain in which an idle instance takes those). This chain is pdplan's
  (no published form used). Lin and Raghavendra ("An approximate analysis of the join the shortest queue (JSQ)
  policy", IEEE TPDS 7(3), 1996) model JSQ as a birth-death process on the total number of requests with departure
  rates estimated iteratively; keeping the idle count as a second dimension instead gives the delay probability
  directly. Against exact JSQ over two exponential instances π is +0.3…+0.8 % (tests/unit/test_queueing_jsq.py).
* **Given W > 0**, the M/G/1 conditional wait at load ρ stretched in time so that
  ``E[W | W > 0] = E[R]/(1 − ρ^c)``, E[R] = E[S²]/(2E[S]) the mean residual service (stretch σ = (1 − ρ)/(1 − ρ^c),
  as the M/G/1 has E[W | W > 0] = E[R]/(1 − ρ)). Derivation: the arrival joins a shortest queue; with the Q waiting
  requests spread evenly it has ⌊Q/c⌋ of them ahead plus the residual of the one in service, and Q given all busy is
  geometric, P(Q ≥ q) = ρ^q, as in M/M/c, so E⌊Q/c⌋ = Σ_{m≥1} ρ^{mc} = ρ^c/(1 − ρ^c); counting each request ahead at
  E[R] (rather than E[S]) makes c = 1 exactly the Pollaczek–Khinchine mean. Limits: light traffic E[R] (all c
  instances hold one request each and the arrival joins one of them, the exact limit), heavy traffic
  E[R]/(c(1 − ρ)), the M/G/c central queue's (JSQ is heavy-traffic optimal: Foschini and Salz, "A basic dynamic
  routing problem and diffusion", IEEE Trans. Commun. 26(3), 1978). The mean wait is ``π_c·E[R]/(1 − ρ^c)``.
* **power-of-two** (JSQ(2), two distinct instances sampled per arrival): at c = 2 it is JSQ over both; as c → ∞ the
  mean-field limit for exponential service gives P(W > 0) = ρ² and E[K | K ≥ 1] = 1 + ρ⁴ + ρ¹² + … requests ahead
  (:func:`mean_field_ahead`; Vvedenskaya et al. 1996, Mitzenmacher 2001). pdplan takes π and the conditional mean
  (in units of E[R], as above; d = 1 gives the M/G/1 exactly) as ``m_∞ + (m_2 − m_∞)/(c − 1)`` between the two: the
  second choice is drawn among the c − 1 others, so its correlation with the first fades as 1/(c − 1). This is an
  interpolation (no fitted constant), exact at c = 2 and c → ∞; the shape given W > 0 is again the stretched M/G/1
  conditional wait. The mean-field term stays finite as ρ → 1 at a fixed c, where the truth grows like JSQ's
  (power-of-d is heavy-traffic optimal too: Chen and Ye, "Asymptotic optimality of balanced routing", Operations
  Research 60(3), 2012), so the stretch is floored by least-loaded's (JSQ over all c instances, which sees every
  count, waits no longer): the floor binds above ρ ≈ 0.89 at c = 3, 0.94 at c = 4 and 0.98 at c = 8, never at
  c ≥ 13 on the screen's loads (ρ ≤ 0.99). Measured in docs/queueing.md §1.3.
* Orderings. By construction both count-based laws wait no longer than random's M/G/1 for every t (π ≤ ρ and the
  stretch σ ≤ 1), and power-of-two's stretch is at least least-loaded's. Against least-work the ordering holds for
  the mean (a property test, tests/property/test_queueing_props.py: least-work ≤ least-loaded ≤ power-of-two ≤
  random), not for every t: π_c is below Erlang C (fewer arrivals wait, as in the simulator), while the stretch
  1/(1 + ρ + … + ρ^{c−1}) is above least-work's 1/c (those that wait, wait longer), so quantiles near 1 − P(W > 0)
  can swap (S = 1 s, ρ = 0.625, x = 9: P90 wait least-work 74 ms, least-loaded 9 ms). Erlang C itself overstates
  an M/D/c's delay probability, so this says more about least-work's atom than about the router.

Measured against the simulator (:mod:`pdplan.sim.prefill`, which routes by the count at each arrival):
docs/queueing.md §1.3 (``benchmarks/routing_closed_form_vs_sim.py``: TTFT P50 and P90 within 7.5 % over 2–16
instances at loads 0.3–0.9). Cost: π_c solves a sparse chain of about c²/2 states per (c, ρ), cached; the screen
needs it on its 32 tabulated loads per prefill server count (c = 64: about 0.4 s on one core; the chain grows as c²,
so above :data:`CHAIN_MAX_SERVERS` the Erlang C upper bound is priced instead), and only when a search includes
``least-loaded``. Gupta, Harchol-Balter, Sigman and Whitt
("Analysis of join-the-shortest-queue routing for web server farms", Performance Evaluation 64, 2007) analyse JSQ
with *processor-sharing* servers, whose mean is nearly insensitive to the service law; FCFS JSQ is not (the E[R]
above grows with c_s²), so their single-queue approximation is not used here.
"""

from __future__ import annotations

import functools

import numpy as np
from numpy.typing import ArrayLike

from pdplan.numerics.sparse_solve import solve_triplets
from pdplan.queueing.distributions import WaitDistribution, as_rates, check_pmf, delayed_tail_wait
from pdplan.queueing.erlang import erlang_c
from pdplan.queueing.exact_memo import forgets
from pdplan.queueing.mg1 import _MAX_CELLS, mg1_wait_distribution, service_moments
from pdplan.types import FloatArray
from pdplan.types import Int64Array as IntArray


def _chain(servers: int) -> tuple[IntArray, IntArray, FloatArray, FloatArray, IntArray, IntArray]:
    """The balanced JSQ chain of c servers (module docstring) as transition arrays (from, to, λ-coefficient,
    μ-coefficient), the states with i = 0 and the state (i, 0) of each i: states (i idle, q waiting) with i + q ≤ c
    and q ≤ c − 1, then the aggregate q ≥ c (the last index), whose exit to (0, c − 1) is the last transition, its
    μ-coefficient c (times 1 − ρ, applied by the caller). Rates in units of μ = 1/E[S], so λ = cρ."""
    c = servers
    grid_i, grid_q = np.meshgrid(np.arange(c + 1), np.arange(c), indexing="ij")
    valid = (grid_i + grid_q) <= c
    i, q = grid_i[valid], grid_q[valid]
    index = np.full((c + 2, c + 1), -1, dtype=np.int64)
    index[i, q] = np.arange(i.size)
    agg = i.size
    index[0, c] = agg  # (0, c): the aggregate
    k = np.arange(i.size)
    one = np.maximum(c - i - q, 0)  # instances holding one request
    idle = i > 0
    arrive_to = np.where(idle, index[np.maximum(i - 1, 0), q], index[0, np.minimum(q + 1, c)])
    ends_one, ends_two = one > 0, q > 0
    frm = np.concatenate([k, k[ends_one], k[ends_two], [agg]])
    to = np.concatenate([arrive_to, index[i + 1, q][ends_one], index[i, q - 1][ends_two], [index[0, c - 1]]])
    n_mu = int(ends_one.sum() + ends_two.sum()) + 1
    lam_coef = np.concatenate([np.ones(i.size), np.zeros(n_mu)])
    mu_coef = np.concatenate([np.zeros(i.size), one[ends_one], (c - i - one)[ends_two], [c]]).astype(np.float64)
    return frm, to, lam_coef, mu_coef, np.append(np.flatnonzero(i == 0), agg), index[: c + 1, 0].copy()


DENSE_MAX_SERVERS = 16
"""Chains of at most this many instances are solved densely with numpy (the default search's pools: up to 16)."""

CHAIN_MAX_SERVERS = 64
"""The most instances whose π_c is solved from the chain (about c²/2 states: c = 64 about 0.4 s of a search's
screen on one core, c = 480 hours). Above it π_c is priced as the Erlang C of one central queue, which bounds it
from above (an idle instance never waits beside a waiting request there): the delay probability is overstated, so
the wait and the plan are conservative; at c = 64 π_c / Erlang C is 0.33 at ρ = 0.8, 0.41 at 0.9, 0.88 at 0.99 and
falls as c grows (tests/unit/test_queueing_jsq.py). A search over more than 64 prefill instances per pool with
``least-loaded`` routing therefore prices those counts pessimistically."""


@functools.lru_cache(maxsize=32)
def _chain_cached(servers: int) -> tuple[IntArray, IntArray, FloatArray, FloatArray, IntArray, IntArray]:
    return _chain(servers)


@functools.lru_cache(maxsize=8192)
def _all_busy(servers: int, rho: float) -> float:
    """π_c(ρ) of one (c, ρ): the balanced JSQ chain's P(i = 0), solved as a linear system: dense (numpy) up to
    :data:`DENSE_MAX_SERVERS` instances (at most 152 states), SciPy's sparse LU (SuperLU) above."""
    frm, to, lam_coef, mu_coef, busy, level = _chain_cached(servers)
    n = int(frm.max()) + 1
    rates = lam_coef * (servers * rho) + mu_coef
    rates[-1] *= 1.0 - rho  # the aggregate's exit: cμ(1 − ρ)
    out = np.bincount(frm, weights=rates, minlength=n)
    pin = int(level[min(servers, round(servers * (1.0 - rho)))])  # (i ≈ c(1 − ρ), q = 0), near the mode
    # balance: Σ_j p_j r_{j→k} − p_k·out_k = 0 for every k but the pinned state, whose row reads p_pin = 1
    row = np.concatenate([to, np.arange(n)])
    col = np.concatenate([frm, np.arange(n)])
    val = np.concatenate([rates, -out])
    kept = row != pin
    row = np.append(row[kept], pin)
    col = np.append(col[kept], pin)
    val = np.append(val[kept], 1.0)
    rhs = np.zeros(n)
    rhs[pin] = 1.0
    if servers <= DENSE_MAX_SERVERS:
        dense = np.zeros((n, n))
        np.add.at(dense, (row, col), val)
        p = np.linalg.solve(dense, rhs)
    else:  # SciPy's spsolve (SuperLU), without importing scipy.sparse (pdplan.numerics.sparse_solve)
        p = solve_triplets(row, col, val, rhs, column_order="MMD_AT_PLUS_A")
    p /= p.sum()
    return float(p[busy].sum())


def jsq_delay_probability(servers: int, rho: ArrayLike) -> FloatArray:
    """π_c(ρ) = P(W > 0) under join-the-shortest-queue over ``servers`` instances at per-instance loads ``rho`` in
    [0, 1) (module docstring). c = 1 gives ρ exactly; c = 2, ρ = 0.5 gives 7/22 (the chain of 6 states, solved by
    hand in tests/unit/test_queueing_jsq.py), against Erlang C's 1/3."""
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    r = np.atleast_1d(np.asarray(rho, dtype=np.float64))
    if np.any(r < 0.0) or np.any(r >= 1.0):
        raise ValueError(f"per-instance load must lie in [0, 1), got {r}")
    if servers == 1:
        return np.asarray(r.copy(), dtype=np.float64)
    if servers > CHAIN_MAX_SERVERS:  # Erlang C: an upper bound on π_c, priced instead of a chain of c²/2 states
        return np.asarray(np.clip(erlang_c(servers, servers * r), 0.0, 1.0), dtype=np.float64)
    out = np.array([_all_busy(servers, float(x)) if x > 0.0 else 0.0 for x in r])
    return np.asarray(np.clip(out, 0.0, 1.0), dtype=np.float64)


def jsq_stretch(servers: int, rho: ArrayLike) -> FloatArray:
    """σ = (1 − ρ)/(1 − ρ^c) = 1/(1 + ρ + … + ρ^{c−1}): the time stretch of the M/G/1 conditional wait at ρ that
    gives JSQ's ``E[W | W > 0] = E[R]/(1 − ρ^c)`` (module docstring). Example: c = 2, ρ = 0.5: 1/1.5."""
    r = np.asarray(rho, dtype=np.float64)
    powers = r[..., None] ** np.arange(servers)
    return np.asarray(1.0 / powers.sum(axis=-1), dtype=np.float64)


def jsq2_delay_probability(rho: ArrayLike) -> FloatArray:
    """π_2(ρ) of the balanced JSQ chain over two instances in closed form (its six states solved by hand in
    tests/unit/test_queueing_jsq.py): ``4ρ²(ρ² + ρ + 1)/((2ρ + 1)(ρ² + ρ + 2))``; ρ = 1/2 gives 7/22 (Erlang C: 1/3)."""
    r = np.asarray(rho, dtype=np.float64)
    return np.asarray(4.0 * r**2 * (r**2 + r + 1.0) / ((2.0 * r + 1.0) * (r**2 + r + 2.0)), dtype=np.float64)


def mean_field_ahead(rho: ArrayLike, choices: int = 2) -> FloatArray:
    """E[K | K ≥ 1] of the requests an arrival finds at the least loaded of ``choices`` instances sampled at random,
    in the mean-field limit of infinitely many exponential instances (Vvedenskaya, Dobrushin and Karpelevich,
    "Queueing system with selection of the shortest of two queues: an asymptotic approach", Problems of Information
    Transmission 32(1), 1996; Mitzenmacher, "The power of two choices in randomized load balancing", IEEE TPDS
    12(10), 2001): a fraction s_k = ρ^{(d^k − 1)/(d − 1)} of the instances hold ≥ k requests, so P(K ≥ k) = s_k^d and
    ``E[K | K ≥ 1] = Σ_{k≥1} s_k^d / s_1^d``; d = 2: 1 + ρ⁴ + ρ¹² + ρ²⁸ + …; d = 1 gives 1/(1 − ρ) (random)."""
    r = np.asarray(rho, dtype=np.float64)
    d = float(choices)
    k = np.arange(1, 64, dtype=np.float64)
    expo = k if choices == 1 else (d**k - 1.0) / (d - 1.0)
    tail = r[..., None] ** (d * expo - d)  # s_k^d / s_1^d
    return np.asarray(tail.sum(axis=-1), dtype=np.float64)


def power_of_two_terms(servers: int, rho: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(π, σ) of ``power-of-two`` (module docstring, "power of two"): the delay probability and the stretch of the
    M/G/1 conditional wait at ρ, each ``m_∞ + (m_2 − m_∞)/(c − 1)`` between JSQ over two instances (m_2, exact at
    c = 2) and the mean-field limit (m_∞), the stretch at least least-loaded's; c = 1 is the M/G/1 (π = ρ, σ = 1)."""
    r = np.asarray(rho, dtype=np.float64)
    if servers == 1:
        return r.copy(), np.ones_like(r)
    near = 1.0 / (servers - 1.0)
    pi = r**2 + (jsq2_delay_probability(r) - r**2) * near
    ahead = mean_field_ahead(r) + (1.0 / (1.0 - r**2) - mean_field_ahead(r)) * near  # E[W | W > 0]/E[R]
    sigma = np.maximum((1.0 - r) * ahead, jsq_stretch(servers, r))  # floored by JSQ over all c (module docstring)
    return np.asarray(pi, dtype=np.float64), np.asarray(sigma, dtype=np.float64)


def count_routing_terms(policy: str, servers: int, rho: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(π, σ) per per-instance load ρ for a router that counts requests (``least-loaded`` or ``power-of-two``): the
    wait is ``P(W ≤ t) = 1 − (π/ρ)·(1 − F_ρ(t/σ))``, F_ρ the M/G/1 wait cdf of one instance at ρ.

    Memoised on ``(policy, servers)`` and the exact doubles of ρ (the screen asks for the same 32 tabulated loads of
    each server count twice per prefill option, 3,072 calls over 24 default-family sweep points); fresh copies each
    call."""
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    r = np.atleast_1d(np.asarray(rho, dtype=np.float64))
    key = (policy, servers, r.shape, r.tobytes())
    hit = _TERMS.get(key)
    if hit is None:
        hit = _count_routing_terms(policy, servers, r)
        if len(_TERMS) >= _TERMS_ENTRIES:
            _TERMS.clear()
        _TERMS[key] = hit
    return hit[0].copy(), hit[1].copy()


_TERMS: dict[tuple[str, int, tuple[int, ...], bytes], tuple[FloatArray, FloatArray]] = {}
_TERMS_ENTRIES = 1024
"""(π, σ) pairs :func:`count_routing_terms` keeps (each of the screen's 32 loads: 0.5 KiB); past it the memo is
emptied."""


@forgets
def clear_memo() -> None:
    """Forget the memoised (π, σ) of :func:`count_routing_terms` (a search timed from scratch)."""
    _TERMS.clear()


def _count_routing_terms(policy: str, servers: int, r: FloatArray) -> tuple[FloatArray, FloatArray]:
    """:func:`count_routing_terms` computed, on 1-D loads ``r``."""
    if np.any(r < 0.0) or np.any(r >= 1.0):
        raise ValueError(f"per-instance load must lie in [0, 1), got {r}")
    if policy == "least-loaded":
        return jsq_delay_probability(servers, r), jsq_stretch(servers, r)
    if policy == "power-of-two":
        return power_of_two_terms(servers, r)
    raise ValueError(f"not a count-based routing policy: {policy!r}; valid: least-loaded, power-of-two")


def count_routed_wait_distribution(
    policy: str,
    rate_per_s: ArrayLike,
    service_s: ArrayLike,
    prob: ArrayLike,
    servers: int,
    *,
    max_cells: int = _MAX_CELLS,
) -> WaitDistribution:
    """The wait behind a router that counts requests (``least-loaded``: JSQ; ``power-of-two``: JSQ(2)) over
    ``servers`` FCFS instances at total rates ``rate_per_s`` [R]: ``P(W ≤ t) = 1 − (π/ρ)·(1 − F_ρ(t/σ))`` with F_ρ
    the M/G/1 cdf at the per-instance load (module docstring); its mean ``π·σ·E[R]/(1 − ρ)``."""
    rate = as_rates(rate_per_s)
    s, p = check_pmf(service_s, prob, "service_s")
    m1, m2, _ = service_moments(s, p)
    rho = rate * m1 / servers
    if np.any(rho >= 1.0):
        raise ValueError(f"{policy} over {servers}: unstable, utilisation {float(rho.max()):.4f} >= 1")
    w1 = mg1_wait_distribution(rate / servers, s, p, max_cells=max_cells)
    pi, sigma = count_routing_terms(policy, servers, rho)
    mean_s = pi * sigma * (m2 / (2.0 * m1)) / (1.0 - rho)
    return delayed_tail_wait(w1, pi, rho, time_scale=sigma, mean_s=mean_s)
