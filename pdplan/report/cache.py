"""The prefix cache in the reports: per plan its setting (caching on or off, routing, the tiers and their sizes) and
what it does (hit ratio per tier, bytes read per second, the busiest element of each read path, the goodput without
it), in human units, for the terminal table, the Markdown review and the CSV (docs/json_keys.md ``cache``).

A plan with a PPD policy (``cache: turn_placement``) adds a column likewise: the policy, the share of turns appended on
decode, the P→D bytes saved, the TPOT stretch, Turn-1 and Turn-2+ TTFT P90 and the gain against the same plan with
``pd`` (:class:`pdplan.serving.ppd_report.PpdReport`); the CSV :data:`PPD_CSV_COLUMNS`, only when a plan has them.

A plan whose cache reads over both DualPath paths (``read_paths: dual``) adds a column: the decode path's share of
the reads, the busiest read-path resource, the workload's cache-compute ratio and the gain against the same plan
with prefill-only reads (:class:`pdplan.serving.dual_path_setup.DualPathReport`); the column appears only when a
shown plan has it, so prefill-only tables are unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pdplan.search.plans import Plan, PlanResult
from pdplan.serving.cache_report import CacheReport
from pdplan.serving.deployment import local_part
from pdplan.units import format_bytes

CACHE_COLUMNS = (
    "rank",
    "prefix cache",
    "routing",
    "tier sizes",
    "hit ratio (tokens)",
    "read GB/s",
    "gain",
)
"""The columns of the cache table (terminal and Markdown), one row per plan that has a cache setting or report."""


def _setting(plan: Plan) -> tuple[str, str, str]:
    setting = local_part(plan.deployment).cache
    if setting is not None and not setting.prefix_caching:
        return "off", "", ""
    routing = "affinity" if setting is None else setting.routing
    sizes = (
        "HBM only"
        if setting is None or not setting.tiers
        else ", ".join(
            f"{t.storage} {format_bytes(t.capacity) if t.capacity is not None else '(catalogue size)'}"
            for t in setting.tiers
        )
    )
    return "on", routing, sizes


def _per_tier(report: CacheReport | None) -> tuple[str, str]:
    if report is None:
        return "", ""
    hits = ", ".join(f"{t.name} {t.token_hit_ratio:.3f}" for t in report.tiers)
    reads = ", ".join(f"{t.name} {t.read_bytes_per_s / 1e9:.3g}" for t in report.tiers if t.read_bytes_per_s > 0)
    return f"{hits} (all {report.token_hit_ratio:.3f})", reads or "0"


def _dual(plan: Plan) -> str:
    """``dual: DE 67 %, PE SNIC, 4.6 GB/PFLOP, 2.05x`` (or ``prefill`` for a cache setting without DualPath)."""
    report = None if plan.cache is None else plan.cache.dual_path
    if report is None:
        return "prefill"
    ratio = report.cache_compute_gb_per_pflop
    gain = report.gain(plan.goodput_rps)
    return (
        f"dual: DE {report.de_fraction:.0%}, {report.binding}"
        + ("" if ratio is None else f", {ratio:.3g} GB/PFLOP")
        + ("" if gain is None else f", {gain:.2f}x")
    )


def _placement(plan: Plan) -> str:
    """``ppd: 63 % on decode, bytes -75 %, TPOT x1.06, 12.6x vs pd`` (or ``pd`` for a plan without PPD)."""
    report = None if plan.cache is None else plan.cache.turn_placement
    if report is None:
        return "pd"
    gain = report.gain(plan.goodput_rps)
    return (
        f"{report.policy}: {report.share_on_decode:.0%} on decode, bytes -{report.transfer_reduction:.0%}, "
        f"TPOT x{report.tpot_factor:.3g}, T1/T2+ TTFT P90 {report.ttft_turn1_p90_s * 1e3:.0f}/"
        f"{report.ttft_turn2_p90_s * 1e3:.0f} ms" + ("" if gain is None else f", {gain:.2f}x vs pd")
    )


def _gain(plan: Plan) -> str:
    gain = None if plan.cache is None else plan.cache.gain(plan.goodput_rps)
    return "" if gain is None else f"{gain:.2f}x"


def cache_rows(result: PlanResult) -> list[list[str]]:
    """One row of :data:`CACHE_COLUMNS` per shown plan (ranked, then the baseline) with a cache setting or report;
    empty when no plan has one (a workload without reuse)."""
    rows: list[list[str]] = []
    ranked = [(str(i), p) for i, p in enumerate(result.plans, start=1)]
    if result.baseline is not None:
        ranked.append(("baseline", result.baseline))
    for rank, plan in ranked:
        if plan.cache is None and local_part(plan.deployment).cache is None:
            continue
        on, routing, sizes = _setting(plan)
        hits, reads = _per_tier(plan.cache)
        rows.append([rank, on, routing, sizes, hits, reads, _gain(plan)])
    shown = [p for _, p in ranked if p.cache is not None or local_part(p.deployment).cache is not None]
    if any(p.cache is not None and p.cache.dual_path is not None for _, p in ranked):
        rows = [[*row, _dual(p)] for row, p in zip(rows, shown, strict=True)]
    if _any_ppd(shown):
        rows = [[*row, _placement(p)] for row, p in zip(rows, shown, strict=True)]
    return rows


def _any_ppd(plans: Sequence[Plan]) -> bool:
    return any(p.cache is not None and p.cache.turn_placement is not None for p in plans)


def cache_columns(result: PlanResult) -> tuple[str, ...]:
    """:data:`CACHE_COLUMNS`, with ``read paths`` where a shown plan reads over both DualPath paths."""
    plans = [*result.plans, *([result.baseline] if result.baseline is not None else [])]
    dual = any(p.cache is not None and p.cache.dual_path is not None for p in plans)
    columns = (*CACHE_COLUMNS, "read paths") if dual else CACHE_COLUMNS
    return (*columns, "turn placement") if _any_ppd(plans) else columns


def cache_csv_record(plan: Plan) -> dict[str, Any]:
    """A plan's cache columns for the CSV (``CSV_COLUMNS``; tiers joined as ``name=value;...``)."""
    on, routing, sizes = _setting(plan)
    report = plan.cache
    dual = None if report is None else report.dual_path
    extra = (
        {}
        if dual is None
        else {
            "cache_dual_de_fraction": dual.de_fraction,
            "cache_dual_binding": dual.binding,
            "cache_gb_per_pflop": dual.cache_compute_gb_per_pflop,
            "cache_dual_gain_vs_prefill_only": dual.gain(plan.goodput_rps),
        }
    )
    return (
        extra
        | _ppd_record(plan)
        | {
            "cache_prefix_caching": on,
            "cache_routing": routing,
            "cache_tier_sizes": sizes,
            "cache_token_hit_ratio": None if report is None else report.token_hit_ratio,
            "cache_tier_hit_ratios": None if report is None else _joined(report, "token_hit_ratio"),
            "cache_tier_read_bytes_per_s": None if report is None else _joined(report, "read_bytes_per_s"),
            "cache_goodput_without_rps": None if report is None else report.goodput_without_cache_rps,
            "cache_gain_vs_no_cache": None if report is None else report.gain(plan.goodput_rps),
        }
    )


DUAL_CSV_COLUMNS = (
    "cache_dual_de_fraction",
    "cache_dual_binding",
    "cache_gb_per_pflop",
    "cache_dual_gain_vs_prefill_only",
)
"""CSV columns of a DualPath plan (``read_paths: dual``); written only when a plan has them."""

CSV_COLUMNS = (
    "cache_prefix_caching",
    "cache_routing",
    "cache_tier_sizes",
    "cache_token_hit_ratio",
    "cache_tier_hit_ratios",
    "cache_tier_read_bytes_per_s",
    "cache_goodput_without_rps",
    "cache_gain_vs_no_cache",
)


PPD_CSV_COLUMNS = (
    "cache_ppd_policy",
    "cache_ppd_share_on_decode",
    "cache_ppd_bytes_saved_per_s",
    "cache_ppd_transfer_reduction",
    "cache_ppd_ttft_turn1_p90_s",
    "cache_ppd_ttft_turn2_p90_s",
    "cache_ppd_gain_vs_pd",
)
"""CSV columns of a PPD plan (``cache: turn_placement`` other than ``pd``; docs/prefix_cache.md §11): the policy, the
share of all turns placed on decode, the P→D KV bytes per second saved and their share of the link's traffic, Turn-1
and Turn-2+ TTFT P90, the goodput over the same plan with ``pd``; written only when a plan has them, after the
DualPath columns."""


def _ppd_record(plan: Plan) -> dict[str, Any]:
    """A PPD plan's :data:`PPD_CSV_COLUMNS` (none for other plans: empty cells)."""
    report = None if plan.cache is None else plan.cache.turn_placement
    if report is None:
        return {}
    return {
        "cache_ppd_policy": report.policy,
        "cache_ppd_share_on_decode": report.share_on_decode,
        "cache_ppd_bytes_saved_per_s": report.bytes_saved_per_s,
        "cache_ppd_transfer_reduction": report.transfer_reduction,
        "cache_ppd_ttft_turn1_p90_s": report.ttft_turn1_p90_s,
        "cache_ppd_ttft_turn2_p90_s": report.ttft_turn2_p90_s,
        "cache_ppd_gain_vs_pd": report.gain(plan.goodput_rps),
    }


def ppd_csv_columns(plans: Sequence[Plan]) -> list[str]:
    """:data:`PPD_CSV_COLUMNS` when a plan places turns on decode, else none."""
    return list(PPD_CSV_COLUMNS) if _any_ppd(plans) else []


def _joined(report: CacheReport, field: str) -> str:
    return ";".join(f"{t.name}={getattr(t, field):.6g}" for t in report.tiers)


def dual_csv_columns(plans: Sequence[Plan]) -> list[str]:
    """:data:`DUAL_CSV_COLUMNS` when a plan reads over both DualPath paths, else none."""
    dual = any(p.cache is not None and p.cache.dual_path is not None for p in plans)
    return list(DUAL_CSV_COLUMNS) if dual else []


def has_cache(plans: Sequence[Plan]) -> bool:
    """Whether any plan has a cache setting or report (the CSV then carries the cache columns)."""
    return any(p.cache is not None or local_part(p.deployment).cache is not None for p in plans)
