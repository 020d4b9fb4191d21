"""Invariants of sessions, shared prefixes and arrival corrections over random valid specs (pdplan/specs/reuse.py,
pdplan/specs/token_pmf.py, pdplan/queueing/arrivals.py), one-turn sessions and one-token outputs included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdplan.queueing.arrivals import gg1_wait_scale
from pdplan.queueing.erlang import erlang_c
from pdplan.queueing.gig1 import delay_probability, gig1_wait, gigc_delay_probability, gigc_wait, klb_factor
from pdplan.queueing.mg1 import mg1_wait_distribution
from pdplan.specs.reuse import SessionsSpec, SharedPrefixSpec
from pdplan.specs.token_pmf import length_pmf
from pdplan.specs.workload import WorkloadSpec
from pdplan.workload.bins import discretize

PROPS = settings(deadline=None, max_examples=60)


@st.composite
def part_laws(draw: st.DrawFn, top: int = 60) -> dict[str, Any]:
    """A fixed (one token included) or uniform token law."""
    lo = draw(st.integers(1, top))
    if draw(st.booleans()):
        return {"dist": "fixed", "value": lo}
    return {"dist": "uniform", "min": lo, "max": draw(st.integers(lo, top + 20))}


@st.composite
def turn_laws(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["fixed", "uniform", "geometric", "histogram"]))
    if kind == "fixed":
        return {"dist": "fixed", "value": draw(st.integers(1, 12))}
    if kind == "uniform":
        lo = draw(st.integers(1, 8))
        return {"dist": "uniform", "min": lo, "max": draw(st.integers(lo, 12))}
    if kind == "geometric":
        return {"dist": "geometric", "mean": draw(st.floats(1.0, 6.0))}
    values = sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=4)))
    weights = draw(st.lists(st.floats(0.1, 5.0), min_size=len(values), max_size=len(values)))
    return {"dist": "histogram", "values": values, "weights": weights}


@st.composite
def sessions(draw: st.DrawFn) -> SessionsSpec:
    return SessionsSpec.model_validate(
        {
            "turns": draw(turn_laws()),
            "new_tokens": draw(part_laws()),
            "output_tokens": draw(part_laws()),
            "think_time": {"dist": "exponential", "mean": draw(st.floats(0.1, 100.0))},
            "system_prompt_tokens": draw(st.integers(0, 2000)),
        }
    )


@PROPS
@given(sessions())
def test_session_laws_keep_their_means(s: SessionsSpec) -> None:
    """E[prompt] = S + E[K − 1]·(E[U] + E[O]) + E[U] and E[history] = S + E[K − 1]·(E[U] + E[O]), up to the masses
    below 1e-12 token_pmf drops (FFT round-off and a geometric law's far tail)."""
    new_mean = length_pmf(s.new_tokens).mean()
    prompt, history = s.prompt_pmf(), s.history_pmf()
    assert prompt.prob.sum() == pytest.approx(1.0)
    assert history.mean() == pytest.approx(s.mean_history_tokens(), rel=1e-7, abs=1e-9)
    assert prompt.mean() == pytest.approx(s.mean_history_tokens() + new_mean, rel=1e-7)
    assert prompt.values[0] == s.system_prompt_tokens + length_pmf(s.new_tokens).values[0]
    assert history.values[0] == s.system_prompt_tokens  # the first turn has no history
    assert prompt.step == 1  # small laws stay exact on whole tokens


@PROPS
@given(sessions())
def test_session_workload_bins_to_its_prompt_law(s: SessionsSpec) -> None:
    spec = WorkloadSpec(sessions=s)
    joint = discretize(spec)
    assert joint.prob.sum() == pytest.approx(1.0)
    # exact on whole tokens up to MAX_HISTOGRAM_BINS support points; a wider law is re-binned (token_pmf docstring)
    assert joint.mean_input() == pytest.approx(s.prompt_pmf().mean(), rel=1e-5)
    assert joint.mean_output() == pytest.approx(length_pmf(s.output_tokens).mean(), rel=1e-9)


@PROPS
@given(part_laws(), part_laws(), st.integers(0, 500))
def test_one_turn_sessions_are_their_first_turn(new: dict[str, Any], out: dict[str, Any], system: int) -> None:
    s = SessionsSpec.model_validate(
        {
            "turns": {"dist": "fixed", "value": 1},
            "new_tokens": new,
            "output_tokens": out,
            "think_time": {"dist": "fixed", "value": 0},
            "system_prompt_tokens": system,
        }
    )
    part = length_pmf(s.new_tokens)
    assert s.prompt_pmf().values.tolist() == (part.values + system).tolist()
    assert s.prompt_pmf().prob == pytest.approx(part.prob)
    assert s.history_pmf().values.tolist() == [system]


@PROPS
@given(
    st.integers(1, 2000),
    st.floats(0.0, 10.0),
    part_laws(top=500),
    part_laws(top=500),
)
def test_shared_prefix_laws(n: int, s: float, prefix: dict[str, Any], question: dict[str, Any]) -> None:
    spec = SharedPrefixSpec.model_validate(
        {
            "num_prefixes": n,
            "prefix_tokens": prefix,
            "question_tokens": question,
            "output_tokens": {"dist": "fixed", "value": 1},
            "popularity": {"kind": "zipf", "s": s},
        }
    )
    p = spec.prefix_probabilities()
    assert p.size == n
    assert p.sum() == pytest.approx(1.0)
    assert np.all(np.diff(p) <= 1e-15)
    expected = length_pmf(spec.prefix_tokens).mean() + length_pmf(spec.question_tokens).mean()
    assert spec.prompt_pmf().mean() == pytest.approx(expected, rel=1e-9)


@PROPS
@given(st.floats(0.01, 20.0))
def test_gamma_arrivals_have_ca2_cv_squared(cv: float) -> None:
    spec = WorkloadSpec.model_validate(
        {
            "input_tokens": {"dist": "fixed", "value": 1},
            "output_tokens": {"dist": "fixed", "value": 1},
            "arrival": {"process": "gamma", "cv": cv},
        }
    )
    assert spec.arrival_process().ca2 == pytest.approx(cv * cv)


@PROPS
@given(st.floats(0.0, 16.0), st.floats(0.0, 9.0), st.floats(0.05, 0.95), st.integers(1, 8))
def test_gig_laws_bracket_the_poisson_wait(ca2: float, cs2: float, rho: float, servers: int) -> None:
    """The GI/G/1 and GI/G/c laws (pdplan/queueing/gig1.py): a probability of waiting in [0, 1], below the Poisson
    queue's for smooth arrivals and above it for bursty ones; the GI/G/1 mean Kingman's times g (c² ≤ 1) or π/ρ
    (c² > 1); the c-server form with C = ρ (one server) is the GI/G/1 law."""
    assert gg1_wait_scale(1.0, cs2) == pytest.approx(1.0)
    # a two-point service law with the drawn c_s²: mass at ~0 and at 1 + c_s²
    top = 1.0 + cs2
    service, prob = np.array([1e-9, top]), np.array([1.0 - 1.0 / top, 1.0 / top])  # E[S] = 1, c_s² = cs2
    base = mg1_wait_distribution(rho, service, prob)
    law = gig1_wait(base, ca2, cs2)
    load = float(1.0 - base.atom[0])  # ρ of the law (E[S] = 1 + 5e-10 here)
    k, pi = gg1_wait_scale(ca2, cs2), float(delay_probability(load, ca2, cs2))
    assert 0.0 <= 1.0 - law.atom[0] <= 1.0
    want = k * float(klb_factor(load, ca2, cs2)) if ca2 <= 1.0 else k * pi / load
    assert law.mean_s[0] == pytest.approx(base.mean_s[0] * want, rel=1e-9, abs=1e-15)
    one = gigc_wait(base, 1.0 - base.atom, ca2, cs2)  # C = ρ: one server
    assert one.atom[0] == pytest.approx(law.atom[0], abs=1e-12)
    assert one.mean_s[0] == pytest.approx(law.mean_s[0], rel=1e-9, abs=1e-15)
    erl = float(erlang_c(servers, servers * rho)[0])
    pi_c = float(gigc_delay_probability(erl, rho, ca2, cs2))
    assert -1e-12 <= pi_c <= 1.0 + 1e-12
    assert (pi_c <= erl + 1e-12) if ca2 <= 1.0 else (pi_c >= erl - 1e-12)
