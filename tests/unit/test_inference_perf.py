"""inference-perf configs as workloads (pdplan/io/inference_perf.py; docs/reuse_workloads.md §5).

The configs mirror ``examples/vllm/config-shared-prefix*.yml`` of kubernetes-sigs/inference-perf (7de5ef2)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pdplan.errors import SpecError
from pdplan.io.inference_perf import load_inference_perf
from pdplan.io.validation import check_file
from pdplan.io.workloads import load_workload
from pdplan.specs.length_laws import LognormalDist, NormalDist, UniformDist

HEAD = """\
api: {type: completion}
server: {type: vllm, model_name: HuggingFaceTB/SmolLM2-135M-Instruct, base_url: "http://0.0.0.0:8000", ignore_eos: true}
tokenizer: {pretrained_model_name_or_path: HuggingFaceTB/SmolLM2-135M-Instruct}
metrics: {type: prometheus, prometheus: {url: "http://localhost:9090", scrape_interval: 15}}
report: {request_lifecycle: {summary: true, per_stage: true, per_request: true}}
"""
SHARED = (
    HEAD
    + """\
load:
  type: constant
  interval: 15
  stages:
  - rate: 1
    duration: 30
  - rate: 2
    duration: 30
data:
  type: shared_prefix
  shared_prefix:
    num_unique_system_prompts: 10
    num_users_per_system_prompt: 10
    system_prompt_len: 100
    question_len: 50
    output_len: 50
"""
)
MULTI_TURN = (
    HEAD
    + """\
load:
  type: constant
  num_workers: 2
  worker_max_concurrency: 10
  stages:
  - rate: 20
    duration: 5
data:
  type: shared_prefix
  shared_prefix:
    num_unique_system_prompts: 2
    num_users_per_system_prompt: 10
    system_prompt_len: 100
    question_len: 50
    output_len: 50
    enable_multi_turn_chat: true
"""
)


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(text)
    return path


def test_shared_prefix_config(tmp_path: Path) -> None:
    result = load_inference_perf(_config(tmp_path, SHARED))
    assert result.stage_rates_per_s == (1.0, 2.0)
    assert result.stage_durations_s == (30.0, 30.0)
    assert result.planning_rate_per_s == 2.0  # the highest stage
    assert result.requests == 90  # int(1 x 30) + int(2 x 30)
    spec = result.workload
    assert spec.arrival == "poisson"
    assert spec.shared_prefix is not None
    block = spec.shared_prefix
    # 90 requests over a list of 100 prompts: none is sent twice, so every question is new to the cache
    assert (block.num_prefixes, block.questions_per_prefix, block.distinct_prompts()) == (10, None, None)
    assert "no prompt resent" in spec.description
    assert block.prefix_probabilities().tolist() == [0.1] * 10
    assert {int(v) for v in block.prompt_pmf().values} == {150}
    assert "highest stage rate, 2 requests/s" in spec.description
    assert "7de5ef2" in spec.source


def test_a_prompt_list_sent_more_than_once_resends_its_questions(tmp_path: Path) -> None:
    """inference-perf sends request n the prompt n mod G·U of its fixed list (module docstring): with 150 s at the
    same rates (int(1 x 150) + int(2 x 150) = 450 requests over 100 prompts) each prompt is resent, so the block keeps
    U = 10 questions per prefix and says the steady state is priced (the first pass, 100 of 450 requests, 22.2 %)."""
    result = load_inference_perf(_config(tmp_path, SHARED.replace("duration: 30", "duration: 150")))
    assert result.requests == 450
    block = result.workload.shared_prefix
    assert block is not None
    assert (block.questions_per_prefix, block.distinct_prompts()) == (10, 100)
    assert "22.2% of the requests" in result.workload.description


def test_multi_turn_config_is_sessions(tmp_path: Path) -> None:
    """20 users, 100 requests: 5 turns each; turn 1 = 100 + (100 + 50), each later turn adds 50 + (100 + 50)."""
    result = load_inference_perf(_config(tmp_path, MULTI_TURN))
    s = result.workload.sessions
    assert s is not None
    assert s.mean_turns() == 5.0
    assert {int(v): float(p) for v, p in zip(s.prompt_pmf().values, s.prompt_pmf().prob, strict=True)} == pytest.approx(
        {250: 0.2, 450: 0.2, 650: 0.2, 850: 0.2, 1050: 0.2}
    )
    assert (s.system_prompt_tokens, s.distinct_system_prompts) == (100, 2)
    assert s.think_time.mean_s() == pytest.approx(20 / 20.0)  # 20 users' rounds at 20 requests/s
    assert s.nominal_request_rate_per_s() == 20.0
    assert "re-sends the system prompt" in result.workload.description


def test_turns_split_the_requests_over_the_users(tmp_path: Path) -> None:
    text = MULTI_TURN.replace("rate: 20\n    duration: 5", "rate: 3\n    duration: 7").replace(
        "num_unique_system_prompts: 2\n    num_users_per_system_prompt: 10",
        "num_unique_system_prompts: 2\n    num_users_per_system_prompt: 2",
    )
    turns = load_inference_perf(_config(tmp_path, text)).workload.sessions.turns  # type: ignore[union-attr]
    assert turns.model_dump() == {"dist": "histogram", "values": [5, 6], "weights": [3.0, 1.0]}  # 21 over 4 users
    few = text.replace("rate: 3\n    duration: 7", "rate: 1\n    duration: 2")
    assert load_inference_perf(_config(tmp_path, few)).workload.sessions.turns.model_dump() == {  # type: ignore[union-attr]
        "dist": "fixed",
        "value": 1,
    }


def test_distributions_take_the_schema_defaults(tmp_path: Path) -> None:
    text = SHARED.replace(
        "question_len: 50", "question_len: {type: lognormal, mean: 200, std_dev: 80, min: 10, max: 2000}"
    )
    text = text.replace("output_len: 50", "output_len: {type: normal}").replace(
        "system_prompt_len: 100", "system_prompt_len: {type: uniform, min: 90, max: 110}"
    )
    result = load_inference_perf(_config(tmp_path, text))
    block = result.workload.shared_prefix
    assert block is not None
    question, output = block.question_tokens, block.output_tokens
    assert isinstance(question, LognormalDist)
    sigma = math.sqrt(math.log1p((80 / 200) ** 2))
    assert question.sigma == pytest.approx(sigma)
    assert question.mu == pytest.approx(math.log(200) - sigma**2 / 2)
    assert question.mean_tokens() == pytest.approx(200, rel=0.01)
    assert isinstance(output, NormalDist)
    assert (output.mean, output.std, output.min, output.max) == (512, 200, 10, 1024)  # common.py Distribution defaults
    assert isinstance(block.prefix_tokens, UniformDist)
    assert "output: inference-perf clips draws to [min, max], pdplan truncates" in result.workload.description


def test_legacy_distribution_and_poisson_load(tmp_path: Path) -> None:
    text = SHARED.replace("question_len: 50", "question_len: 50\n    question_distribution: {type: fixed, mean: 64}")
    text = text.replace("type: constant", "type: poisson").replace(
        "rate: 1\n    duration: 30", "rate: 1.5\n    duration: 3"
    )
    result = load_inference_perf(_config(tmp_path, text))
    assert result.workload.shared_prefix.question_tokens.model_dump() == {"dist": "fixed", "value": 64}  # type: ignore[union-attr]
    assert result.requests == round(1.5 * 3 + 2 * 30)
    assert "poisson stages" in result.workload.description


def test_detected_as_a_workload_and_by_validate(tmp_path: Path) -> None:
    path = _config(tmp_path, SHARED)
    assert load_workload(path).shared_prefix is not None
    assert check_file(path).kind == "inference-perf"
    assert check_file(path).ok


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("api:", "apis: {}\napi:", "apis: unknown or unsupported key; pdplan reads: api, data, load"),
        ("type: shared_prefix", "type: random", "data.type: data type 'random' is not supported"),
        ("type: constant", "type: concurrent", "load.type: load type 'concurrent' is not supported"),
        ("  interval: 15\n", "  sweep: {type: linear}\n", "load.sweep: unknown or unsupported key"),
        (
            "question_len: 50",
            "question_len: {type: skew_normal, mean: 200}",
            "question_len: distribution type 'skew_normal'",
        ),
        ("question_len: 50", "question_len: 0", "data.shared_prefix.question_len: 0 tokens"),
        (
            "question_len: 50",
            "question_len: {std_dev: 0, variance: 100, min: 20, max: 10}",
            "min (20) must be <= max (10)",
        ),
        ("question_len: 50", "question_len: {variance: 100}", "give std_dev or variance, not both"),
        ("question_len: 50", "question_len: {type: normal, mean: 5000}", "question_len: mean (5000.0) must lie within"),
        (
            "question_len: 50",
            "question_len: {type: normal, means: 5}",
            "question_len.means: unknown or unsupported key",
        ),
        ("question_len: 50", "question_len: fifty", "question_len: 'fifty' must be an integer or a distribution"),
        (
            "output_len: 50",
            "output_len: 50\n    multimodal: {}",
            "data.shared_prefix.multimodal: unknown or unsupported",
        ),
        ("output_len: 50", "output_len: 50\n    num_groups: 3", "data.shared_prefix.num_groups: given twice"),
        ("output_len: 50", "output_len: 50\n    enable_multi_turn_chat: yes please", "must be true or false"),
        (
            "num_unique_system_prompts: 10",
            "num_unique_system_prompts: 0",
            "num_unique_system_prompts: 0 must be an integer",
        ),
        (
            "  - rate: 1\n    duration: 30\n",
            "  - rate: 0\n    duration: 30\n",
            "load.stages.0.rate: 0 must be a number > 0",
        ),
        (
            "  - rate: 1\n    duration: 30\n",
            "  - rate: 1\n    duration: 30\n    num_requests: 5\n",
            "load.stages.0.num_requests",
        ),
        ("data:\n", "data:\n  path: sharegpt.json\n", "data.path: unknown or unsupported key"),
    ],
)
def test_bad_configs_name_the_key(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in SHARED
    path = _config(tmp_path, SHARED.replace(old, new, 1))
    with pytest.raises(SpecError) as info:
        load_inference_perf(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert expected in message, message


def test_no_stages_and_multi_turn_distribution_are_refused(tmp_path: Path) -> None:
    no_stages = SHARED.split("load:")[0] + "load: {type: constant}\n" + "data:" + SHARED.split("data:")[1]
    with pytest.raises(SpecError, match=r"load\.stages: no load stages"):
        load_inference_perf(_config(tmp_path, no_stages))
    text = MULTI_TURN.replace("system_prompt_len: 100", "system_prompt_len: {type: uniform, min: 90, max: 110}")
    with pytest.raises(SpecError, match="system_prompt_len: a distribution of system_prompt_len is not supported"):
        load_inference_perf(_config(tmp_path, text))
