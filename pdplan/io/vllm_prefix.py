"""``vllm bench serve`` result JSON read as a workload: the prefix datasets (``random`` with ``--random-prefix-len``,
``prefix_repetition``) and the arrival process (docs/reuse_workloads.md §6).

**What the JSON records** (``vllm-project/vllm``, ``vllm/benchmarks/serve.py`` at ``def9ce8``, ``main_async``):
``backend``, ``model_id``, ``num_prompts``, ``request_rate`` (``"inf"`` when unset), ``burstiness``,
``max_concurrency``, the ramp-up settings when used, every ``--metadata KEY=VALUE`` pair at the top level, and the
results. It does **not** record ``--dataset-name`` or any dataset option. pdplan therefore reads them from metadata
pairs named as the options' argparse destinations (``--metadata dataset_name=prefix_repetition
prefix_repetition_prefix_len=512 ...``), and refuses a file without them rather than guess.

**The datasets** (``vllm/benchmarks/datasets/arg_utils.py``, ``random.py``, ``prefix_repetition.py`` at
``237145e``):

* ``random``: one prefix of ``random_prefix_len`` tokens shared by every request, then a sampled length uniform on
  the integers ``[⌊I·(1 − r)⌋, ⌈I·(1 + r)⌉]`` (I = ``random_input_len`` less the tokenizer's special tokens,
  r = ``random_range_ratio``); outputs uniform on ``[max(1, ⌊O·(1 − r)⌋), max(1, ⌈O·(1 + r)⌉)]``
  (``RandomDataset.get_sampling_params``). Required keys: ``random_input_len``, ``random_output_len``,
  ``random_range_ratio``, ``random_prefix_len``.
* ``prefix_repetition``: ``prefix_repetition_num_prefixes`` prefixes of ``prefix_repetition_prefix_len`` tokens,
  ``num_prompts // num_prefixes`` prompts each, every prompt the prefix plus its own ``prefix_repetition_suffix_len``
  tokens, ``prefix_repetition_output_len`` output tokens, shuffled: uniform popularity, every question new.

**Arrivals** (``serve.py``, ``get_request``): gaps are gamma with shape ``burstiness`` and mean 1/rate, so
c_a² = 1/burstiness: ``poisson`` at burstiness 1, ``constant`` at infinity, else ``gamma`` with cv = 1/√burstiness.
``request_rate`` is the rate (requests/s); ``"inf"`` (every request at time 0, as closed-loop runs use) gives no
rate. A ramp-up run's rate is its ``ramp_up_end_rps``.

**Not recoverable:** the tokenizer's special tokens (``random`` subtracts them from the sampled length and the server
adds them back: pdplan takes 0), the prompts' text and hashes, the seed, and, without ``--save-detailed``, any
per-request length.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pdplan.errors import SpecError
from pdplan.io.files import DEEP_MESSAGE, read_text_file
from pdplan.specs.base import first_error_line
from pdplan.specs.workload import WorkloadSpec

SOURCE = "vllm-project/vllm vllm/benchmarks (serve.py def9ce8, datasets 237145e)"
DATASET_KEYS = {
    "random": ("random_input_len", "random_output_len", "random_range_ratio", "random_prefix_len"),
    "prefix_repetition": (
        "prefix_repetition_prefix_len",
        "prefix_repetition_suffix_len",
        "prefix_repetition_num_prefixes",
        "prefix_repetition_output_len",
    ),
}


@dataclass(frozen=True)
class VllmBenchWorkload:
    """A ``vllm bench serve`` run as pdplan reads it: the workload, the run's rate (None: ``inf``) and prompts."""

    workload: WorkloadSpec
    request_rate_per_s: float | None
    num_prompts: int
    notes: tuple[str, ...]


def load_vllm_bench_workload(path: str | Path) -> VllmBenchWorkload:
    """Read one ``vllm bench serve --save-result`` JSON (module docstring)."""
    path = Path(path)
    text = read_text_file(path).strip()
    try:
        data = json.loads(text)
    except ValueError as err:
        raise SpecError(f"not one JSON object ({err}); pass a file of one run", source=str(path)) from None
    except RecursionError:
        raise SpecError(DEEP_MESSAGE, source=str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("expected a JSON object (one run)", source=str(path))
    return vllm_bench_workload(data, source=str(path), name=path.stem)


def vllm_bench_workload(data: dict[str, Any], *, source: str, name: str) -> VllmBenchWorkload:
    """Map a parsed result (module docstring); errors name ``source`` and the key."""
    dataset = data.get("dataset_name")
    if dataset is None:
        raise SpecError(
            "the result JSON does not record the dataset or its prefix options; rerun with --metadata "
            "dataset_name=... and the dataset's options (e.g. prefix_repetition_prefix_len=...)",
            source=source,
            field="dataset_name",
        )
    if dataset not in DATASET_KEYS:
        raise SpecError(
            f"dataset {dataset!r} has no prefix options pdplan maps; valid: random, prefix_repetition",
            source=source,
            field="dataset_name",
        )
    opts = {key: _number(data, key, source) for key in DATASET_KEYS[str(dataset)]}
    num_prompts = int(_number(data, "num_prompts", source))
    arrival, rate, notes = _arrival(data, source)
    block = _random(opts, notes, source) if dataset == "random" else _repetition(opts, num_prompts, notes, source)
    spec_data = {
        "name": name,
        "description": "; ".join(notes),
        "source": f"vllm bench serve result {source} ({SOURCE})",
        "arrival": arrival,
        **block,
    }
    try:
        spec = WorkloadSpec.model_validate(spec_data)
    except ValidationError as err:
        field, message = first_error_line(err)
        raise SpecError(f"cannot be mapped: {message}", source=source, field=field) from None
    return VllmBenchWorkload(workload=spec, request_rate_per_s=rate, num_prompts=num_prompts, notes=tuple(notes))


def _number(data: dict[str, Any], key: str, source: str) -> float:
    """A recorded number (metadata values are strings); missing or not a finite number ≥ 0 is an error."""
    if key not in data:
        raise SpecError("not recorded; pass it with --metadata KEY=VALUE", source=source, field=key)
    value = data[key]
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"{value!r} is not a number", source=source, field=key) from None
    if isinstance(value, bool) or not 0 <= number < math.inf:
        raise SpecError(f"{value!r} must be a finite number >= 0", source=source, field=key)
    return number


def _uniform(lo: int, hi: int) -> dict[str, Any]:
    return {"dist": "fixed", "value": lo} if lo == hi else {"dist": "uniform", "min": lo, "max": hi}


def _random(opts: dict[str, float], notes: list[str], source: str) -> dict[str, Any]:
    length, out, ratio, prefix = (opts[k] for k in DATASET_KEYS["random"])
    if not ratio < 1:
        raise SpecError(f"{ratio} must lie in [0, 1)", source=source, field="random_range_ratio")
    question = _uniform(math.floor(length * (1 - ratio)), math.ceil(length * (1 + ratio)))
    output = _uniform(max(1, math.floor(out * (1 - ratio))), max(1, math.ceil(out * (1 + ratio))))
    notes.append("the tokenizer's special tokens are not recorded: pdplan takes 0")
    if prefix == 0:
        return {"input_tokens": question, "output_tokens": output}
    notes.append(f"one prefix of {int(prefix)} tokens shared by every request")
    block = {
        "num_prefixes": 1,
        "prefix_tokens": {"dist": "fixed", "value": int(prefix)},
        "question_tokens": question,
        "output_tokens": output,
    }
    return {"shared_prefix": block}


def _repetition(opts: dict[str, float], num_prompts: int, notes: list[str], source: str) -> dict[str, Any]:
    prefix, suffix, count, out = (int(opts[k]) for k in DATASET_KEYS["prefix_repetition"])
    if count < 1 or num_prompts < count:
        raise SpecError(
            f"num_prompts ({num_prompts}) must be >= prefix_repetition_num_prefixes ({count}) >= 1",
            source=source,
            field="prefix_repetition_num_prefixes",
        )
    notes.append(f"{count} prefixes x {num_prompts // count} prompts each, every prompt new")
    block = {
        "num_prefixes": count,
        "prefix_tokens": {"dist": "fixed", "value": prefix},
        "question_tokens": {"dist": "fixed", "value": suffix},
        "output_tokens": {"dist": "fixed", "value": out},
        "popularity": "uniform",
    }
    return {"shared_prefix": block}


def _arrival(data: dict[str, Any], source: str) -> tuple[Any, float | None, list[str]]:
    """(arrival field, rate in requests/s or None, notes) from ``request_rate``, ``burstiness`` and ramp-up."""
    key = "ramp_up_end_rps" if data.get("ramp_up_strategy") else "request_rate"
    rate = None if str(data.get(key, "inf")) == "inf" else _number(data, key, source)
    if rate is not None and rate <= 0:
        raise SpecError(f"{rate} must be > 0 requests/s", source=source, field=key)
    notes = ["request_rate inf: no open-loop rate recorded"] if rate is None else []
    if key == "ramp_up_end_rps":
        notes.append(f"ramp-up run: its final rate {rate} requests/s")
    burst = math.inf if str(data.get("burstiness")) in ("inf", "Infinity") else _number(data, "burstiness", source)
    if burst <= 0:
        raise SpecError(f"{burst} must be > 0", source=source, field="burstiness")
    if burst == 1.0:
        return "poisson", rate, notes
    if math.isinf(burst):
        return "constant", rate, notes
    return {"process": "gamma", "cv": 1.0 / math.sqrt(burst)}, rate, notes
