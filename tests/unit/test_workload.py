"""Workload loading (file forms, schema version), presets, binning (docs/queueing.md §5.1), context-window clipping
(the clipped share of a preset against its exact tail), traces and sampling."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from support.trace_files import write_trace

from pdplan.errors import SpecError
from pdplan.io.workloads import list_presets, load_preset_workload, load_workload
from pdplan.specs.length_laws import LognormalDist
from pdplan.specs.workload import WorkloadSpec
from pdplan.workload.bins import JointLengths, discretize, sample, trace_arrivals_s


def _spec(inp: dict[str, object], out: dict[str, object]) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"input_tokens": inp, "output_tokens": out})


LOGNORMAL = {"dist": "lognormal", "mu": 7.0, "sigma": 1.0, "min": 1, "max": 32768}
FIXED_128 = {"dist": "fixed", "value": 128}


def test_fixed_lengths_give_exactly_one_bin() -> None:
    joint = discretize(_spec({"dist": "fixed", "value": 2048}, FIXED_128))
    assert joint.prob.shape == (1, 1)
    assert joint.prob[0, 0] == 1.0
    assert joint.mean_input() == 2048.0
    assert joint.mean_output() == 128.0
    assert joint.clipped_fraction == 0.0


def test_lognormal_binning_preserves_mean_and_sorts_bins() -> None:
    spec = _spec(LOGNORMAL, FIXED_128)
    joint = discretize(spec)
    d = stats.lognorm(s=1.0, scale=math.exp(7.0))
    mass = d.cdf(32768) - d.cdf(1)
    exact = d.expect(lambda x: x, lb=1, ub=32768) / mass  # independent of our closed form
    assert joint.mean_input() == pytest.approx(exact, rel=1e-6)
    assert joint.prob.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(np.diff(joint.input_tokens) > 0)
    assert joint.prob.shape == (64, 1)


def test_tail_has_its_own_bins() -> None:
    joint = discretize(_spec(LOGNORMAL, FIXED_128))
    marginal = joint.input_marginal()
    # cuts snap to whole token counts (half-integer edges): each tail bin moves by < one count's mass
    np.testing.assert_allclose(marginal[-3:], [0.005, 0.004, 0.001], rtol=1e-3)
    p999 = LognormalDist.model_validate(LOGNORMAL).ppf(np.array([0.999]))[0]
    assert joint.input_tokens[-1] > p999  # the top 0.1 % is represented beyond P99.9


def test_independent_joint_is_outer_product_and_moments() -> None:
    spec = _spec(LOGNORMAL, {"dist": "uniform", "min": 10, "max": 500})
    joint = discretize(spec, max_bins=32)
    np.testing.assert_allclose(joint.prob, np.outer(joint.input_marginal(), joint.output_marginal()), atol=1e-15)
    assert joint.mean_output() == pytest.approx(255.0, rel=1e-9)
    assert joint.mean_input_times_output() == pytest.approx(joint.mean_input() * 255.0, rel=1e-9)
    assert joint.expect(lambda lin, n: lin * lin) == pytest.approx(joint.input_moment(2), rel=1e-12)
    assert joint.input_moment(2) >= joint.mean_input() ** 2


def test_histogram_mean_matches_numpy_semantics() -> None:
    edges, weights = [1.0, 100.0, 1000.0, 4000.0], [5.0, 3.0, 2.0]
    joint = discretize(_spec({"dist": "histogram", "bins": edges, "weights": weights}, FIXED_128))
    mids = (np.array(edges[:-1]) + np.array(edges[1:])) / 2
    # bins are whole-count ranges (the sampled law): narrow bins at the edges take the counts' own
    # mean, which differs from the continuous law's by far less than a token here
    assert joint.mean_input() == pytest.approx(float(np.dot(mids, weights) / 10.0), abs=0.01)


def test_normal_is_truncated_parent() -> None:
    spec = _spec({"dist": "normal", "mean": 1000, "std": 400, "min": 500, "max": 3000}, FIXED_128)
    a, b = (500 - 1000) / 400, (3000 - 1000) / 400
    exact = stats.truncnorm(a, b, loc=1000, scale=400).mean()
    assert discretize(spec).mean_input() == pytest.approx(exact, abs=0.01)  # whole-count bins


def test_lognormal_mean_form_is_the_truncated_mean() -> None:
    dist = LognormalDist(dist="lognormal", mean=27000, sigma=1.0, min=128, max=131072)
    assert dist.mean_tokens() == pytest.approx(27000, rel=1e-9)
    assert dist.mu_resolved < math.log(27000)


def test_presets_load_with_sources() -> None:
    presets = list_presets()
    expected = {
        "chat",
        "splitwise-coding",
        "splitwise-conversation",
        "mooncake-arxiv",
        "mooncake-leval",
        "mooncake-kimi",
        "prfaas-long",
    }
    assert expected <= set(presets)
    for name in presets:
        spec = load_preset_workload(name)
        assert spec.name == name
        assert spec.source.strip()
        assert spec.fit_note.strip()
        assert not spec.is_fit if name == "prfaas-long" else spec.is_fit


@pytest.mark.parametrize(
    ("name", "median_in", "median_out"), [("splitwise-coding", 1500, 13), ("splitwise-conversation", 1020, 129)]
)
def test_splitwise_fits_match_published_medians(name: str, median_in: int, median_out: int) -> None:
    laws = load_preset_workload(name).parametric()
    assert laws is not None
    assert laws[0].median_tokens() == pytest.approx(median_in, rel=5e-3)
    assert laws[1].median_tokens() == pytest.approx(median_out, rel=5e-3)


@pytest.mark.parametrize(
    ("name", "mean_in", "mean_out"),
    [("mooncake-arxiv", 8088, 229), ("mooncake-leval", 19019, 72), ("mooncake-kimi", 7590, 182)],
)
def test_mooncake_fits_match_published_means(name: str, mean_in: int, mean_out: int) -> None:
    joint = discretize(load_preset_workload(name))
    assert joint.mean_input() == pytest.approx(mean_in, rel=1e-6)
    assert joint.mean_output() == pytest.approx(mean_out, rel=1e-6)


def test_prfaas_truncated_mean_is_about_27k() -> None:
    # PrfaaS: lognormal(9.90, 1.00) on [128, 128K], "mean about 27K" (docs/published_results.md §4).
    joint = discretize(load_preset_workload("prfaas-long"))
    assert joint.mean_input() == pytest.approx(27000, rel=0.03)
    assert joint.mean_output() == 1024.0


def test_context_window_clips_and_reports_fraction() -> None:
    spec = load_preset_workload("prfaas-long")
    window = 32768
    joint = discretize(spec, context_window=window)
    laws = spec.parametric()
    assert laws is not None
    exact = 1.0 - float(laws[0].cdf(np.array([window - 1024.0]))[0])  # output fixed -> exact
    assert joint.clipped_fraction == pytest.approx(exact, rel=1e-9)
    assert 0.2 < joint.clipped_fraction < 0.4
    assert joint.prob.sum() == pytest.approx(1.0, abs=1e-12)
    assert joint.input_tokens.max() <= window - 1
    l_s, n_s = sample(spec, 200_000, np.random.default_rng(7), context_window=window)
    assert np.all(l_s + n_s <= window)
    assert joint.mean_input() == pytest.approx(l_s.mean(), rel=0.01)
    assert joint.mean_output() == pytest.approx(n_s.mean(), rel=0.01)


def test_window_that_fits_everything_changes_nothing() -> None:
    spec = _spec(LOGNORMAL, FIXED_128)
    plain, windowed = discretize(spec), discretize(spec, context_window=32768 + 128)
    np.testing.assert_array_equal(plain.prob, windowed.prob)
    assert windowed.clipped_fraction == 0.0


def test_median_input_beyond_window_is_an_error() -> None:
    with pytest.raises(SpecError, match="median input"):
        discretize(load_preset_workload("mooncake-leval"), context_window=8192)


def _write_trace(folder: Path, rows: list[tuple[int, int, float]]) -> Path:
    lines = ["input_tokens,output_tokens,arrival_s"] + [f"{a},{b},{t}" for a, b, t in rows]
    (folder / "traces").mkdir()
    (folder / "traces" / "t.csv").write_text("\n".join(lines) + "\n")
    yaml_path = folder / "wl.yaml"
    yaml_path.write_text("trace: {file: traces/t.csv}\narrival: trace\n")
    return yaml_path


def test_trace_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    lin = rng.integers(1, 5000, 500)
    out = rng.integers(1, 300, 500)
    rows = [(int(a), int(b), 0.1 * i) for i, (a, b) in enumerate(zip(lin, out, strict=True))]
    spec = load_workload(_write_trace(tmp_path, rows))
    assert spec.trace is not None
    assert spec.trace.file == tmp_path / "traces" / "t.csv"
    joint = discretize(spec)
    assert joint.mean_input() == pytest.approx(lin.mean(), rel=1e-12)
    assert joint.mean_output() == pytest.approx(out.mean(), rel=1e-12)
    assert joint.input_tokens.size <= 64
    assert joint.mean_input_times_output() == pytest.approx(np.mean(lin * out), rel=0.05)
    np.testing.assert_allclose(trace_arrivals_s(spec), 0.1 * np.arange(500))
    l_s, n_s = sample(spec, 1000, np.random.default_rng(0))
    assert set(zip(l_s, n_s, strict=True)) <= set(zip(lin, out, strict=True))


def test_small_trace_keeps_exact_joint(tmp_path: Path) -> None:
    spec = load_workload(_write_trace(tmp_path, [(100, 10, 0.0), (100, 10, 1.0), (900, 50, 2.0)]))
    joint = discretize(spec)
    np.testing.assert_array_equal(joint.input_tokens, [100.0, 900.0])
    np.testing.assert_array_equal(joint.output_tokens, [10.0, 50.0])
    np.testing.assert_allclose(joint.prob, [[2 / 3, 0.0], [0.0, 1 / 3]])


def test_trace_as_input_dist_form(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("input_tokens,output_tokens\n10,5\n20,7\n")
    path = tmp_path / "wl.yaml"
    path.write_text("input_tokens: {dist: trace, file: t.csv}\n")
    assert discretize(load_workload(path)).mean_input() == 15.0


def test_sample_is_seeded_and_integer() -> None:
    spec = _spec(LOGNORMAL, {"dist": "uniform", "min": 1, "max": 4})
    a = sample(spec, 1000, np.random.default_rng(42))
    b = sample(spec, 1000, np.random.default_rng(42))
    np.testing.assert_array_equal(a[0], b[0])
    assert a[0].dtype == np.int64
    assert a[0].min() >= 1
    assert a[0].max() <= 32768
    assert set(np.unique(a[1])) == {1, 2, 3, 4}


def test_joint_lengths_is_read_only() -> None:
    joint = JointLengths(np.array([1.0]), np.array([2.0]), np.array([[1.0]]))
    with pytest.raises(ValueError, match="read-only"):
        joint.prob[0, 0] = 0.5
    with pytest.raises(ValueError, match="shape"):
        JointLengths(np.array([1.0]), np.array([2.0, 3.0]), np.array([[1.0]]))


def test_trace_given_as_a_bare_file_name(tmp_path: Path) -> None:
    write_trace(tmp_path)
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
