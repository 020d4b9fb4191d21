"""Serving reports: ``pdplan evaluate`` (one deployment), ``pdplan simulate`` (closed form next to the simulator)
and ``pdplan transfer`` (one request's KV transfer).

The JSON documents are the results' own (:meth:`Evaluation.to_document`, :meth:`Comparison.to_document`, the
transfer's mapping); the records are the two-column (or closed form / simulated) rows of the other views, latencies
in ms. Library use::

    from pdplan import evaluate, load_scenario
    from pdplan.report.serving import evaluation_view
    evaluation_view(evaluate(load_scenario("examples/default.yaml"), rate=8.0)).records
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pdplan.io.billing_periods import per_month, per_year
from pdplan.report.kv_words import binding_words
from pdplan.report.render import QUANTITY_COLUMNS, View, quantity_records

if TYPE_CHECKING:
    from pdplan.evaluation.record import Evaluation
    from pdplan.serving.cache_report import CacheReport
    from pdplan.serving.dual_path_setup import DualPathReport
    from pdplan.sim.compare import Comparison

COMPARISON_COLUMNS = ("quantity", "closed_form", "simulated", "rel_error")


def _deployment_rows(ev: Evaluation) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for role in ("prefill", "decode", "colocated"):
        spec = ev.deployment.get(role)
        if spec:
            extra = f" {spec['scheduler']}" if "scheduler" in spec else ""
            extra += " ZeRO-gather" if spec.get("expert_gather") else ""
            par = "".join(f" {k.upper()}{spec[k]}" for k in ("dp", "ep") if spec.get(k, 1) > 1)
            rows.append((role, f"{spec['count']}× {spec['gpu']} TP{spec['tp']} PP{spec['pp']}{par}{extra}"))
    return rows


def _period_rows(usd_per_hour: float | None) -> list[tuple[str, Any]]:
    """$/month (x 730 h) and $/year (x 8,760 h) of an hourly cost (``pdplan/data/billing_periods.yaml``)."""
    if usd_per_hour is None:
        return [("cost_usd_per_month", "n/a (a GPU has no price)"), ("cost_usd_per_year", "n/a (a GPU has no price)")]
    return [
        ("cost_usd_per_month", f"${per_month(usd_per_hour):,.2f}"),
        ("cost_usd_per_year", f"${per_year(usd_per_hour):,.2f}"),
    ]


def evaluation_records(ev: Evaluation) -> list[dict[str, Any]]:
    """Two-column quantity/value rows for the table, CSV and Markdown views (human units)."""
    rows: list[tuple[str, Any]] = [("mode", ev.mode), ("model", ev.model), *_deployment_rows(ev)]
    rows += [
        ("num_gpus", ev.num_gpus),
        ("goodput_rps", ev.goodput_rps),
        ("goodput_rps_per_gpu", ev.goodput_rps_per_gpu),
        (
            "cost_usd_per_hour",
            "n/a (a GPU has no price)" if ev.cost_usd_per_hour is None else f"${ev.cost_usd_per_hour:,.2f}",
        ),
        *_period_rows(ev.cost_usd_per_hour),
        ("goodput_rps_per_usd_hour", ev.goodput_rps_per_usd_hour),
        (
            "stability_limit_rps",
            f"{ev.stability_limit_rps:.4g} ({binding_words(ev.stability_binding, ev.utilisation_at_goodput)})",
        ),
        ("binding_constraint", ev.binding_constraint),
        ("convention", ev.convention),
    ]
    if ev.engine:
        rows.append(("engine", f"{ev.engine['name']} {ev.engine['version']} ({ev.engine['source']})"))
    if ev.expected_error is not None:
        rows.append(("expected_error", ev.expected_error.band_words()))
        rows += [("outside_validation", "; ".join(ev.expected_error.outside))] if ev.expected_error.outside else []
    op = ev.operating_point
    if ev.closed_loop is not None:
        rows += [("concurrency", ev.closed_loop.concurrency), ("throughput_rps", ev.closed_loop.throughput_rps)]
    if op is not None:
        rows.append(("rate_rps", op.rate_rps))
        for name, summ in (("ttft", op.ttft_s), ("tpot", op.tpot_s)):
            rows += [(f"{name}_{k}_ms", v * 1e3) for k, v in summ.as_dict().items()]
        rows.append(("attainment", op.attainment))
        rows += [(f"utilisation_{k}", v) for k, v in op.utilisation.items()]
        rows.append(("operating_binding_constraint", op.binding_constraint))
    if ev.prfaas is not None:
        rows += prfaas_rows(ev.prfaas.to_document())
    if ev.cache is not None:
        rows += cache_rows(ev.cache, ev.goodput_rps)
    if ev.benchmark is not None:  # what the benchmark tool reports (benchmark/colocated_loop.py)
        b = ev.benchmark
        rows += [
            ("benchmark", f"{b.tool}: {b.requests} requests after {b.warmup} warm-up"),
            ("benchmark_mean_ttft_ms", b.mean_ttft_s * 1e3),
            ("benchmark_mean_tpot_ms", b.mean_tpot_s * 1e3),
            ("benchmark_throughput_rps", b.throughput_rps),
            ("steady_ttft_ms", b.steady_ttft_s * 1e3),
            ("steady_tpot_ms", b.steady_tpot_s * 1e3),
            ("burst_ttft_ms", b.burst_ttft_s * 1e3),
            ("effective_concurrency", b.effective_concurrency),
        ]
    return quantity_records(rows)


def dual_path_words(d: DualPathReport, goodput_rps: float) -> str:
    """DualPath in one line: the split, the busiest resource, the read bounds, GB/PFLOP and the gain."""
    gain = d.gain(goodput_rps)
    ratio = d.cache_compute_gb_per_pflop
    return (
        f"{d.tier}: {d.de_fraction:.0%} of reads over the decode nodes (SNIC-balanced {d.snic_balanced_fraction:.0%}),"
        f" busiest {d.binding} at {d.utilisation[d.binding]:.3g}, reads saturate at {d.read_limit_rps:.4g} req/s"
        f" (prefill nodes alone {d.prefill_only_read_limit_rps:.4g})"
        + ("" if ratio is None else f", {ratio:.3g} GB/PFLOP")
        + ("" if gain is None else f", {gain:.3g}x the same plan reading over the prefill nodes")
    )


def cache_rows(cache: CacheReport, goodput_rps: float) -> list[tuple[str, Any]]:
    """The prefix cache: routing, hit ratio and read traffic per tier (at the rate the hit rates hold at), the
    busiest element of each tier's read path, and the goodput without the cache."""
    rows: list[tuple[str, Any]] = [
        (
            "cache_lives_on",
            cache.lives_on
            + ("; the P→D link carries the whole context's KV" if cache.link_carries else "")
            + (" of the turns prefilled there" if cache.turn_placement is not None else ""),
        ),
        ("cache_routing", cache.routing),
        ("cache_hit_rates_at_rps", cache.rate_rps),
        ("cache_token_hit_ratio", cache.token_hit_ratio),
    ]
    if cache.warmup_requests:  # a trace: its first requests warm the cache (pdplan.cache.trace.WARMUP_SHARE)
        warm = f"the trace's first {cache.warmup_requests:,} requests (cache warm-up)"
        rows.append(("cache_hits_counted_after", warm))
    for tier in cache.tiers:
        busiest = max(tier.path_utilisation.items(), key=lambda kv: kv[1], default=("", 0.0))
        rows.append(
            (
                f"cache_tier_{tier.name}",
                f"hit ratio {tier.token_hit_ratio:.4g}, {tier.capacity_tokens:,.0f} tokens per instance, "
                f"reads {tier.read_bytes_per_s / 1e9:.4g} GB/s, busiest path element {busiest[0]} at "
                f"{busiest[1]:.3g}",
            )
        )
    if cache.dual_path is not None:  # read_paths: dual (docs/prefix_cache.md §10)
        rows.append(("cache_dual_path", dual_path_words(cache.dual_path, goodput_rps)))
    if cache.turn_placement is not None:  # PPD (docs/prefix_cache.md §11)
        rows.append(("cache_turn_placement", cache.turn_placement.words(goodput_rps)))
    gain = cache.gain(goodput_rps)
    rows.append(("cache_goodput_without_rps", cache.goodput_without_cache_rps))
    rows.append(("cache_gain_vs_no_cache", "n/a" if gain is None else f"{gain:.3g}x"))
    return rows


def prfaas_rows(pf: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The PrfaaS section: threshold, paths, link, gains over the two baselines, link sensitivity, sources."""
    remote = pf["remote"]
    how = "searched" if pf["threshold_searched"] else "fixed"
    rows: list[tuple[str, Any]] = [
        ("prfaas_remote", f"{remote['count']}× {remote['gpu']} TP{remote['tp']} over {pf['link']}"),
        ("prfaas_threshold_tokens", f"{pf['threshold_tokens']:,.0f} ({how})"),
        ("prfaas_offload_fraction", pf["offload_fraction"]),
        ("prfaas_goodput_rps", f"{pf['goodput_rps']:.4g} ({pf['binding_constraint']})"),
        ("prfaas_stability_limit_rps", pf["stability_limit_rps"]),
        ("prfaas_remote_ttft_p90_ms", pf["remote_ttft_p90_s"] * 1e3),
        ("prfaas_local_ttft_p90_ms", pf["local_ttft_p90_s"] * 1e3),
        ("prfaas_ttft_p90_ms", pf["ttft_p90_s"] * 1e3),
        ("prfaas_egress_gbps", pf["egress_gbps"]),
        ("prfaas_link_utilization", pf["link_utilization"]),
        (
            "prfaas_homogeneous_goodput_rps",
            f"{pf['homogeneous_goodput_rps']:.4g} (gain {pf['gain_vs_homogeneous']:.2f}x)",
        ),
        ("prfaas_naive_goodput_rps", f"{pf['naive_goodput_rps']:.4g} (gain {pf['gain_vs_naive']:.2f}x)"),
        (
            "prfaas_capacity_eq7",
            f"t* {pf['capacity_threshold_tokens']:,.0f}, Λ_max {pf['capacity_lambda_max_rps']:.4g} req/s "
            f"({pf['capacity_binding']})",
        ),
    ]
    for item in pf["link_sensitivity"]:
        rows.append(
            (
                f"prfaas_link_x{item['link_scale']:g}",
                f"threshold {item['threshold_tokens']:,.0f}, goodput {item['goodput_rps']:.4g} req/s",
            )
        )
    rows += [(f"prfaas_source_{k.replace(' ', '_')}", v) for k, v in pf["sources"].items()]
    return rows


def evaluation_view(ev: Evaluation) -> View:
    """``pdplan evaluate``: :func:`evaluation_records`; JSON is :meth:`Evaluation.to_document` plus the cost per
    month and per year."""
    document = ev.to_document()
    document["cost_usd_per_month"] = per_month(ev.cost_usd_per_hour)
    document["cost_usd_per_year"] = per_year(ev.cost_usd_per_hour)
    return View(
        records=evaluation_records(ev),
        document=document,
        columns=QUANTITY_COLUMNS,
        title=f"pdplan evaluate — {ev.name or 'scenario'}",
    )


def transfer_view(transfer: Mapping[str, Any]) -> View:
    """``pdplan transfer``: one quantity/value row per key of :func:`pdplan.serving.transfer_one.one_transfer`'s
    mapping (``bytes``, ``time_s``, ``exposed_s``...), which is also the JSON document."""
    return View(
        records=quantity_records(transfer),
        document=transfer,
        columns=QUANTITY_COLUMNS,
        title="pdplan transfer",
    )


KV_SWEEP_COLUMNS = ("tokens", "kv_mib", "prefill_ms", "kv_gbps")


def kv_sweep_view(sweep: Mapping[str, Any]) -> View:
    """``pdplan transfer --sweep``: one row per prompt length (KV in MiB, prefill in ms, KV throughput in Gb/s);
    the JSON document keeps SI units (``kv_bytes``, ``prefill_s``)."""
    records = [
        {
            "tokens": r["tokens"],
            "kv_mib": r["kv_bytes"] / 2**20,
            "prefill_ms": r["prefill_s"] * 1e3,
            "kv_gbps": r["kv_gbps"],
        }
        for r in sweep["rows"]
    ]
    ep = f" EP{sweep['ep']}" if sweep.get("ep", 1) > 1 else ""
    title = f"pdplan transfer --sweep — {sweep['model']} on {sweep['gpu']} TP{sweep['tp']}{ep}"
    return View(records=records, document=dict(sweep), columns=KV_SWEEP_COLUMNS, title=title)


def comparison_records(cmp: Comparison) -> list[dict[str, Any]]:
    """Rows quantity / closed form / simulated / relative error (latencies in ms)."""
    rows: list[dict[str, Any]] = []
    err = cmp.relative_error()

    def add(name: str, closed: Any, sim: Any, rel: Any, scale: float = 1.0) -> None:
        rows.append(
            {
                "quantity": name,
                "closed_form": None if closed is None else closed * scale,
                "simulated": None if sim is None else sim * scale,
                "rel_error": rel,
            }
        )

    if cmp.simulated is not None:
        sim = cmp.simulated.as_dict()
        add("rate_rps", cmp.closed_form["rate_rps"], sim["rate_rps"], None)
        for key in ("ttft_s", "tpot_s"):
            for stat, value in cmp.closed_form[key].items():
                add(f"{key[:-2]}_{stat}_ms", value, sim[key][stat], err[key][stat], 1e3)
        add("attainment", cmp.closed_form["attainment"], sim["attainment"], err["attainment"])
        for k, v in cmp.closed_form["utilisation"].items():
            add(f"utilisation_{k}", v, sim["utilisation"].get(k), err["utilisation"].get(k))
    add("goodput_rps", cmp.goodput_closed_rps, cmp.goodput_simulated_rps, err.get("goodput_rps"))
    add("seconds", None, cmp.seconds, None)
    return rows


def comparison_view(cmp: Comparison) -> View:
    """``pdplan simulate``: :func:`comparison_records`; JSON is :meth:`Comparison.to_document`."""
    return View(
        records=comparison_records(cmp),
        document=cmp.to_document(),
        columns=COMPARISON_COLUMNS,
        title=f"pdplan simulate — {cmp.evaluation.name or 'scenario'}",
    )
