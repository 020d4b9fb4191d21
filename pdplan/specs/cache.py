"""The prefix cache of a deployment (scenario ``cache:``) and the cache dimensions ``optimize`` may search
(``search: cache:``); docs/prefix_cache.md describes the model.

A serving engine keeps the KV of the prompts it has prefilled, by block, and a later prompt that starts with the same
blocks loads them instead of computing them (vLLM automatic prefix caching, SGLang RadixAttention; both on by
default). The first tier is the GPU's own HBM: the KV blocks the running sequences leave free. Below it, an offload
mechanism may keep evicted blocks in host DRAM, on local NVMe, or in a remote pool (``tiers``, each a
``hardware_db/storage`` entry with its size). ``routing`` says how requests reach instances: ``affinity`` keeps a
session (or a prefix) on one instance, so its reuse stays where its KV is, at the price of a load the router does not
balance; ``load-balance`` uses the scenario's routing policy and finds a session's history on the instance that
served it only by chance.

In an xPyD deployment the cache lives on the prefill instances (they compute the prompts and read the hits); the
whole context's KV still crosses the P→D link unless the decode instance already holds it (multi-turn placement on
the decode side is a later mechanism). Colocated instances cache on themselves.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from pdplan.specs.base import FrozenModel
from pdplan.units import parse_size_bytes

CacheRouting = Literal["affinity", "load-balance"]
"""``affinity``: a session (or a prefix) always reaches the same instance; ``load-balance``: the scenario's policy."""


def _size_or_zero(value: float) -> float:
    if not math.isfinite(value) or value < 0.0:
        raise ValueError(f"must be a size >= 0 (0: the tier is left out), got {value!r}")
    return value


TierSize = Annotated[float, BeforeValidator(parse_size_bytes), AfterValidator(_size_or_zero)]
"""A tier's size to try in a search: bytes, unit strings allowed (``"512 GiB"``); 0 leaves the tier out."""


def _tier_size(value: float) -> float:
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(
            f"must be a size > 0, got {value!r}: a tier of 0 bytes holds nothing; remove the tier, or offer 0 among "
            "search.cache.tier_capacities to let optimize leave it out"
        )
    return value


TierCapacity = Annotated[float, BeforeValidator(parse_size_bytes), AfterValidator(_tier_size)]
"""A tier's size in a deployment: bytes > 0, unit strings allowed (``"1 TiB"``)."""


class TierChoice(FrozenModel):
    """One tier below HBM: a storage catalogue entry (``hardware_db/storage``) and its size.

    ``capacity`` is per node for host DRAM and local SSD (shared by the node's GPUs) and the pool's size for a remote
    pool (shared by the deployment); None takes the entry's ``capacity_bytes``."""

    storage: Annotated[str, Field(min_length=1)]
    capacity: TierCapacity | None = None


class CacheSpec(FrozenModel):
    """Scenario ``cache:``: prefix caching on or off, the routing it is planned with, and the tiers below HBM."""

    prefix_caching: bool = True
    routing: CacheRouting = "affinity"
    tiers: tuple[TierChoice, ...] = ()


class CacheSearch(FrozenModel):
    """``search: cache:``: the cache settings ``optimize`` chooses among (each list a dimension of the search;
    ``tier_capacities`` gives, per tier of the scenario's ``cache.tiers`` (same order), the sizes to try, 0 meaning
    the tier is left out)."""

    prefix_caching: Annotated[tuple[bool, ...], Field(min_length=1)] = (True, False)
    routing: Annotated[tuple[CacheRouting, ...], Field(min_length=1)] = ("affinity", "load-balance")
    tier_capacities: tuple[Annotated[tuple[TierSize, ...], Field(min_length=1)], ...] = ()
