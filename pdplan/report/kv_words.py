"""The decode KV limit in words (issue #12 item 9, issue #23 item 5).

An xPyD decode pool is stable up to the **mean** (fluid) KV occupancy ``K̄ = M_kv`` (docs/queueing.md §2.3, §2.6;
:mod:`pdplan.queueing.kv_admission`); its **comfortable** limit is the P99 one, ``K̄ + z·sd K = M_kv`` (z = the 0.99
normal quantile). Between the two, requests queue for free KV and that wait enters TTFT; a goodput there says so in its
binding words. The ``decode_kv`` utilisation every report prints is the mean ``K̄ / M_kv``. (The colocated model still
stops at the P99 occupancy.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pdplan.serving.limits import BEYOND_KV_COMFORT
from pdplan.types import Z99, Binding

KV_LIMIT_NOTE = (
    "decode KV capacity binds where the mean KV occupancy reaches the capacity (xPyD; colocated: where the P99 "
    f"occupancy, mean + {Z99:.2f} sd, does); past the comfortable limit, where the P99 occupancy reaches it, requests "
    "queue for KV admission and the wait enters TTFT (docs/queueing.md §2.6); decode_kv shows the mean occupancy"
)
"""What "limited by decode KV capacity" means beside a ``decode_kv`` utilisation below 1."""


def binding_words(binding: str, utilisation: Mapping[Any, float]) -> str:
    """The binding constraint, and for the decode KV limit the mean occupancy at the rate shown:
    ``decode KV capacity (mean KV occupancy 0.93)``."""
    mean_kv = utilisation.get("decode_kv")
    if binding != Binding.DECODE_KV or mean_kv is None:
        return binding
    return f"{binding} (mean KV occupancy {mean_kv:.2f})"


def binds_on_kv(bindings: Iterable[str]) -> bool:
    """Whether any of ``bindings`` is the decode KV capacity, or lies past its comfortable limit (the reports then
    print :data:`KV_LIMIT_NOTE`)."""
    return any(b == Binding.DECODE_KV or b.endswith(f"({BEYOND_KV_COMFORT})") for b in bindings)
