"""How tokens spread over experts: distinct experts hit and token-expert pairs on the busiest GPU.

A MoE layer routes each of T tokens to k of E experts. Under expert parallelism (EP = ep) each GPU holds
E/ep experts; the layer waits for the busiest GPU, so what a GPU's grouped GEMM sees is

* ``pairs``: token-expert pairs routed to its experts (rows of the grouped GEMM), and
* ``hit``: how many of its experts receive at least one token (expert weights it must read).

Routing laws (:class:`~pdplan.specs.routing_law.RoutingLaw`; named presets with their sources in
``pdplan/data/moe_routing.yaml``, read by :func:`pdplan.io.perf_data.routing_law`):

* ``balanced``: each expert gets T·k/E tokens (AIConfigurator's ``balanced_logits``: token i picks experts
  (i + j·⌈E/k⌉) mod E, or T·k evenly spaced ones when T < ⌈E/k⌉): the busiest rank (rank 0, which holds
  expert 0) hits ⌈min(E, T·k)/ep⌉ of its E/ep experts, pairs = max(T·k/ep, hit).
* ``uniform``: independent uniform choices: E[hit] = E·(1 − (1 − k/E)^T) over all GPUs, the busiest GPU
  max(E[hit]/ep, min(1, E[hit])) (some GPU holds a hit expert), pairs = max(T·k/ep, hit).
* ``power_law``: per-expert loads drawn from a power law p(x) ∝ x^−α on [a, b] and scaled to T·k
  (AIConfigurator's ``power_law_logits_v3``: a = 1, b = 0.8·T when T·k > E, else a = 0.01, b = 2; the
  benchmark swaps the busiest EP rank onto the measured GPU). Expected values in closed form: an expert with
  draw x gets T·k·x/(E·μ) tokens (μ the law's mean) and is hit when that rounds to >= 1; the pairs lost to
  rounding (loads below 1/2) are handed back one per expert in descending load order, so at least that many
  experts are hit (all T·k picks land on distinct experts when every load rounds to zero). The busiest rank
  is the largest of ep sums of n = E/ep independent draws (the benchmark keeps the rank of most tokens):
  at n = 1 the largest expert (the 1 − 1/(E+1) quantile, capped at T: a token picks an expert once); at
  n >= 2 the expected maximum of ep sums, each of mean n·μ, deviation √n·σ and skewness γ/√n (the law's
  moments in closed form), by the normal order statistic z_ep = Φ⁻¹((ep − 0.375)/(ep + 0.25)) (Blom) with
  the first Cornish-Fisher skewness term, n·μ + √n·σ·(z + (z² − 1)·γ/(6√n)), never below the rank that
  holds the largest expert (it plus n − 1 average others) nor T·k/ep. Against 256 seeded draws of
  AIConfigurator's generator (E 256, k 8, α 0.6-1.2, T 64-524,288) the maximum is within 6 % at n >= 4
  (EP32 α 0.6: 1.80 against 1.81 × the mean), 0-10 % high at n = 2 (α <= 1.01), exact at n = 1; the
  former form (largest expert plus average others at every n) was 25-35 % low at n = 4-32 (1.30 at EP32).
* ``eplb``: an expert-parallel load balancer (DeepSeek EPLB) replicates hot experts so every rank carries the
  mean load T·k/ep; experts are hit as under ``uniform``.

All functions are vectorised over ``tokens`` and ``ep``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.specs.routing_law import UNIFORM, RoutingLaw
from pdplan.types import ArrayLike, FloatArray


@dataclass(frozen=True)
class Routing:
    """What the busiest GPU's experts receive: token-expert ``pairs`` and experts ``hit`` (expected values)."""

    pairs: FloatArray
    hit: FloatArray


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def _uniform_hit(tokens: FloatArray, experts: int, top_k: int) -> FloatArray:
    """E·(1 − (1 − k/E)^T): expected distinct experts for T tokens each picking k of E uniformly."""
    if top_k >= experts:
        every: FloatArray = np.where(tokens > 0.0, float(experts), 0.0)
        return every
    hit: FloatArray = experts * -np.expm1(tokens * np.log1p(-top_k / experts))
    return hit


def _pow(x: FloatArray, e: float) -> FloatArray:
    out: FloatArray = np.exp(e * np.log(x))
    return out


def _raw_integral(alpha: float, a: FloatArray, b: FloatArray, j: int) -> FloatArray:
    """∫ x^(j−α) dx on [a, b] (the log where j + 1 = α)."""
    e = j + 1.0 - alpha
    if abs(e) < 1e-9:
        lg: FloatArray = np.log(b / a)
        return lg
    out: FloatArray = (_pow(b, e) - _pow(a, e)) / e
    return out


def _law_moments(alpha: float, a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Mean of the power law p(x) ∝ x^−α on [a, b], and the normaliser ∫ x^−α dx (α = 1, 2 as limits)."""
    one = _raw_integral(alpha, a, b, 0)
    return _raw_integral(alpha, a, b, 1) / one, one


def _law_shape(alpha: float, a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Mean μ, standard deviation σ and skewness γ of the power law on [a, b], from its raw moments."""
    one = _raw_integral(alpha, a, b, 0)
    m1, m2, m3 = (_raw_integral(alpha, a, b, j) / one for j in (1, 2, 3))
    var = np.maximum(m2 - m1 * m1, 1e-300)
    sd = np.sqrt(var)
    skew: FloatArray = (m3 - 3.0 * m1 * m2 + 2.0 * m1**3) / (var * sd)
    return m1, sd, skew


def _max_of_sums(alpha: float, a: FloatArray, b: FloatArray, n: FloatArray, ep: FloatArray) -> FloatArray:
    """Expected largest of ``ep`` sums of ``n`` draws (n >= 2; module docstring): n·μ + √n·σ·w, w the
    Cornish-Fisher quantile z + (z² − 1)·γ_n/6 of skewness γ_n = γ/√n at Blom's position of the maximum."""
    from statistics import NormalDist

    mean, sd, skew = _law_shape(alpha, a, b)
    blom = (np.maximum(ep, 1.0) - 0.375) / (np.maximum(ep, 1.0) + 0.25)
    z = np.vectorize(NormalDist().inv_cdf, otypes=[np.float64])(blom)
    root_n = np.sqrt(np.maximum(n, 1.0))
    out: FloatArray = n * mean + root_n * sd * (z + (z * z - 1.0) * skew / (6.0 * root_n))
    return out


def _law_quantile(alpha: float, a: FloatArray, b: FloatArray, u: FloatArray) -> FloatArray:
    """Inverse CDF of the power law on [a, b] (the sampler AIConfigurator uses)."""
    if abs(alpha - 1.0) < 1e-9:
        q1: FloatArray = a * _pow(b / a, 1.0) ** u
        return q1
    e = 1.0 - alpha
    q: FloatArray = _pow((_pow(b, e) - _pow(a, e)) * u + _pow(a, e), 1.0 / e)
    return q


def _law_cdf(alpha: float, a: FloatArray, b: FloatArray, x: FloatArray) -> FloatArray:
    x = np.clip(x, a, b)
    if abs(alpha - 1.0) < 1e-9:
        c1: FloatArray = np.log(x / a) / np.log(b / a)
        return c1
    e = 1.0 - alpha
    c: FloatArray = (_pow(x, e) - _pow(a, e)) / (_pow(b, e) - _pow(a, e))
    return c


def _power_law(tokens: FloatArray, experts: int, top_k: int, ep: FloatArray, alpha: float) -> Routing:
    pairs_all = tokens * top_k
    big = pairs_all > experts
    t = np.maximum(tokens, 1.0)
    a = np.where(big, 1.0, 0.01)
    b = np.where(big, np.maximum(0.8 * t, 1.0 + 1e-6), 2.0)
    mean, _ = _law_moments(alpha, a, b)
    scale = pairs_all / (experts * mean)  # tokens per unit draw
    # hit when the expert's rounded load is >= 1, i.e. draw x >= 0.5/scale
    cut = np.clip(0.5 / np.maximum(scale, 1e-30), a, b)
    below = _law_cdf(alpha, a, b, cut)
    rounded_hit = experts * (1.0 - below)
    # the pairs lost by rounding loads below one to zero (share F(c)·mean[a,c]/mean[a,b] of all pairs) are put
    # back one each on the experts in descending load order: they hit new experts once they exceed rounded_hit
    lost = pairs_all * below * _law_moments(alpha, a, np.maximum(cut, a * (1.0 + 1e-9)))[0] / mean
    hit_all = np.maximum(rounded_hit, np.minimum(float(experts), lost))
    top = np.minimum(_law_quantile(alpha, a, b, np.asarray(1.0 - 1.0 / (experts + 1.0))) * scale, t)
    per_rank = experts / ep
    rest = np.maximum(pairs_all - top, 0.0) / max(experts - 1, 1)
    holder = top + (per_rank - 1.0) * rest  # the rank that holds the largest expert
    summed = np.minimum(_max_of_sums(alpha, a, b, per_rank, ep) * scale, per_rank * t)
    hot = np.maximum(np.where(per_rank >= 2.0, np.maximum(summed, holder), holder), pairs_all / ep)
    hot = np.minimum(hot, pairs_all)
    hit = np.minimum(np.maximum(hit_all / ep, np.minimum(1.0, hit_all)), per_rank)
    return _busiest(tokens, hot, hit)


def _busiest(tokens: FloatArray, pairs: FloatArray, hit: FloatArray) -> Routing:
    """The busiest GPU's expected load, at least one pair per expert it hits (zero without tokens)."""
    live = tokens > 0.0
    return Routing(np.where(live, np.maximum(pairs, hit), 0.0), np.where(live, hit, 0.0))


def route(tokens: ArrayLike, num_experts: int, top_k: int, ep: ArrayLike = 1, law: RoutingLaw | None = None) -> Routing:
    """Pairs and hit experts on the busiest of ``ep`` GPUs for ``tokens`` tokens entering the MoE layer.

    Example: E = 128, k = 8, T = 64, ep = 1, uniform: pairs 512, hit 128·(1 − (15/16)^64) ≈ 124.7.
    """
    rule = law or UNIFORM
    t, e = _f(tokens) * rule.load_scale, _f(ep)
    if rule.kind == "power_law":
        return _power_law(t, num_experts, top_k, e, rule.alpha)
    per_rank = num_experts / e
    if rule.kind == "balanced":  # the T·k picks (<= E distinct) spread evenly; rank 0 holds expert 0
        hit = np.minimum(per_rank, np.ceil(np.minimum(float(num_experts), t * top_k) / e - 1e-9))
    else:  # uniform, eplb: the expected share, and the busiest GPU hits at least one expert
        hit_all = _uniform_hit(t, num_experts, top_k)
        hit = np.minimum(np.maximum(hit_all / e, np.minimum(1.0, hit_all)), per_rank)
    return _busiest(t + 0.0 * e, t * top_k / e + 0.0 * hit, hit + 0.0 * t)
