"""pdplan's shared vocabulary, defined once: array aliases, constants, and the words results use.

* Array aliases for numpy code (``FloatArray`` of float64, ``IntArray`` of platform ints, ``Int64Array``).
* ``Z99``: the standard normal 0.99 quantile (docs/queueing.md §2.3's z for the KV-occupancy margin).
* Literals for what users type (``Mode``, ``Granularity``, ``Routing``, ``Scheduler``, ``Dtype``, ``Convention``,
  ``Objective``) and :class:`Binding`, the binding constraints a result names. ``Binding`` is a ``StrEnum``: its
  members are the exact words printed in tables, CSV and JSON, so a member compares equal to its text. The
  latency constraints depend on the SLO percentile and are built by :func:`ttft_at` / :func:`tpot_at`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
Int64Array = npt.NDArray[np.int64]
ArrayLike = npt.ArrayLike

Z99 = 2.3263478740408408
"""Standard normal 0.99 quantile, ``scipy.stats.norm.ppf(0.99)``."""

Mode = Literal["disaggregated", "colocated"]
Granularity = Literal["request", "layer", "chunk"]
Routing = Literal["random", "round-robin", "least-work", "least-loaded", "power-of-two"]
Scheduler = Literal["prefill-first", "chunked"]
Dtype = Literal["bf16", "fp8"]
Convention = Literal["A", "B"]
Objective = Literal["gpus", "cost", "tokens-per-dollar"]
Redundancy = Literal["none", "n+1"]
"""Instance redundancy of a plan: ``n+1`` must meet the SLO with one instance of each pool down."""
Role = Literal["prefill", "decode", "colocated"]
UtilisationKey = Literal["prefill", "prefill_busy", "decode", "decode_kv", "link"]
"""Keys of a serving model's utilisations: prefill load (ρ over capacity), batched prefill's busy fraction,
decode utilisation u, decode KV occupancy K̄/M_kv, KV-link ρ."""
Utilisation = dict[UtilisationKey, FloatArray]
"""Utilisations per rate, by :data:`UtilisationKey`."""


class Binding(StrEnum):
    """Capacity constraints that can bind a deployment (the words every report prints)."""

    PREFILL_UTILISATION = "prefill utilisation"
    PREFILL_CHUNK = "prefill chunk capacity"
    PREFILL_KV = "prefill KV capacity"
    DECODE_UTILISATION = "decode utilisation"
    DECODE_KV = "decode KV capacity"
    DECODE_SEATS = "decode seats (max_num_seqs)"
    LINK = "link"
    COLOCATED_UTILISATION = "colocated utilisation"
    CACHE_CAPACITY = "cache capacity"
    """A prefix-cache tier's hit rate collapses as the rate rises (its working set outgrows it); names the tier."""
    CACHE_READ = "cache read bandwidth"
    """A prefix-cache tier's read path (PCIe, storage NIC, SSD) saturates; the report names the tier."""
    MEMORY = "memory"
    """No instance type holds the model's weights."""
    SLO = "SLO"
    """The SLO cannot be met (no search budget or target to name)."""
    GPU_BUDGET = "GPU budget"
    REDUNDANCY = "n+1 redundancy (a single instance in a pool)"
    """``--redundancy n+1`` with one instance in a pool: none is left when it is down."""
    DOLLAR_BUDGET = "dollar budget"
    PRICE = "no price"
    """A cost search cannot rank a GPU without a price."""


def percentile_label(percentile: float) -> str:
    """``90.0`` → ``"P90"``, ``99.9`` → ``"P99.9"``."""
    return f"P{percentile:g}"


def ttft_at(percentile: float) -> str:
    """The latency constraint on TTFT at an SLO percentile: ``"TTFT at P90"``."""
    return f"TTFT at {percentile_label(percentile)}"


def tpot_at(percentile: float) -> str:
    """The latency constraint on TPOT at an SLO percentile: ``"TPOT at P90"``."""
    return f"TPOT at {percentile_label(percentile)}"
