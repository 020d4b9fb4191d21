"""The front a colocated plan's instances get on each target (issue #25 item 3), parsed as the pinned engines parse it
(``tests/support/engine_args.py``) from the command lines the scripts really run (``tests/support/export_argv.py``).

vLLM 0.20.1: one ``vllm serve --data-parallel-size z`` where the z dense TP-only instances fit one node
(:mod:`pdplan.report.export.vllm_dp`), else one server per instance and a note. SGLang: sglang-router 0.3.2 over the
instances with the priced policy. Dynamo: its frontend over the aggregated workers. TensorRT-LLM: a note.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.engine_args import EngineRefusal, check
from support.export_argv import script_argvs

from pdplan.io.catalog import open_catalog
from pdplan.io.export_data import engine_flags
from pdplan.report.export import ExportResult, export_plan, plan_gpus
from pdplan.report.export.context import export_context
from pdplan.specs.base import validate_spec
from pdplan.specs.export import PlanDocument

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _doc(count: int, tp: int, *, model: str = "llama-3.1-70b", routing: str = "random", **extra: Any) -> PlanDocument:
    plan: dict[str, Any] = {
        "mode": "colocated",
        "label": f"colocated {count}x h100-sxm TP{tp} chunked",
        "prefill": None,
        "decode": None,
        "colocated": {"gpu": "h100-sxm", "tp": tp, "pp": 1, "count": count},
        "granularity": None,
        "routing": None,
        "scheduler": "chunked",
        "max_num_seqs": 128,
        "num_gpus": count * tp,
        "goodput_rps": 4.0,
        "ttft_p90_s": 0.5,
        "tpot_p90_s": 0.04,
        "priced": {
            "engine": "vllm",
            "engine_version": "0.12.0",
            "routing": {"colocated": routing},
            "roles": {"colocated": {"gpu_memory_utilization": 0.9, "max_num_batched_tokens": 2048}},
        },
        **extra,
    }
    data = {"plans": [plan], "inputs": {"model": {"name": model}, "dtype": "bf16", "kv_dtype": "bf16"}}
    return validate_spec(PlanDocument, data, "test")


def _export(doc: PlanDocument, target: str, **context: Any) -> ExportResult:
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, 1, "test"), source="test", **context)
    return export_plan(doc, target=target, rank=1, ctx=ctx, source="test")


def _routing(result: ExportResult) -> str:
    return next(line for line in result.text.splitlines() if line.startswith("# routing:"))


def _visible_devices(text: str, tmp: Path) -> str:
    """``CUDA_VISIBLE_DEVICES`` as the ``colocated`` case hands it to ``vllm`` (a stub that prints it)."""
    (tmp / "bin").mkdir(parents=True)
    stub = tmp / "bin" / "vllm"
    stub.write_text('#!/bin/sh\nprintf "%s" "$CUDA_VISIBLE_DEVICES"\n')
    stub.chmod(0o755)
    (tmp / "launch.sh").write_text(text)
    env = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "HOST_IP": "10.0.0.1"}
    run = subprocess.run(["bash", str(tmp / "launch.sh"), "colocated"], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_vllm_instances_on_one_node_run_as_data_parallel_engines(tmp_path: Path) -> None:
    """3 x TP2 Llama-3.1-70B on 8-GPU H100 nodes: 6 GPUs, one node, so one ``vllm serve`` with 3 DP ranks of TP2 on
    GPUs 0..5, each rank capped at the plan's 128 sequences (per DP engine in vLLM), on the colocated port 8000."""
    result = _export(_doc(3, 2), "vllm")
    [(program, argv)] = script_argvs(result.text, tmp_path / "argv")
    ns = check(program, argv)
    assert (program, ns.model_tag) == ("vllm serve", "meta-llama/Llama-3.1-70B-Instruct")
    assert (ns.data_parallel_size, ns.tensor_parallel_size, ns.port, ns.max_num_seqs) == (3, 2, 8000, 128)
    assert (ns.data_parallel_size_local, ns.data_parallel_rank) == (None, None)  # all ranks local: internal LB
    assert _visible_devices(result.text, tmp_path / "env") == "0,1,2,3,4,5"
    assert "4 x waiting + running" in _routing(result)
    assert "SLOT" not in result.text  # one launch, no per-instance slots
    assert [c.program for c in result.commands] == ["vllm serve"]
    accepted = set(engine_flags().programs["vllm serve"].flags)  # the curated list, too
    assert {flag for flag, _ in result.commands[0].flags} <= accepted


def test_vllm_instances_wider_than_a_node_run_behind_one_front_over_two_nodes(tmp_path: Path) -> None:
    """3 x TP4 = 12 GPUs on 8-GPU nodes: 2 engines fit a node, so 2 nodes, 2 engines on node 0 and 1 on node 1
    (start rank 2); with 16-GPU nodes (``--gpus-per-node 16``) all 3 on one node."""
    doc = _doc(3, 4)
    result = _export(doc, "vllm")
    assert "a load-aware split over the 3 data-parallel engines" in _routing(result)
    argvs = script_argvs(result.text, tmp_path / "narrow")
    head, rest = (check(p, a) for p, a in argvs)  # NODE 0, then NODE 1
    assert (head.data_parallel_size, head.data_parallel_size_local, head.data_parallel_start_rank) == (3, 2, None)
    assert (rest.data_parallel_size, rest.data_parallel_size_local, rest.data_parallel_start_rank) == (3, 1, 2)
    assert "(2 on nodes 0..0, 1 on the rest)" in result.text
    wide = _export(doc, "vllm", gpus_per_node=16)
    [(program, argv)] = script_argvs(wide.text, tmp_path / "wide")
    assert (check(program, argv).data_parallel_size, check(program, argv).tensor_parallel_size) == (3, 4)


@pytest.mark.parametrize(
    ("model", "context", "reason"),
    [
        ("deepseek-v3", {"gpus_per_node": 16}, "an MoE model's data-parallel ranks run in lockstep"),
        ("not-in-the-catalogue", {"model_id": "org/model"}, "the catalogue does not hold the model"),
    ],
)
def test_vllm_writes_no_data_parallel_front_where_the_ranks_would_not_be_the_priced_instances(
    model: str, context: dict[str, Any], reason: str
) -> None:
    result = _export(_doc(2, 8, model=model), "vllm", **context)
    assert reason in _routing(result)
    assert all(("--data-parallel-size", "2") not in c.flags for c in result.commands)


def test_one_instance_needs_no_balancer() -> None:
    result = _export(_doc(1, 2), "vllm")
    assert _routing(result).endswith("one instance: no load balancer needed")
    assert ("--data-parallel-size", "1") not in result.commands[0].flags


@pytest.mark.parametrize(
    ("routing", "extra", "policy"),
    [
        ("least-work", {}, "power_of_two"),  # the router's load-aware policy (no least-work one)
        ("random", {"cache": {"prefix_caching": True, "routing": "affinity"}}, "cache_aware"),
    ],
)
def test_sglang_router_balances_colocated_instances_with_the_priced_policy(
    routing: str, extra: dict[str, Any], policy: str, tmp_path: Path
) -> None:
    """3 x TP4 on 8-GPU nodes: 2 per node, so the router lists n0:30000, n0:30001, n1:30000 (regular mode)."""
    result = _export(_doc(3, 4, routing=routing, **extra), "sglang")
    argvs = dict(script_argvs(result.text, tmp_path))
    router = check("python -m sglang_router.launch_router", argvs["python -m sglang_router.launch_router"])
    assert not router.pd_disaggregation  # regular mode
    assert router.worker_urls == ["http://10.1.0.0:30000", "http://10.1.0.0:30001", "http://10.1.0.1:30000"]
    assert (router.policy, router.host, router.port) == (policy, "0.0.0.0", 8000)


def test_dynamo_frontend_balances_over_the_aggregated_workers() -> None:
    result = _export(_doc(3, 4), "dynamo")
    assert "Dynamo's frontend balances over the 3 aggregated worker(s) with --router-mode random" in _routing(result)
    assert "replicas: 3" in result.text


def test_trtllm_says_why_its_disaggregated_server_is_no_balancer() -> None:
    result = _export(_doc(3, 4), "trtllm")
    assert "trtllm-serve disaggregated needs context servers" in _routing(result)
    assert [c.program for c in result.commands] == ["trtllm-serve"]


def test_a_wrong_flag_in_a_colocated_front_fails_the_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The export-to-parser path catches a wrong front: a misspelt engine flag on vLLM's data-parallel server, and a
    policy sglang-router 0.3.2 does not have."""
    import pdplan.report.export.sglang as sglang_target
    import pdplan.report.export.vllm as vllm_target

    real = vllm_target.role_engine_flags
    monkeypatch.setattr(vllm_target, "role_engine_flags", lambda *a: [*real(*a), ("--max-num-seq", "8")])
    [(program, argv)] = script_argvs(_export(_doc(3, 2), "vllm").text, tmp_path / "vllm")
    assert "--data-parallel-size" in argv
    with pytest.raises(EngineRefusal, match="unrecognized arguments: --max-num-seq"):
        check(program, argv)
    monkeypatch.setattr(sglang_target, "sglang_policy_flags", lambda chosen: [("--policy", "least_work")])
    argvs = dict(script_argvs(_export(_doc(3, 4), "sglang").text, tmp_path / "sglang"))
    with pytest.raises(EngineRefusal, match="is not one of"):
        check("python -m sglang_router.launch_router", argvs["python -m sglang_router.launch_router"])
