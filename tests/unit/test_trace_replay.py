"""Issue #12: workload file forms, trace replay in ``simulate``, the overridden workload's name, the roofline memory
fit, the decode KV limit in words, the one-deployment Markdown review, the embedded chart and the cross-vendor note."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.workloads import load_workload

Cli = Callable[..., Any]
SMALL = Path(__file__).parents[1] / "data" / "small_scenario.yaml"


def _trace(folder: Path, arrivals: list[float] | None = None) -> Path:
    path = folder / "trace.csv"
    rows = ["input_tokens,output_tokens" + (",arrival_s" if arrivals is not None else "")]
    for i in range(len(arrivals) if arrivals is not None else 4):
        cells = [str(500 + 100 * (i % 5)), str(50 + 10 * (i % 3))]
        if arrivals is not None:
            cells.append(repr(arrivals[i]))
        rows.append(",".join(cells))
    path.write_text("\n".join(rows) + "\n")
    return path


# --- workload files --------------------------------------------------------------------------------------------


def test_trace_given_as_a_bare_file_name(tmp_path: Path) -> None:
    _trace(tmp_path)
    spec_file = tmp_path / "w.yaml"
    spec_file.write_text("name: t\ntrace: trace.csv\n")
    spec = load_workload(spec_file)
    assert spec.trace is not None
    assert spec.trace.file == tmp_path / "trace.csv"


def test_workload_accepts_schema_version(tmp_path: Path) -> None:
    spec_file = tmp_path / "w.yaml"
    body = "input_tokens: {dist: fixed, value: 100}\noutput_tokens: {dist: fixed, value: 10}\n"
    spec_file.write_text("schema_version: 1\n" + body)
    assert load_workload(spec_file).schema_version == 1
    spec_file.write_text("schema_version: 2\n" + body)
    with pytest.raises(SpecError, match="schema_version"):
        load_workload(spec_file)


# --- arrival: trace in simulate ----------------------------------------------------------------------------------


def test_trace_gaps_scale_to_the_rate() -> None:
    from pdplan.sim.trace_replay import native_rate_rps, scaled_arrivals_s

    arrivals = np.array([0.0, 1.0, 3.0])
    assert native_rate_rps(arrivals) == pytest.approx(2 / 3)
    # rate 2 req/s: every gap x (2/3)/2 = 1/3
    assert scaled_arrivals_s(arrivals, 2.0) == pytest.approx([0.0, 1 / 3, 1.0])


def _trace_scenario(tmp_path: Path, arrivals: list[float]) -> Any:
    from pdplan.io.scenario import load_scenario

    _trace(tmp_path, arrivals)
    text = SMALL.read_text().split("workload:")[0]
    tail = SMALL.read_text().split("slo:")[1]
    path = tmp_path / "sc.yaml"
    path.write_text(text + "workload:\n  trace: trace.csv\n  arrival: trace\nslo:" + tail)
    return load_scenario(path)


def test_simulate_replays_the_trace_arrivals(tmp_path: Path) -> None:
    from pdplan.sim.compare import simulate_scenario

    # 400 requests in bursts of 20 arriving together every 20 s: the trace's own rate is 399/380 req/s
    arrivals = [20.0 * (i // 20) for i in range(400)]
    sc = _trace_scenario(tmp_path, arrivals)
    replay = simulate_scenario(sc, n_requests=100)
    assert replay.settings["arrivals"] == "trace"
    assert replay.settings["requests"] == 400
    assert replay.evaluation.operating_point is not None
    assert replay.evaluation.operating_point.rate_rps == pytest.approx(399 / 380)
    as_poisson = sc.model_copy(update={"workload": sc.workload.model_copy(update={"arrival": "poisson"})})
    poisson = simulate_scenario(as_poisson, rate=399 / 380, n_requests=400)
    assert replay.simulated is not None
    assert poisson.simulated is not None
    # bursts of 20 queue behind each other: the replay's TTFT tail is far above Poisson arrivals at the same rate
    assert replay.simulated.ttft_s.p90 > 3.0 * poisson.simulated.ttft_s.p90


def test_simulate_cli_runs_a_trace_without_a_rate(cli: Cli, tmp_path: Path) -> None:
    _trace_scenario(tmp_path, [0.5 * i for i in range(200)])
    result = cli("simulate", tmp_path / "sc.yaml", "--format", "json")
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["simulation"]["arrivals"] == "trace"


# --- --isl names the workload ------------------------------------------------------------------------------------


def test_isl_override_renames_the_workload() -> None:
    from pdplan.io.overrides import apply_overrides
    from pdplan.io.scenario import default_scenario_path, load_scenario
    from pdplan.specs.command_line import ScenarioOverrides

    base = load_scenario(default_scenario_path())
    assert base.workload.name == "chat"
    assert apply_overrides(base, ScenarioOverrides(isl=2048)).workload.name == "chat (isl=2048)"
    both = apply_overrides(base, ScenarioOverrides(isl=2048, osl=128)).workload.name
    assert both == "chat (isl=2048, osl=128)"


# --- roofline memory fit -----------------------------------------------------------------------------------------


def test_roofline_counts_the_pass_kv_in_the_memory_fit(cli: Cli) -> None:
    argv = ("roofline", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--phase", "decode", "--format", "json")
    huge = cli(*argv, "--batch", "100000", "--tokens", "100000")
    assert huge.code == 0
    doc = json.loads(huge.out)
    assert doc["fits_in_memory"] is False
    assert doc["kv_tokens_needed"] == 10**10 > doc["kv_capacity_tokens"]
    assert "KV tokens" in huge.err
    small = json.loads(cli(*argv, "--batch", "8", "--tokens", "1000").out)
    assert small["fits_in_memory"] is True  # 8,000 tokens against ~460k


# --- the decode KV limit in words ----------------------------------------------------------------------------------


def test_kv_binding_words_name_the_mean_occupancy() -> None:
    from pdplan.report.kv_words import binding_words
    from pdplan.types import Binding

    words = binding_words(Binding.DECODE_KV, {"decode_kv": 0.6304})
    assert words == "decode KV capacity (P99 KV occupancy reaches capacity at mean 0.63)"
    assert binding_words(Binding.PREFILL_UTILISATION, {"decode_kv": 0.6}) == "prefill utilisation"


def test_optimize_markdown_explains_the_kv_limit(cli: Cli) -> None:
    result = cli("optimize", "--format", "markdown")
    assert result.code == 0
    assert "decode KV capacity" in result.out  # rank 2 of the default run binds on it
    assert "P99 KV occupancy" in result.out
    assert "mean occupancy" in result.out


# --- evaluate --format markdown ------------------------------------------------------------------------------------


def test_evaluate_markdown_is_a_deployment_review(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "review.md"
    result = cli("evaluate", SMALL, "--rate", "2", "-o", target)
    assert result.code == 0, result.err
    text = target.read_text()
    assert text.startswith("# Deployment review: small\n")
    for heading in ("## Deployment", "## Capacity", "## Operating point", "## Assumptions", "## Method"):
        assert f"\n{heading}\n" in text
    doc = json.loads(cli("evaluate", SMALL, "--rate", "2", "--format", "json").out)
    assert f"{doc['goodput_rps']:.2f} req/s" in text
    assert f"P99 {doc['ttft_s']['p99'] * 1e3:,.1f} ms" in text


def test_evaluate_markdown_names_attention_dp_and_ep(cli: Cli, tmp_path: Path) -> None:
    """A wide-EP deployment's review says DP and EP per role (it printed 'TP1 PP1' only)."""
    target = tmp_path / "review.md"
    args = ("--model", "deepseek-v3", "--gpu", "h200-sxm", "--dtype", "fp8", "--kv-dtype", "fp8", "--xpyd", "1P2D")
    roles = ("--prefill-tp", "8", "--prefill-ep", "8", "--decode-tp", "1", "--decode-dp", "16", "--decode-ep", "16")
    result = cli("evaluate", *args, *roles, "-o", target)
    assert result.code == 0, result.err
    text = target.read_text()
    assert "| prefill | 1x h200-sxm TP8 PP1 EP8 |" in text
    assert "| decode | 2x h200-sxm TP1 PP1 DP16 EP16 |" in text


# --- the chart in the Markdown -------------------------------------------------------------------------------------


def test_markdown_embeds_the_plot_relative_to_the_report(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    report, chart = tmp_path / "reports" / "review.md", tmp_path / "charts" / "front.svg"
    chart.parent.mkdir()
    result = cli("optimize", SMALL, "--plot", chart, "-o", report)
    assert result.code == 0, result.err
    assert "![Pareto front and the recommended plan's latency vs rate](../charts/front.svg)" in report.read_text()


def test_markdown_without_plot_has_no_chart(cli: Cli) -> None:
    assert "## Chart" not in cli("optimize", SMALL, "--format", "markdown").out


# --- two vendors -------------------------------------------------------------------------------------------------


def test_cross_vendor_pairing_is_flagged(cli: Cli) -> None:
    argv = ("evaluate", "--prefill-gpu", "b200", "--decode-gpu", "mi300x", "--tp", "8", "--xpyd", "1P1D")
    doc = json.loads(cli(*argv, "--format", "json").out)
    assert any("two vendors" in w for w in doc["warnings"])
    same = json.loads(cli("evaluate", "--format", "json").out)
    assert not any("two vendors" in w for w in same["warnings"])


def test_cross_vendor_plans_are_flagged_in_optimize(cli: Cli) -> None:
    result = cli(
        "optimize", SMALL, "--prefill-gpu", "b200", "--decode-gpu", "mi300x", "--top", "2", "--format", "markdown"
    )
    assert result.code == 0, result.err
    assert "b200 prefill (nvidia) with mi300x decode (amd)" in result.out


# --- mooncake-leval's context-window share -------------------------------------------------------------------------


def test_mooncake_leval_clipped_share_is_the_exact_tail() -> None:
    """The preset bounds inputs at 131072 tokens, Llama-3.1's window, so only a prompt within its output of the bound
    is clipped: P(L + n > W) = sum_n P(n) P(L > W - n) = 2.60e-6 by direct summation, which the binned share (and the
    warning, "0.00026%") must match; it was printed as "0.00 %"."""
    from pdplan.io.workloads import load_preset_workload
    from pdplan.serving.resolve import WORKLOAD_BINS
    from pdplan.workload.bins import discretize

    spec = load_preset_workload("mooncake-leval")
    laws = spec.parametric()
    assert laws is not None
    inp, out = laws
    window = 131072
    n = np.arange(1, 4097, dtype=float)
    p_n = out.cdf(n + 0.5) - out.cdf(n - 0.5)
    exact = float(np.sum(p_n / p_n.sum() * (1.0 - inp.cdf(window - n))))
    assert exact == pytest.approx(2.6e-6, rel=0.01)
    binned = discretize(spec, max_bins=WORKLOAD_BINS, context_window=window).clipped_fraction
    assert binned == pytest.approx(exact, rel=1e-3)
