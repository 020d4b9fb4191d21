"""Erlang C, the M/M/c probability of waiting: one function that both the central-queue laws
(:mod:`pdplan.queueing.mgc`) and the count-routing laws (:mod:`pdplan.queueing.jsq`, its bound above the chain limit)
read, kept apart so neither imports the other.

``C(c, a) = c·B_c(a) / (c − a·(1 − B_c(a)))`` with the Erlang B recursion ``B_k = a·B_{k−1} / (k + a·B_{k−1})``,
``B_0 = 1`` (Kleinrock, *Queueing Systems* vol. 1, 1975, §3.5).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from pdplan.types import FloatArray


def erlang_c(servers: int, offered_load: ArrayLike) -> FloatArray:
    """Erlang-C probability of waiting ``C(c, a)`` for M/M/c, a = λE[S] in Erlangs (a < c).

    Textbook values: C(1, a) = a; C(2, 1) = 1/3 (B₁ = 1/2, B₂ = 1/5, C = 2·0.2/(2 − 0.8) = 1/3).
    """
    if servers < 1:
        raise ValueError(f"servers must be >= 1, got {servers}")
    a = np.atleast_1d(np.asarray(offered_load, dtype=np.float64))
    if np.any(a < 0) or np.any(a >= servers):
        raise ValueError(f"offered load must lie in [0, {servers}), got {a}")
    b = np.ones_like(a)
    for k in range(1, servers + 1):
        b = a * b / (k + a * b)
        if k > a.max() and not b.any():  # B_k decreases faster than a/k once k > a: zero stays zero
            break
    return np.asarray(servers * b / (servers - a * (1.0 - b)), dtype=np.float64)
