"""Whether a resolved scenario uses the prefix cache's two optional mechanisms, DualPath reads (``cache: read_paths:
dual``) and PPD turn placement (``cache: turn_placement`` other than ``pd``): the guards, which import none of the
mechanisms' modules, so that the default path can ask without loading them. The mechanisms' entry points, each made
behind its guard, are in :mod:`pdplan.serving.cache_mechanism_calls`. Those modules (with
:mod:`pdplan.cache.dual_path`) are 56 million instructions of a start-up that imports them (cachegrind,
docs/accuracy.md §7.20), and every model build and report called into them to learn that the mechanism is off
(start-up, issue #27).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pdplan.serving.ppd_pool import TurnPlacement
    from pdplan.serving.resolve import ResolvedScenario

SNIC_KINDS = ("remote-pool",)
"""Storage kinds read over a node's storage NIC (DualPath's second read path)."""


def reads_over_both_paths(res: ResolvedScenario[Any]) -> bool:
    """Whether the scenario's prefix cache reads ``dual`` (DualPath: over the prefill and the decode nodes' storage
    NICs); :func:`pdplan.serving.dual_path_setup.dual_path_setting` checks the rest (bad input raises there)."""
    setup = res.cache
    return setup is not None and setup.spec.read_paths != "prefill"


def ppd_applies(res: Any) -> bool:
    """Whether PPD placement changes this resolved xPyD scenario: a prefix cache, a ``sessions`` workload and a
    policy other than ``pd``."""
    setup = res.cache
    return bool(setup is not None and setup.reuse.sessions is not None and setup.spec.turn_placement.policy != "pd")


def placement_of(model: Any) -> TurnPlacement | None:
    """The model's PPD placement (None: plain disaggregation)."""
    pool = getattr(model, "pool", None)
    ppd_pool = sys.modules.get("pdplan.serving.ppd_pool")  # a PpdPool exists only once its module is imported: the
    # default path need not import it (start-up, issue #27)
    return pool.placement if ppd_pool is not None and isinstance(pool, ppd_pool.PpdPool) else None
