"""Sessions, shared prefixes and arrival processes as specs (pdplan/specs/reuse.py; docs/reuse_workloads.md §1, §2,
§4): hand-worked laws, the hook into WorkloadSpec and the binning, and every bad input as a one-line SpecError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.validation import check_file
from pdplan.io.workloads import load_workload, workload_from_dict
from pdplan.specs.reuse import SessionsSpec, SharedPrefixSpec
from pdplan.specs.session_laws import GeometricTurns
from pdplan.specs.workload import WorkloadSpec
from pdplan.workload.bins import discretize, sample


def _fixed(n: int) -> dict[str, Any]:
    return {"dist": "fixed", "value": n}


def _sessions(turns: dict[str, Any], new: int = 100, out: int = 50, **extra: Any) -> SessionsSpec:
    data = {"turns": turns, "new_tokens": _fixed(new), "output_tokens": _fixed(out), "think_time": _fixed(0), **extra}
    return SessionsSpec.model_validate(data)


def _pmf(pmf: Any) -> dict[int, float]:
    return {int(v): float(p) for v, p in zip(pmf.values, pmf.prob, strict=True)}


# ------------------------------------------------------------------------------------------- sessions, by hand
def test_two_turn_fixed_sessions() -> None:
    """Turn 1: 100 new tokens; turn 2: 100 + 50 (turn 1's prompt and answer) + 100. Half the requests are each."""
    s = _sessions(_fixed(2))
    assert _pmf(s.prompt_pmf()) == pytest.approx({100: 0.5, 250: 0.5})
    assert _pmf(s.history_pmf()) == pytest.approx({0: 0.5, 150: 0.5})
    assert s.mean_turns() == 2.0
    assert s.mean_history_tokens() == pytest.approx(75.0)
    assert [s.history_tokens_mean_at(k) for k in (1, 2, 3)] == [0.0, 150.0, 300.0]
    assert s.request_rate_per_s(0.5) == 1.0
    assert s.sessions_per_s(1.0) == 0.5


def test_system_prompt_shifts_every_prompt() -> None:
    s = _sessions(_fixed(2), system_prompt_tokens=1000, distinct_system_prompts=4)
    assert _pmf(s.prompt_pmf()) == pytest.approx({1100: 0.5, 1250: 0.5})
    assert s.history_tokens_mean_at(2) == 1150.0


def test_uniform_turns_weight_turn_k_by_sessions_that_reach_it() -> None:
    """T uniform on 1..3: P(K = k) = P(T ≥ k)/E[T] = 1/2, 1/3, 1/6; prompts 10, 10 + 15 + 10, 10 + 2·15 + 10."""
    s = _sessions({"dist": "uniform", "min": 1, "max": 3}, new=10, out=5)
    assert _pmf(s.prompt_pmf()) == pytest.approx({10: 1 / 2, 25: 1 / 3, 40: 1 / 6})
    assert s.mean_history_tokens() == pytest.approx(15 * (1 / 3 + 2 / 6))


def test_histogram_turns_are_a_pmf() -> None:
    s = _sessions({"dist": "histogram", "values": [1, 3], "weights": [1, 1]}, new=10, out=5)
    assert _pmf(s.prompt_pmf()) == pytest.approx({10: 0.5, 25: 0.25, 40: 0.25})


def test_geometric_turns_mean_three_point_one() -> None:
    """PPD's ShareGPT sessions average 3.1 turns (docs/mission_features.md §2.2): E[K − 1] = mean − 1."""
    s = _sessions({"dist": "geometric", "mean": 3.1}, new=200, out=300)
    assert s.mean_turns() == pytest.approx(3.1)
    assert s.mean_history_tokens() == pytest.approx(2.1 * 500)
    assert s.history_pmf().mean() == pytest.approx(2.1 * 500, rel=1e-9)
    assert s.prompt_pmf().mean() == pytest.approx(2.1 * 500 + 200, rel=1e-9)
    ratio = GeometricTurns(dist="geometric", mean=3.1).ratio
    assert _pmf(s.prompt_pmf())[200] == pytest.approx(1 - ratio)  # P(K = 1) = 1 − q


def test_one_turn_sessions_are_their_new_tokens() -> None:
    s = SessionsSpec.model_validate(
        {
            "turns": _fixed(1),
            "new_tokens": {"dist": "uniform", "min": 1, "max": 3},
            "output_tokens": _fixed(1),
            "think_time": {"dist": "exponential", "mean": "30s"},
            "system_prompt_tokens": 7,
        }
    )
    assert _pmf(s.prompt_pmf()) == pytest.approx({8: 1 / 3, 9: 1 / 3, 10: 1 / 3})
    assert _pmf(s.history_pmf()) == {7: 1.0}


def test_random_parts_convolve_across_turns() -> None:
    """Two turns, U uniform on 1..3, O = 1: turn 2 is U₁ + 1 + U₂, triangular on 3..7."""
    s = SessionsSpec.model_validate(
        {
            "turns": _fixed(2),
            "new_tokens": {"dist": "uniform", "min": 1, "max": 3},
            "output_tokens": _fixed(1),
            "think_time": _fixed(0),
        }
    )
    want = {1: 1 / 6, 2: 1 / 6, 3: 1 / 6 + 1 / 18, 4: 2 / 18, 5: 3 / 18, 6: 2 / 18, 7: 1 / 18}
    assert _pmf(s.prompt_pmf()) == pytest.approx(want)


def test_rates_and_think_times() -> None:
    s = _sessions(_fixed(4), rate={"sessions_per_s": 0.25})
    assert s.nominal_request_rate_per_s() == 1.0
    assert _sessions(_fixed(4), rate={"requests_per_s": 3}).nominal_request_rate_per_s() == 3.0
    assert _sessions(_fixed(4)).nominal_request_rate_per_s() is None
    laws = {
        "fixed": ({"dist": "fixed", "value": "500ms"}, 0.5, 0.0),
        "exponential": ({"dist": "exponential", "mean": 30}, 30.0, 1.0),
        "lognormal": ({"dist": "lognormal", "mean": "1 min", "sigma": 1.0}, 60.0, np.expm1(1.0)),
        "uniform": ({"dist": "uniform", "min": 0, "max": "10s"}, 5.0, 1 / 3),
    }
    for name, (law, mean, scv) in laws.items():
        think = _sessions(_fixed(2), think_time=law).think_time
        assert think.mean_s() == pytest.approx(mean)
        assert think.scv() == pytest.approx(scv)
        draws = think.ppf(np.linspace(0.0005, 0.9995, 4000))
        assert draws.mean() == pytest.approx(mean, rel=0.02)
        at_30 = think.cdf(think.ppf(np.array([0.3])))[0]
        assert at_30 == (1.0 if name == "fixed" else pytest.approx(0.3, abs=1e-9))
    point = _sessions(_fixed(2), think_time={"dist": "uniform", "min": 3, "max": 3}).think_time
    assert point.cdf(np.array([2.9, 3.0])).tolist() == [0.0, 1.0]
    assert point.scv() == 0.0


# ------------------------------------------------------------------------------------------- shared prefixes
def test_zipf_popularity_and_prompt_law() -> None:
    spec = SharedPrefixSpec.model_validate(
        {
            "num_prefixes": 3,
            "prefix_tokens": _fixed(100),
            "question_tokens": {"dist": "uniform", "min": 1, "max": 2},
            "output_tokens": _fixed(1),
            "popularity": {"kind": "zipf", "s": 1.0},
            "questions_per_prefix": 4,
        }
    )
    assert spec.prefix_probabilities() == pytest.approx([6 / 11, 3 / 11, 2 / 11])
    assert _pmf(spec.prompt_pmf()) == pytest.approx({101: 0.5, 102: 0.5})
    assert spec.mean_prefix_tokens() == 100
    assert spec.distinct_prompts() == 12
    flat = SharedPrefixSpec.model_validate({**spec.model_dump(), "popularity": {"kind": "zipf", "s": 0.0}})
    assert flat.prefix_probabilities() == pytest.approx([1 / 3] * 3)


# ------------------------------------------------------------------------------------------- arrivals
@pytest.mark.parametrize(
    ("arrival", "stored", "ca2"),
    [
        ("poisson", "poisson", 1.0),
        ({"process": "poisson"}, "poisson", 1.0),
        ("constant", None, 0.0),
        ({"process": "gamma", "cv": 2}, None, 4.0),
        ({"process": "gamma", "cv": 1}, None, 1.0),
    ],
)
def test_arrival_forms(arrival: Any, stored: str | None, ca2: float) -> None:
    spec = WorkloadSpec.model_validate({"input_tokens": _fixed(10), "output_tokens": _fixed(5), "arrival": arrival})
    if stored is not None:
        assert spec.arrival == stored
    assert spec.arrival_process().ca2 == ca2
    assert WorkloadSpec.model_validate(spec.model_dump()) == spec  # a scenario's revalidation round-trips


# ------------------------------------------------------------------------------------------- in a workload
def _workload(tmp_path: Path, text: str) -> WorkloadSpec:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    return load_workload(path)


SESSIONS_YAML = """\
sessions:
  turns: {dist: fixed, value: 2}
  new_tokens: {dist: fixed, value: 100}
  output_tokens: {dist: fixed, value: 50}
  think_time: {dist: exponential, mean: 30s}
arrival: {process: gamma, cv: 2}
"""


def test_sessions_workload_bins_and_samples(tmp_path: Path) -> None:
    spec = _workload(tmp_path, SESSIONS_YAML)
    joint = discretize(spec)
    assert joint.input_tokens.tolist() == [100.0, 250.0]
    assert joint.input_marginal() == pytest.approx([0.5, 0.5])
    assert joint.output_tokens.tolist() == [50.0]
    lin, out = sample(spec, 4000, np.random.default_rng(0))
    assert set(lin.tolist()) == {100, 250}
    assert set(out.tolist()) == {50}
    assert check_file(tmp_path / "w.yaml").kind == "workload"


def test_shared_prefix_workload_bins(tmp_path: Path) -> None:
    spec = _workload(
        tmp_path,
        "shared_prefix:\n  num_prefixes: 8\n  prefix_tokens: {dist: fixed, value: 1000}\n"
        "  question_tokens: {dist: lognormal, mean: 200, sigma: 1.0, max: 4096}\n"
        "  output_tokens: {dist: fixed, value: 100}\n  popularity: {kind: zipf, s: 0.9}\n",
    )
    assert spec.shared_prefix is not None
    joint = discretize(spec)
    assert joint.mean_input() == pytest.approx(spec.shared_prefix.prompt_pmf().mean(), rel=1e-6)
    assert joint.input_tokens.min() >= 1001


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            SESSIONS_YAML.replace("value: 2}", "value: 0}", 1),
            "sessions.turns.fixed.value: Input should be greater than or",
        ),
        (
            SESSIONS_YAML.replace("value: 2}", "value: 20000}", 1),
            "sessions.turns.fixed.value: Input should be less than",
        ),
        (SESSIONS_YAML.replace("{dist: fixed, value: 2}", "{dist: geometric, mean: 0.5}"), "turns.geometric.mean"),
        (SESSIONS_YAML.replace("{dist: fixed, value: 2}", "{dist: uniform, min: 3, max: 2}"), "min (3) must be <= max"),
        (
            SESSIONS_YAML.replace("{dist: fixed, value: 2}", "{dist: histogram, values: [2, 1], weights: [1, 1]}"),
            "strictly increasing turn counts",
        ),
        (SESSIONS_YAML.replace("exponential, mean: 30s", "fixed, value: -1"), "sessions.think_time.fixed.value: Input"),
        (SESSIONS_YAML.replace("exponential, mean: 30s", "fixed, value: -5s"), "greater than or equal to 0"),
        (SESSIONS_YAML.replace("exponential, mean: 30s", "uniform, min: 5, max: 1"), "min (5.0 s) must be <= max"),
        (SESSIONS_YAML.replace("mean: 30s", "mean: soon"), "think_time.exponential.mean: cannot read 'soon'"),
        (
            SESSIONS_YAML.replace("  turns:", "  turn_count: 3\n  turns:"),
            "sessions.turn_count: unknown field; allowed: turns",
        ),
        (SESSIONS_YAML + "input_tokens: {dist: fixed, value: 5}\n", "give either sessions or input_tokens"),
        (SESSIONS_YAML.replace("cv: 2", "cv: 0"), "arrival.gamma.cv: Input should be greater than 0"),
        (
            SESSIONS_YAML.replace("{process: gamma, cv: 2}", "bursty"),
            "unknown arrival process 'bursty'; allowed: poisson",
        ),
        (SESSIONS_YAML.replace("{process: gamma, cv: 2}", "{process: poisson, cv: 2}"), "poisson takes no parameters"),
        (
            SESSIONS_YAML.replace("cv: 2}", "cv: 2, shape: 3}"),
            "arrival.gamma.shape: unknown field; allowed: process, cv",
        ),
        (
            SESSIONS_YAML.replace("  turns:", "  rate: {sessions_per_s: 1, requests_per_s: 2}\n  turns:"),
            "sessions.rate: give exactly one of sessions_per_s",
        ),
    ],
    ids=lambda v: None,
)
def test_bad_session_inputs_name_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        _workload(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(tmp_path / "w.yaml"))
    assert expected in message, message


SHARED_YAML = """\
shared_prefix:
  num_prefixes: 10
  prefix_tokens: {dist: fixed, value: 100}
  question_tokens: {dist: fixed, value: 50}
  output_tokens: {dist: fixed, value: 50}
  popularity: {kind: zipf, s: 1.2}
"""


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("s: 1.2", "s: 12", "shared_prefix.popularity.zipf.s: Input should be less than or equal to 10"),
        ("s: 1.2", "s: -0.5", "shared_prefix.popularity.zipf.s: Input should be greater than or equal to 0"),
        ("{kind: zipf, s: 1.2}", "zipf", "shared_prefix.popularity.zipf.s: required field is missing"),
        ("{kind: zipf, s: 1.2}", "pareto", "shared_prefix.popularity"),
        (
            "num_prefixes: 10",
            "num_prefixes: 0",
            "shared_prefix.num_prefixes: Input should be greater than or equal to 1",
        ),
        ("value: 100}", "value: 0}", "shared_prefix.prefix_tokens.fixed.value"),
    ],
)
def test_bad_shared_prefix_inputs(tmp_path: Path, old: str, new: str, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        _workload(tmp_path, SHARED_YAML.replace(old, new))
    assert "\n" not in str(info.value)
    assert expected in str(info.value), str(info.value)


def test_only_one_kind_of_workload(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="give one of trace, sessions or shared_prefix, not sessions and shared_prefix"):
        _workload(tmp_path, SESSIONS_YAML + SHARED_YAML)
    with pytest.raises(
        SpecError, match=r"missing input_tokens and output_tokens \(or a trace, sessions or shared_prefix"
    ):
        workload_from_dict({"arrival": "constant"}, source="inline", base_dir=tmp_path)
