"""Which prompt bins the turns a PPD policy places come from (pdplan/serving/ppd_bins.py): the classes add up to the
prefix-cache model's turn law, a threshold keeps the short appends' prompts, by hand on fixed lengths."""

from __future__ import annotations

import numpy as np
import pytest
from support.sessions_1p2d import sessions_1p2d

from pdplan.io.catalog import open_catalog
from pdplan.serving.build import build_model, with_cache_rate
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.ppd import AppendGroups
from pdplan.serving.ppd_bins import append_classes, class_bins
from pdplan.serving.ppd_report import placement_of
from pdplan.serving.prefix_cache import turn_bins
from pdplan.serving.resolve import resolve
from pdplan.specs.reuse import SessionsSpec
from pdplan.specs.token_pmf import length_pmf


def _spec(new: dict[str, object], system: int = 0) -> SessionsSpec:
    return SessionsSpec.model_validate(
        {"turns": {"dist": "fixed", "value": 3}, "new_tokens": new, "output_tokens": {"dist": "fixed", "value": 50},
         "think_time": {"dist": "fixed", "value": 1}, "system_prompt_tokens": system}
    )  # fmt: skip


EDGES = np.array([-np.inf, 150.0, 300.0, 450.0, np.inf])


def test_classes_add_up_to_the_turn_law() -> None:
    spec = _spec({"dist": "lognormal", "mean": 100, "sigma": 0.8, "max": 1000}, system=20)
    joint = class_bins(spec, 3, EDGES, 120.0)
    np.testing.assert_allclose(joint.sum(axis=0), turn_bins(spec, 3, EDGES), atol=1e-9)
    law = length_pmf(spec.new_tokens)
    below = float(law.prob[law.values < 120].sum())
    np.testing.assert_allclose(joint[0].sum(axis=1), below, atol=1e-9)  # class 0: the appends below the threshold


def test_threshold_keeps_the_short_appends_prompts_by_hand() -> None:
    # appends 100 or 400 tokens (1/2 each), outputs 50: turn 2's prompt is m1 + 50 + m2; a 200-token threshold places
    # m2 = 100: 250 (bin [150, 300)) or 550 tokens (bin [450, ∞)), 1/4 each; keeps m2 = 400: 550 or 850, 1/4 each
    spec = _spec({"dist": "histogram", "bins": [99.5, 100.5, 399.5, 400.5], "weights": [1, 0, 1]})
    assert length_pmf(spec.new_tokens).values.tolist() == [100, 400]
    joint = class_bins(spec, 3, EDGES, 200.0)
    assert joint[0, 1].tolist() == pytest.approx([0.0, 0.25, 0.0, 0.25])
    assert joint[1:, 1].sum(axis=0).tolist() == pytest.approx([0.0, 0.0, 0.0, 0.5])


def test_classes_are_the_groups_above_the_threshold() -> None:
    values = np.array([100.0, 300.0, 900.0])
    groups = AppendGroups.of(values, np.array([0.5, 0.3, 0.2]), groups=3)
    assert append_classes(values, groups, 200.0).tolist() == [0, 2, 3]


def test_turn_law_of_a_histogram_spec() -> None:
    """A sessions spec whose new tokens follow a histogram (lists inside: not hashable) is binned like any other (it
    raised TypeError from the turn law's cache). New tokens uniform on 100–200, outputs 50: turn 3's prompt is three
    new parts and two outputs, 400–700 tokens; below the 450 edge when the new parts sum below 350, probability
    0.5³/3! = 0.0208 (three uniforms on 0–1 summing below 0.5), within the token grid's rounding."""
    spec = _spec({"dist": "histogram", "bins": [100, 200], "weights": [1.0]})
    bins = turn_bins(spec, 3, EDGES)
    np.testing.assert_allclose(bins.sum(axis=1), 1.0, atol=1e-9)
    assert bins[2, 2] == pytest.approx(0.5**3 / 6, abs=2e-3)
    assert bins[2, 3] == pytest.approx(1.0 - 0.5**3 / 6, abs=2e-3)


def test_turn_bins_of_other_edges_bin_the_same_turn_laws() -> None:
    """The sensitivity rows scale the bin edges (ISL x0.8, x1.2): the turns' laws on the token grid do not depend on
    them and are computed once (prefix_cache._turn_laws), and each binning is the one computed from scratch, bit for
    bit; every turn's row still sums to 1, and by hand: turn 1's prompt (system 20 + one append of 100 or 400) lands
    half below 150 and half in [300, 450) of the x1 edges, half in [120, 240) and half past 360 of the x0.8 ones."""
    from pdplan.serving import prefix_cache

    spec = _spec({"dist": "histogram", "bins": [99.5, 100.5, 399.5, 400.5], "weights": [1, 0, 1]}, system=20)
    prefix_cache._turn_laws.cache_clear()
    prefix_cache._turn_bins_cached.cache_clear()
    edges = [EDGES, EDGES * 0.8, EDGES * 1.2]
    shared = [turn_bins(spec, 3, e) for e in edges]
    assert prefix_cache._turn_laws.cache_info().misses == 1
    for e, bins in zip(edges, shared, strict=True):
        prefix_cache._turn_laws.cache_clear()
        assert np.array_equal(bins, prefix_cache._turn_bins_of(spec, 3, e))
        np.testing.assert_allclose(bins.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(shared[0][0], [0.5, 0.0, 0.5, 0.0], atol=1e-12)
    np.testing.assert_allclose(shared[1][0], [0.0, 0.5, 0.0, 0.5], atol=1e-12)  # 120 on its edge: the bin above


def test_decode_rows_take_their_own_bins_appends() -> None:
    """``ppd`` places every held append, so the placed law is the append law (lognormal, mean 400, σ = 1): over the
    decode rows' mass the bins' laws mix back to it (mean 400 within 3 %: the resolved prompt bins against the class
    grid's), while a long prompt's placed append is longer than a short one's (pdplan.serving.ppd_model._bin_appends,
    issue #24 item 6: the simulator's decode turns computed 214 tokens under 1,000 prompt tokens, 649 over 3,000)."""
    lognormal = {"dist": "lognormal", "mean": 400, "sigma": 1.0, "max": 8192}
    sessions = {
        "turns": {"dist": "geometric", "mean": 3.1},
        "new_tokens": lognormal,
        "output_tokens": {"dist": "lognormal", "mean": 200, "sigma": 1.0, "max": 4096},
        "think_time": {"dist": "exponential", "mean": "5s"},
    }
    sc = sessions_1p2d("geo-think", sessions, {"routing": "affinity", "turn_placement": {"policy": "ppd"}})
    res = with_cache_rate(resolve(sc, open_catalog()), 20.0)
    model = build_model(res)
    assert isinstance(model, DisaggregatedModel)
    p = placement_of(model)
    assert p is not None
    law = length_pmf(_spec(lognormal).new_tokens)
    tokens = AppendGroups.of(np.asarray(law.values, dtype=np.float64), law.prob).tokens
    assert p.append_prob.shape == (res.lengths.input_tokens.size, tokens.size)
    np.testing.assert_allclose(p.append_prob.sum(axis=1), 1.0)
    per_bin = p.append_prob @ tokens
    k = res.lengths.input_tokens.size
    rows = np.asarray(model.bin_prob).reshape(k, -1)[:, -1]
    assert float(rows @ per_bin) / float(rows.sum()) == pytest.approx(float(law.prob @ law.values), rel=0.03)
    reps = res.lengths.input_tokens
    short, long = (reps < 1000) & (rows > 0), reps > 3000
    assert float(rows[long] @ per_bin[long]) / float(rows[long].sum()) > 1.5 * float(
        rows[short] @ per_bin[short]
    ) / float(rows[short].sum())
