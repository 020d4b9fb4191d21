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

import math
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from pdplan.specs.base import FrozenModel
from pdplan.units import parse_size_bytes

CacheRouting = Literal["affinity", "load-balance"]
"""``affinity``: a session (or a prefix) always reaches the same instance; ``load-balance``: the scenario's policy."""

ReadPaths = Literal["prefill", "dual"]
"""How an xPyD deployment reads hits from a tier behind a storage NIC (a remote pool): ``prefill``, over the prefill
node's own storage NIC (every engine); ``dual``, DualPath's second path through the decode nodes' storage NICs,
their DRAM and the compute network (arXiv 2602.21548; :mod:`pdplan.cache.dual_path`, docs/prefix_cache.md §10)."""


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


TurnPolicy = Literal["pd", "ppd", "threshold", "score"]
"""Where a session's Turn 2+ prefill runs in an xPyD deployment (PPD, arXiv 2603.13358; :class:`TurnPlacementSpec`):
``pd``, always on the prefill pool (today's disaggregation, PPD's x = 0); ``ppd``, always as an append-prefill on the
decode instance that holds the session (x = 1); ``threshold``, on decode when the turn's new tokens are fewer than
``append_threshold_tokens``; ``score``, PPD's routing rule. Turn 1, and any turn whose history the decode instance does
not hold, always goes to the prefill pool."""


class TurnPlacementSpec(FrozenModel):
    """Scenario ``cache: turn_placement:``: the per-turn placement policy of multi-turn sessions (PPD).

    Sources: the threshold's default 512 is ``PPD_BYPASS_THRESHOLD`` of the PPD repository (``freelulul/vllm-ppd``,
    "short input bypass": ``input_tokens < 512`` goes to decode); the score rule and its default weights 1/1 (presets
    2/1 TTFT priority, 1/2 TPOT priority) are the same repository's decision engine:
    ``score = w_ttft·(pd_ttft − ppd_ttft)/pd_ttft − w_tpot·(ppd_tpot − pd_tpot)/pd_tpot``, decode when score > 0."""

    policy: TurnPolicy = "pd"
    append_threshold_tokens: Annotated[int, Field(ge=0, le=10_000_000)] = 512
    """``threshold``: a Turn 2+ whose new (appended) tokens are fewer than this runs on decode."""
    ttft_weight: Annotated[float, Field(gt=0.0, le=1e6, allow_inf_nan=False)] = 1.0
    """``score``: w_ttft."""
    tpot_weight: Annotated[float, Field(gt=0.0, le=1e6, allow_inf_nan=False)] = 1.0
    """``score``: w_tpot."""


def _placement(value: object) -> object:
    """A bare policy name in ``search.cache.turn_placement`` stands for that policy with its defaults."""
    return {"policy": value} if isinstance(value, str) else value


TurnPlacementChoice = Annotated[TurnPlacementSpec, BeforeValidator(_placement)]
"""One entry of ``search.cache.turn_placement``: a policy name (``ppd``) or a full mapping
(``{policy: threshold, append_threshold_tokens: 256}``)."""


DualSplit = Literal["optimal", "snic-balanced"] | Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
"""The decode path's share of hit reads (:class:`CacheSpec` ``dual_split``)."""


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
    read_paths: ReadPaths = "prefill"
    staging_dram: Annotated[str, Field(min_length=1)] = "host-dram-pcie5"
    """With ``read_paths: dual``: the host-DRAM catalogue entry whose ``read_bytes_per_s`` is a node's DRAM bandwidth
    M, where the decode path stages its reads."""
    dual_split: DualSplit = "optimal"
    """With ``read_paths: dual``: the share of hit reads taken over the decode path: ``optimal`` (the share that
    minimises the busiest resource), ``snic-balanced`` (DualPath's shortest-read-queue scheduler in its fluid limit,
    D/(P + D)) or a fixed share in [0, 1]."""
    turn_placement: TurnPlacementSpec = TurnPlacementSpec()
    """Where Turn 2+ prefills run in an xPyD deployment of a ``sessions`` workload (PPD); the default ``pd`` is
    plain disaggregation."""


class CacheSearch(FrozenModel):
    """``search: cache:``: the cache settings ``optimize`` chooses among (each list a dimension of the search;
    ``tier_capacities`` gives, per tier of the scenario's ``cache.tiers`` (same order), the sizes to try, 0 meaning
    the tier is left out)."""

    prefix_caching: Annotated[tuple[bool, ...], Field(min_length=1)] = (True, False)
    routing: Annotated[tuple[CacheRouting, ...], Field(min_length=1)] = ("affinity", "load-balance")
    tier_capacities: tuple[Annotated[tuple[TierSize, ...], Field(min_length=1)], ...] = ()
    read_paths: Annotated[tuple[ReadPaths, ...], Field(min_length=1)] = ("prefill",)
    """Offered only where a tier sits behind a storage NIC, and only to xPyD plans."""
    turn_placement: Annotated[tuple[TurnPlacementChoice, ...], Field(min_length=1)] = (TurnPlacementSpec(),)
    """PPD policies (and thresholds) to try: offered only to xPyD plans of a ``sessions`` workload with prefix caching
    on (the colocated baseline and caching-off variants keep ``pd``; docs/prefix_cache.md §11)."""
