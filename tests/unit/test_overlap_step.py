"""The overlap scheduler's extra step on token 1 in the open-loop serving models (pdplan.serving.ttft ``overlap_s``)
and the simulator's own twin of it (pdplan.sim.overlap_lag): hand-worked shifts, k = 0 unchanged, the screen's
zero-load step, and the closed form's shift against the simulator's iterations."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.overrides import apply_overrides
from pdplan.io.scenario import default_scenario_path, load_scenario, revalidate
from pdplan.queueing.decode import decode_fixed_point
from pdplan.serving.build import build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.overlap_ttft import OverlapTtft, coupled, drain_step_slices, drain_step_var_s2, shifted
from pdplan.serving.resolve import resolve
from pdplan.serving.ttft import overlap_append_steps, overlap_s, overlap_steps
from pdplan.sim import Colocated, Disaggregated, Requests, simulate
from pdplan.sim.batch import Timeline
from pdplan.sim.deployment import sim_deployment
from pdplan.sim.overlap_lag import OverlapLag, overlap_iterations
from pdplan.specs.command_line import ScenarioOverrides
from pdplan.workload.bins import sample

CATALOG = open_catalog()


def _scenario(engine: str, colocated: int = 0) -> Any:
    sc = revalidate(load_scenario(default_scenario_path()), {"engine": engine})
    return apply_overrides(sc, ScenarioOverrides(colocated=colocated)) if colocated else sc


def _without_overlap(model: Any) -> Any:
    """The same model with its engine's overlap steps set to 0 (every other number the same)."""
    hw = model.res.hardware
    role = "colocated" if isinstance(model, ColocatedModel) else "decode"
    inst = getattr(hw, role)
    sched = inst.engine.scheduling.model_copy(update={"overlap_extra_steps": 0.0})
    engine = inst.engine.model_copy(update={"scheduling": sched})
    hw0 = dataclasses.replace(hw, **{role: dataclasses.replace(inst, engine=engine)})
    return dataclasses.replace(model, res=dataclasses.replace(model.res, hardware=hw0))


def test_overlap_s_by_hand() -> None:
    """k steps of the sampling instance's mean step: k = 1 adds one step, k = 2 two, k = 0 nothing."""
    tau = np.array([0.02, 0.0175])
    assert overlap_s(1.0, tau).tolist() == [0.02, 0.0175]
    assert overlap_s(2.0, tau).tolist() == [0.04, 0.035]
    assert overlap_s(0.0, tau).tolist() == [0.0, 0.0]
    assert overlap_steps(None) == 0.0  # kernel time only: no engine, no overlap


def test_append_steps_by_hand() -> None:
    # PPD's decode instance (pdplan/serving/ttft.py overlap_append_steps): τ' = 33.4 ms, ρ_a = 0.3, k = 1: a plain
    # step τ_p = 0.7 × 33.4 = 23.38 ms with probability 0.7, one carrying append work τ_p + τ' = 56.78 ms with 0.3;
    # the mean 0.7 × 23.38 + 0.3 × 56.78 = 16.366 + 17.034 = 33.4 ms, k·τ' as overlap_s.
    points, weights = overlap_append_steps(1.0, np.array([0.0334]), 0.3)
    assert points[0] == pytest.approx([0.02338, 0.05678], rel=1e-12)
    assert weights[0] == pytest.approx([0.7, 0.3], rel=1e-12)
    assert float(points[0] @ weights[0]) == pytest.approx(float(overlap_s(1.0, np.array([0.0334]))[0]), rel=1e-12)
    two, _ = overlap_append_steps(2.0, np.array([0.0334]), 0.3)  # k steps alike
    assert two[0] == pytest.approx(2.0 * points[0], rel=1e-12)
    none, w0 = overlap_append_steps(1.0, np.array([0.0334]), 0.0)  # no appends: the constant k·τ'
    assert none[0, 0] == pytest.approx(0.0334, rel=1e-12)
    assert w0[0, 1] == 0.0


def test_the_profiles_steps() -> None:
    """vLLM 0.12 (the default) and the kernel-only profile have none; SGLang, TensorRT-LLM and vLLM 0.18 one."""
    for name, k in (("vllm", 0.0), ("kernels", 0.0), ("sglang", 1.0), ("trtllm", 1.0), ("vllm-0.18", 1.0)):
        model = build_model(resolve(_scenario(name), CATALOG))
        assert isinstance(model, DisaggregatedModel)
        assert model.overlap_steps == k, name


def test_disaggregated_adds_one_decode_step() -> None:
    """SGLang on the default 2P1D at 4 req/s: TTFT (mean and P90) is one mean decode step τ̄_d later than the same
    model with k = 0, τ̄_d the decode pool's fixed point at λ/y; TPOT does not move."""
    model = build_model(resolve(_scenario("sglang"), CATALOG))
    plain = _without_overlap(model)
    rates = np.array([4.0])
    tau = float(decode_fixed_point(rates / model.y, model.cells, model.decode.step).tau_mean_s[0])
    assert 0.005 < tau < 0.1  # a 70B TP4 decode step at a light load: tens of ms
    with_k, without = model.snapshot(rates), plain.snapshot(rates)
    assert float(with_k.ttft.mean_s[0] - without.ttft.mean_s[0]) == pytest.approx(tau, rel=1e-9)
    assert float(with_k.ttft.quantile(0.9)[0] - without.ttft.quantile(0.9)[0]) == pytest.approx(tau, rel=1e-6)
    assert with_k.tpot.mean_s.tolist() == without.tpot.mean_s.tolist()
    assert model.ttft_parts(4.0).overlap_s == pytest.approx(tau, rel=1e-12)
    assert plain.ttft_parts(4.0).overlap_s == 0.0


def test_convention_b_adds_nothing() -> None:
    """Under B the prefill instance streams token 1: no decode step joins it."""
    sc = revalidate(_scenario("sglang"), {"ttft_convention": "B"})
    model = build_model(resolve(sc, CATALOG))
    plain = _without_overlap(model)
    rates = np.array([4.0])
    assert model.snapshot(rates).ttft.mean_s.tolist() == plain.snapshot(rates).ttft.mean_s.tolist()
    assert model.ttft_parts(4.0).overlap_s == 0.0


def test_k0_default_is_unchanged() -> None:
    """The default scenario (vLLM 0.12, k = 0): no overlap part, and the k = 0 rebuild is bit for bit the same."""
    model = build_model(resolve(load_scenario(default_scenario_path()), CATALOG))
    rates = np.array([3.0])
    assert model.ttft_parts(3.0).overlap_s == 0.0
    assert (
        model.snapshot(rates).ttft.quantile(0.9).tolist()
        == _without_overlap(model).snapshot(rates).ttft.quantile(0.9).tolist()
    )


@pytest.mark.parametrize("scheduler", ["chunked", "prefill-first"])
def test_colocated_adds_one_iteration(scheduler: str) -> None:
    """Colocated SGLang (3 instances) at half its limit: TTFT gains one iteration after the prompt's end, by hand
    from the queue's state: chunked ``ρ τ_b + (1 − ρ) τ_p`` (a chunk-carrying step with probability ρ, of mean
    τ_b = ρ/(n_c + n_d) over the full and drain steps, else a plain one); prefill-first ``ρ_p E[S] + (1 − ρ_p)²τ̄``
    (another prompt's pass, else a plain decode step)."""
    sc = apply_overrides(_scenario("sglang"), ScenarioOverrides(colocated=3, scheduler=scheduler))
    model = build_model(resolve(sc, CATALOG))
    assert isinstance(model, ColocatedModel)
    rate = 0.5 * model.limit().rate_rps
    rates = np.array([rate])
    lam = rate / model.z
    if scheduler == "chunked":
        q = model.chunk_queue_at(np.array([lam]))
        rho, f_d = float(q.rho[0]), float(q.drain_time[0])
        tau_b = rho / ((rho - f_d) / float(q.tau_chunk_s[0]) + f_d / float(q.tau_drain_s[0]))
        step = rho * tau_b + (1.0 - rho) * float(q.tau_plain_s[0])
        assert step > 1.5 * model.token_interval_s(lam)  # length-biased: not the mean token interval
    else:
        mean_s = float(model.cells.prob @ model.prefill_cell_s)
        rho = lam * mean_s
        step = rho * mean_s + (1.0 - rho) ** 2 * model.token_interval_s(lam)
    shift = float(model.snapshot(rates).ttft.mean_s[0] - _without_overlap(model).snapshot(rates).ttft.mean_s[0])
    assert shift == pytest.approx(step, rel=1e-6)
    parts = model.ttft_parts(rate)
    assert parts.overlap_s == pytest.approx(shift, rel=1e-9)
    assert parts.total_s == pytest.approx(float(model.snapshot(rates).ttft.mean_s[0]), rel=1e-9)


def test_lag_by_hand() -> None:
    """k = 1: token 1 sampled by the iteration ending at 1.0 is out at the end of the next one (1.5), not at the
    sampling iteration's own end; k = 2 across two calls; an idle instance sends it at once; k = 0 records 0."""
    tl = Timeline(4)
    one = OverlapLag(1, tl)
    one.sampled(0, 1.0)
    one.ended([0.5, 1.0])  # the sampling iteration itself (and an earlier one) do not count
    assert tl.first_lag[0] == 0.0
    assert one.pending
    one.ended([1.5, 2.0])
    assert tl.first_lag[0] == 0.5
    assert not one.pending
    two = OverlapLag(2, tl)
    two.sampled(1, 3.0)
    two.ended([3.25])
    two.ended([3.5, 3.75])
    assert tl.first_lag[1] == 0.5
    two.sampled(2, 4.0)
    two.ended([4.25])
    two.idle(4.25)
    assert tl.first_lag[2] == 0.25
    zero = OverlapLag(0, tl)
    zero.sampled(3, 5.0)
    assert (tl.first_token[3], tl.first_lag[3]) == (5.0, 0.0)
    assert overlap_iterations(1.0) == 1
    with pytest.raises(SpecError, match="whole number"):
        overlap_iterations(0.5)


def _sim_pair(model: Any, rate: float, n: int) -> tuple[Any, Any]:
    """Two seeded simulations of ``model`` at ``rate``: with the engine's overlap lag and with it set to 0."""
    sc = model.res.scenario
    lin, out = sample(sc.workload, n, np.random.default_rng(7), context_window=model.res.model.max_position_embeddings)
    dep = sim_deployment(model, lin, out, "linear").deployment
    if isinstance(dep, Disaggregated):
        dep0: Disaggregated | Colocated = dataclasses.replace(
            dep, decode=dataclasses.replace(dep.decode, overlap_steps=0)
        )
    else:
        dep0 = dataclasses.replace(dep, overlap_steps=0)
    arrivals = np.cumsum(np.random.default_rng(8).exponential(1.0 / rate, n))
    req = Requests.of(lin, np.maximum(out, 1))
    runs = [simulate(arrivals, req, d, np.random.default_rng(9), warmup_fraction=0.1) for d in (dep, dep0)]
    return runs[0], runs[1]


@pytest.mark.parametrize(
    ("colocated", "scheduler"),
    [(0, None), (3, "chunked"), (3, "prefill-first")],
    ids=["disaggregated", "colocated-chunked", "colocated-prefill-first"],
)
def test_shift_against_the_simulator(colocated: int, scheduler: str | None) -> None:
    """SGLang at half the stability limit, 3,000 requests: the simulator's own lag (the next iterations' simulated
    lengths, every other event the same) against the closed form's k·step, within 10 % (measured: chunked -7.6 %,
    the others within 1-2 %); TPOT is the engine's in both runs (the lag moves token 1 and the last token alike)."""
    sc = _scenario("sglang", colocated)
    if scheduler is not None:
        sc = apply_overrides(sc, ScenarioOverrides(scheduler=scheduler))
    model = build_model(resolve(sc, CATALOG))
    rate = 0.5 * model.limit().rate_rps
    with_k, without = _sim_pair(model, rate, 3_000)
    sim_shift = float(np.nanmean(with_k.values("ttft")) - np.nanmean(without.values("ttft")))
    assert sim_shift > 0.0
    assert model.ttft_parts(rate).overlap_s == pytest.approx(sim_shift, rel=0.10)
    np.testing.assert_allclose(with_k.values("tpot"), without.values("tpot"), rtol=1e-12)
    e2e_shift = with_k.values("e2e") - without.values("e2e")
    np.testing.assert_allclose(e2e_shift, with_k.values("ttft") - without.values("ttft"), rtol=1e-9, atol=1e-12)


def test_coupled_step_by_hand() -> None:
    """OverlapTtft (colocated chunked SGLang at half its limit): ρ = 0 is the law shifted by the plain step, ρ = 1 by
    the busy one; in between the mean mixes them and every quantile lies between theirs; a bin's cdf is
    ``min(1 − ρ, F_p) + max(0, F_b − (1 − ρ))`` (at ρ = 0.25 and F_p = 0.9, F_b = 0.5: 0.75 + 0)."""
    sc = apply_overrides(_scenario("sglang"), ScenarioOverrides(colocated=3, scheduler="chunked"))
    model = build_model(resolve(sc, CATALOG))
    assert isinstance(model, ColocatedModel)
    rates = np.array([0.5 * model.limit().rate_rps])
    out = model._distributions(rates)
    points, weights = model.overlap_step_law(rates, out)
    plain, busy = shifted(out.ttft, points[:, 0]), shifted(out.ttft, points[:, 1])
    assert points[0, 1] > points[0, 0]  # a step carrying prompt work is the longer one
    for rho, law in ((0.0, plain), (1.0, busy)):
        coupled = OverlapTtft.two(plain, busy, np.array([rho]))
        assert coupled.quantile(0.9)[0] == pytest.approx(float(law.quantile(0.9)[0]), rel=1e-9)
        assert coupled.mean_s[0] == pytest.approx(float(law.mean_s[0]), rel=1e-12)
    mixed = OverlapTtft.two(plain, busy, weights[:, 1])
    for q in (0.5, 0.9, 0.99):
        assert float(plain.quantile(q)[0]) <= float(mixed.quantile(q)[0]) <= float(busy.quantile(q)[0])
    mean = (1.0 - weights[0, 1]) * plain.mean_s[0] + weights[0, 1] * busy.mean_s[0]
    assert mixed.mean_s[0] == pytest.approx(mean, rel=1e-12)
    a = float(plain.quantile(0.9)[0])
    f_p, f_b = plain.cdf_per_bin(a), busy.cdf_per_bin(a)
    quarter = OverlapTtft.two(plain, busy, np.array([0.25])).cdf_per_bin(a)
    np.testing.assert_allclose(quarter, np.minimum(0.75, f_p) + np.maximum(0.0, f_b - 0.75), rtol=1e-12)


def test_drain_slices_by_hand() -> None:
    """Equal-mass slices of a gamma law (pdplan/serving/overlap_ttft.py drain_step_slices): shape 1 (mean = sd = θ),
    two slices split at the median θ·ln 2; the lower half's mean 2θ(1 − (1 + ln 2)/2) = 0.30685θ, the upper's
    2θ − 0.30685θ = 1.69315θ. No variance: every slice at the mean."""
    theta = 0.1
    halves = drain_step_slices(np.array([theta]), np.array([theta**2]), 2)[0]
    assert halves == pytest.approx([0.30685282 * theta, 1.69314718 * theta], rel=1e-7)
    four = drain_step_slices(np.array([0.095, 0.15]), np.array([0.025**2, 0.04**2]), 4)
    assert four.mean(axis=1) == pytest.approx([0.095, 0.15], rel=1e-12)  # the mean kept
    assert np.all(np.diff(four, axis=1) > 0)
    assert drain_step_slices(np.array([0.095]), np.array([0.0]), 4)[0] == pytest.approx([0.095] * 4, rel=1e-15)
    with pytest.raises(ValueError, match="slices"):
        drain_step_slices(np.array([0.095]), np.array([0.0]), 0)


def test_drain_variance_by_hand() -> None:
    """drain_step_var_s2: λ = 10/s, τ_d = 100 ms, τ_p = 50 ms: μ = λτ_d = 1, m = 1/(1 − e^{−1}) = 1.58198
    prompts a drain step, their count's variance m(1 + μ − m) = 0.66130, w̄ = 50 ms/m = 31.606 ms, λw̄ = 0.31606,
    Var S = w̄²·0.66130/(1 − 0.31606²) = 7.3392e−4 s² (sd 27.1 ms); no drain time, no spread."""
    var = drain_step_var_s2(np.full(2, 10.0), np.full(2, 0.1), np.full(2, 0.05), np.array([0.5, 0.0]))
    assert var == pytest.approx([7.339167e-4, 0.0], rel=1e-6)


def test_comonotone_steps_by_hand() -> None:
    """coupled(): steps sorted per rate, a zero-weight step changes nothing, and with three steps of weights 0.5 /
    0.3 / 0.2 a bin's cdf is Σ_i min(w_i, max(0, F_i − c_{i−1})) (e.g. at F = 0.9 / 0.6 / 0.3: 0.5 + 0.1 + 0 = 0.6)."""
    sc = apply_overrides(_scenario("sglang"), ScenarioOverrides(colocated=3, scheduler="chunked"))
    model = build_model(resolve(sc, CATALOG))
    assert isinstance(model, ColocatedModel)
    rates = np.array([0.5 * model.limit().rate_rps])
    base = model._distributions(rates).ttft
    steps = np.array([[0.12, 0.02, 0.05]])
    three = coupled(base, steps, np.array([[0.0, 0.75, 0.25]]))
    two = OverlapTtft.two(shifted(base, steps[:, 1]), shifted(base, steps[:, 2]), np.array([0.25]))
    assert three.quantile(0.9)[0] == pytest.approx(float(two.quantile(0.9)[0]), rel=1e-9)
    assert three.mean_s[0] == pytest.approx(float(two.mean_s[0]), rel=1e-12)
    law = coupled(base, steps, np.array([[0.2, 0.5, 0.3]]))  # sorted: 0.02 (0.5), 0.05 (0.3), 0.12 (0.2)
    a = float(shifted(base, steps[:, 1]).quantile(0.9)[0])
    f = [law.laws[i].cdf_per_bin(a)[0] for i in range(3)]
    expect = np.minimum(0.5, f[0]) + np.minimum(0.3, np.maximum(0.0, f[1] - 0.5))
    expect += np.minimum(0.2, np.maximum(0.0, f[2] - 0.8))
    np.testing.assert_allclose(law.cdf_per_bin(a)[0], expect, rtol=1e-12)
    assert float(f[0] @ base.prob) == pytest.approx(0.9, abs=1e-6)
    assert float(law.mean_s[0]) == pytest.approx(float(base.mean_s[0]) + 0.5 * 0.02 + 0.3 * 0.05 + 0.2 * 0.12)
