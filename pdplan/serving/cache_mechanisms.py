"""Whether a resolved scenario uses the prefix cache's two optional mechanisms, DualPath reads (``cache: read_paths:
dual``) and PPD turn placement (``cache: turn_placement`` other than ``pd``), and their entry points on the default
path, which import the mechanism's modules only where it is on.

Each function here is the function of the same name in :mod:`pdplan.serving.dual_path_setup`,
:mod:`pdplan.serving.ppd_model` or :mod:`pdplan.serving.ppd_report`, with that function's own first test ("no
DualPath setting", "PPD does not apply", "no placement") made before its module is imported: the same result, and a
scenario without the mechanism never imports it. Those modules (with :mod:`pdplan.cache.dual_path`) are 56 million
instructions of a start-up that imports them (cachegrind, docs/accuracy.md §7.20), and every model build and report
called into them to learn that the mechanism is off (start-up, issue #27).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from pdplan.queueing.link_delay import BinDelay
    from pdplan.serving.dual_path_setup import DualPathReport, DualPathSetting, StorageReadStage
    from pdplan.serving.ppd_pool import TurnPlacement
    from pdplan.serving.ppd_report import PpdReport
    from pdplan.serving.prefix_cache import CacheClasses, CacheSetup
    from pdplan.serving.resolve import ResolvedScenario
    from pdplan.transfer.kv_inputs import TransferConfig
    from pdplan.types import FloatArray

M = TypeVar("M")

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


def dual_path_setting(res: ResolvedScenario[Any]) -> DualPathSetting | None:
    """:func:`pdplan.serving.dual_path_setup.dual_path_setting` (None without DualPath reads)."""
    if not reads_over_both_paths(res):
        return None
    from pdplan.serving.dual_path_setup import dual_path_setting as setting_of  # lazy: DualPath only

    return setting_of(res)


def dual_path_cache(res: ResolvedScenario[Any], setup: CacheSetup) -> CacheSetup:
    """:func:`pdplan.serving.dual_path_setup.dual_path_cache` (``setup`` unchanged without DualPath reads)."""
    if not reads_over_both_paths(res):
        return setup
    from pdplan.serving.dual_path_setup import dual_path_cache as cache_of  # lazy: DualPath only

    return cache_of(res, setup)


def storage_read_stage(
    res: ResolvedScenario[Any], classes: CacheClasses, cached_tokens: FloatArray, prob: FloatArray
) -> StorageReadStage | None:
    """:func:`pdplan.serving.dual_path_setup.storage_read_stage` (None without DualPath reads)."""
    if not reads_over_both_paths(res):
        return None
    from pdplan.serving.dual_path_setup import storage_read_stage as stage_of  # lazy: DualPath only

    return stage_of(res, classes, cached_tokens, prob)


def add_read_wait(link: BinDelay, wait: BinDelay) -> BinDelay:
    """:func:`pdplan.serving.dual_path_setup.add_read_wait` (called only with a storage read stage, so DualPath's
    module is loaded already)."""
    from pdplan.serving.dual_path_setup import add_read_wait as added  # lazy: DualPath only

    return added(link, wait)


def dual_path_report(
    res: ResolvedScenario[Any],
    classes: CacheClasses | None,
    goodput_of: Callable[[ResolvedScenario[Any]], float] | None = None,
) -> DualPathReport | None:
    """:func:`pdplan.serving.dual_path_setup.dual_path_report` (None without DualPath reads)."""
    if not reads_over_both_paths(res):
        return None
    from pdplan.serving.dual_path_setup import dual_path_report as report_of  # lazy: DualPath only

    return report_of(res, classes, goodput_of)


def place_turns(built: M, transfer: TransferConfig | None = None) -> M:
    """:func:`pdplan.serving.ppd_model.place_turns` (``built`` unchanged where PPD does not apply)."""
    model: Any = built
    if not ppd_applies(model.res):
        return built
    from pdplan.serving.ppd_model import place_turns as placed  # lazy: PPD only

    return placed(built, transfer)


def ppd_report(res: Any, model: Any, goodput_of: Callable[[Any], float] | None = None) -> PpdReport | None:
    """:func:`pdplan.serving.ppd_report.ppd_report` (None without a PPD placement)."""
    if placement_of(model) is None:
        return None
    from pdplan.serving.ppd_report import ppd_report as report_of  # lazy: PPD only

    return report_of(res, model, goodput_of)
