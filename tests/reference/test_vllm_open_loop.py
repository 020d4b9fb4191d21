"""pdplan's colocated model against published open-loop vLLM runs (held out: nothing fitted to them).

``benchmarks/vllm_open_loop.py`` builds the runs of ``benchmarks/data/vllm_open_loop.yaml`` (inference-sim/training at
ed5c1d2: vLLM on H100 SXM under kubernetes-sigs/inference-perf, Llama-2-70B TP4 and Mixtral-8x7B TP2, 128 seats,
2,048-token chunks, 5-20 req/s; the repository states no licence, see the data file) as pdplan scenarios and compares
them (docs/accuracy.md section 6, "Open-loop: vLLM under inference-perf"). Profile ``vllm-0.18``, the nearer to the
runs' vLLM.

Tolerances, from the recorded errors plus margin:

* Llama-2-70B's plain decode step at the occupancy each run measured: -10.7 % to -8.2 % recorded; held to 12 % (the
  dense TPOT target of issue #23 is 10 %, which -10.7 % misses). Mixtral's (MoE): -17.8 % to +28.5 %, held to 35 %.
* The mean E2E latency at the rates pdplan admits: -12.2 % to +40.0 % recorded (-12.0 % to +47.0 % before the prompt
  tokens were priced at the step's width, pdplan/queueing/chunk_width.py); held to 45 % (a guard, not a target).
* Known misses, xfail (strict: they fail until pdplan agrees): the step with the prefill riding on it within 10 % of
  the measured time per token (Llama-2-70B +8.1 % to +151 %; +10.9 % to +174 % at the full-chunk secant of 55 us per
  token: at the step's width pdplan's kernel-table GEMM curve still charges 48-52 us per token where the real steps
  carry them almost free); pdplan admitting every run's rate (the two 20 req/s runs are past its stable limit, 12.5
  and 12.2 req/s, set by the P99 seat bound at its slow step).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = pytest.mark.xdist_group("vllm_open_loop")  # one worker prices the runs once

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
ENGINE = "vllm-0.18"
PLAIN_STEP_TOLERANCE = {"llama-2-70b": 0.12, "mixtral-8x7b": 0.35}
E2E_GUARD = 0.45
TPOT_TARGET = 0.10


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCH))
        mp.delitem(sys.modules, "vllm_open_loop", raising=False)
        import vllm_open_loop

        return vllm_open_loop


@pytest.fixture(scope="module")
def rows(bench: ModuleType) -> dict[str, Any]:
    data = bench.load_data()
    gpu = data["source"]["gpu"]
    return {run["name"]: bench.compare(run, gpu, ENGINE) for run in data["runs"]}


def test_measured_time_per_token_hand_worked(bench: ModuleType) -> None:
    """Llama-2-70B general at 8 req/s: (4.6784 − 0.0573892 s)/(246.083 − 1) = 18.854 ms per token, and by Little's
    law 8.00127 × 4.6210 s = 36.97 requests decoding; at 20 req/s 20.0002 × (5.5775 − 0.121327) = 109.1 < 128 seats."""
    runs = {r["name"]: r for r in bench.load_data()["runs"]}
    low = bench.measured(runs["llama-2-70b-tp4-general-stage0"])
    assert low.tpot_s == pytest.approx(0.018854, rel=2e-4)
    assert low.decoding == pytest.approx(36.97, rel=1e-3)
    high = bench.measured(runs["llama-2-70b-tp4-general-stage1"])
    assert high.decoding == pytest.approx(109.1, rel=2e-3)


def test_runs_fit_their_seats(bench: ModuleType) -> None:
    """Every run kept its decoding requests (Little's law) inside its seats, and failed none: the published rates
    were served, so a stable limit below one is pdplan's miss, not the server's."""
    for run in bench.load_data()["runs"]:
        m = bench.measured(run)
        assert m.decoding < run["max_num_seqs"], run["name"]
        assert run["failures"] == 0, run["name"]


def test_scenario_carries_the_run(bench: ModuleType) -> None:
    data = bench.load_data()
    run = data["runs"][0]
    sc = bench.scenario(run, data["source"]["gpu"], ENGINE)
    assert sc.colocated is not None
    assert sc.colocated.chunk_tokens == 2048
    assert sc.colocated.tp == 4
    assert sc.max_num_seqs == 128
    assert sc.max_model_len == 4096
    assert sc.workload.input_tokens.value == 575
    assert sc.workload.output_tokens.value == 246


def test_plain_decode_step_at_measured_occupancy(rows: dict[str, Any]) -> None:
    for name, row in rows.items():
        check = row.step_check()
        tol = PLAIN_STEP_TOLERANCE[row.run["model"]]
        assert abs(check.plain_error) <= tol, (name, check)


def test_e2e_mean_at_admitted_rates(rows: dict[str, Any]) -> None:
    admitted = 0
    for name, row in rows.items():
        e2e = row.predicted_e2e_mean_s()
        if e2e is None:
            continue
        admitted += 1
        assert abs(e2e / row.measured.e2e_mean_s - 1.0) <= E2E_GUARD, (name, e2e)
    assert admitted == 8  # every run but the two at 20 req/s


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="known miss: the riding prefill is priced too high")
def test_step_with_prefill_share_within_tpot_target(rows: dict[str, Any]) -> None:
    errors = {n: r.step_check().error for n, r in rows.items() if r.run["model"] == "llama-2-70b"}
    assert all(abs(e) <= TPOT_TARGET for e in errors.values()), errors


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="known miss: 20 req/s is past pdplan's stable limit")
def test_every_published_rate_is_admitted(rows: dict[str, Any]) -> None:
    refused = {n: r.limit.stability_limit_rps for n, r in rows.items() if r.at_rate is None}
    assert not refused, refused
