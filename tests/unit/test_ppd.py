"""PPD turn placement (pdplan/serving/ppd.py, ppd_model.py, ppd_report.py): the routing rule, the policies' shares,
the appends' load and the held-history probability worked by hand; the model built on examples/chat-ppd.yaml; the
search dimension and bad input; the optimize CSV's PPD columns."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from pdplan.cache.lru_closed_form import SessionWorkload, ThinkTime
from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.report.cache import PPD_CSV_COLUMNS, _ppd_record, ppd_csv_columns
from pdplan.search.cache_options import cache_variants, colocated_caches
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.ppd import (
    AppendGroups,
    append_load,
    decode_share,
    held_probability,
    placed_law,
    routes_to_decode,
    score,
    turns_pmf,
)
from pdplan.serving.ppd_model import DECODE_CLASS, place_turns
from pdplan.serving.ppd_report import ENGINE_NOTE, PpdReport, placement_of, ppd_report
from pdplan.serving.resolve import resolve
from pdplan.specs.cache import TurnPlacementSpec
from pdplan.specs.reuse import SessionsSpec
from pdplan.specs.scenario import Scenario

EXAMPLE = Path(__file__).parents[2] / "examples" / "chat-ppd.yaml"


def _scenario(**cache: Any) -> Scenario:
    sc = load_scenario(EXAMPLE)
    assert sc.cache is not None
    spec = sc.cache.model_copy(update=cache) if cache else sc.cache
    return sc.model_copy(update={"cache": spec})


def _policy(policy: str, **extra: Any) -> Scenario:
    return _scenario(turn_placement=TurnPlacementSpec(policy=policy, **extra))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------- the routing rule
def test_score_by_hand() -> None:
    # TTFT 100 → 40 ms (+0.6), TPOT 20 → 22 ms (−0.1)
    assert score(100.0, 40.0, 20.0, 22.0, 1.0, 1.0) == pytest.approx(0.5)
    assert score(100.0, 40.0, 20.0, 22.0, 1.0, 2.0) == pytest.approx(0.4)  # TPOT priority preset (1, 2)
    assert score(100.0, 40.0, 20.0, 32.0, 1.0, 1.0) == pytest.approx(0.0)
    assert score(0.0, 40.0, 0.0, 22.0, 1.0, 1.0) == 0.0  # no PD figure: both terms 0, as the repository


def test_routes_to_decode_is_the_repository_rule() -> None:
    figures = (100.0, 40.0, 20.0, 22.0)
    assert not routes_to_decode(1, 10, 512, figures)  # Turn 1 always PD
    assert routes_to_decode(2, 511, 512, (100.0, 400.0, 20.0, 40.0))  # short input bypass whatever the score
    assert not routes_to_decode(2, 512, 512, (100.0, 400.0, 20.0, 40.0))  # not below the bypass: the score decides
    assert routes_to_decode(3, 2000, 512, figures)
    assert not routes_to_decode(3, 2000, 512, (100.0, 40.0, 20.0, 40.0))  # +0.6 − 1.0 < 0
    assert not routes_to_decode(3, 2000, 512, (100.0, 40.0, 20.0, 32.0))  # score 0 is not > 0
    assert routes_to_decode(3, 2000, 512, (0.0, 40.0, 0.0, 22.0))  # PD failed (all-zero metrics): forced PPD
    assert routes_to_decode(3, 2000, 512, (math.inf, 40.0, 20.0, 22.0))  # PD unstable
    assert routes_to_decode(3, 2000, 512, None)  # no data: default_use_ppd
    assert not routes_to_decode(3, 2000, 512, (100.0, 40.0, 20.0, 22.0), (1.0, 6.0))  # +0.6 − 0.6


# ------------------------------------------------------------------------------------------- policies and loads
VALUES = np.array([100.0, 300.0, 900.0])
PROB = np.array([0.5, 0.3, 0.2])


def test_policy_shares_by_hand() -> None:
    groups = AppendGroups.of(VALUES, PROB, groups=3)
    assert decode_share(TurnPlacementSpec(policy="pd"), VALUES, PROB, groups, None) == (0.0, 0.0)
    share, mean = decode_share(TurnPlacementSpec(policy="ppd"), VALUES, PROB, groups, None)
    assert (share, mean) == pytest.approx((1.0, 320.0))  # 50 + 90 + 180
    share, mean = decode_share(TurnPlacementSpec(policy="threshold"), VALUES, PROB, groups, None)
    assert (share, mean) == pytest.approx((0.8, 175.0))  # 100 and 300 < 512: (50 + 90)/0.8
    spec = TurnPlacementSpec(policy="score", append_threshold_tokens=200)
    share, mean = decode_share(spec, VALUES, PROB, groups, np.array([0.0, 1.0, 0.0]))
    assert (share, mean) == pytest.approx((0.8, 175.0))  # bypass 100, the score sends 300, keeps 900


def test_placed_law_by_hand() -> None:
    groups = AppendGroups.of(VALUES, PROB, groups=3)
    assert groups.member.tolist() == [0, 1, 2]
    assert placed_law(TurnPlacementSpec(policy="pd"), VALUES, PROB, groups, None).tolist() == [0.0, 0.0, 0.0]
    np.testing.assert_allclose(placed_law(TurnPlacementSpec(policy="ppd"), VALUES, PROB, groups, None), PROB)
    threshold = placed_law(TurnPlacementSpec(policy="threshold"), VALUES, PROB, groups, None)
    np.testing.assert_allclose(threshold, [0.5, 0.3, 0.0])  # below 512
    spec = TurnPlacementSpec(policy="score", append_threshold_tokens=200)
    np.testing.assert_allclose(placed_law(spec, VALUES, PROB, groups, np.array([0.0, 0.0, 1.0])), [0.5, 0.0, 0.2])


def test_append_groups_keep_the_law() -> None:
    values = np.arange(1.0, 101.0)
    prob = np.full(100, 0.01)
    g = AppendGroups.of(values, prob, groups=4)
    assert g.prob.sum() == pytest.approx(1.0)
    assert g.prob @ g.tokens == pytest.approx(50.5)
    assert g.tokens.size == 4


def test_append_load_and_turns() -> None:
    assert append_load(10.0, 0.005) == pytest.approx(0.05)
    sessions = load_scenario(EXAMPLE).workload.sessions
    assert isinstance(sessions, SessionsSpec)
    pmf = turns_pmf(sessions)
    assert pmf.sum() == pytest.approx(1.0)
    assert pmf @ np.arange(1, pmf.size + 1) == pytest.approx(3.1, rel=1e-4)


def _sessions() -> SessionWorkload:
    return SessionWorkload(1.0, (0.2, 0.3, 0.5), 1000.0, 400.0, 200.0, ThinkTime("exponential", 10.0), 0.0)


def test_held_probability_affine_and_one_in_d() -> None:
    """With room for every history the previous turn's instance holds it: f_k = 1 (affine), 1/D (load-balanced)."""
    affine, _ = held_probability(_sessions(), 1e12, 4, affine=True)
    spread, _ = held_probability(_sessions(), 1e12, 4, affine=False)
    assert affine[0] == 0.0
    assert spread[0] == 0.0
    assert affine[1:] == pytest.approx(1.0, abs=1e-6)
    assert spread[1:] == pytest.approx(0.25, abs=1e-6)
    none, held = held_probability(_sessions(), 0.0, 4, affine=True)
    assert np.all(none == 0.0)
    assert held == 0.0


# ------------------------------------------------------------------------------------------- the model
@pytest.mark.slow
def test_pd_leaves_the_model_unchanged() -> None:
    sc = _policy("pd")
    res = with_cache_rate(resolve(sc, open_catalog()), 10.0)
    model = build_model(res)
    assert placement_of(model) is None
    assert place_turns(model) is model
    assert DECODE_CLASS not in (model.cache.names if model.cache is not None else ())


@pytest.mark.slow
def test_ppd_model_at_ten_rps() -> None:
    """Turns on decode leave the prefill pool and the link; decode rows wait for no prefill, only for the decode
    step in flight (ppd_boundary); the decode step stretches by 1/(1 − ρ_a)."""
    sc = _policy("ppd")
    res = with_cache_rate(resolve(sc, open_catalog()), 10.0)
    plain = build_model(dataclasses.replace(res, cache=dataclasses.replace(res.cache, spec=_policy("pd").cache)))
    model = build_model(res)
    p = placement_of(model)
    assert p is not None
    assert 0.0 < p.share_on_decode < 1.0 - float(p.turn_share[0]) + 1e-9  # Turn 1 never goes to decode
    assert p.tpot_factor == pytest.approx(1.0 / (1.0 - p.rho_append), rel=0.05)
    rate = np.array([10.0])
    util, util0 = model.utilisation(rate), plain.utilisation(rate)
    # the link time per transfer is not quite proportional to its bytes (fixed costs per transfer): 1 %
    assert util["link"][0] == pytest.approx(util0["link"][0] * (1.0 - p.transfer_reduction), rel=0.01)
    assert util["prefill"][0] < util0["prefill"][0]
    wait, _ = model.pool.wait(rate)
    rows = p.decode_rows.astype(bool)
    k = model.res.lengths.input_tokens.size
    np.testing.assert_allclose(
        wait.mean_s[0, rows], p.boundary.mean_s + np.sum(p.append_excess_s * p.append_prob, axis=1)
    )
    assert 0.0 < p.boundary.mean_s <= p.boundary.span_s
    assert p.append_excess_s.shape == p.append_prob.shape == (k, p.append_prob.shape[1])
    np.testing.assert_allclose(p.append_prob.sum(axis=1), 1.0)
    assert p.arrival is not None  # convention A: the prefill-side rows' decode side is part of their wait
    assert p.arrival.mean_s > 0.0
    assert np.all(wait.mean_s[0, ~rows] > 0.0)
    assert model.cache is not None
    assert model.cache.names[-1] == DECODE_CLASS
    assert plain.cache is not None  # the prefill caches keep only the turns left on the prefill side
    assert model.cache.token_hit_ratio < plain.cache.token_hit_ratio
    assert sum(t.token_hit_ratio for t in model.cache.tiers) == pytest.approx(model.cache.token_hit_ratio)
    assert model.cache.weights.sum(axis=1) == pytest.approx(1.0)


@pytest.mark.slow
def test_report_turn_ttfts_and_gain() -> None:
    sc = _policy("ppd")
    res = with_cache_rate(resolve(sc, open_catalog()), 10.0)
    model = build_model(res)
    report = ppd_report(res, model, lambda r: 1.0)
    assert report is not None
    assert report.ttft_turn2_p90_s < report.ttft_turn1_p90_s  # appends on decode skip the prefill queue and link
    assert report.gain(5.0) == pytest.approx(5.0)
    assert report.to_document(5.0)["gain_vs_pd"] == pytest.approx(5.0)
    assert report.bytes_saved_per_s == pytest.approx(
        placement_of(model).bytes_saved_per_request * report.rate_rps  # type: ignore[union-attr]
    )
    assert "runs as plain disaggregation" in ENGINE_NOTE


# ------------------------------------------------------------------------------------------- search and bad input
def test_search_multiplies_caching_on_variants_by_the_policies() -> None:
    sc = load_scenario(EXAMPLE)
    variants = cache_variants(sc)
    policies = [v.turn_placement.policy for v in variants if v is not None]
    assert policies == ["pd", "ppd", "score", "threshold"]
    assert {c.turn_placement.policy for c in colocated_caches(variants) if c is not None} == {"pd"}


def test_search_refuses_ppd_without_sessions() -> None:
    sc = load_scenario(EXAMPLE)
    plain = load_scenario(Path(__file__).parents[2] / "examples" / "default.yaml")
    assert sc.search is not None
    bad = plain.model_copy(update={"search": sc.search, "cache": None})
    with pytest.raises(SpecError, match="sessions workload"):
        cache_variants(bad)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"mode": "colocated"}, "mode disaggregated"),
        ({"workload": "chat"}, "sessions workload"),
        ({"prefix_caching": False}, "prefix_caching: true"),
    ],
)
def test_scenario_refuses_ppd_it_cannot_place(tmp_path: Path, change: dict[str, Any], why: str) -> None:
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text())
    doc.pop("search")
    if change.get("mode") == "colocated":
        doc.update(mode="colocated", colocated={"gpu": "h100-sxm", "tp": 1, "count": 4})
        doc.pop("prefill"), doc.pop("decode")
    elif "workload" in change:
        doc["workload"] = change["workload"]
    else:
        doc["cache"]["prefix_caching"] = False
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match=why):
        load_scenario(path)


def test_threshold_and_think_time_below_zero_are_refused(tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["cache"]["turn_placement"] = {"policy": "threshold", "append_threshold_tokens": -1}
    path = tmp_path / "thr.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match="append_threshold_tokens"):
        load_scenario(path)
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["workload"]["sessions"]["think_time"] = {"dist": "exponential", "mean": "-5s"}
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SpecError, match="think_time"):
        load_scenario(path)


def test_export_header_says_no_engine_runs_ppd() -> None:
    from pdplan.report.export.common import ppd_warnings
    from pdplan.specs.export import ExportPlan

    role = {"gpu": "h100-sxm", "tp": 1, "count": 2}
    plan: dict[str, Any] = {
        "mode": "disaggregated",
        "label": "2P2D ppd",
        "prefill": role,
        "decode": role,
        "granularity": "layer",
        "num_gpus": 4,
        "goodput_rps": 16.07,
    }
    assert ppd_warnings(ExportPlan.model_validate(plan)) == []
    cache = {"turn_placement": {"policy": "pd"}, "report": None}
    assert ppd_warnings(ExportPlan.model_validate({**plan, "cache": cache})) == []
    report = {"turn_placement": {"goodput_pd_rps": 1.29, "gain_vs_pd": 12.46}}
    cache = {"turn_placement": {"policy": "ppd"}, "report": report}
    (line,) = ppd_warnings(ExportPlan.model_validate({**plan, "cache": cache}))
    assert line.startswith(ENGINE_NOTE)
    assert line.endswith("priced with ppd: 16.07 req/s, with pd 1.29 req/s (12.5x)")


def test_csv_columns_of_a_ppd_plan() -> None:
    """The optimize CSV's PPD columns (pdplan/report/cache.py): written only when a plan places turns on decode."""
    report = PpdReport(
        policy="ppd", decode_routing="session-affine", rate_rps=10.0, share_on_decode=0.6, held_turn2=0.9,
        bytes_saved_per_s=2e9, transfer_reduction=0.75, tpot_factor=1.05, steps_with_append=0.2,
        held_history_tokens=1e5, ttft_turn1_p90_s=0.5, ttft_turn2_p90_s=0.05, goodput_pd_rps=4.0,
    )  # fmt: skip
    ppd = SimpleNamespace(cache=SimpleNamespace(turn_placement=report), goodput_rps=10.0)
    plain = SimpleNamespace(cache=SimpleNamespace(turn_placement=None), goodput_rps=3.0)
    assert ppd_csv_columns([plain]) == []  # type: ignore[list-item]
    assert ppd_csv_columns([plain, ppd]) == list(PPD_CSV_COLUMNS)  # type: ignore[list-item]
    record = _ppd_record(ppd)  # type: ignore[arg-type]
    assert list(record) == list(PPD_CSV_COLUMNS)
    assert record["cache_ppd_share_on_decode"] == 0.6
    assert record["cache_ppd_bytes_saved_per_s"] == 2e9
    assert record["cache_ppd_gain_vs_pd"] == pytest.approx(2.5)
    assert _ppd_record(plain) == {}  # type: ignore[arg-type]
