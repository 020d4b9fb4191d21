"""pdplan's colocated model against MLPerf Inference v4.1 Server results (held out: nothing fitted to them).

``benchmarks/mlperf_server.py`` builds NVIDIA's two Llama-2-70B Server submissions (DGX H100: 4 TensorRT-LLM
instances at TP2, batch 1,024; 8x H200: 8 instances at TP1, batch 896; FP8 weights and KV, 4,096-token steps) as
pdplan scenarios from ``benchmarks/data/mlperf_server.yaml`` (mlcommons/inference_results_v4.1 at 198fc467, Apache-2.0;
every figure with its file) and compares them with the published runs (docs/accuracy.md section 6). Closed form
only here (the simulator's figures are in the report).

Tolerances, from the recorded errors plus margin:

* goodput per GPU: -0.4 % (H100) and -4.5 % (H200) recorded (+0.6 % and -3.8 % before the prompt tokens were priced
  at the step's width, pdplan/queueing/chunk_width.py); held to 5 %. The H100 figure is pdplan's colocated
  utilisation limit (0.85), not an SLO: what agrees is the capacity, as in the real runs, whose P99s had slack. The
  H200's was that limit too (-1.2 %) until the colocated KV rule priced TensorRT-LLM's reserved footprint (L + n
  from admission, ``GUARANTEED_NO_EVICT``) with the load-feedback factor (issue #23, docs/accuracy.md section 6 "A KV
  knee"): its comfortable (P99) KV limit, 96.0 req/s (95.5 with the step-width price), bound below the utilisation
  limit (99.3; 98.7), -5.2 %. With the
  colocated KV admission queue (issue #23 item 5) the plan runs past it, marked, to 97.36 req/s (96.69 with the
  step-width price), where the admission wait brings the P99 TTFT to MLPerf's 2 s (1.79 s; the joint TTFT x TPOT
  attainment binds first) (P99 TPOT 160 ms of 200 ms). Whether NVIDIA's harness ran the
  default ``GUARANTEED_NO_EVICT`` is not in the submission's files.
* Known miss, xfail (strict): the H200's published 101.25 req/s is still beyond the closed form's stable limit, the
  utilisation limit 99.34 req/s, with the mean (fluid) KV limit of the reserved footprint 99.40 just above it; the
  real run served it with a P99 TTFT of 0.453 s. pdplan's step at the run's occupancy is +7.8 % slow, amplified
  about 5x by the occupancy's feedback, so its occupancy, and the KV it holds, is high there. The limit stays (issue
  #23 item 4, docs/accuracy.md section 6, "Why the H200's published rate stays refused"): 0.85 is the highest load at
  which the TPOT model was validated (docs/queueing.md section 6), not an engine property; pdplan's prices put the
  run at u = 0.866, and a step 7.8 % cheaper would put it near 0.80, inside it: the step price is what fails.
* pdplan's mean step priced at the occupancy each run measured (Little's law): -5.4 % / +8.6 % recorded (-6.5 % /
  +7.8 % at the full-chunk secant); held to the issue #23 dense TPOT target, 10 %.
* P99 TTFT at the H100's published rate: -5.6 % recorded (0.435 s against 0.461 s; the chunked TTFT's landing-step
  wait, pdplan/queueing/colocated_queue.py); held to 25 %. Known miss since the step-width pricing, xfail (strict):
  the prompt tokens riding beside ~840 decodes per instance are past the GEMM knee and cost more than the full-chunk
  secant (which averaged in the flat part from one token), the step at the run's occupancy moves from -6.5 % to
  -5.4 %, and with it u_d + u_p reaches the 0.85 limit at 74.85 req/s, 0.3 % below the published 75.10 req/s: the
  closed form prices no latency there (at its goodput, 74.85 req/s, P99 TTFT 0.414 s and P99 TPOT 133 ms).
* Known miss, xfail (strict: fails once pdplan agrees): at the H100's published rate the closed form's mean TPOT is
  27 % fast (the step's -6 % amplified about 4x by the occupancy's feedback near saturation); now also refused.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("mlperf_server")]  # one worker prices the deployments once

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
GOODPUT_TOLERANCE = 0.05
STEP_TOLERANCE = 0.10
TPOT_TARGET = 0.10
TTFT_TARGET = 0.25


@pytest.fixture(scope="module")
def mlperf() -> ModuleType:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(BENCH))
        mp.delitem(sys.modules, "mlperf_server", raising=False)
        import mlperf_server

        return mlperf_server


@pytest.fixture(scope="module")
def rows(mlperf: ModuleType) -> dict[str, Any]:
    data = mlperf.load_data()
    return {s["name"]: mlperf.compare(s, data, simulate=False) for s in data["systems"]}


SYSTEMS = ["DGX-H100_H100-SXM-80GBx8_TRT", "H200-SXM-141GBx8_TRT"]


def test_output_law_has_the_published_mean(mlperf: ModuleType) -> None:
    data = mlperf.load_data()
    for system in data["systems"]:
        law = mlperf.scenario(system, data).workload.output_tokens
        mean, _ = mlperf._moments(law)
        assert mean == pytest.approx(system["generated_tokens_per_sample"], rel=1e-9)
        assert law.bins[-1] == data["dataset"]["max_output_tokens"]


@pytest.mark.parametrize("name", SYSTEMS)
def test_goodput_per_gpu_within_tolerance(rows: dict[str, Any], name: str) -> None:
    row = rows[name]
    assert abs(row.goodput_error) <= GOODPUT_TOLERANCE, (name, row.goodput.goodput_rps, row.published_rps)


@pytest.mark.parametrize("name", SYSTEMS)
def test_step_price_at_measured_occupancy(rows: dict[str, Any], name: str) -> None:
    check = rows[name].step_check()
    assert abs(check.error) <= STEP_TOLERANCE, (name, check)


def _h100_point(rows: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The closed form at the H100's published rate (inside its stable limit); RuntimeError, not an assertion, where
    it is not: the xfail test below expects only its own comparison to fail."""
    row = rows[SYSTEMS[0]]
    if row.at_rate is None or row.at_rate.operating_point is None:
        raise RuntimeError(f"the closed form no longer admits {row.published_rps} req/s")
    return row.at_rate.operating_point, row.system


@pytest.mark.xfail(
    strict=True,
    raises=(AssertionError, RuntimeError),
    reason="known miss: closed-form TPOT near saturation (and the rate 0.3 % past the limit since the step width)",
)
def test_h100_tpot_at_published_rate(rows: dict[str, Any]) -> None:
    point, system = _h100_point(rows)
    assert abs(point.tpot_s.mean / system["tpot_mean_s"] - 1.0) <= TPOT_TARGET


@pytest.mark.xfail(
    strict=True, raises=RuntimeError, reason="known miss: the H100's published rate is 0.3 % past the utilisation limit"
)
def test_h100_ttft_p99_at_published_rate(rows: dict[str, Any]) -> None:
    point, system = _h100_point(rows)
    assert abs(point.ttft_s.p99 / system["ttft_p99_s"] - 1.0) <= TTFT_TARGET


def test_h200_runs_past_its_comfortable_kv_limit_within_the_p99_limits(rows: dict[str, Any]) -> None:
    row = rows[SYSTEMS[1]]
    ev = row.goodput
    assert ev.beyond_kv_comfort
    # 95.54 with TensorRT-LLM's H100-fitted host terms; 95.61 since the joint fit of both GPUs (issue #23 item 2,
    # 2026-12-07: step_s 0.828 ms, request_s 72.1 ms; docs/cross_gpu_accuracy.md §8.4)
    assert ev.kv_comfort_limit_rps == pytest.approx(95.61, abs=0.05)
    point = row.at_goodput.operating_point
    # the admission wait binds: the joint TTFT x TPOT attainment reaches 99 % at 96.69 req/s, where the P99 TTFT alone
    # is 1.79 s and rising 1.1 s per req/s (1.97 s at 97.36 req/s before the step-width pricing). Since the overlap
    # step's drain slices (pdplan/serving/overlap_ttft.py chunk_step_law, 2026-12-07) the SLO margin crosses 0 at
    # 96.71 req/s and the search reports its feasible side, 96.52 (brentq's root 96.718 misses by 1.5e-4; the step
    # back is 2 × 1e-3 of the limit), where the P99 TTFT is 1.58 s: at 1.1 s per req/s the search's resolution alone
    # spans 0.2 s of it. With the joint TensorRT-LLM terms (2026-12-07) the search reports 96.56 req/s, P99 TTFT
    # 1.58 s (96.49 and 1.59 s before)
    assert 0.75 * float(row.scenario.slo.ttft) <= point.ttft_s.p99 <= float(row.scenario.slo.ttft)
    assert point.tpot_s.p99 < float(row.scenario.slo.tpot)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="known miss: the H200's published rate is past the limit")
def test_h200_published_rate_is_priced(rows: dict[str, Any]) -> None:
    row = rows[SYSTEMS[1]]
    assert row.at_rate is not None, (row.goodput.stability_limit_rps, row.goodput.stability_binding)
