"""A one-instance colocated H100 deployment under vLLM 0.18 (chunked, 2,048-token budget, 128 seats, 575-in /
246-out fixed lengths, the shape of the inference-sim open-loop runs), resolved for a model and TP: the concave
decode law's tests price Mixtral-8x7B TP2 and Llama-3.1-70B TP4 on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdplan.io.catalog import open_catalog
from pdplan.io.scenario import scenario_from_dict
from pdplan.serving.resolve import ResolvedScenario, resolve

CATALOG = open_catalog()


def vllm018_colocated(model: str, tp: int, **extra: Any) -> ResolvedScenario[Any]:
    """The deployment of ``model`` at ``tp``, any top-level scenario keys in ``extra`` replacing the defaults."""
    data: dict[str, Any] = {
        "model": model,
        "mode": "colocated",
        "colocated": {"gpu": "h100-sxm", "tp": tp, "count": 1, "scheduler": "chunked", "chunk_tokens": 2048},
        "workload": {"input_tokens": {"dist": "fixed", "value": 575}, "output_tokens": {"dist": "fixed", "value": 246}},
        "slo": {"ttft": "60s", "tpot": "10s", "percentile": 99},
        "dtype": "bf16",
        "kv_dtype": "bf16",
        "max_num_seqs": 128,
        "max_model_len": 4096,
        "engine": "vllm-0.18",
    }
    data.update(extra)
    return resolve(scenario_from_dict(data, source="test", base_dir=Path.cwd()), CATALOG)
