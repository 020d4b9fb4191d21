"""Workload refinements for the serving models (pdplan.workload.quadrature): one-token outputs split off, input
quadrature, and the TPOT convention for one-token outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pdplan.evaluation import evaluate
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving import build_model, resolve
from pdplan.specs.workload import WorkloadSpec
from pdplan.workload.bins import JointLengths, discretize
from pdplan.workload.quadrature import input_quadrature, one_token_fraction, split_one_token


def _workload(output: dict[str, object]) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"input_tokens": {"dist": "fixed", "value": 100}, "output_tokens": output})


def test_one_token_fraction_by_hand() -> None:
    assert one_token_fraction(_workload({"dist": "fixed", "value": 1})) == 1.0
    assert one_token_fraction(_workload({"dist": "fixed", "value": 2})) == 0.0
    assert one_token_fraction(_workload({"dist": "uniform", "min": 1, "max": 4})) == 0.25
    assert one_token_fraction(_workload({"dist": "uniform", "min": 2, "max": 4})) == 0.0
    # lognormal mu = 0, sigma = 1 on [1, 100]: P(X < 1.5 | X ≥ 1) = (Φ(ln 1.5) − ½)/(Φ(ln 100) − ½)
    law = {"dist": "lognormal", "mu": 0.0, "sigma": 1.0, "min": 1, "max": 100}
    from scipy.stats import norm

    expected = (norm.cdf(np.log(1.5)) - 0.5) / (norm.cdf(np.log(100.0)) - 0.5)
    assert one_token_fraction(_workload(law)) == pytest.approx(expected, rel=1e-9)


def test_split_one_token_keeps_mass_and_mean() -> None:
    # Output bins 1.8 (p 0.25), 5 (p 0.75); 10 % of requests have one token: the first bin
    # becomes 1 (p 0.10) and (0.25·1.8 − 0.10)/0.15 = 2.333… (p 0.15).
    lens = JointLengths(np.array([10.0, 20.0]), np.array([1.8, 5.0]), np.array([[0.125, 0.375], [0.125, 0.375]]))
    out = split_one_token(lens, 0.10)
    np.testing.assert_allclose(out.output_tokens, [1.0, 0.35 / 0.15, 5.0])
    np.testing.assert_allclose(out.output_marginal(), [0.10, 0.15, 0.75])
    np.testing.assert_allclose(out.input_marginal(), lens.input_marginal())
    assert out.mean_output() == pytest.approx(lens.mean_output())


def test_split_one_token_spanning_bins() -> None:
    lens = JointLengths(np.array([10.0]), np.array([1.2, 1.4, 3.0]), np.array([[0.2, 0.2, 0.6]]))
    out = split_one_token(lens, 0.3)
    np.testing.assert_allclose(out.output_tokens[:2], [1.0, 1.0])
    np.testing.assert_allclose(out.output_marginal(), [0.2, 0.1, 0.1, 0.6])
    assert split_one_token(lens, 0.0) is lens


def test_input_quadrature_keeps_bin_means() -> None:
    spec = WorkloadSpec.model_validate(
        {
            "input_tokens": {"dist": "lognormal", "mean": 2000, "sigma": 1.0, "min": 1, "max": 16384},
            "output_tokens": {"dist": "fixed", "value": 10},
        }
    )
    lens = discretize(spec, max_bins=24)
    q = input_quadrature(lens.input_tokens, lens.input_marginal(), 8)
    assert q.shape == (lens.input_tokens.size, 8)
    np.testing.assert_allclose(q.mean(axis=1), lens.input_tokens, rtol=1e-12)
    assert np.all(np.diff(q, axis=1) >= 0.0)
    assert np.all(q >= 1.0)
    # a fixed length stays a point
    np.testing.assert_array_equal(input_quadrature(np.array([512.0]), np.array([1.0]), 4), [[512.0] * 4])


def _coding_b() -> object:
    data = {
        "model": "llama-3.1-8b",
        "prefill": {"gpu": "h100-sxm"},
        "decode": {"gpu": "l40s", "count": 2},
        "link": "roce-100g",
        "routing": "random",
        "ttft_convention": "B",
        "workload": "splitwise-coding",
        "slo": {"ttft": "2s", "tpot": "50ms"},
    }
    return scenario_from_dict(data, source="test", base_dir=Path.cwd())


def test_one_token_outputs_have_no_tpot() -> None:
    sc = _coding_b()
    res = resolve(sc, open_catalog())  # type: ignore[arg-type]
    assert res.lengths.output_tokens[0] == 1.0
    p1 = float(res.lengths.output_marginal()[0])
    assert p1 == pytest.approx(one_token_fraction(sc.workload), rel=1e-9)  # type: ignore[attr-defined]
    model = build_model(res)
    snap = model.snapshot(np.array([1.0]))
    assert snap.tpot_defined is not None
    undefined = ~snap.tpot_defined
    assert float(snap.prob[undefined].sum()) == pytest.approx(p1)
    np.testing.assert_array_equal(snap.tpot_ok(1e-6)[0, undefined], 1.0)  # meet any SLO
    reported = snap.tpot_reported
    assert float(reported.prob[undefined].sum()) == 0.0
    assert float(reported.prob.sum()) == pytest.approx(1.0)
    assert evaluate(sc, rate=5.0).operating_point is not None  # type: ignore[arg-type]
