"""Whole-token laws of sums of parts and of session turn mixtures (pdplan/specs/token_pmf.py), against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pdplan.specs import token_pmf
from pdplan.specs.length_laws import FixedDist, HistogramDist, LognormalDist, UniformDist
from pdplan.specs.token_pmf import TokenPmf, TurnIndexLaw, length_pmf, sum_of_parts, turn_mixture
from pdplan.workload.bins import bin_distribution


def _pmf(values: list[int], prob: list[float]) -> TokenPmf:
    return TokenPmf(np.array(values), np.array(prob))


def _as_dict(pmf: TokenPmf) -> dict[int, float]:
    return {int(v): float(p) for v, p in zip(pmf.values, pmf.prob, strict=True)}


def test_length_pmf_of_each_kind() -> None:
    assert _as_dict(length_pmf(FixedDist(dist="fixed", value=7))) == {7: 1.0}
    assert _as_dict(length_pmf(UniformDist(dist="uniform", min=3, max=5))) == pytest.approx(
        {3: 1 / 3, 4: 1 / 3, 5: 1 / 3}
    )
    hist = HistogramDist(dist="histogram", bins=[1, 3, 5], weights=[1, 3])
    # rint of a draw uniform within each bin: counts 1..5 get F(k + ½) − F(k − ½), the ends clipped
    assert _as_dict(length_pmf(hist)) == pytest.approx({1: 0.0625, 2: 0.125, 3: 0.25, 4: 0.375, 5: 0.1875})
    law = LognormalDist(dist="lognormal", mean=300, sigma=1.0, min=1, max=8192)
    pmf = length_pmf(law)
    assert pmf.prob.sum() == pytest.approx(1.0)
    assert pmf.mean() == pytest.approx(law.mean_tokens(), abs=0.5)  # rounding to whole tokens moves < ½ token


def test_sum_of_parts_is_the_convolution() -> None:
    a, b = _pmf([1, 2, 4], [0.2, 0.5, 0.3]), _pmf([10, 11], [0.6, 0.4])
    expected: dict[int, float] = {}
    pairs_a, pairs_b = zip(a.values, a.prob, strict=True), zip(b.values, b.prob, strict=True)
    for (va, pa), (vb, pb) in itertools.product(pairs_a, pairs_b):
        expected[int(va + vb) + 3] = expected.get(int(va + vb) + 3, 0.0) + pa * pb
    assert _as_dict(sum_of_parts([a, b], shift=3)) == pytest.approx(expected, abs=1e-12)


def _brute_mixture(weights: list[float], new: TokenPmf, out: TokenPmf, shift: int) -> tuple[dict, dict]:
    """Enumerate every turn index and every draw: prompt = shift + Σ_{j<k}(U_j + O_j) + U_k."""
    prompt: dict[int, float] = {}
    history: dict[int, float] = {}
    step = sum_of_parts([new, out])
    hist = TokenPmf(np.array([0]), np.array([1.0]))
    for w in weights:
        for v, p in zip(hist.values, hist.prob, strict=True):
            history[int(v) + shift] = history.get(int(v) + shift, 0.0) + w * p
        for v, p in _as_dict(sum_of_parts([hist, new])).items():
            prompt[v + shift] = prompt.get(v + shift, 0.0) + w * p
        hist = sum_of_parts([hist, step])
    return prompt, history


def test_turn_mixture_matches_enumeration() -> None:
    new, out = _pmf([3, 5], [0.5, 0.5]), _pmf([1, 2], [0.25, 0.75])
    weights = [0.5, 1 / 3, 1 / 6]  # T uniform on 1..3: P(K = k) = P(T ≥ k)/E[T]
    prompt, history = turn_mixture(TurnIndexLaw(weights=np.array(weights)), new, out, shift=100)
    want_prompt, want_history = _brute_mixture(weights, new, out, 100)
    assert _as_dict(prompt) == pytest.approx(want_prompt, abs=1e-12)
    assert _as_dict(history) == pytest.approx(want_history, abs=1e-12)


def test_geometric_closed_form_matches_a_long_finite_sum() -> None:
    new, out = _pmf([2], [1.0]), _pmf([1, 3], [0.5, 0.5])
    q = 0.6
    geometric, _ = turn_mixture(TurnIndexLaw(geometric_ratio=q), new, out, shift=0)
    weights = (1 - q) * q ** np.arange(80)
    finite, _ = turn_mixture(TurnIndexLaw(weights=weights / weights.sum()), new, out, shift=0)
    common = np.intersect1d(geometric.values, finite.values)
    g, f = _as_dict(geometric), _as_dict(finite)
    assert max(abs(g[v] - f[v]) for v in common) < 1e-12
    assert geometric.mean() == pytest.approx(2 + (1 / (1 - q) - 1) * 4, rel=1e-9)  # E[K − 1]·E[U + O] + E[U]


def test_coarse_grid_keeps_the_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the cell cap the parts move to a coarser grid: the law says its step and keeps its mean exactly."""
    monkeypatch.setattr(token_pmf, "MAX_CELLS", 64)
    new, out = _pmf([101, 250], [0.3, 0.7]), _pmf([37], [1.0])
    prompt, history = turn_mixture(TurnIndexLaw(weights=np.array([0.5, 0.3, 0.2])), new, out, shift=5)
    assert prompt.step > 1
    e_new, e_out, e_k1 = new.mean(), out.mean(), 0.3 + 2 * 0.2
    assert prompt.mean() == pytest.approx(5 + e_k1 * (e_new + e_out) + e_new, rel=1e-12)
    assert history.mean() == pytest.approx(5 + e_k1 * (e_new + e_out), rel=1e-12)


def test_as_histogram_is_exact_for_whole_tokens() -> None:
    pmf = _pmf([1, 2, 250], [0.25, 0.25, 0.5])
    law = pmf.as_histogram()
    assert law.bins == [1.0, 1.5, 2.5, 249.5, 250.5]  # a count of 1 starts at 1; a gap gets a zero-weight bin
    assert law.weights == [0.25, 0.25, 0.0, 0.5]
    reps, prob = bin_distribution(law, 64)
    assert dict(zip(reps.tolist(), prob.tolist(), strict=True)) == pytest.approx({1.0: 0.25, 2.0: 0.25, 250.0: 0.5})
    # the continuous mean differs only through the count of 1, whose bin [1, 1.5] has midpoint 1.25
    assert law.mean_tokens() == pytest.approx(pmf.mean() + 0.25 * 0.25)


def test_as_histogram_rebins_wide_laws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_pmf, "MAX_HISTOGRAM_BINS", 16)
    pmf = _pmf(list(range(1, 201)), [1 / 200] * 200)
    law = pmf.as_histogram()
    assert len(law.weights) <= 16
    assert law.mean_tokens() == pytest.approx(pmf.mean(), abs=200 / 16 / 2)
    with pytest.raises(ValueError, match="counts >= 1"):
        _pmf([0, 3], [0.5, 0.5]).as_histogram()


def test_token_pmf_checks_and_quantiles() -> None:
    pmf = _pmf([10, 20, 30], [0.2, 0.3, 0.5])
    assert pmf.quantile(0.2) == 10
    assert pmf.quantile(0.21) == 20
    assert pmf.quantile(1.0) == 30
    assert pmf.shifted(5).values.tolist() == [15, 25, 35]
    assert pmf.second_moment() == pytest.approx(0.2 * 100 + 0.3 * 400 + 0.5 * 900)
    with pytest.raises(ValueError, match="increasing"):
        _pmf([3, 2], [0.5, 0.5])


def test_length_pmf_is_kept_by_value() -> None:
    """A law asked for again (an equal law, another object) is the TokenPmf built the first time, read-only and equal
    to a fresh computation; a law differing in one field is its own."""
    token_pmf._LENGTH_PMFS.clear()
    first = length_pmf(LognormalDist(dist="lognormal", mean=400, sigma=1.0, max=8192))
    again = length_pmf(LognormalDist(dist="lognormal", mean=400, sigma=1.0, max=8192))
    assert again is first
    fresh = token_pmf._length_pmf(LognormalDist(dist="lognormal", mean=400, sigma=1.0, max=8192))
    assert np.array_equal(first.values, fresh.values)
    assert np.array_equal(first.prob, fresh.prob)
    with pytest.raises(ValueError, match="read-only"):
        first.prob[0] = 0.0
    other = length_pmf(LognormalDist(dist="lognormal", mean=400, sigma=1.0, max=4096))
    assert other is not first
    assert int(other.values[-1]) == 4096
