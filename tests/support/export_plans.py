"""The plans every export check runs over, and each export of each plan to each target.

Plans: every ranked plan of the golden example reports (``tests/golden/examples``: Llama-3.1-70B disaggregated,
DeepSeek-V3 wide-EP MoE, OPT-13B colocated and disaggregated, both PrfaaS examples), the synthetic report fixture
(mixed H100 / H20), ``examples/h100-prefill-l40s-decode.yaml`` and ``examples/fp8-h200.yaml`` optimised here (mixed
GPU types; FP8 weights and KV), ``examples/chat-sessions.yaml`` and ``examples/shared-system-prompt.yaml`` (KV-aware:
prefix caching, affinity and load-balance routing, a host-DRAM tier), and two variants that vLLM can run,
request-granularity KV transfer (vLLM's NIXL connector moves a request's KV after its prefill, so it refuses layer- and
chunk-granularity plans): the wide-EP example with DP8 instances (one node each, so the script targets run it too) and
with DP16 instances (two nodes each: vLLM's data-parallel ranks over nodes), with DP8 instances without two-batch
overlap (TensorRT-LLM's attention DP and WIDEEP MoE), and with DP16 instances without it (TensorRT-LLM's MPI world
over two nodes), the H100 / A100 example and the PrfaaS H200 / H100 example; and two priced with the TensorRT-LLM
engine profile (``engine: trtllm``): the default example (dense, disaggregated) and the wide-EP example with DP8
instances without two-batch overlap (MoE: attention DP, EP8, redundant experts).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.export_data import read_plan_document
from pdplan.report import render_optimize
from pdplan.report.export import ExportResult, export_plan, plan_gpus
from pdplan.report.export.context import export_context
from pdplan.specs.export import PlanDocument
from support.optimized import Optimized
from support.plan_fixture import plan_result

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "examples"
GOLDEN_DOCS = ["default", "deepseek-v3-wide-ep", "opt-13b-a100-distserve", "prfaas-h200-h100", "prfaas-h200-h20"]
OPTIMIZED_DOCS = ["h100-prefill-l40s-decode", "fp8-h200", "chat-sessions", "shared-system-prompt"]
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "wide-ep-request": (
        "deepseek-v3-wide-ep",
        {"granularity": "request", "search": {"tp": [1], "prefill_dp": [8], "decode_dp": [8], "max_instances": 3}},
    ),
    "wide-ep-request-2node": (
        "deepseek-v3-wide-ep",
        {"granularity": "request", "search": {"tp": [1], "prefill_dp": [16], "decode_dp": [16], "max_instances": 2}},
    ),
    "wide-ep-request-no-tbo": (
        "deepseek-v3-wide-ep",
        {
            "granularity": "request",
            "two_batch_overlap": False,
            "search": {"tp": [1], "prefill_dp": [8], "decode_dp": [8], "max_instances": 3},
        },
    ),
    "wide-ep-request-2node-no-tbo": (
        "deepseek-v3-wide-ep",
        {
            "granularity": "request",
            "two_batch_overlap": False,
            "search": {"tp": [1], "prefill_dp": [16], "decode_dp": [16], "max_instances": 2},
        },
    ),
    "mixed-gpu-request": ("h100-prefill-l40s-decode", {"granularity": "request"}),
    "default-trtllm": ("default", {"engine": "trtllm"}),
    "wide-ep-trtllm": (
        "deepseek-v3-wide-ep",
        {
            "engine": "trtllm",
            "granularity": "request",
            "two_batch_overlap": False,
            "search": {"tp": [1], "prefill_dp": [8], "decode_dp": [8], "max_instances": 3},
        },
    ),
    "prfaas-request": ("prfaas-h200-h100", {"granularity": "request"}),
}
DOCUMENTS = [*GOLDEN_DOCS, "fixture", *OPTIMIZED_DOCS, *VARIANTS]
_VARIANT_DIR: list[Path] = []


def variant_path(name: str) -> Path:
    """The example scenario with :data:`VARIANTS`' changes (the search block's keys merged), written once per test
    process to one folder, so :class:`Optimized` optimises it once."""
    if not _VARIANT_DIR:
        _VARIANT_DIR.append(Path(tempfile.mkdtemp(prefix="pdplan-export-variants-")))
    path = _VARIANT_DIR[0] / f"{name}.yaml"
    if not path.exists():
        base, changes = VARIANTS[name]
        scenario = yaml.safe_load((ROOT / "examples" / f"{base}.yaml").read_text())
        search = {**scenario.get("search", {}), **changes.get("search", {})}
        scenario.update({**changes, "search": search})
        path.write_text(yaml.safe_dump(scenario))
    return path


def document(name: str, optimized: Optimized) -> PlanDocument:
    """One of :data:`DOCUMENTS` as the plan document ``optimize --format json`` writes."""
    if name in GOLDEN_DOCS:
        return read_plan_document(str(GOLDEN / f"{name}.json"))
    if name == "fixture":
        result = plan_result()
    else:
        result = optimized(variant_path(name), analyse=False) if name in VARIANTS else optimized(name)
    text = render_optimize(result, "json")
    assert isinstance(text, str)
    return read_plan_document("-", text)


def export(doc: PlanDocument, rank: int, target: str, backend: str = "vllm") -> ExportResult:
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, rank, "test"), source="test")
    return export_plan(doc, target=target, rank=rank, ctx=ctx, source="test", backend=backend)


def plan_kinds(doc: PlanDocument, rank: int) -> set[str]:
    """``colocated`` / ``disaggregated``, ``dense`` / ``moe`` (EP > 1), ``mixed-gpu``, ``prfaas``, ``kv-aware``
    (prefix caching with affinity routing)."""
    plan = doc.plans[rank - 1]
    roles = [r for r in (plan.get(k) for k in ("prefill", "decode", "colocated")) if isinstance(r, dict)]
    kinds = {str(plan["mode"]), "moe" if any(int(r.get("ep", 1)) > 1 for r in roles) else "dense"}
    kinds |= {"mixed-gpu"} if len({r["gpu"] for r in roles}) > 1 else set()
    cache = plan.get("cache")
    if isinstance(cache, dict) and cache.get("prefix_caching") and cache.get("routing") == "affinity":
        kinds.add("kv-aware")
    return kinds | ({"prfaas"} if plan.get("prfaas") else set())


@dataclass(frozen=True)
class Outcome:
    """One export attempt: the document, rank, the plan's kinds, the target, and the result or the refusal."""

    name: str
    rank: int
    kinds: frozenset[str]
    target: str
    backend: str
    result: ExportResult | None
    refusal: str | None


def outcomes(optimized: Optimized, targets: list[tuple[str, str]]) -> Iterator[Outcome]:
    """Every plan of every document exported to every target (a SpecError is a refusal)."""
    for name in DOCUMENTS:
        doc = document(name, optimized)
        for rank in range(1, len(doc.plans) + 1):
            kinds = frozenset(plan_kinds(doc, rank))
            for target, backend in targets:
                try:
                    result = export(doc, rank, target, backend)
                except SpecError as err:
                    yield Outcome(name, rank, kinds, target, backend, None, str(err))
                    continue
                yield Outcome(name, rank, kinds, target, backend, result, None)
