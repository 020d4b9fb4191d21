"""The PrfaaS section of an optimisation report (table, Markdown, CSV): the pick's ``prfaas`` object in words.

What the issue asks every report to show (arXiv 2604.15039 §3.4): the remote cluster and link, the threshold
and the offloaded share, the P90 TTFT of each path, the egress in Gb/s, the gain over homogeneous PD on the same
local GPUs and over naive heterogeneous PD, the capacity optimum (Eq. 7), how threshold and goodput move when the
link bandwidth halves or doubles, and where each input came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pdplan.report import common as c
from pdplan.search.plans import Plan, PlanResult

CSV_KEYS = (
    "threshold_tokens",
    "offload_fraction",
    "link_utilization",
    "remote_instances",
    "remote_ttft_p90_s",
    "local_ttft_p90_s",
    "egress_gbps",
    "homogeneous_goodput_rps",
    "gain_vs_homogeneous",
    "naive_goodput_rps",
    "gain_vs_naive",
)
"""The ``prfaas`` keys a CSV row carries (as ``prfaas_<key>``), docs/architecture.md §4's first."""


def _link_rows(pf: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = [
        (
            f"link bandwidth x{item['link_scale']:g}",
            f"threshold {c.fixed(item['threshold_tokens'], 0)} tokens, goodput {c.fixed(item['goodput_rps'], 3)} req/s",
        )
        for item in pf["link_sensitivity"]
    ]
    return rows or [("link bandwidth x0.5 / x2", "in the Markdown and JSON reports (--format markdown|json)")]


def prfaas_facts(pf: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(quantity, value) pairs of one plan's ``prfaas`` object, human units."""
    remote, homo = pf["remote"], pf["homogeneous_split"]
    how = "searched" if pf["threshold_searched"] else "pinned"
    rows = [
        ("remote prefill", f"{remote['count']}x {remote['gpu']} TP{remote['tp']} over {pf['link']}"),
        ("threshold", f"{c.fixed(pf['threshold_tokens'], 0)} tokens ({how}); longer prompts prefill remotely"),
        ("offloaded", c.pct(pf["offload_fraction"])),
        ("goodput", f"{c.fixed(pf['goodput_rps'], 3)} req/s ({pf['binding_constraint']})"),
        (
            "TTFT P90 remote / local / all ms",
            " / ".join(c.ms(pf[k]) for k in ("remote_ttft_p90_s", "local_ttft_p90_s", "ttft_p90_s")),
        ),
        ("egress", f"{c.fixed(pf['egress_gbps'], 2)} Gb/s (link {c.pct(pf['link_utilization'])} busy)"),
        (
            "vs homogeneous PD",
            f"{c.fixed(pf['homogeneous_goodput_rps'], 3)} req/s on the same local GPUs ({homo[0]}P{homo[1]}D): "
            f"gain {c.fixed(pf['gain_vs_homogeneous'], 2)}x",
        ),
        (
            "vs naive heterogeneous PD",
            f"{c.fixed(pf['naive_goodput_rps'], 3)} req/s (every prompt prefilled remotely): "
            f"gain {c.fixed(pf['gain_vs_naive'], 2)}x",
        ),
        (
            "capacity optimum (Eq. 7)",
            f"t* {c.fixed(pf['capacity_threshold_tokens'], 0)} tokens, "
            f"Λ_max {c.fixed(pf['capacity_lambda_max_rps'], 3)} req/s ({pf['capacity_binding']})",
        ),
        *_link_rows(pf),
    ]
    return rows + [(f"source: {k}", str(v)) for k, v in pf["sources"].items()]


def other_plans(result: PlanResult) -> list[tuple[str, str]]:
    """One (rank, summary) row per ranked PrfaaS plan after the pick: its threshold, offloaded share, path TTFTs."""
    rows = []
    for rank, plan in enumerate(result.plans[1:], start=2):
        pf = plan.prfaas
        if pf is None or plan.prefill is None or plan.decode is None:
            continue
        ttft = f"{c.ms(pf.remote_ttft_p90_s)} / {c.ms(pf.local_ttft_p90_s)} ms"
        summary = (
            f"threshold {c.fixed(pf.threshold_tokens, 0)} tokens, {c.pct(pf.offload_fraction)} offloaded, "
            f"TTFT P90 remote / local {ttft}, egress {c.fixed(pf.egress_gbps, 2)} Gb/s"
        )
        rows.append((f"plan {rank}: {plan.prefill.count}P{plan.decode.count}D", summary))
    return rows


def prfaas_pick(result: PlanResult) -> Plan | None:
    """The recommended plan when it is a PrfaaS plan."""
    return result.best if result.plans and result.best.prfaas is not None else None


def csv_record(plan: Plan) -> dict[str, Any]:
    pf = plan.prfaas.to_document() if plan.prfaas is not None else {}
    return {f"prfaas_{k}": pf.get(k) for k in CSV_KEYS}


def csv_columns(plans: list[Plan]) -> list[str]:
    return [f"prfaas_{k}" for k in CSV_KEYS] if any(p.prfaas is not None for p in plans) else []
