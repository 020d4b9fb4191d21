"""The workload's arrival process in the serving model and the simulator (pdplan.serving.build, pdplan.sim.
arrival_times): Poisson runs exactly the Poisson code, other processes reach every prefill queue with the c² each
instance sees, a trace's c_a² is measured from its times, and the simulator draws the process's gaps."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.trace_files import write_trace

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import load_scenario, revalidate
from pdplan.queueing import colocated_distributions, prefill_wait_distribution
from pdplan.queueing.arrivals import empirical_ca2, gg1_wait_scale, instance_ca2, service_scv
from pdplan.queueing.colocated_queue import _chunk_wait
from pdplan.queueing.gig1 import klb_factor
from pdplan.serving.build import arrival_ca2, build_model
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.resolve import resolve
from pdplan.serving.ttft import GRID_CELLS
from pdplan.sim import poisson_arrivals
from pdplan.sim.arrival_times import arrival_name, arrival_times_s
from pdplan.specs.arrivals import ConstantArrival, GammaArrival, PoissonArrival, TraceArrival
from pdplan.specs.scenario import Scenario
from pdplan.specs.workload import WorkloadSpec

SMALL = Path(__file__).parents[1] / "data" / "small_scenario.yaml"
PRFAAS = Path(__file__).parents[2] / "examples" / "prfaas-h200-h100.yaml"
CONSTANT = {"process": "constant"}


def _with(sc: Scenario, arrival: Any = "poisson", **update: Any) -> Scenario:
    workload = {**sc.workload.model_dump(exclude_none=True), "arrival": arrival}
    return revalidate(sc, {**update, "workload": workload})


def _small(routing: str = "random", arrival: Any = "poisson") -> Scenario:
    sc = load_scenario(SMALL)
    return _with(sc, arrival, routing=routing, prefill={"gpu": "h100-sxm", "tp": 1, "count": 3})


def _disaggregated(sc: Scenario) -> DisaggregatedModel:
    model = build_model(resolve(sc, open_catalog()))
    assert isinstance(model, DisaggregatedModel)
    return model


@pytest.mark.parametrize("routing", ["random", "round-robin", "least-work"])
def test_poisson_prefill_wait_is_the_poisson_code(routing: str) -> None:
    """Poisson arrivals: the pool keeps c_a² = 1 and its wait is exactly the M/G/x law as computed before arrivals
    were wired (bit for bit)."""
    model = _disaggregated(_small(routing))
    pool = model.pool
    assert pool.arrival_ca2 == 1.0
    rates = np.array([0.3, 0.6, 0.9]) * pool.capacity_rps
    got, _ = pool.wait(rates)
    ref = prefill_wait_distribution(
        routing, rates, pool.point_service_s.ravel(), pool.point_prob, pool.instances, max_cells=GRID_CELLS
    )
    for name in ("h_s", "cdf_grid", "atom", "mean_s"):
        assert np.array_equal(getattr(got, name), getattr(ref, name)), name


def test_gamma_cv_one_gives_the_poisson_evaluation_bit_for_bit() -> None:
    """Gamma gaps with cv = 1 have c_a² = 1: every number of the evaluation equals Poisson's; only the stated
    arrival process differs."""
    from pdplan.evaluation import evaluate

    poisson = evaluate(_small("round-robin"), rate=10.0).to_document()
    gamma = evaluate(_small("round-robin", {"process": "gamma", "cv": 1.0}), rate=10.0).to_document()
    assert "arrival_process" not in poisson["assumptions"]
    assert gamma["assumptions"].pop("arrival_process").startswith("gamma gaps, cv 1 (c_a² 1)")
    assert gamma == poisson


@pytest.mark.parametrize("routing", ["random", "round-robin", "least-work"])
def test_constant_arrivals_reach_the_prefill_wait(routing: str) -> None:
    """Constant arrivals: the pool's mean wait is the Poisson mean times Kingman's factor and Krämer–Langenbach-Belz's
    g at the c² an instance sees (GI/G/1 for random and round-robin, whose Poisson law is already the E_3/G/1's at
    c² = 1/3; least-work's GI/G/c form, the same factor on the M/G/c mean: pdplan.queueing.gig1)."""
    poisson, constant = _disaggregated(_small(routing)), _disaggregated(_small(routing, CONSTANT))
    assert constant.pool.arrival_ca2 == 0.0
    rates = np.array([0.5, 0.8]) * poisson.limit().rate_rps
    base, _ = poisson.pool.wait(rates)
    got, _ = constant.pool.wait(rates)
    cs2 = service_scv(poisson.pool.point_service_s.ravel(), poisson.pool.point_prob)
    rho = poisson.pool.load(rates)
    seen, seen_poisson = instance_ca2(routing, 0.0, 3), instance_ca2(routing, 1.0, 3)
    k = gg1_wait_scale(seen, cs2) * klb_factor(rho, seen, cs2)
    k /= gg1_wait_scale(seen_poisson, cs2) * klb_factor(rho, seen_poisson, cs2)
    assert got.mean_s == pytest.approx(base.mean_s * k, rel=1e-9)
    assert np.all(constant.snapshot(rates).ttft.mean_s < poisson.snapshot(rates).ttft.mean_s)


def test_colocated_prompt_queue_takes_the_random_split() -> None:
    """Colocated: z = 2 instances, constant arrivals split at random: c² = 1/2 per instance, the prompt queue's
    wait scaled by (1/2 + c_s²)/(1 + c_s²); Poisson keeps exactly the unscaled law."""
    colocated = {"mode": "colocated", "colocated": {"gpu": "h100-sxm", "tp": 1, "count": 2}}
    sc = _with(load_scenario(SMALL), CONSTANT, prefill=None, decode=None, **colocated)
    model = build_model(resolve(sc, open_catalog()))
    assert isinstance(model, ColocatedModel)
    assert model.arrival_ca2 == 0.0
    rates = np.array([0.4, 0.7]) * model.limit().rate_rps
    poisson = dataclasses.replace(model, arrival_ca2=1.0)  # Poisson: the default c_a²
    base = poisson._distributions(rates).ttft.wait
    kwargs = {
        "prefill_service_s": model.prefill_cell_s,
        "token_budget": float(model.res.chunk_tokens),
        "prefill_s_per_token": model.prefill_s_per_token,
        "attention_s": model.attention_cell_s,
        "drain_s": None if model.gemm_width is not None else model.drain_cell_s,
        "width": model.gemm_width,
        "max_cells": GRID_CELLS,
    }
    ref = colocated_distributions(model.scheduler, rates / 2, model.cells, model.decode.step, **kwargs).ttft.wait
    assert np.array_equal(base.cdf_grid, ref.cdf_grid)
    assert np.array_equal(base.mean_s, ref.mean_s)
    got = model._distributions(rates).ttft.wait
    assert instance_ca2("random", 0.0, 2) == 0.5
    # the chunked TTFT: the prompt queue's fluid wait W_f takes the GI/G/1 law (waits less often, less), the landing
    # step is a chunk step with Whitt's π < ρ and fewer others ride with the prompt (colocated_queue._renewal_landing)
    assert model.scheduler == "chunked"
    assert np.all(got.mean_s < base.mean_s)
    fluid = model.chunk_queue_at(rates / 2).fluid_service_s
    poisson_w, smooth_w = (_chunk_wait(rates / 2, model.cells, fluid, GRID_CELLS, ca2) for ca2 in (1.0, 0.5))
    assert np.all(smooth_w.mean_s < poisson_w.mean_s)
    assert np.all(smooth_w.atom > poisson_w.atom)  # smooth arrivals find the prompt queue empty more often than 1 − ρ


def test_trace_ca2_is_measured_from_its_times(tmp_path: Path) -> None:
    arrivals = [0.0, 0.1, 0.2, 1.0, 1.1, 1.2, 3.0, 3.05]
    workload = WorkloadSpec(trace=write_trace(tmp_path, arrivals), arrival="trace")
    assert arrival_ca2(workload) == empirical_ca2(arrivals)
    write_trace(tmp_path, [0.0, 1.0])  # the same file, now two rows
    with pytest.raises(SpecError, match="at least 3"):
        arrival_ca2(workload)


def test_prfaas_paths_take_the_split_of_the_stream() -> None:
    """PrfaaS: the setup carries c_a²; the remote path's stream is a random split by length (c² = p·c_a² + 1 − p)
    and its pool's mean wait falls with constant arrivals."""
    from pdplan.serving.prfaas.build import prfaas_setup
    from pdplan.serving.prfaas.queue import path_mixture

    base = load_scenario(PRFAAS)
    setups = [prfaas_setup(resolve(_with(base, arrival), open_catalog())) for arrival in ("poisson", CONSTANT)]
    assert [s.arrival_ca2 for s in setups] == [1.0, 0.0]
    threshold = float(np.median([setups[0].capacity.law.lower, setups[0].capacity.law.upper]))
    rate = 1.0  # req/s: a load both paths hold
    mixes = [path_mixture(s, threshold, rate) for s in setups]
    ratio = {}
    for path in ("remote", "local"):
        poisson, constant = (getattr(m, path) for m in mixes)
        assert poisson is not None, path
        assert constant is not None, path
        ratio[path] = float(constant.wait.mean_s[0]) / float(poisson.wait.mean_s[0])
    # a few per cent offloaded: the remote stream stays nearly Poisson (c² = 1 − p), the local one nearly constant
    assert mixes[0].offload_fraction < 0.5
    assert ratio["local"] < ratio["remote"] < 1.0


def test_simulator_draws_the_process_gaps() -> None:
    n = 50_000
    poisson = arrival_times_s(PoissonArrival(), 3.0, n, np.random.default_rng(5))
    assert np.array_equal(poisson, poisson_arrivals(3.0, n, np.random.default_rng(5)))  # exactly today's draws
    constant = arrival_times_s(ConstantArrival(process="constant"), 4.0, 3, np.random.default_rng(0))
    assert constant == pytest.approx([0.25, 0.5, 0.75])
    gamma = GammaArrival(process="gamma", cv=2.0)
    one = arrival_times_s(gamma, 1.0, n, np.random.default_rng(9))
    two = arrival_times_s(gamma, 2.0, n, np.random.default_rng(9))
    assert two == pytest.approx(one / 2.0, rel=1e-12)  # common random numbers across rates
    assert empirical_ca2(one) == pytest.approx(4.0, rel=0.1)
    assert [arrival_name(p) for p in (PoissonArrival(), gamma)] == ["poisson", "gamma (cv 2)"]
    with pytest.raises(SpecError, match="trace"):
        arrival_times_s(TraceArrival(), 1.0, 3, np.random.default_rng(0))
    with pytest.raises(SpecError, match="rate"):
        arrival_times_s(gamma, 0.0, 3, np.random.default_rng(0))
