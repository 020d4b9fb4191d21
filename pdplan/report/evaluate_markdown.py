"""``pdplan evaluate --format markdown``: a one-deployment capacity review (issue #12), not a bare quantity table.

Sections: the deployment and its SLO, what it sustains (goodput, per GPU, per $/h, the stability limit and what
binds it), the operating point when ``--rate`` or ``--concurrency`` is given (latency percentiles, attainment,
utilisations), the assumptions the numbers rest on, the warnings, and the method in one paragraph. Pure function of
the :class:`~pdplan.evaluation.record.Evaluation`; human units (ms, req/s, %) only here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pdplan.report.kv_words import KV_LIMIT_NOTE, binding_words, binds_on_kv
from pdplan.report.render import format_cell

if TYPE_CHECKING:
    from pdplan.evaluation.record import Evaluation


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines


def _roles(ev: Evaluation) -> list[list[str]]:
    rows = []
    for role in ("prefill", "decode", "colocated"):
        spec = ev.deployment.get(role)
        if spec:
            parallel = "".join(f" {k.upper()}{spec[k]}" for k in ("dp", "ep") if spec.get(k, 1) > 1)
            gather = " ZeRO-gather" if spec.get("expert_gather") and spec.get("ep", 1) > 1 else ""
            extra = f", scheduler {spec['scheduler']}" if "scheduler" in spec else ""
            label = f"{spec['count']}x {spec['gpu']} TP{spec['tp']} PP{spec['pp']}{parallel}{gather}{extra}"
            rows.append([role, label])
    for key in ("link", "granularity", "routing"):
        if ev.deployment.get(key) is not None:
            rows.append([key, str(ev.deployment[key])])
    return rows


def _deployment(ev: Evaluation) -> list[str]:
    slo = ev.slo
    pct = format_cell(float(slo["percentile"]))
    target = (
        f"{float(slo['attainment']):.0%} of requests meet P{pct} TTFT <= {float(slo['ttft']) * 1e3:g} ms "
        f"and TPOT <= {float(slo['tpot']) * 1e3:g} ms"
    )
    rows = [["model", ev.model], *_roles(ev), ["GPUs", str(ev.num_gpus)], ["SLO", target]]
    return ["## Deployment", "", *_table(["item", "value"], rows)]


def _prices(prices: dict[str, float | None]) -> str:
    """``h100-sxm $2.50/GPU-hour`` per GPU type (``--price`` or the catalogue's typical rental price)."""
    return ", ".join(f"{gpu} " + ("n/a" if p is None else f"${p:,.2f}/GPU-hour") for gpu, p in prices.items())


def _capacity(ev: Evaluation) -> list[str]:
    per_usd = ev.goodput_rps_per_usd_hour
    cost = ev.cost_usd_per_hour
    rows = [
        ["goodput", f"{ev.goodput_rps:.2f} req/s ({ev.goodput_rps_per_gpu:.3f} per GPU)"],
        ["cost", "n/a (a GPU has no price)" if cost is None else f"${cost:,.2f} per hour"],
        ["GPU prices", _prices(ev.price_usd_per_gpu_hour)],
        ["goodput per $/h", "n/a" if per_usd is None else f"{per_usd:.4f} req/s"],
        [
            "stability limit",
            f"{ev.stability_limit_rps:.2f} req/s ({binding_words(ev.stability_binding, ev.utilisation_at_goodput)})",
        ],
        ["binding constraint at goodput", binding_words(ev.binding_constraint, ev.utilisation_at_goodput)],
        ["TTFT convention", ev.convention],
    ]
    rows += [[f"utilisation {k} at goodput", f"{v:.1%}"] for k, v in sorted(ev.utilisation_at_goodput.items())]
    return ["## Capacity", "", *_table(["quantity", "value"], rows)]


def _operating_point(ev: Evaluation) -> list[str]:
    op = ev.operating_point
    if op is None:
        return ["## Operating point", "", "No rate given (`--rate R` or `--concurrency C` adds latencies at a load)."]
    rows = []
    if ev.closed_loop is not None:
        rows.append(["concurrency", f"{ev.closed_loop.concurrency} clients"])
    rows.append(["rate", f"{op.rate_rps:.2f} req/s"])
    for name, summ in (("TTFT", op.ttft_s), ("TPOT", op.tpot_s)):
        rows.append(
            [
                name,
                f"mean {summ.mean * 1e3:,.1f}, P50 {summ.p50 * 1e3:,.1f}, P90 {summ.p90 * 1e3:,.1f}, "
                f"P99 {summ.p99 * 1e3:,.1f} ms",
            ]
        )
    rows.append(["SLO attainment", f"{op.attainment:.1%}"])
    rows += [[f"utilisation {k}", f"{v:.1%}"] for k, v in sorted(op.utilisation.items())]
    rows.append(["closest constraint", binding_words(op.binding_constraint, op.utilisation)])
    return ["## Operating point", "", *_table(["quantity", "value"], rows)]


def _assumptions(assumptions: Mapping[str, Any]) -> list[str]:
    rows = [[key, format_cell(value)] for key, value in assumptions.items()]
    return ["## Assumptions", "", *(_table(["assumption", "value"], rows) if rows else ["None recorded."])]


def _expected_error(ev: Evaluation) -> list[str]:
    """How far to trust the numbers: the cross-validated band and the notes (:mod:`pdplan.evaluation.error_band`)."""
    err = ev.expected_error
    lines = ["None recorded."] if err is None else [f"- {line}" for line in err.lines()]
    return ["## Expected error", "", *lines]


def _notes(ev: Evaluation) -> list[str]:
    bindings = [ev.stability_binding, ev.binding_constraint]
    if ev.operating_point is not None:
        bindings.append(ev.operating_point.binding_constraint)
    lines = [f"- warning: {w}" for w in ev.warnings]
    if binds_on_kv(bindings):
        lines.append(f"- note: {KV_LIMIT_NOTE}")
    return ["## Warnings and notes", "", *(lines or ["None."])]


def evaluation_markdown(ev: Evaluation) -> str:
    """The one-deployment review as Markdown (ends with one newline)."""
    parts = [
        [f"# Deployment review: {ev.name or ev.model}"],
        _deployment(ev),
        _capacity(ev),
        _operating_point(ev),
        _assumptions({} if ev.assumptions is None else ev.assumptions.to_document()),
        _expected_error(ev),
        _notes(ev),
        [
            "## Method",
            "",
            "Step times come from a per-operator roofline priced with each GPU's kernel-efficiency table; the "
            "prefill and decode pools are queues fed by Poisson arrivals with the workload's length distributions. "
            "Percentiles are read from the modelled latency distributions, and goodput is the highest arrival rate "
            "at which the share of requests meeting both SLOs reaches the target attainment.",
        ],
    ]
    return "\n\n".join("\n".join(part) for part in parts) + "\n"
