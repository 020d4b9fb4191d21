"""``vllm bench serve`` result JSON as a prefix workload (pdplan/io/vllm_prefix.py; docs/reuse_workloads.md §6)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from pdplan.errors import SpecError
from pdplan.io.vllm_prefix import load_vllm_bench_workload

FIXTURE = Path(__file__).parents[1] / "data" / "benchmarks" / "vllm_bench_serve.json"
BASE = {
    "date": "20260115-101500",
    "backend": "vllm",
    "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 1000,
    "request_rate": 4.0,
    "burstiness": 0.5,
    "max_concurrency": None,
    "completed": 1000,
    "mean_ttft_ms": 50.0,
}
REPETITION = {
    "dataset_name": "prefix_repetition",
    "prefix_repetition_prefix_len": "512",  # --metadata values are strings
    "prefix_repetition_suffix_len": "128",
    "prefix_repetition_num_prefixes": "10",
    "prefix_repetition_output_len": "64",
}
RANDOM = {
    "dataset_name": "random",
    "random_input_len": "1024",
    "random_output_len": "128",
    "random_range_ratio": "0.25",
    "random_prefix_len": "2000",
}


def _result(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**BASE, **fields}))
    return path


def test_prefix_repetition_run(tmp_path: Path) -> None:
    result = load_vllm_bench_workload(_result(tmp_path, **REPETITION))
    assert result.request_rate_per_s == 4.0
    assert result.num_prompts == 1000
    spec = result.workload
    block = spec.shared_prefix
    assert block is not None
    assert block.num_prefixes == 10
    assert block.questions_per_prefix is None
    assert {int(v) for v in block.prompt_pmf().values} == {640}
    assert block.output_tokens.model_dump() == {"dist": "fixed", "value": 64}
    assert spec.arrival_process().ca2 == pytest.approx(2.0)  # gamma shape = burstiness 0.5: c_a^2 = 1/0.5
    assert "10 prefixes x 100 prompts each" in spec.description


def test_random_run_with_a_prefix(tmp_path: Path) -> None:
    """I = 1024, r = 0.25: questions uniform on [768, 1280]; O = 128: outputs on [96, 160]; one 2000-token prefix."""
    spec = load_vllm_bench_workload(_result(tmp_path, **RANDOM, burstiness=1.0)).workload
    block = spec.shared_prefix
    assert block is not None
    assert block.num_prefixes == 1
    assert block.question_tokens.model_dump() == {"dist": "uniform", "min": 768, "max": 1280}
    assert block.output_tokens.model_dump() == {"dist": "uniform", "min": 96, "max": 160}
    assert spec.arrival == "poisson"
    assert block.prompt_pmf().mean() == pytest.approx(2000 + 1024)
    assert "special tokens are not recorded" in spec.description


def test_random_run_without_prefix_is_a_plain_workload(tmp_path: Path) -> None:
    fields = {**RANDOM, "random_prefix_len": 0, "random_range_ratio": 0}
    spec = load_vllm_bench_workload(_result(tmp_path, **fields, burstiness=math.inf)).workload
    assert spec.shared_prefix is None
    assert spec.input_tokens.model_dump() == {"dist": "fixed", "value": 1024}  # type: ignore[union-attr]
    assert spec.arrival_process().ca2 == 0.0  # burstiness inf: constant gaps


def test_rates_inf_and_ramp_up(tmp_path: Path) -> None:
    closed = load_vllm_bench_workload(_result(tmp_path, **REPETITION, request_rate="inf"))
    assert closed.request_rate_per_s is None
    assert "no open-loop rate" in closed.workload.description
    ramp = {"request_rate": "inf", "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 8}
    assert load_vllm_bench_workload(_result(tmp_path, **REPETITION, **ramp)).request_rate_per_s == 8.0


def test_a_result_without_the_dataset_is_refused() -> None:
    """The JSON `vllm bench serve` writes records no dataset option: pdplan says so rather than guess."""
    with pytest.raises(SpecError, match=r"vllm_bench_serve\.json: dataset_name: the result JSON does not record"):
        load_vllm_bench_workload(FIXTURE)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({**REPETITION, "dataset_name": "sharegpt"}, "dataset_name: dataset 'sharegpt' has no prefix options"),
        (
            {k: v for k, v in REPETITION.items() if k != "prefix_repetition_suffix_len"},
            "prefix_repetition_suffix_len: not",
        ),
        (
            {**REPETITION, "prefix_repetition_num_prefixes": "ten"},
            "prefix_repetition_num_prefixes: 'ten' is not a number",
        ),
        ({**REPETITION, "prefix_repetition_num_prefixes": "2000"}, "num_prompts (1000) must be >="),
        ({**REPETITION, "prefix_repetition_prefix_len": "0"}, "prefix_tokens.fixed.value"),
        ({**RANDOM, "random_range_ratio": "1.5"}, "random_range_ratio: 1.5 must lie in [0, 1)"),
        ({**REPETITION, "burstiness": 0}, "burstiness: 0.0 must be > 0"),
        ({**REPETITION, "request_rate": 0}, "request_rate: 0.0 must be > 0"),
        ({**REPETITION, "request_rate": -2}, "request_rate: -2 must be a finite number >= 0"),
    ],
)
def test_bad_results_name_the_key(tmp_path: Path, fields: dict[str, Any], expected: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**BASE, **fields}))
    with pytest.raises(SpecError) as info:
        load_vllm_bench_workload(path)
    assert "\n" not in str(info.value)
    assert expected in str(info.value), str(info.value)


def test_not_one_json_object(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(BASE) + "\n" + json.dumps(BASE))
    with pytest.raises(SpecError, match="not one JSON object"):
        load_vllm_bench_workload(path)
    path.write_text("[1, 2]")
    with pytest.raises(SpecError, match="expected a JSON object"):
        load_vllm_bench_workload(path)
