"""The capacity-review document of an optimisation (Markdown), for a PR or a design review.

Sections: Question, Inputs and their sources, Assumed efficiencies, Recommended plan and why, Alternatives,
Pareto front, Sensitivity (with GPU prices), Why not, Warnings, Method. Deterministic: fixed formatting, dict keys
sorted, no timestamps and no search wall time (``search.seconds`` is in the JSON only).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pdplan.io.billing_periods import billing_periods
from pdplan.report import common as c
from pdplan.report.cache import cache_columns, cache_rows
from pdplan.report.kv_words import KV_LIMIT_NOTE, binding_words, binds_on_kv
from pdplan.report.mapping import cell, sections
from pdplan.report.prfaas import other_plans, prfaas_facts, prfaas_pick
from pdplan.search.plans import Plan, PlanResult

_INPUT_ORDER = ("model", "workload", "slo", "gpus", "links", "search_space")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return lines + ["| " + " | ".join(cell(x) for x in row) + " |" for row in rows]


def _question(result: PlanResult) -> list[str]:
    s = result.search
    return [
        "## Question",
        "",
        result.question,
        "",
        f"- Objective: {result.objective}{_objective_words(result.objective_key)}",
        f"- {c.planning_line(result)[:1].upper()}{c.planning_line(result)[1:]}",
        f"- Search: {s.candidates:,} candidates screened, {s.feasible:,} feasible, "
        f"{s.refined:,} re-evaluated with the full serving model",
        f"- {c.rates_line(result)[:1].upper()}{c.rates_line(result)[1:]}",
    ]


_OBJECTIVE_WORDS = {
    "gpus": "most goodput per GPU within a GPU budget, or fewest GPUs at a target rate",
    "cost": "lowest cost per hour at a target rate, or most goodput per $/h within a budget",
    "tokens-per-dollar": "most output tokens/s per $/h within a budget, or lowest cost per hour at a target rate",
}


def _objective_words(objective: str) -> str:
    words = _OBJECTIVE_WORDS.get(objective)
    return f" ({words})" if words else ""


def _inputs(result: PlanResult) -> list[str]:
    return ["## Inputs and their sources", "", *sections(result.inputs.to_document(), first_keys=_INPUT_ORDER)]


def _assumptions(result: PlanResult) -> list[str]:
    gpus = c.gpu_inputs(result)
    status = [
        f"{name} {'calibrated' if facts.calibrated_kernel_table else '**not calibrated**'}"
        for name, facts in gpus.items()
    ]
    text = "Kernel tables: " + "; ".join(status) + "." if status else ""
    engine = result.assumptions.engine
    if engine.get("version"):
        text += f" Engine: {engine['name']} {engine['version']} ({engine.get('source', '')})."
    if c.uncalibrated_gpus(result):
        text += (
            " An uncalibrated table's efficiencies are derived from another GPU, not measured: treat plans on "
            + ", ".join(c.uncalibrated_gpus(result))
            + " as estimates."
        )
    lines = ["## Assumed efficiencies", "", text.strip(), ""] if text else ["## Assumed efficiencies", ""]
    return [*lines, *sections(result.assumptions.to_document(), transpose=True)]


def _pick_facts(result: PlanResult, plan: Plan) -> list[list[str]]:
    rate = c.rps(plan.operating_rate_rps)
    rows = [
        ["deployment", _deployment(plan)],
        [
            "goodput",
            f"{c.rps(plan.goodput_rps)} req/s ({c.rps_per_gpu(plan.goodput_rps_per_gpu)} per GPU, "
            f"{c.per_usd_hour(plan.goodput_rps_per_usd_hour)} per $/h)",
        ],
        [
            "output tokens/s",
            f"{c.tokens_per_s(plan.output_tokens_per_s)} ({c.tokens_per_s(plan.output_tokens_per_s_per_gpu)} per GPU, "
            f"{c.fixed(plan.tokens_per_s_per_user, 1)} per user)",
        ],
        [
            "cost",
            f"{c.usd(plan.cost_usd_per_hour)} per hour, {c.usd(plan.cost_usd_per_month)} per month "
            f"({c.fixed(billing_periods().hours_per_month, 0)} h), {c.usd(plan.cost_usd_per_year)} per year "
            f"({c.fixed(billing_periods().hours_per_year, 0)} h)",
        ],
        ["operating rate", f"{rate} req/s"],
    ]
    for name, latency in (("TTFT", plan.ttft_s), ("TPOT", plan.tpot_s)):
        text = (
            c.NA
            if latency is None
            else (
                f"mean {c.ms(latency.mean)}, P50 {c.ms(latency.p50)}, "
                f"P90 {c.ms(latency.p90)}, P99 {c.ms(latency.p99)} ms"
            )
        )
        rows.append([f"{name} at {rate} req/s", text])
    e2e = c.NA if plan.e2e_mean_s is None else f"mean {c.fixed(plan.e2e_mean_s, 2)} s"
    itl = c.NA if plan.itl_mean_s is None else f"mean {c.ms(plan.itl_mean_s)} ms"
    rows += [[f"E2E latency at {rate} req/s", e2e], [f"ITL at {rate} req/s", itl]]
    rows.append(["SLO attainment", c.pct(plan.attainment)])
    rows += [[f"utilisation {k}", c.pct(v)] for k, v in sorted(plan.utilisation.items())]
    rows += [[f"memory headroom {k}", c.gib(v)] for k, v in sorted(plan.memory_headroom.items())]
    rows += [
        ["binding constraint (at goodput)", binding_words(plan.binding_constraint, plan.utilisation)],
        [f"closest constraint at {rate} req/s", plan.operating_binding_constraint or c.NA],
        ["numbers", "exact (full serving model)" if plan.exact else "screened estimate (vectorised screen)"],
    ]
    err = plan.expected_error
    if err is not None:
        rows.append(["expected error", err.band_words()])
        rows += [["outside validation", "; ".join(err.outside)]] if err.outside else []
    return rows


def _deployment(plan: Plan) -> str:
    if plan.colocated is not None:
        parts = [f"colocated {c.role_text(plan.colocated)}", f"scheduler {plan.scheduler}"]
    else:
        parts = [
            f"prefill {c.role_text(plan.prefill)}",
            f"decode {c.role_text(plan.decode)}",
            f"link {plan.link}",
            f"{plan.granularity}-wise KV transfer",
            f"routing {plan.routing}",
        ]
    return ", ".join([*parts, f"max {plan.max_num_seqs} sequences per instance", f"{plan.num_gpus} GPUs"])


def _why(result: PlanResult) -> list[str]:
    words, get, fmt, higher = c.objective_metric(result)
    pick, second = result.best, c.runner_up(result)
    lines: list[str] = []
    if second is None:
        lines.append(f"It is the only plan that meets the SLO ({words}: {fmt(get(pick))}).")
    else:
        change = c.relative_change(get(pick), get(second))
        lower = "" if higher else ", lower is better"
        lines.append(
            f"It ranks first on {words}: {fmt(get(pick))} against {fmt(get(second))} for the runner-up, "
            f"{second.label} ({c.signed_pct(change)}{lower})."
        )
    lines.append(f"Against the colocated baseline: {c.ratio_line(result)}.")
    return [" ".join(lines), "", *_compare_table(result)]


_COMPARE: tuple[tuple[str, Callable[[Plan], str]], ...] = (
    ("plan", lambda p: p.label),
    ("GPUs", lambda p: str(p.num_gpus)),
    ("goodput req/s", lambda p: c.rps(p.goodput_rps)),
    ("req/s per GPU", lambda p: c.rps_per_gpu(p.goodput_rps_per_gpu)),
    ("req/s per $/h", lambda p: c.per_usd_hour(p.goodput_rps_per_usd_hour)),
    ("cost per hour", lambda p: c.usd(p.cost_usd_per_hour)),
    ("cost per month", lambda p: c.usd(p.cost_usd_per_month)),
    ("binding constraint", lambda p: p.binding_constraint),
)


def _compare_rows(pct: int) -> tuple[tuple[str, Callable[[Plan], str]], ...]:
    """:data:`_COMPARE` with the latencies at the shown percentile before the binding constraint."""
    latencies: tuple[tuple[str, Callable[[Plan], str]], ...] = (
        (f"TTFT P{pct} ms", lambda p: c.ms(c.at_percentile(p, "ttft", pct))),
        (f"TPOT P{pct} ms", lambda p: c.ms(c.at_percentile(p, "tpot", pct))),
    )
    return (*_COMPARE[:-1], *latencies, _COMPARE[-1])


def _compare_table(result: PlanResult) -> list[str]:
    """The pick beside the runner-up and the baseline."""
    second = c.runner_up(result)
    compare = [("recommended", result.best)] + ([("runner-up", second)] if second else [])
    compare += [("baseline", result.baseline)] if result.baseline is not None else []
    rows = [[q, *(f(p) for _, p in compare)] for q, f in _compare_rows(c.shown_percentile(result))]
    return _table(["", *(name for name, _ in compare)], rows)


def _recommended(result: PlanResult) -> list[str]:
    pick = result.best
    head = f"**{pick.label}**" + (" — screened estimate, not re-evaluated" if not pick.exact else "")
    return [
        "## Recommended plan and why",
        "",
        head,
        "",
        *_table(["quantity", "value"], _pick_facts(result, pick)),
        "",
        *_why(result),
    ]


def _alternatives(result: PlanResult) -> list[str]:
    pct = c.shown_percentile(result)
    rows = [c.plan_cells(rank, p, pct) for rank, p in c.ranked_with_baseline(result)[1:]]
    if not rows:
        return ["## Alternatives", "", "None: the recommended plan is the only feasible one."]
    columns = c.at_columns(c.PLAN_COLUMNS, pct)
    return ["## Alternatives", "", *_table(columns, rows), "", "`*` screened estimate (vectorised screen only)."]


def _pareto(result: PlanResult) -> list[str]:
    plans = c.pareto_sorted(result)
    if not plans:
        return ["## Pareto front", "", "Not computed."]
    return [
        "## Pareto front",
        "",
        "Goodput per GPU against tokens/s per user (interactivity); no plan on the front is beaten on both.",
        "",
        *_table(c.at_columns(c.PARETO_COLUMNS, c.shown_percentile(result)), [c.pareto_cells(result, p) for p in plans]),
    ]


def _sensitivity(result: PlanResult) -> list[str]:
    if not result.sensitivity:
        return ["## Sensitivity", "", "Not computed."]
    base = result.best.goodput_rps
    rows = [
        [
            s.change,
            c.rps(s.goodput_rps),
            c.signed_pct(c.relative_change(s.goodput_rps, base)),
            c.pct(s.attainment),
            "yes" if s.meets_target else "**no**",
            s.note,
        ]
        for s in result.sensitivity
    ]
    header = ["change", "goodput req/s", "vs recommended", "attainment at operating rate", "meets target", "note"]
    return [
        "## Sensitivity",
        "",
        f"The recommended plan ({result.best.label}) when one input moves.",
        "",
        *_table(header, rows),
        *_price_sensitivity(result),
    ]


def _price_sensitivity(result: PlanResult) -> list[str]:
    if not result.price_sensitivity:
        return []
    rows = [
        [
            f"{p.gpu} price x{p.factor:g} ({c.usd(p.price_usd_per_gpu_hour)} per GPU-hour)",
            c.usd(p.pick_cost_usd_per_hour),
            c.NA if p.winner is None else p.winner,
            "**yes**" if p.winner_changes else "no",
        ]
        for p in result.price_sensitivity
    ]
    return [
        "",
        "Prices: each GPU's price moved on its own; the exactly evaluated plans re-ranked by the objective.",
        "",
        *_table(["change", "recommended plan $/h", "ranks first", "pick changes"], rows),
    ]


def _why_not(result: PlanResult) -> list[str]:
    if not result.rejected:
        return ["## Why not", "", "Every GPU type and TP size searched appears in a reported plan."]
    rows = [c.why_not_cells(r) for r in result.rejected]
    return [
        "## Why not",
        "",
        "GPU types and TP/PP sizes the search tried (or dropped) that no reported plan uses, with the binding reason.",
        "",
        *_table(c.WHY_NOT_COLUMNS, rows),
    ]


def _warnings(result: PlanResult) -> list[str]:
    lines = c.all_warnings(result)
    return ["## Warnings", "", *([f"- {w}" for w in lines] or ["None."])]


def _method() -> list[str]:
    return [
        "## Method",
        "",
        "Step times come from a per-operator roofline priced with each GPU's kernel-efficiency table (above); "
        "prefill and decode pools are modelled as queues fed by a Poisson arrival stream with the workload's "
        "length distributions. TTFT runs from arrival to the first token, including queueing, prefill and the "
        "exposed part of the KV transfer; TPOT is the time per output token after the first. Percentiles are read "
        "from the modelled latency distributions, not from means, and goodput is the highest arrival rate at "
        "which the share of requests meeting both SLOs reaches the target attainment. Screened plans come from "
        "the vectorised screen only; the others were re-evaluated with the full serving model.",
    ]


def _chart(chart: str | None) -> list[list[str]]:
    """The ``--plot`` figure embedded (``chart``: its path relative to the Markdown file), or nothing."""
    if chart is None:
        return []
    return [["## Chart", "", f"![Pareto front and the recommended plan's latency vs rate]({chart})"]]


def _kv_note(result: PlanResult) -> list[list[str]]:
    """The decode KV limit explained (:mod:`pdplan.report.kv_words`) when a reported plan binds on it."""
    plans = [p for _, p in c.ranked_with_baseline(result)]
    return [[f"Note: {KV_LIMIT_NOTE}."]] if binds_on_kv(p.binding_constraint for p in plans) else []


def _cache(result: PlanResult) -> list[list[str]]:
    rows = cache_rows(result)
    if not rows:
        return []
    return [["## Prefix cache", "", *_table(list(cache_columns(result)), rows)]]


def _growth(result: PlanResult) -> list[list[str]]:
    """``--growth``: GPUs and $ the same search needs at each grown rate."""
    if not result.growth:
        return []
    rows = [c.growth_cells(result, row) for row in result.growth]
    head = ["## Growth", "", c.growth_base_line(result)[0].upper() + c.growth_base_line(result)[1:] + ".", ""]
    return [[*head, *_table(list(c.GROWTH_COLUMNS), rows)]]


def _prfaas(result: PlanResult) -> list[list[str]]:
    pick = prfaas_pick(result)
    if pick is None or pick.prfaas is None:
        return []
    rows = [[name, value] for name, value in [*prfaas_facts(pick.prfaas.to_document()), *other_plans(result)]]
    return [["## Prefill-as-a-Service", "", *_table(["quantity", "value"], rows)]]


def to_markdown(result: PlanResult, *, chart: str | None = None) -> str:
    """The whole document (ends with one newline); ``chart`` (a path relative to the document) embeds the plot."""
    parts = [
        [f"# Capacity review: {result.inputs.model.name}"],
        _question(result),
        _inputs(result),
        _assumptions(result),
        _recommended(result),
        *_prfaas(result),
        *_cache(result),
        *_growth(result),
        *_chart(chart),
        _alternatives(result),
        *_kv_note(result),
        _pareto(result),
        _sensitivity(result),
        _why_not(result),
        _warnings(result),
        _method(),
    ]
    return "\n\n".join("\n".join(part) for part in parts) + "\n"
