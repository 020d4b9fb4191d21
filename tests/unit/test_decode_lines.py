"""The concave decode step law (pdplan.serving.roles.concave_lines) and the line a model prices
(pdplan.serving.decode_lines): hand-worked fixed points, the fit on a MoE and a dense step, and the best line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.vllm018_colocated import vllm018_colocated

from pdplan.errors import NoFeasiblePlanError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.queueing import LinearStepTime, decode_fixed_point, decode_workload
from pdplan.serving.build import goodput_model, model_at_rate
from pdplan.serving.decode_lines import best_line, decode_role, line_count, role_decode_perf
from pdplan.serving.resolve import ResolvedScenario, resolve
from pdplan.serving.roles import LINE_SPLIT_REL_ERR, decode_step_fn

CATALOG = open_catalog()
STEEP = LinearStepTime(0.005, 0.002, 0.0)
FLAT = LinearStepTime(0.017, 0.00004, 0.0)


def test_fixed_point_of_the_minimum_is_the_least_of_the_lines() -> None:
    """n = 100 steps, t2 = 0. At λ = 0.02/s: u = 0.02·0.002·100 = 0.004 on the steep line, τ̄ = 5/0.996 = 5.0201 ms;
    the flat one 17/(1 − 0.00008) = 17.0014 ms: the law runs on the steep line. At λ = 4/s: u = 0.8, τ̄ = 25 ms on
    the steep line; 17/(1 − 0.016) = 17.2764 ms on the flat one, which the law runs on. The general-step solver
    (brentq on the minimum itself) finds the same τ̄ and the running line's slope."""
    wl = decode_workload([500.0], [100.0], [1.0])

    def law(b: np.ndarray, k: np.ndarray) -> np.ndarray:
        return np.minimum(STEEP(b, k), FLAT(b, k))

    fixed = decode_fixed_point(np.array([0.02, 4.0]), wl, law)
    assert fixed.tau_mean_s[0] == pytest.approx(0.005 / 0.996, rel=1e-9)
    assert fixed.tau_mean_s[1] == pytest.approx(0.017 / (1.0 - 0.016), rel=1e-9)
    assert fixed.t1_s_per_seq == pytest.approx([0.002, 0.00004], rel=1e-6)
    for rate, line in ((0.02, STEEP), (4.0, FLAT)):
        own = decode_fixed_point(np.array([rate]), wl, line).tau_mean_s[0]
        assert own == pytest.approx(float(decode_fixed_point(np.array([rate]), wl, law).tau_mean_s[0]), rel=1e-9)


def test_a_moe_step_is_two_lines_within_seven_percent() -> None:
    """Mixtral-8x7B on H100 TP2 at 700 tokens of context: the roofline 7.1 ms at B = 1, 21.5 ms at B = 101; the one
    line misses it by up to 68 % over its grid, the minimum of two lines by at most 7 %; the steep line first."""
    res = vllm018_colocated("mixtral-8x7b", 2)
    perf = role_decode_perf(res)
    assert perf.fit_max_rel_err > 0.6
    assert len(perf.lines) == 2
    assert perf.lines_rel_err[1] <= 0.07
    assert perf.lines[0].t1_s_per_seq > perf.lines[1].t1_s_per_seq
    batch = np.array([1.0, 8.0, 101.0])
    roof = decode_step_fn(decode_role(res), batch, batch * 700.0)
    law = np.minimum(perf.lines[0](batch, batch * 700.0), perf.lines[1](batch, batch * 700.0))
    assert np.all(np.abs(law / roof - 1.0) <= 0.07)
    assert float(roof[0]) == pytest.approx(7.14e-3, rel=0.01)


def test_a_dense_step_stays_one_line() -> None:
    """Llama-3.1-70B on H100 TP4: the one line fits within the split threshold, so the law is that line."""
    res = vllm018_colocated("llama-3.1-70b", 4)
    perf = role_decode_perf(res)
    assert perf.fit_max_rel_err <= LINE_SPLIT_REL_ERR
    assert perf.lines == ()
    assert line_count(res) == 0


def test_on_line_prices_that_line_with_the_law_errors() -> None:
    res = dataclasses.replace(vllm018_colocated("mixtral-8x7b", 2), decode_line=1)
    perf = role_decode_perf(res)
    assert perf.step == perf.lines[1]
    assert (perf.fit_median_rel_err, perf.fit_max_rel_err) == perf.lines_rel_err
    with pytest.raises(ValueError, match="decode line 2 of a law of 2 lines"):
        perf.on_line(2)


def test_best_line_keeps_the_highest_and_skips_failures() -> None:
    res = vllm018_colocated("mixtral-8x7b", 2)
    seen: list[int | None] = []

    def search(r: ResolvedScenario[Any]) -> float:
        seen.append(r.decode_line)
        if r.decode_line == 0:
            raise NoFeasiblePlanError("no rate holds on the steep line", binding_constraint="TPOT")
        return 3.0

    assert best_line(res, search, float) == 3.0
    assert seen == [1, 0]  # flattest first
    seen.clear()
    assert best_line(res, search, float, bound=lambda r: 2.0) == 3.0  # the steep line's limit is below: not searched
    assert seen == [1]

    def never(r: ResolvedScenario[Any]) -> float:
        raise NoFeasiblePlanError(f"line {r.decode_line}", binding_constraint="TPOT")

    with pytest.raises(NoFeasiblePlanError, match="line 0"):
        best_line(res, never, float)


def test_goodput_is_the_best_line_and_a_light_rate_runs_on_the_steep_one() -> None:
    """The law's goodput is the best of its lines' (here the flat one at the stable limit); at 0.05 req/s (a batch of
    about one) the model runs on the steep line, whose mean step lies below the flat one's."""
    res = vllm018_colocated("mixtral-8x7b", 2)
    chosen, _, good = goodput_model(res, res.scenario.slo)
    others = []
    for line in (0, 1):
        _, _, g = goodput_model(dataclasses.replace(res, decode_line=line), res.scenario.slo)
        others.append(g.rate_rps)
    assert good.rate_rps == max(others)
    assert chosen.decode_line == int(np.argmax(others))
    light = model_at_rate(res, 0.05)
    assert light.res.decode_line == 0
    assert light.decode.step == role_decode_perf(res).lines[0]


def test_simulate_compares_the_mean_batch_of_the_laws_line() -> None:
    """``pdplan simulate``'s closed-form ``decode_mean_seqs`` is read on the line the rate runs on, as its latencies
    (evaluate's): Mixtral-8x7B TP2 at 8 req/s, 1,500 requests, seed 0: 44.6 sequences, +2.9 % against the simulator;
    on the one-line fit it read 39.7 (−8.3 %)."""
    from pdplan.sim.compare import simulate_scenario

    res = vllm018_colocated("mixtral-8x7b", 2)
    got = simulate_scenario(res.scenario, rate=8.0, n_requests=1500)
    assert got.relative_error()["utilisation"]["decode_mean_seqs"] == pytest.approx(0.0, abs=0.06)


def test_sensitivity_slo_rows_reuse_the_line_models_bit_for_bit() -> None:
    """The SLO rows of a concave law's pick search each line's model: the pick's own model on its line and the other
    line's built once for both rows (pdplan.search.exact.Exact.capacity_lines); the goodputs are those of models built
    afresh per row, bit for bit."""
    from pdplan.search.exact import _law_goodput, evaluate_exact, sensitivity

    res = vllm018_colocated("mixtral-8x7b", 2)
    pick = evaluate_exact(res, res.hardware.deployment, target_rps=None)
    assert pick is not None
    capacity = pick.capacity or pick.model
    assert line_count(dataclasses.replace(capacity.res, decode_line=None)) == 2
    lines = pick.capacity_lines
    assert lines[capacity.res.decode_line or 0] is capacity
    other = 1 - (capacity.res.decode_line or 0)
    assert pick.capacity_lines[other] is lines[other]  # built once
    rows = {s.change: s.goodput_rps for s in sensitivity(pick, target_rps=None)}
    slo = res.scenario.slo
    for factor in (0.8, 1.2):
        scaled = slo.model_copy(update={"ttft": slo.ttft * factor, "tpot": slo.tpot * factor})
        assert rows[f"SLO thresholds x{factor:g}"] == _law_goodput(pick, capacity.res, scaled)


SESSIONS: dict[str, Any] = {
    "turns": {"dist": "geometric", "mean": 3.0},
    "new_tokens": {"dist": "fixed", "value": 300},
    "output_tokens": {"dist": "fixed", "value": 150},
    "think_time": {"dist": "exponential", "mean": "5s"},
    "system_prompt_tokens": 500,
}


def _cached_xpyd(policy: str) -> ResolvedScenario[Any]:
    data: dict[str, Any] = {
        "model": "mixtral-8x7b",
        "mode": "disaggregated",
        "prefill": {"gpu": "h100-sxm", "tp": 2, "count": 1},
        "decode": {"gpu": "h100-sxm", "tp": 2, "count": 1},
        "workload": {"sessions": SESSIONS},
        "cache": {"prefix_caching": True, "routing": "affinity", "turn_placement": {"policy": policy}},
        "slo": {"ttft": "2s", "tpot": "100ms"},
        "dtype": "bf16",
        "kv_dtype": "bf16",
    }
    return resolve(scenario_from_dict(data, source="test", base_dir=Path.cwd()), CATALOG)


def test_a_cached_xpyd_line_is_bounded_by_its_decode_pool() -> None:
    """pdplan.search.exact._line_bound: with a prefix cache an xPyD line's bound is its decode pool's stable limit,
    the same at any cache rate (the decode side reads no hit rate) and at least the line's self-consistent goodput;
    PPD's decode side moves with the hits and a colocated model's limit too: no bound (inf)."""
    from pdplan.search.exact import _capacity_model, _line_bound, _line_goodput
    from pdplan.serving.build import build_model, with_cache_rate
    from pdplan.serving.colocated import ColocatedModel
    from pdplan.serving.disaggregated import DisaggregatedModel

    res = _cached_xpyd("pd")
    d = res.hardware.deployment
    assert line_count(res) == 2
    bound = _line_bound(_capacity_model(res, d, "none"))
    for line in (0, 1):
        on = dataclasses.replace(res, decode_line=line)
        limits = set()
        for rate in (0.5, 2.0, 8.0):
            model = build_model(with_cache_rate(on, rate))
            assert isinstance(model, DisaggregatedModel)
            limits.add(model.decode_limit().rate_rps)
            assert model.limit().rate_rps <= model.decode_limit().rate_rps
        assert limits == {bound(on)}  # one decode limit at every cache rate
        _, _, _, good = _line_goodput(res, on, None, "none")
        assert good.rate_rps <= bound(on)
    ppd = _cached_xpyd("ppd")
    assert _line_bound(_capacity_model(ppd, ppd.hardware.deployment, "none"))(
        dataclasses.replace(ppd, decode_line=0)
    ) == float("inf")
    uncached = vllm018_colocated("mixtral-8x7b", 2)  # without a cache: the decode-share cap, then the stable limit
    on = dataclasses.replace(uncached, decode_line=0)
    model = build_model(on)
    assert isinstance(model, ColocatedModel)
    bounds = list(_line_bound(_capacity_model(uncached, uncached.hardware.deployment, "none"))(on))
    assert bounds == [model.decode_rate_bound(), model.limit().rate_rps]
    assert bounds[0] >= bounds[1]


def test_a_cached_colocated_line_is_bounded_by_its_decode_share() -> None:
    """A colocated line with a session cache: the bound is the plain model's decode-share cap
    (ColocatedModel.decode_rate_bound), the cached models' own at every cache rate but for round-off, above each of
    their stable limits and the line's self-consistent goodput; a shared-prefix layout reweights the cells: none."""
    from pdplan.search.exact import _capacity_model, _line_bound, _line_goodput
    from pdplan.serving.build import build_model, with_cache_rate
    from pdplan.serving.colocated import ColocatedModel

    res = vllm018_colocated("mixtral-8x7b", 2, workload={"sessions": SESSIONS}, cache={"prefix_caching": True})
    assert res.cache is not None
    bound = _line_bound(_capacity_model(res, res.hardware.deployment, "none"))
    for line in (0, 1):
        on = dataclasses.replace(res, decode_line=line)
        plain = build_model(dataclasses.replace(on, cache=None))
        assert isinstance(plain, ColocatedModel)
        assert bound(on) == plain.decode_rate_bound() < float("inf")
        for rate in (0.2, 1.0, 5.0):
            model = build_model(with_cache_rate(on, rate))
            assert isinstance(model, ColocatedModel)
            assert model.cache is not None
            assert model.decode_rate_bound() == pytest.approx(bound(on), rel=1e-12)
            assert model.limit().rate_rps <= bound(on)
        _, _, _, good = _line_goodput(res, on, None, "none")
        assert good.rate_rps <= bound(on)
    part = {"dist": "fixed", "value": 200}
    shared = {
        "shared_prefix": {"num_prefixes": 4, "prefix_tokens": part, "question_tokens": part, "output_tokens": part}
    }
    layout = vllm018_colocated("mixtral-8x7b", 2, workload=shared, cache={"prefix_caching": True})
    assert layout.cache is not None
    assert _line_bound(_capacity_model(layout, layout.hardware.deployment, "none"))(
        dataclasses.replace(layout, decode_line=0)
    ) == float("inf")


@pytest.mark.slow
def test_a_comparisons_line_bound_is_above_its_goodput() -> None:
    """pdplan.search.exact._comparison_bound (a report's comparison: one model per line, its hit rates fixed): an
    xPyD model's decode pool limit (PPD's too: its own placed decode side) and a colocated model's decode-share cap
    lie at or above the model's stable limit and so above its goodput, on both lines of Mixtral-8x7B's law, cached or
    not; the best line found with the bound is the one found without it, the steep line's search skipped; a model
    that cannot be built bounds at 0."""
    from pdplan.search.exact import _comparison_bound, _goodput_or_zero
    from pdplan.serving.build import build_model, with_cache_rate

    colocated = vllm018_colocated("mixtral-8x7b", 2, workload={"sessions": SESSIONS}, cache={"prefix_caching": True})
    cases = [with_cache_rate(_cached_xpyd(p), 2.0) for p in ("pd", "ppd")]
    cases += [with_cache_rate(colocated, 1.0), dataclasses.replace(colocated, cache=None)]
    for res in cases:
        built: dict[int | None, Any] = {}

        def on(r: ResolvedScenario[Any], built: dict[int | None, Any] = built) -> Any:
            return built.setdefault(r.decode_line, build_model(r))

        bound, slo = _comparison_bound(on), res.scenario.slo
        goods = []
        for line in (0, 1):
            line_res = dataclasses.replace(res, decode_line=line)
            model = on(line_res)
            good = _goodput_or_zero(model, slo)
            assert good <= model.limit().rate_rps <= bound(line_res) < float("inf")
            goods.append(good)
        whole = dataclasses.replace(res, decode_line=None)
        searched: list[int | None] = []

        def search(r: ResolvedScenario[Any], slo: Any = slo, searched: list[int | None] = searched) -> float:
            searched.append(r.decode_line)
            return float(_goodput_or_zero(on(r), slo))

        assert best_line(whole, search, float, bound) == max(goods)
        assert searched == [1]  # the steep line (2.6-2.9 req/s here) is bounded below the flat line's goodput
        assert best_line(whole, search, float) == max(goods)

    def fails(r: ResolvedScenario[Any]) -> Any:
        raise NoFeasiblePlanError("does not fit", binding_constraint="memory")

    assert _comparison_bound(fails)(cases[0]) == 0.0


def test_a_colocated_line_whose_decode_cap_loses_is_skipped_before_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """limit_bound: a colocated line's decode-share cap comes before its stable limit, and best_line stops at the cap
    where it does not exceed the best goodput found (the limit's roots are not solved); where it does, the limit is
    read as before."""
    from pdplan.serving.build import build_model
    from pdplan.serving.colocated import ColocatedModel
    from pdplan.serving.decode_lines import limit_bound

    res = vllm018_colocated("mixtral-8x7b", 2)
    assert line_count(res) == 2
    steep = build_model(dataclasses.replace(res, decode_line=0))
    assert isinstance(steep, ColocatedModel)
    cap, limit = steep.decode_rate_bound(), steep.limit().rate_rps
    assert cap >= limit
    solved: list[int | None] = []
    original = ColocatedModel.limit
    monkeypatch.setattr(ColocatedModel, "limit", lambda self: (solved.append(self.res.decode_line), original(self))[1])
    searched: list[int | None] = []
    for best, limit_read in ((cap, False), (0.5 * (cap + limit), True)):
        solved.clear()
        searched.clear()

        def search(on: ResolvedScenario[Any], best: float = best) -> float:
            searched.append(on.decode_line)
            return best if on.decode_line == 1 else 0.0

        assert best_line(res, search, float, limit_bound(build_model)) == best
        assert searched == [1]  # the steep line skipped either way: its limit lies below the best
        assert solved == ([0] if limit_read else [])
