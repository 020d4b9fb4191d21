"""The decode KV limit in words (issue #12 item 9): it binds on the P99 occupancy while tables show the mean.

:func:`pdplan.queueing.decode.decode_capacity` stops the decode pool where ``K̄ + z·sd K`` reaches the KV capacity
(z = the 0.99 normal quantile, docs/queueing.md §2.3), but the ``decode_kv`` utilisation every report prints is the mean
``K̄ / M_kv``, so "limited by decode KV capacity" sits beside, e.g., ``decode_kv 0.63``; these words say why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pdplan.types import Z99, Binding

KV_LIMIT_NOTE = (
    f"decode KV capacity binds when the P99 KV occupancy (mean + {Z99:.2f} sd of the resident tokens, "
    "docs/queueing.md §2.3) reaches the capacity; the decode_kv utilisation shown is the mean occupancy, lower by "
    "that margin"
)
"""Why "limited by decode KV capacity" sits beside a ``decode_kv`` utilisation well below 1."""


def binding_words(binding: str, utilisation: Mapping[Any, float]) -> str:
    """The binding constraint, and for the decode KV limit the mean occupancy at which its P99 reaches capacity:
    ``decode KV capacity (P99 KV occupancy reaches capacity at mean 0.63)``."""
    mean_kv = utilisation.get("decode_kv")
    if binding != Binding.DECODE_KV or mean_kv is None:
        return binding
    return f"{binding} (P99 KV occupancy reaches capacity at mean {mean_kv:.2f})"


def binds_on_kv(bindings: Iterable[str]) -> bool:
    """Whether any of ``bindings`` is the decode KV capacity (the reports then print :data:`KV_LIMIT_NOTE`)."""
    return any(b == Binding.DECODE_KV for b in bindings)
