"""The ``score`` policy's placement (pdplan/serving/ppd.py, ppd_model.py; issue #24): a group that straddles the
bypass adds its part above the bypass at that part's own mean, worked by hand; where the rule places every append
its placement is ``ppd``'s, and the model built is ``ppd``'s but for the policy's name (examples/chat-ppd.yaml), so
a search shares its goodput searches with its ``ppd`` twin (pdplan/serving/build.py ``PpdProbes``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario
from pdplan.serving.build import PpdProbes, build_model, with_cache_rate
from pdplan.serving.goodput import find_goodput
from pdplan.serving.ppd import AppendGroups, decode_share, placed_law, places_every_append
from pdplan.serving.ppd_report import placement_of
from pdplan.serving.resolve import resolve
from pdplan.specs.cache import TurnPlacementSpec

EXAMPLE = Path(__file__).parents[2] / "examples" / "chat-ppd.yaml"

# Appends of 100, 500 and 700 tokens with probabilities 1/2, 1/4, 1/4, in two equal-mass groups: {100} and {500, 700}
# (mean 600). The bypass of 512 tokens splits the second group: 500 goes to decode by length, 700 as the rule decides.
VALUES = np.array([100.0, 500.0, 700.0])
PROB = np.array([0.5, 0.25, 0.25])
SCORE = TurnPlacementSpec(policy="score", append_threshold_tokens=512)


def test_groups_split_at_the_bypass_by_hand() -> None:
    groups = AppendGroups.of(VALUES, PROB, groups=2)
    assert groups.member.tolist() == [0, 1, 1]
    np.testing.assert_allclose(groups.tokens, [100.0, 600.0])
    mass, mean = groups.above(VALUES, PROB, 512.0)
    np.testing.assert_allclose(mass, [0.0, 0.25])  # only 700 lies at or above the bypass
    np.testing.assert_allclose(mean, [512.0, 700.0])  # a group with nothing above: its mean, at least the bypass


def test_score_placing_the_straddling_group_has_the_laws_mean() -> None:
    """The rule sends the part above the bypass to decode: every append is placed, mean 0.5·100 + 0.25·500 +
    0.25·700 = 350 tokens, the law's (the group's whole mean, 600, floored at the bypass, 512, gave
    50 + 125 + 0.25·max(600, 512) = 325)."""
    groups = AppendGroups.of(VALUES, PROB, groups=2)
    decide = np.array([0.0, 1.0])  # the first group lies wholly below the bypass: its decision is not read
    assert places_every_append(SCORE, VALUES, groups, decide)
    assert decode_share(SCORE, VALUES, PROB, groups, decide) == (1.0, 350.0)
    assert decode_share(TurnPlacementSpec(policy="ppd"), VALUES, PROB, groups, None) == (1.0, 350.0)
    assert placed_law(SCORE, VALUES, PROB, groups, decide).tolist() == PROB.tolist()


def test_score_keeping_the_straddling_group_on_prefill_by_hand() -> None:
    """The rule keeps the part above the bypass on the prefill pool: 100 and 500 placed by length, share 0.75,
    mean (50 + 125)/0.75 = 233.3 tokens."""
    groups = AppendGroups.of(VALUES, PROB, groups=2)
    decide = np.array([1.0, 0.0])
    assert not places_every_append(SCORE, VALUES, groups, decide)
    share, mean = decode_share(SCORE, VALUES, PROB, groups, decide)
    assert (share, mean) == pytest.approx((0.75, 175.0 / 0.75))
    law = placed_law(SCORE, VALUES, PROB, groups, decide)
    np.testing.assert_allclose(law, [0.5, 0.25, 0.0])
    assert (law.sum(), law @ VALUES / law.sum()) == pytest.approx((share, mean))


def test_places_every_append_reads_only_score() -> None:
    groups = AppendGroups.of(VALUES, PROB, groups=2)
    ones = np.ones(2)
    assert not places_every_append(TurnPlacementSpec(policy="threshold"), VALUES, groups, ones)
    assert not places_every_append(SCORE, VALUES, groups, None)
    low = TurnPlacementSpec(policy="score", append_threshold_tokens=50)  # every append at or above the bypass
    assert not places_every_append(low, VALUES, groups, np.array([0.0, 1.0]))
    assert places_every_append(low, VALUES, groups, ones)


def _model(policy: str | TurnPlacementSpec, rate_rps: float) -> Any:
    sc = load_scenario(EXAMPLE)
    assert sc.cache is not None
    spec = policy if isinstance(policy, TurnPlacementSpec) else TurnPlacementSpec(policy=policy)
    cache = sc.cache.model_copy(update={"turn_placement": spec})
    return build_model(with_cache_rate(resolve(sc.model_copy(update={"cache": cache}), open_catalog()), rate_rps))


def _same(x: Any, y: Any) -> bool:
    """Equal bit for bit: arrays element by element (NaN where NaN), dataclasses field by field."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return type(x) is type(y) and all(_same(getattr(x, f.name), getattr(y, f.name)) for f in dataclasses.fields(x))
    if isinstance(x, np.ndarray):
        return isinstance(y, np.ndarray) and x.shape == y.shape and bool(np.array_equal(x, y, equal_nan=True))
    return bool(x == y)


@pytest.mark.slow
def test_score_placing_everything_builds_the_ppd_model() -> None:
    """On examples/chat-ppd.yaml the rule sends every held Turn 2+ to decode (PD's TTFT there is the 25 GbE link's,
    near a second; PPD's tens of ms), so the score model is the ppd model: the same placement, field for field but
    the policy's name, and the same latencies at every rate, bit for bit (the goodput search reads nothing else)."""
    score, ppd = _model("score", 8.0), _model("ppd", 8.0)
    a, b = placement_of(score), placement_of(ppd)
    assert a is not None
    assert b is not None
    assert (a.policy, b.policy) == ("score", "ppd")
    assert a.append_tokens == b.append_tokens == pytest.approx(400.0, rel=1e-6)  # the law's mean (399.25 before)
    for f in dataclasses.fields(a):
        if f.name != "policy":
            assert _same(getattr(a, f.name), getattr(b, f.name)), f.name
    rates = np.array([2.0, 6.0, 9.0])
    left, right = score.snapshot(rates), ppd.snapshot(rates)
    np.testing.assert_array_equal(left.ttft.quantile(0.9), right.ttft.quantile(0.9))
    np.testing.assert_array_equal(left.tpot.quantile(0.9), right.tpot.quantile(0.9))
    np.testing.assert_array_equal(left.attainment(1.0, 0.05), right.attainment(1.0, 0.05))


@pytest.mark.slow
def test_score_placing_everything_reads_its_ppd_twins_search() -> None:
    """``PpdProbes``: the score model placing every append reads the goodput search of its ``ppd`` twin (same
    deployment, bypass threshold, cache rate and start rate), which is its own search's answer bit for bit; a
    ``score`` rule that keeps appends on prefill (a TPOT weight no TTFT gain outweighs) and a ``threshold`` are
    neither read nor kept, and another start rate is another search."""
    slo = load_scenario(EXAMPLE).slo
    score, ppd = _model("score", 8.0), _model("ppd", 8.0)
    probes = PpdProbes()
    twin = probes.goodput(ppd.res, ppd, slo, 8.0)
    assert probes.goodput(score.res, score, slo, 8.0) is twin  # read, not searched again
    assert find_goodput(score, slo, 8.0) == twin  # what the memo stands for
    assert len(probes.found) == 1
    keeps = _model(TurnPlacementSpec(policy="score", tpot_weight=1e6), 8.0)
    kept, placed = placement_of(keeps), placement_of(score)
    assert kept is not None
    assert placed is not None
    assert (kept.as_ppd, placed.as_ppd) == (False, True)
    assert kept.share_on_decode < placed.share_on_decode  # the appends at or above the bypass stay on prefill
    threshold = _model(TurnPlacementSpec(policy="threshold", append_threshold_tokens=256), 8.0)
    for other in (keeps, threshold):
        assert PpdProbes.key(other.res, other, slo, 8.0) is None
        assert probes.goodput(other.res, other, slo, 8.0) == find_goodput(other, slo, 8.0)
    assert len(probes.found) == 1
    probes.goodput(ppd.res, ppd, slo, 7.0)
    assert len(probes.found) == 2


def _same_deep(x: Any, y: Any) -> bool:
    """:func:`_same`, also through tuples, lists and dicts (a model's fields hold them)."""
    if isinstance(x, tuple | list):
        return type(x) is type(y) and len(x) == len(y) and all(_same_deep(a, b) for a, b in zip(x, y, strict=True))
    if isinstance(x, dict):
        return isinstance(y, dict) and x.keys() == y.keys() and all(_same_deep(x[k], y[k]) for k in x)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        fields = dataclasses.fields(x)
        return type(x) is type(y) and all(_same_deep(getattr(x, f.name), getattr(y, f.name)) for f in fields)
    return _same(x, y)


@pytest.mark.slow
def test_score_placing_everything_is_its_ppd_twins_model_renamed() -> None:
    """``PpdProbes.built``: a ``score`` probe whose rule places every append (its decisions alone, on the plain
    model) takes the model its ``ppd`` twin built at the same cache rate with ``res`` and the policy's name, which is
    the model a fresh build gives, field for field and bit for bit, through every nested field; a ``score`` rule that
    keeps appends on prefill, a ``threshold`` and another cache rate are built afresh."""
    from pdplan.serving.disaggregated import unplaced_disaggregated
    from pdplan.serving.ppd_model import places_as_ppd

    score, ppd = _model("score", 8.0), _model("ppd", 8.0)
    keeps = _model(TurnPlacementSpec(policy="score", tpot_weight=1e6), 8.0)
    assert places_as_ppd(unplaced_disaggregated(score.res)[0])
    assert places_as_ppd(unplaced_disaggregated(ppd.res)[0])
    assert not places_as_ppd(unplaced_disaggregated(keeps.res)[0])
    threshold = _model(TurnPlacementSpec(policy="threshold", append_threshold_tokens=256), 8.0)
    assert not places_as_ppd(unplaced_disaggregated(threshold.res)[0])

    probes = PpdProbes()
    twin = probes.built(ppd.res)
    assert _same_deep(twin, ppd)
    taken = probes.built(score.res)
    assert taken.decode is twin.decode  # read from the twin, not priced again
    assert taken.res is score.res
    assert _same_deep(taken, score)  # the model a fresh build gives, every nested field
    assert placement_of(taken).policy == "score"  # type: ignore[union-attr]
    assert placement_of(twin).policy == "ppd"  # type: ignore[union-attr]
    for fresh in (keeps, threshold, _model("score", 6.0)):
        built = probes.built(fresh.res)
        assert built.decode is not twin.decode
        assert _same_deep(built, fresh)
    assert len(probes.models) == 1
