"""The guarded entry points of the prefix cache's two optional mechanisms, DualPath reads and PPD turn placement: each
function here is the function of the same name in :mod:`pdplan.serving.dual_path_setup`,
:mod:`pdplan.serving.ppd_model` or :mod:`pdplan.serving.ppd_report`, with that function's own first test made by a
guard of :mod:`pdplan.serving.cache_mechanisms` before its module is imported: the same result, and a scenario
without the mechanism never imports it (start-up, issue #27; docs/accuracy.md §7.20).

Apart from the guards, so that the mechanisms' modules, which import the guards, form no import cycle with these
calls (tests/unit/test_architecture.py counts imports inside functions too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from pdplan.serving.cache_mechanisms import placement_of, ppd_applies, reads_over_both_paths

if TYPE_CHECKING:
    from collections.abc import Callable

    from pdplan.queueing.link_delay import BinDelay
    from pdplan.serving.dual_path_setup import DualPathReport, DualPathSetting, StorageReadStage
    from pdplan.serving.ppd_report import PpdReport
    from pdplan.serving.prefix_cache import CacheClasses, CacheSetup
    from pdplan.serving.resolve import ResolvedScenario
    from pdplan.transfer.kv_inputs import TransferConfig
    from pdplan.types import FloatArray

M = TypeVar("M")


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
