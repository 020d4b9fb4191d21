"""pdplan's colocated model against published open-loop vLLM runs (held out: nothing fitted to them).

``benchmarks/vllm_open_loop.py`` builds the runs of ``benchmarks/data/vllm_open_loop.yaml`` (inference-sim/training at
ed5c1d2: vLLM on H100 SXM under kubernetes-sigs/inference-perf, Llama-2-70B TP4 and Mixtral-8x7B TP2, 128 seats,
2,048-token chunks, 5-20 req/s; the repository states no licence, see the data file) as pdplan scenarios and compares
them (docs/accuracy.md section 6, "Open-loop: vLLM under inference-perf"). Profile ``vllm-0.18``, the nearer to the
runs' vLLM.

The traffic is priced as the harness sent it: a fixed list of 100 prompts resent in turn, which vLLM's prefix cache
serves but for the last token (the data file says how that was read from the runs' configs). Until 2026-12-07 every
prompt was priced new, and the prompt tokens riding the decode steps were the whole miss (the step +8 % to +151 %, the
20 req/s runs refused at 12.2-12.5 req/s).

Tolerances, from the recorded errors plus margin:

* Llama-2-70B's plain decode step at the occupancy each run measured: -10.7 % to -8.2 % recorded; held to 12 % (the
  dense TPOT target of issue #23 is 10 %, which -10.7 % misses). Mixtral's (MoE, its step the minimum of two lines
  since 2026-12-07, pdplan/serving/decode_lines.py): +0.6 % to +10.8 % recorded (was -17.8 % to +28.5 % as one
  line); held to 12 %.
* The step with the prefill riding on it (the cached prompts' last tokens), Llama-2-70B: -9.9 % to -6.7 % recorded,
  within the 10 % TPOT target.
* The mean E2E latency at the rates pdplan admits: -11.1 % to +16.8 % recorded; held to 25 % (a guard, not a target).
* Every run's rate is admitted. Until 2026-12-07 Mixtral's 20 req/s run was not (17.1 req/s): its step as one line
  t0 + t1 B + t2 B K priced 26.6 ms at the 101 decodes the run held where its roofline gives 21.5 (a MoE step is
  concave in the batch, its expert reads saturate); as the minimum of two lines its limit is 21.3 req/s.
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
PLAIN_STEP_TOLERANCE = {"llama-2-70b": 0.12, "mixtral-8x7b": 0.12}
E2E_GUARD = 0.25
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
    prefixes = sc.workload.shared_prefix
    assert prefixes is not None
    assert (prefixes.num_prefixes, prefixes.questions_per_prefix) == (10, 10)  # results/config.yaml: 10 x 10 prompts
    assert prefixes.prefix_tokens.value == 100
    assert prefixes.question_tokens.value == 475  # the measured 575-token prompts less the 100-token system prompt
    assert prefixes.output_tokens.value == 246


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
    assert admitted == 10  # every run


def test_step_with_prefill_share_within_tpot_target(rows: dict[str, Any]) -> None:
    errors = {n: r.step_check().error for n, r in rows.items() if r.run["model"] == "llama-2-70b"}
    assert all(abs(e) <= TPOT_TARGET for e in errors.values()), errors


def test_every_published_rate_is_admitted(rows: dict[str, Any]) -> None:
    refused = {n: r.limit.stability_limit_rps for n, r in rows.items() if r.at_rate is None}
    assert not refused, refused
