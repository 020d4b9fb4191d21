"""Instances and fronts over several nodes in the launch scripts (issue #25): an SGLang instance wider than a node as
one ``launch_server`` a node (``--nnodes``, ``--node-rank``, ``--dist-init-addr``), and a colocated vLLM plan whose
instances need several nodes as one data-parallel front spanning them. Every command line is the one the script
really runs (``tests/support/export_argv.py``), parsed and checked as the pinned engines do
(``tests/support/engine_args.py``: SGLang 0.5.11, vLLM 0.20.1, sglang-router 0.3.2).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.engine_args import EngineRefusal, check
from support.export_argv import script_argvs

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.report.export import ExportResult, export_plan, plan_gpus
from pdplan.report.export.context import export_context
from pdplan.specs.base import validate_spec
from pdplan.specs.export import PlanDocument

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

SERVER = "python -m sglang.launch_server"
ROUTER = "python -m sglang_router.launch_router"


def _roles(mode: str, **roles: dict[str, Any]) -> dict[str, Any]:
    """A plan of ``mode`` with ``roles`` (prefill and decode, or colocated), priced with vLLM's settings."""
    names = ("colocated",) if mode == "colocated" else ("prefill", "decode")
    gpus = sum(r["tp"] * r.get("pp", 1) * r.get("dp", 1) * r["count"] for r in roles.values())
    return {
        "mode": mode,
        "label": f"{mode} plan over nodes",
        "prefill": roles.get("prefill"),
        "decode": roles.get("decode"),
        "colocated": roles.get("colocated"),
        "granularity": None if mode == "colocated" else "chunk",
        "routing": None,
        "scheduler": "chunked" if mode == "colocated" else None,
        "max_num_seqs": 128,
        "num_gpus": gpus,
        "goodput_rps": 10.0,
        "ttft_p90_s": 0.5,
        "tpot_p90_s": 0.04,
        "priced": {
            "engine": "vllm",
            "engine_version": "0.12.0",
            "routing": {name: "random" for name in names},
            "roles": {name: {"gpu_memory_utilization": 0.9, "max_num_batched_tokens": 4096} for name in names},
        },
    }


def _doc(plan: dict[str, Any], model: str = "llama-3.1-70b") -> PlanDocument:
    data = {"plans": [plan], "inputs": {"model": {"name": model}, "dtype": "bf16", "kv_dtype": "bf16"}}
    return validate_spec(PlanDocument, data, "test")


def _export(doc: PlanDocument, target: str, **context: Any) -> ExportResult:
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, 1, "test"), source="test", **context)
    return export_plan(doc, target=target, rank=1, ctx=ctx, source="test")


def _parsed(result: ExportResult, tmp: Path) -> list[tuple[str, argparse.Namespace]]:
    return [(program, check(program, argv)) for program, argv in script_argvs(result.text, tmp)]


def _wide_sglang() -> PlanDocument:
    """2 prefill instances of TP1 DP16 EP16 (two 8-GPU H100 nodes each) and 1 decode of TP16 (two nodes)."""
    prefill = {"gpu": "h100-sxm", "tp": 1, "pp": 1, "dp": 16, "ep": 16, "count": 2}
    decode = {"gpu": "h100-sxm", "tp": 16, "pp": 1, "count": 1}
    return _doc(_roles("disaggregated", prefill=prefill, decode=decode), model="deepseek-v3")


def test_sglang_runs_an_instance_wider_than_a_node_as_one_server_a_node(tmp_path: Path) -> None:
    """Each node of an instance runs the same ``launch_server`` with ``--nnodes 2``, its ``--node-rank`` and node 0's
    address at ``dist_init_port`` (5000, targets.yaml) in ``--dist-init-addr``; no slot (``--base-gpu-id``): the
    instance has its nodes to itself. Attention DP spans the nodes (``--tp-size 16 --dp-size 16``)."""
    result = _export(_wide_sglang(), "sglang")
    parsed = _parsed(result, tmp_path)
    servers = [ns for program, ns in parsed if program == SERVER]
    assert len(servers) == 4  # prefill and decode, each at NODE 0 and NODE 1
    for ns in servers:
        assert (ns.nnodes, ns.dist_init_addr, ns.base_gpu_id) == (2, "10.0.0.1:5000", None)
        assert ns.tensor_parallel_size == 16
    prefill = [ns for ns in servers if ns.disaggregation_mode == "prefill"]
    assert [ns.node_rank for ns in prefill] == [0, 1]
    assert all((ns.data_parallel_size, ns.enable_dp_attention, ns.port) == (16, True, 30000) for ns in prefill)
    assert all(ns.disaggregation_bootstrap_port == 8998 for ns in prefill)
    assert "--nnodes" in {flag for c in result.commands for flag, _ in c.flags}


def test_the_router_lists_node_0_of_each_instance(tmp_path: Path) -> None:
    """Node 0 runs the instance's HTTP server and (prefill) its bootstrap server, so the router gets node 0 of each
    instance: prefill hosts 10.1.1.0 and 10.1.1.2 of four, decode host 10.1.0.0 of two."""
    parsed = dict(_parsed(_export(_wide_sglang(), "sglang"), tmp_path))
    router = parsed[ROUTER]
    assert router.prefill == [["http://10.1.1.0:30000", "8998"], ["http://10.1.1.2:30000", "8998"]]
    assert router.decode == [["http://10.1.0.0:30001"]]


def test_colocated_sglang_instances_over_nodes_get_one_balancer(tmp_path: Path) -> None:
    """3 colocated TP16 instances on 8-GPU nodes: 6 nodes, the router over node 0 of each."""
    doc = _doc(_roles("colocated", colocated={"gpu": "h100-sxm", "tp": 16, "pp": 1, "count": 3}))
    parsed = _parsed(_export(doc, "sglang"), tmp_path)
    router = next(ns for program, ns in parsed if program == ROUTER)
    assert router.worker_urls == [f"http://10.1.0.{n}:30000" for n in (0, 2, 4)]
    assert {ns.node_rank for program, ns in parsed if program == SERVER} == {0, 1}


@pytest.mark.parametrize(("tp", "pp", "nodes"), [(8, 2, 2), (4, 4, 2), (8, 2, 4)])
def test_sglang_pipeline_stages_over_nodes_start_every_rank(tp: int, pp: int, nodes: int, tmp_path: Path) -> None:
    """PP a multiple of the nodes (2 stages of TP8 on 2 nodes; 4 of TP4 on 2), or the nodes a multiple of PP
    (2 stages of TP8 on 4 nodes of 4 GPUs): every (PP, TP) rank starts once (``_calculate_rank_ranges``, checked by
    the rules)."""
    doc = _doc(_roles("colocated", colocated={"gpu": "h100-sxm", "tp": tp, "pp": pp, "count": 1}))
    parsed = _parsed(_export(doc, "sglang", gpus_per_node=tp * pp // nodes), tmp_path)
    assert {ns.nnodes for program, ns in parsed if program == SERVER} == {nodes}


def test_a_wrong_flag_in_a_multinode_launch_fails_the_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The export-to-parser path catches a wrong multi-node flag: ``--nnodes`` misspelt, and a node count SGLang
    cannot place the ranks over."""
    import pdplan.report.export.sglang as sglang_target

    real = sglang_target._server

    def misspelt(*args: Any, **kwargs: Any) -> Any:
        cmd = real(*args, **kwargs)
        flags = tuple(("--nnode" if flag == "--nnodes" else flag, value) for flag, value in cmd.flags)
        return type(cmd)(role=cmd.role, program=cmd.program, flags=flags)

    monkeypatch.setattr(sglang_target, "_server", misspelt)
    with pytest.raises(EngineRefusal, match="unrecognized arguments: --nnode"):
        _parsed(_export(_wide_sglang(), "sglang"), tmp_path / "misspelt")
    monkeypatch.setattr(sglang_target, "_server", real)
    unchecked = dataclasses.replace(sglang_target.LAUNCHER, spans_nodes=lambda role, facts: True)
    monkeypatch.setattr(sglang_target, "LAUNCHER", unchecked)  # the export's placement check removed
    doc = _doc(_roles("colocated", colocated={"gpu": "h100-sxm", "tp": 4, "pp": 3, "count": 1}))
    with pytest.raises(EngineRefusal, match="does not start each of the pp 3 x tp 4 ranks"):
        _parsed(_export(doc, "sglang"), tmp_path / "placement")


def test_sglang_refuses_in_one_line_what_it_cannot_place_over_nodes() -> None:
    doc = _doc(_roles("colocated", colocated={"gpu": "h100-sxm", "tp": 4, "pp": 3, "count": 1}))
    with pytest.raises(SpecError, match="needs 12 GPUs, more than one h100-sxm node") as err:
        _export(doc, "sglang")
    assert "\n" not in str(err.value)


# ---- vLLM: one colocated front over several nodes -----------------------------------------------------------


def test_vllm_colocated_instances_over_nodes_run_behind_one_data_parallel_front(tmp_path: Path) -> None:
    """8 x TP2 Llama-3.1-70B on 8-GPU H100 nodes: 16 GPUs, 2 nodes of 4 engines. Node 0 serves the API on port 8000
    and balances over all 8 engines; node 1 runs ``--headless`` from rank 4; both on GPUs 0..7."""
    doc = _doc(_roles("colocated", colocated={"gpu": "h100-sxm", "tp": 2, "pp": 1, "count": 8}))
    result = _export(doc, "vllm")
    head, rest = [ns for _, ns in _parsed(result, tmp_path)]
    for ns in (head, rest):
        assert (ns.data_parallel_size, ns.data_parallel_size_local, ns.tensor_parallel_size) == (8, 4, 2)
        assert (ns.data_parallel_address, ns.data_parallel_rpc_port, ns.max_num_seqs) == ("10.0.0.1", 29550, 128)
    assert (head.port, head.headless, head.data_parallel_start_rank) == (8000, None, None)
    assert (rest.port, rest.headless, rest.data_parallel_start_rank) == (None, True, 4)
    assert "a load-aware split over the 8 data-parallel engines" in result.text
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 \\" in result.text
    assert [c.program for c in result.commands] == ["vllm serve", "vllm serve"]


def _ranks(parsed: list[argparse.Namespace]) -> list[int]:
    """The data-parallel ranks the launches start: each node's start rank (0 on node 0) .. + its local count."""
    out: list[int] = []
    for ns in parsed:
        start = ns.data_parallel_start_rank or 0
        out += range(start, start + ns.data_parallel_size_local)
    return sorted(out)


@pytest.mark.parametrize(
    ("count", "nodes", "locals_", "starts"),
    [
        (5, 2, [3, 2], [None, 3]),
        (7, 2, [4, 3], [None, 4]),
        (9, 3, [3, 3, 3], [None, 3, 6]),
        (10, 3, [4, 3, 3], [None, 4, 7]),
    ],
)
def test_vllm_colocated_instances_that_split_unevenly_run_behind_one_front(
    count: int, nodes: int, locals_: list[int], starts: list[int | None], tmp_path: Path
) -> None:
    """z x TP2 on 8-GPU nodes (4 engines a node): m = ceil(z / 4) nodes, q, r = divmod(z, m), nodes 0..r-1 hold
    q + 1 engines and the others q, each from start rank NODE*q + min(NODE, r), so that every rank 0..z-1 starts once
    (vLLM 0.20.1: rank 0's node handshakes with all z engines, a --headless node starts ranks start..start+L-1).
    Hand-worked: 5 -> 3 + 2 (start 3); 7 -> 4 + 3 (start 4); 9 -> 3 + 3 + 3; 10 -> 4 + 3 + 3 (starts 4, 7)."""
    doc = _doc(_roles("colocated", colocated={"gpu": "h100-sxm", "tp": 2, "pp": 1, "count": count}))
    result = _export(doc, "vllm")
    script = tmp_path / "launch.sh"
    script.write_text(result.text)
    parsed = []
    for node in range(nodes):  # every node, not only the first and last that script_argvs runs
        parsed += _parsed_node(script, node, tmp_path / str(node))
    assert [ns.data_parallel_size_local for ns in parsed] == locals_
    assert [ns.data_parallel_start_rank for ns in parsed] == starts
    assert [bool(ns.headless) for ns in parsed] == [False] + [True] * (nodes - 1)
    assert _ranks(parsed) == list(range(count))
    assert {ns.data_parallel_size for ns in parsed} == {count}
    assert f"CUDA_VISIBLE_DEVICES={','.join(str(g) for g in range(2 * locals_[0]))} \\" in result.text


def test_a_vllm_data_parallel_instance_split_unevenly_over_nodes_starts_every_rank_once(tmp_path: Path) -> None:
    """A DeepSeek-V3 prefill instance of DP9 EP9 (TP1) on 8-GPU nodes: 2 nodes, q, r = divmod(9, 2) = 4, 1, so node 0
    runs ranks 0..4 (local 5) and serves the API, node 1 runs --headless ranks 5..8 (local 4, start rank 5)."""
    plan = _roles(
        "disaggregated",
        prefill={"gpu": "h100-sxm", "tp": 1, "dp": 9, "ep": 9, "count": 1},
        decode={"gpu": "h100-sxm", "tp": 1, "dp": 8, "ep": 8, "count": 1},
    )
    result = _export(_doc({**plan, "granularity": "request"}, model="deepseek-v3"), "vllm")
    nodes = [ns for program, ns in _parsed(result, tmp_path) if program == "vllm serve" and ns.data_parallel_size == 9]
    assert [(ns.data_parallel_size_local, ns.data_parallel_start_rank, ns.headless) for ns in nodes] == [
        (5, None, None),
        (4, 5, True),
    ]
    assert _ranks(nodes) == list(range(9))
    assert "5 data-parallel ranks on nodes 0..0, 4 on the rest" in result.text


def _parsed_node(script: Path, node: int, tmp: Path) -> list[argparse.Namespace]:
    """``bash script colocated NODE`` with ``vllm`` stubbed, parsed as vLLM 0.20.1 parses it."""
    tmp.mkdir(parents=True)
    (tmp / "bin").mkdir()
    stub = tmp / "bin" / "vllm"
    stub.write_text('#!/bin/sh\nprintf "%s\\0" "$@" > "$ARGV_OUT"\n')
    stub.chmod(0o755)
    env = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "ARGV_OUT": str(tmp / "argv"), "HEAD_IP": "10.0.0.1"}
    run = subprocess.run(["bash", str(script), "colocated", str(node)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    words = (tmp / "argv").read_bytes().decode().split("\0")[:-1]
    assert words[0] == "serve"
    return [check("vllm serve", words[1:])]


# ---- TensorRT-LLM: an instance over nodes as one Slurm MPI world --------------------------------------------


LAUNCH_SERVE = ["trtllm-llmapi-launch", "trtllm-serve"]


def _wide_trtllm(prefill_tp: int = 16) -> PlanDocument:
    """2 prefill instances of TP16 (two 8-GPU H100 nodes each) and 1 decode of TP8, request-wise KV transfer."""
    plan = _roles(
        "disaggregated",
        prefill={"gpu": "h100-sxm", "tp": prefill_tp, "count": 2},
        decode={"gpu": "h100-sxm", "tp": 8, "count": 1},
    )
    return _doc({**plan, "granularity": "request"})


def _case_env(tmp: Path, role: str) -> Path:
    """The folder :func:`script_argvs` gave ``role``'s launch as TRTLLM_CONFIG_DIR (what it wrote is there)."""
    return tmp / f"config-{role}-None"


def test_trtllm_runs_an_instance_wider_than_a_node_as_one_slurm_mpi_world(tmp_path: Path) -> None:
    """TP16 on 8-GPU nodes: ``srun --nodes 2 --ntasks 16 --distribution arbitrary --mpi pmix trtllm-llmapi-launch
    trtllm-serve`` (16 ranks, the YAML's world ``tensor_parallel_size`` 16), serving on all interfaces of rank 0's
    node; the host file puts ranks 0..7 on node 0 (10.1.2.0, PREFILL_NODES' first name) and 8..15 on node 1; the
    server lists node 0 of each instance (10.1.1.0 and 10.1.1.2 of PREFILL_HOSTS' four) at the context port."""
    result = _export(_wide_trtllm(), "trtllm")
    parsed = _parsed(result, tmp_path)
    srun = next(ns for program, ns in parsed if program == "srun")
    assert (srun.nodes, srun.ntasks, srun.distribution, srun.mpi, srun.nodelist) == (
        "2",
        "16",
        "arbitrary",
        "pmix",
        None,
    )
    launch, serve, model, *args = srun.command
    assert (launch, serve, model) == ("trtllm-llmapi-launch", "trtllm-serve", "meta-llama/Llama-3.1-70B-Instruct")
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert args[args.index("--port") + 1] == "8001"
    config = _case_env(tmp_path, "prefill")
    hosts = (config / "pdplan-trtllm-prefill-10.1.2.0.hosts").read_text().split()
    assert hosts == ["10.1.2.0"] * 8 + ["10.1.2.1"] * 8
    options = yaml.safe_load((config / "pdplan-trtllm-prefill-10.1.2.0.yaml").read_text())
    assert (options["tensor_parallel_size"], options["pipeline_parallel_size"]) == (16, 1)
    server = yaml.safe_load((_case_env(tmp_path, "server") / "pdplan-trtllm-disagg.yaml").read_text())
    assert server["context_servers"]["urls"] == ["10.1.1.0:8001", "10.1.1.2:8001"]
    assert server["generation_servers"]["urls"] == ["10.1.0.0:8101"]
    assert [c.program for c in result.commands] == ["srun", "trtllm-serve", "trtllm-serve disaggregated"]
    assert "not checked: that this cluster's Slurm has the PMIx plugin" in result.text


def test_trtllm_colocated_instances_over_nodes_each_run_one_mpi_world(tmp_path: Path) -> None:
    """2 colocated TP16 instances on 8-GPU nodes: each one ``srun --nodes 2 --ntasks 16`` (COLOCATED_NODES), and no
    front (TensorRT-LLM ships no balancer for separate servers: the header says so)."""
    doc = _doc(_roles("colocated", colocated={"gpu": "h100-sxm", "tp": 16, "pp": 1, "count": 2}))
    result = _export(doc, "trtllm")
    [(program, srun)] = _parsed(result, tmp_path)
    assert (program, srun.nodes, srun.ntasks, srun.command[:2]) == ("srun", "2", "16", LAUNCH_SERVE)
    assert "COLOCATED_NODES needs 2 addresses" in result.text


def test_trtllm_node_names_are_checked_before_they_reach_a_file_or_srun(tmp_path: Path) -> None:
    """PREFILL_NODES names files and the host file's lines: a value with shell or path characters, or too few
    names, stops the case (exit 2) before anything runs; nothing it holds is executed."""
    script = tmp_path / "launch.sh"
    script.write_text(_export(_wide_trtllm(), "trtllm").text)
    marker = tmp_path / "pwned"
    for nodes in (f"a;touch {marker} b", f"$(touch {marker}) b", "../../etc b", "a", f"a `touch {marker}`"):
        env = {"PATH": "/usr/bin:/bin", "PREFILL_NODES": nodes, "TRTLLM_CONFIG_DIR": str(tmp_path / "cfg")}
        run = subprocess.run(["bash", str(script), "prefill"], env=env, capture_output=True, text=True, check=False)
        assert run.returncode == 2, (nodes, run.stderr)
        assert "PREFILL_NODES" in run.stderr
        assert not marker.exists()
        assert not (tmp_path / "cfg").exists()


def test_a_wrong_srun_flag_fails_the_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The export-to-parser path catches a wrong ``srun`` option (``--node`` is not one of Slurm 25.11.7's), a
    node list beside the host file, and a wrong ``trtllm-serve`` flag behind ``srun``."""
    import pdplan.report.export.trtllm as trtllm_target

    real = trtllm_target.srun_command

    def edited(rename: dict[str, str], extra: tuple[tuple[str, str | None], ...] = ()) -> Any:
        def make(*args: Any) -> Any:
            cmd = real(*args)
            flags = tuple((rename.get(flag, flag), value) for flag, value in cmd.flags)
            return dataclasses.replace(cmd, flags=flags + extra)

        return make

    monkeypatch.setattr(trtllm_target, "srun_command", edited({"--nodes": "--node"}))
    with pytest.raises(EngineRefusal, match=r"unrecognized arguments: --node$"):
        _parsed(_export(_wide_trtllm(), "trtllm"), tmp_path / "node")
    monkeypatch.setattr(trtllm_target, "srun_command", edited({}, (("--nodelist", "n0,n1"),)))
    with pytest.raises(EngineRefusal, match="only with --distribution arbitrary and no --nodelist"):
        _parsed(_export(_wide_trtllm(), "trtllm"), tmp_path / "nodelist")
    with pytest.raises(EngineRefusal, match="unrecognized arguments: --tp-size"):
        check(
            "srun",
            [
                "--nodes",
                "2",
                "--ntasks",
                "16",
                "-m",
                "arbitrary",
                "trtllm-llmapi-launch",
                "trtllm-serve",
                "m",
                "--tp-size",
                "16",
            ],
        )


def test_trtllm_refuses_in_one_line_an_instance_it_cannot_split_evenly_over_nodes() -> None:
    """TP9 on 8-GPU nodes needs 2 nodes, which 9 ranks do not fill evenly (TensorRT-LLM's examples put the same
    ranks on every node)."""
    with pytest.raises(SpecError, match="9 GPUs per instance do not split evenly over 2 nodes") as err:
        _export(_wide_trtllm(prefill_tp=9), "trtllm")
    assert "\n" not in str(err.value)
