"""Ranking candidates by the objective, deterministically, and the Pareto front.

Objectives (docs/architecture.md §4, ``pdplan optimize``):

* budget (``--gpus N``, the default): among candidates using at most N GPUs (any number without a budget), the
  highest goodput per GPU — ``objective: cost`` ranks by goodput per $/h instead, ``tokens-per-dollar`` by output
  tokens/s per $/h;
* target rate (``--rate R``): among candidates whose goodput reaches R, the fewest GPUs (``objective: gpus``) or the
  lowest $/h (``objective: cost``), then the highest goodput per GPU.

Ties are broken by fewer GPUs, then by the candidate's position in the (ordered) search space, so results are
identical run to run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.numerics.sorted_stats import sorted_unique
from pdplan.types import FloatArray, IntArray


@dataclass(frozen=True)
class Metrics:
    """Per-candidate numbers the objective reads (arrays of length N; cost NaN where a price is missing)."""

    goodput_rps: FloatArray
    num_gpus: FloatArray
    cost_usd_per_hour: FloatArray
    output_tokens_per_s: FloatArray


PRICED_OBJECTIVES = ("cost", "tokens-per-dollar")
"""Objectives that rank by price: a candidate without one cannot be ranked and is skipped (and reported)."""


def needs_price(objective: str, budget_usd_per_hour: float | None) -> bool:
    """Whether candidates without a price are skipped: a cost objective or a dollar budget reads the price."""
    return objective in PRICED_OBJECTIVES or budget_usd_per_hour is not None


def feasible_mask(
    m: Metrics,
    *,
    budget_gpus: int | None,
    rate_rps: float | None,
    budget_usd_per_hour: float | None = None,
    priced: bool = False,
) -> npt.NDArray[np.bool_]:
    """Candidates that meet the SLO at some rate, fit the GPU and dollar budgets and reach the target rate;
    ``priced`` also drops candidates without a price (NaN cost)."""
    ok = m.goodput_rps > 0.0
    if budget_gpus is not None:
        ok &= m.num_gpus <= budget_gpus
    if rate_rps is not None:
        ok &= m.goodput_rps >= rate_rps
    if priced or budget_usd_per_hour is not None:
        ok &= np.isfinite(m.cost_usd_per_hour)
    if budget_usd_per_hour is not None:
        with np.errstate(invalid="ignore"):
            ok &= m.cost_usd_per_hour <= budget_usd_per_hour
    return np.asarray(ok)


def rank(
    m: Metrics,
    *,
    objective: str,
    budget_gpus: int | None,
    rate_rps: float | None,
    budget_usd_per_hour: float | None = None,
) -> IntArray:
    """Indices of the feasible candidates, best first (module docstring); under a cost objective or a dollar
    budget, candidates without a price are not feasible (:func:`needs_price`)."""
    ok = feasible_mask(
        m,
        budget_gpus=budget_gpus,
        rate_rps=rate_rps,
        budget_usd_per_hour=budget_usd_per_hour,
        priced=needs_price(objective, budget_usd_per_hour),
    )
    idx = np.flatnonzero(ok)
    # equal to 12 significant digits counts as a tie (k identical colocated instances score the same
    # per GPU up to float rounding), so the documented tie-breaks decide, not the last bit
    per_gpu = _tie_round(m.goodput_rps[idx] / m.num_gpus[idx])
    gpus = m.num_gpus[idx]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_dollar = np.nan_to_num(m.goodput_rps[idx] / m.cost_usd_per_hour[idx], nan=-np.inf)
        tok_dollar = np.nan_to_num(m.output_tokens_per_s[idx] / m.cost_usd_per_hour[idx], nan=-np.inf)
    cost = np.nan_to_num(m.cost_usd_per_hour[idx], nan=np.inf)
    keys: tuple[npt.NDArray[np.generic], ...]
    if rate_rps is not None:
        # at a fixed rate the output tokens/s are fixed too, so most tokens per dollar = lowest cost
        primary = cost if objective in ("cost", "tokens-per-dollar") else gpus
        keys = (idx, gpus, -per_gpu, primary)
    elif objective == "cost":
        keys = (idx, gpus, -per_gpu, -per_dollar)
    elif objective == "tokens-per-dollar":
        keys = (idx, gpus, -per_gpu, -tok_dollar)
    else:
        keys = (idx, gpus, -per_gpu)
    order = np.lexsort(keys)  # the last key is the primary one
    return np.asarray(idx[order], dtype=np.intp)


def _tie_round(values: FloatArray) -> FloatArray:
    """``values`` rounded to 12 significant digits (inf and nan pass through)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        digits = 11 - np.floor(np.log10(np.abs(values)))
    digits = np.where(np.isfinite(digits), digits, 0.0)
    scale = 10.0**digits
    return np.asarray(
        np.where(np.isfinite(values) & (values != 0.0), np.round(values * scale) / scale, values), dtype=np.float64
    )


def pareto_front(x_better: FloatArray, y_better: FloatArray, limit: int = 12) -> IntArray:
    """Indices of points not dominated in (higher x, higher y), sorted by x descending; at most ``limit``
    evenly chosen along the front."""
    order = np.lexsort((-y_better, -x_better))
    y_sorted = y_better[order]
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(y_sorted)[:-1]))
    picked = np.asarray(order[y_sorted > best_before], dtype=np.intp)  # each point that improves y
    if picked.size > limit:
        picked = picked[sorted_unique(np.round(np.linspace(0, picked.size - 1, limit)).astype(np.intp))]
    return picked
