"""``pdplan export`` output per target, byte for byte, from the frozen optimise reports in this folder.

Inputs: ``examples/default.json`` rank 1 (disaggregated, one GPU type), ``examples/opt-13b-a100-distserve.json``
rank 1 (colocated) and ``optimize_2p1d_h100.json`` rank 3 (H100 prefill, H20 decode). Those reports are goldens
themselves, so ``pytest tests/golden --update-golden`` regenerates them first (this file sorts after theirs).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pdplan.io.catalog import open_catalog
from pdplan.io.export_data import read_plan_document
from pdplan.report.export import export_plan, plan_gpus
from pdplan.report.export.context import export_context

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    ("tests/golden/examples/default.json", 1, "dynamo", "vllm", "export_default_dynamo.yaml"),
    ("tests/golden/examples/default.json", 1, "dynamo", "sglang", "export_default_dynamo_sglang.yaml"),
    ("tests/golden/examples/default.json", 1, "vllm", "vllm", "export_default_vllm.sh"),
    ("tests/golden/examples/default.json", 1, "sglang", "vllm", "export_default_sglang.sh"),
    ("tests/golden/examples/opt-13b-a100-distserve.json", 1, "vllm", "vllm", "export_colocated_vllm.sh"),
    ("tests/golden/examples/opt-13b-a100-distserve.json", 1, "dynamo", "vllm", "export_colocated_dynamo.yaml"),
    ("tests/golden/optimize_2p1d_h100.json", 3, "dynamo", "vllm", "export_mixed_gpu_dynamo.yaml"),
]


@pytest.mark.parametrize(("plan", "rank", "target", "backend", "name"), CASES)
def test_export_matches_golden(
    plan: str, rank: int, target: str, backend: str, name: str, golden: Callable[[str, str], None]
) -> None:
    doc = read_plan_document(str(ROOT / plan))
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, rank, plan), source=plan)
    result = export_plan(doc, target=target, rank=rank, ctx=ctx, source=plan, backend=backend)
    golden(name, result.text)
