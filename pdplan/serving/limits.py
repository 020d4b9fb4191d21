"""Stability limits of the serving model and the words that name them — one module that the exact model
(:mod:`pdplan.serving.disaggregated`, :mod:`pdplan.serving.colocated`,
:func:`pdplan.serving.operating_point.operating_point`) and the optimiser's vectorised screen
(:mod:`pdplan.search.screen`) both import, so the two cannot drift apart.

* ``PREFILL_RHO_MAX``: highest prefill (and KV-link) utilisation evaluated; the FFT wait grid and any SLO fail beyond.
* ``DECODE_U_MAX``: highest decode utilisation trusted (docs/queueing.md §6.3 validated the TPOT model up to u = 0.85).
* ``BEYOND_KV_COMFORT``: the words for a goodput past the comfortable (P99) decode KV limit.
* ``LINK_QUEUE_MIN_RHO``: below this link utilisation at the stability limit the link wait is negligible and skipped.

The constraint names are :class:`pdplan.types.Binding` members (and :func:`pdplan.types.ttft_at` /
:func:`~pdplan.types.tpot_at` for the latency SLOs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pdplan.queueing.decode import DecodeCapacity
from pdplan.types import Binding

if TYPE_CHECKING:
    from pdplan.serving.dual_path_setup import DualPathSetting
    from pdplan.serving.prefix_cache import CacheClasses

PREFILL_RHO_MAX = 0.99
LINK_QUEUE_MIN_RHO = 0.01
DECODE_U_MAX = 0.85


BEYOND_KV_COMFORT = "beyond the comfortable decode KV limit: requests queue for KV admission"
"""Appended to a goodput's binding words when the goodput lies past the comfortable (P99) decode KV limit
(:mod:`pdplan.queueing.kv_admission`)."""
BEYOND_SEAT_COMFORT = "beyond the comfortable seat limit: requests queue for a seat (max_num_seqs)"
"""Appended to a goodput's binding words when the goodput lies past the comfortable (P99) seat limit of a colocated
instance (:mod:`pdplan.queueing.kv_admission`, *Seats*)."""


@dataclass(frozen=True, slots=True)
class Limit:
    """Largest stable rate (req/s) and which constraint sets it, in words; ``kv_comfort_rps``: the deployment rate of
    the comfortable (P99) decode KV limit when it lies below ``rate_rps`` (past it requests queue for KV admission,
    :mod:`pdplan.queueing.kv_admission`), else None."""

    rate_rps: float
    binding: str
    kv_comfort_rps: float | None = None
    seat_comfort_rps: float | None = None
    """The deployment rate of a colocated instance's comfortable (P99) seat limit when it lies below ``rate_rps``
    (past it requests queue for a seat, :mod:`pdplan.queueing.kv_admission` *Seats*), else None."""

    def beyond_kv_comfort(self, rate_rps: float) -> bool:
        """Whether ``rate_rps`` lies past the comfortable decode KV limit."""
        return self.kv_comfort_rps is not None and rate_rps > self.kv_comfort_rps

    def beyond_seat_comfort(self, rate_rps: float) -> bool:
        """Whether ``rate_rps`` lies past the comfortable seat limit."""
        return self.seat_comfort_rps is not None and rate_rps > self.seat_comfort_rps


_DECODE_BINDING = {"utilisation": Binding.DECODE_UTILISATION, "kv": Binding.DECODE_KV, "seqs": Binding.DECODE_SEATS}


def decode_binding(cap: DecodeCapacity) -> Binding:
    """The decode pool's binding bound (utilisation, KV occupancy or seats) as a :class:`Binding`."""
    return _DECODE_BINDING[cap.binding]


def cache_read_limit(classes: CacheClasses | None, dual: DualPathSetting | None = None) -> Limit | None:
    """The rate at which a prefix-cache tier's read path saturates, named ``cache read bandwidth (tier: element)``.
    At fixed hit rates a tier's read traffic is proportional to the request rate, so a path element at utilisation
    u at the classes' rate λ_c saturates at λ_c/u (None: no cache, or nothing read below HBM). With ``dual``
    (``cache: read_paths: dual``) the DualPath tier's own elements give way to the busiest resource of the two read
    paths at the setting's split (:mod:`pdplan.serving.dual_path_setup`), named ``(tier: resource, dual path)``."""
    if classes is None:
        return None
    worst = max(
        (
            (u, tier.name, element)
            for tier in classes.tiers
            if dual is None or tier.name != dual.tier
            for element, u in tier.path_utilisation.items()
        ),
        default=(0.0, "", ""),
    )
    load = None if dual is None else dual.load(classes)
    if dual is not None and load is not None and load.max_utilisation > worst[0]:
        worst = (load.max_utilisation, dual.tier, f"{load.binding}, dual path")
    if worst[0] <= 0.0:
        return None
    return Limit(classes.rate_rps / worst[0], f"{Binding.CACHE_READ} ({worst[1]}: {worst[2]})")
