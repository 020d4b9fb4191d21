"""Every exported command line parses as the pinned engine release parses it, and passes the engine's own cross-flag
checks (issue #25 item 2): ``tests/support/engine_args.py`` rebuilds each program's argparse parser from the
argument snapshots (``pdplan/data/export/engine_args``, read from the released wheels by
tools/engine_args_snapshot.py), and ``tests/support/export_argv.py`` gets the command lines a script really runs
(bash, with each program stubbed) or a manifest's containers hold.

Plans: ``tests/support/export_plans.py`` (every example report's ranked plans, colocated and disaggregated, dense
and MoE, mixed GPU, PrfaaS), each on every target. A plan a target cannot run is refused with one line (SpecError);
every other export is checked flag by flag.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import pytest
import yaml
from support.engine_args import (
    PROGRAMS,
    EngineRefusal,
    check,
    disagg_config_problems,
    llm_args_problems,
    moe_problems,
    parse,
    records,
)
from support.export_argv import manifest_argvs, script_argvs
from support.export_plans import GOLDEN, document, export, outcomes
from support.optimized import Optimized

from pdplan.errors import SpecError
from pdplan.io.export_data import read_plan_document
from pdplan.report.export import ExportResult

ROOT = Path(__file__).resolve().parents[2]
TARGETS = [
    ("vllm", "vllm"),
    ("sglang", "vllm"),
    ("dynamo", "vllm"),
    ("dynamo", "sglang"),
    ("dynamo", "trtllm"),
    ("trtllm", "vllm"),
]
RUNS = {"disaggregated", "colocated", "dense", "moe", "mixed-gpu", "kv-aware", "prfaas"}
"""The kinds of plan each target exports; TensorRT-LLM refuses PrfaaS plans (their remote cluster is not written for
it) and runs the MoE plans of attention DP / wide EP without two-batch overlap (``wide-ep-request-no-tbo``)."""
RUNS_BY_TARGET = {("trtllm", "vllm"): RUNS - {"prfaas"}, ("dynamo", "trtllm"): RUNS - {"prfaas"}}


def _command_lines(result: ExportResult, target: str, tmp: Path) -> list[tuple[str, list[str]]]:
    return manifest_argvs(result.text) if target == "dynamo" else script_argvs(result.text, tmp)


def _check_export(result: ExportResult, target: str, tmp: Path) -> list[tuple[str, argparse.Namespace]]:
    lines = _command_lines(result, target, tmp)
    assert {program for program, _ in lines} == {cmd.program for cmd in result.commands}
    return [(program, check(program, argv)) for program, argv in lines]


@pytest.mark.slow
@pytest.mark.xdist_group("optimized")
def test_every_example_plan_exports_flags_the_engines_accept(optimized: Optimized, tmp_path: Path) -> None:
    exported: dict[tuple[str, str], set[str]] = {}
    refused: dict[tuple[str, str], set[str]] = {}
    for n, out in enumerate(outcomes(optimized, TARGETS)):
        key = (out.target, out.backend)
        if out.result is None:
            assert out.refusal is not None
            assert "\n" not in out.refusal  # each refusal is one line
            refused.setdefault(key, set()).update(out.kinds)
            continue
        _check_export(out.result, out.target, tmp_path / str(n))
        exported.setdefault(key, set()).update(out.kinds)
    for key in TARGETS:  # each target ran each kind of plan it can run
        assert RUNS_BY_TARGET.get(key, RUNS) <= exported[key], (key, exported[key])
    for key in (("trtllm", "vllm"), ("dynamo", "trtllm")):  # the remote cluster is not written for TensorRT-LLM
        assert "prfaas" in refused[key]
        assert "prfaas" not in exported[key]


def test_the_default_plan_carries_the_kv_transfer_config_routing_and_a_fitting_context(tmp_path: Path) -> None:
    """Issue #25 "Done when": the default plan's Dynamo/vLLM export parses with its KV-transfer config, router mode
    and a max-model-len no larger than the priced KV capacity of a prefill instance."""
    doc = read_plan_document(str(GOLDEN / "default.json"))
    parsed = _check_export(export(doc, 1, "dynamo", "vllm"), "dynamo", tmp_path)
    prefill = next(ns for _, ns in parsed if getattr(ns, "disaggregation_mode", None) == "prefill")
    frontend = next(ns for program, ns in parsed if program == "python3 -m dynamo.frontend")
    assert prefill.kv_transfer_config == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert prefill.max_model_len == doc.plans[0]["priced"]["roles"]["prefill"]["max_model_len"]  # type: ignore[index]
    assert frontend.router_mode == "least-loaded"  # priced least-work: the fewest active requests, the nearest


@pytest.mark.xdist_group("optimized")
def test_kv_aware_plans_parse_with_the_cache_they_were_priced_with(optimized: Optimized, tmp_path: Path) -> None:
    """chat-sessions rank 3 (affinity, 1 TiB host DRAM per 8-GPU node: 128 GiB per TP1 prefill instance) on
    Dynamo / vLLM and plain vLLM, and shared-system-prompt's best plan with prefix affinity on SGLang (colocated since
    the HBM cache is what the cached deployment's sequences leave free), as the engines parse them."""
    chat = document("chat-sessions", optimized)
    parsed = _check_export(export(chat, 3, "dynamo", "vllm"), "dynamo", tmp_path / "dynamo")
    prefill = next(ns for _, ns in parsed if getattr(ns, "disaggregation_mode", None) == "prefill")
    decode = next(ns for _, ns in parsed if getattr(ns, "disaggregation_mode", None) == "decode")
    frontend = next(ns for program, ns in parsed if program == "python3 -m dynamo.frontend")
    assert frontend.router_mode == "kv"
    assert prefill.enable_prefix_caching is True
    assert prefill.kv_events_config["enable_kv_cache_events"] is True
    offload = prefill.kv_transfer_config["kv_connector_extra_config"]["connectors"][1]
    assert offload["kv_connector_extra_config"]["cpu_bytes_to_use"] == 128 * 2**30
    assert decode.kv_transfer_config == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    parsed = _check_export(export(chat, 3, "vllm"), "vllm", tmp_path / "vllm")
    caching = {ns.port // 100 * 100: ns.enable_prefix_caching for p, ns in parsed if p == "vllm serve"}
    assert caching == {8100: True, 8200: None}  # prefill caches; decode keeps vLLM's default
    shared = document("shared-system-prompt", optimized)
    affine = next(
        i + 1 for i, plan in enumerate(shared.plans) if (plan.get("cache") or {}).get("routing") == "affinity"
    )
    parsed = _check_export(export(shared, affine, "sglang"), "sglang", tmp_path / "sglang")
    router = next(ns for p, ns in parsed if p == "python -m sglang_router.launch_router")
    # a colocated plan's router balances one pool (--policy), an xPyD plan's its prefill pool (--prefill-policy)
    key = "policy" if shared.plans[affine - 1]["mode"] == "colocated" else "prefill_policy"
    assert getattr(router, key) == "cache_aware"
    assert all(ns.disable_radix_cache is not True for p, ns in parsed if p == "python -m sglang.launch_server")


def test_sglang_under_dp_attention_gives_each_rank_the_priced_chunk(tmp_path: Path) -> None:
    """SGLang 0.5.11 divides ``--chunked-prefill-size`` by the DP size under ``--enable-dp-attention``
    (``sglang/srt/server_args.py`` ``_handle_data_parallelism``: ``chunked_prefill_size // dp_size``), so the
    export writes the priced per-rank budget times DP: wide-EP rank 1, DP16 on both roles, 8,192 priced → 131,072."""
    doc = read_plan_document(str(GOLDEN / "deepseek-v3-wide-ep.json"))
    parsed = _check_export(export(doc, 1, "dynamo", "sglang"), "dynamo", tmp_path)
    workers = [ns for program, ns in parsed if program == "python3 -m dynamo.sglang"]
    priced = doc.plans[0]["priced"]["roles"]  # type: ignore[index]
    assert len(workers) == 2
    for ns in workers:
        assert ns.enable_dp_attention
        assert (ns.data_parallel_size, ns.chunked_prefill_size) == (16, 131_072)
        per_rank = ns.chunked_prefill_size // ns.data_parallel_size  # what SGLang's scheduler of each DP rank then gets
        assert per_rank == priced[ns.disaggregation_mode]["max_num_batched_tokens"] == 8192
    dense = read_plan_document(str(GOLDEN / "default.json"))  # DP 1: the budget as priced
    assert _flags_of(export(dense, 1, "sglang"), "prefill")["--chunked-prefill-size"] == "8192"


def _flags_of(result: ExportResult, role: str) -> dict[str, str | None]:
    return dict(next(c for c in result.commands if c.role == role).flags)


# ---- a wrong flag fails ---------------------------------------------------------------------------------------

TRTLLM_BAD_SLOTS = '{"moe_config":{"load_balancer":{"num_slots":260}}}'
WRONG = [
    ("vllm serve", ["m", "--max-num-seq", "8"], "unrecognized arguments"),  # misspelt
    ("vllm serve", ["m", "--max-num-seqs", "eight"], "is not int"),
    ("vllm serve", ["m", "--kv-cache-dtype", "fp8_e4m3x"], "is not one of"),
    ("vllm serve", ["m", "--gpu-memory-utilization", "1.2"], "violates le 1"),
    ("vllm serve", ["m", "--enable-expert-parallel", "true"], "unrecognized arguments"),  # takes no value
    ("vllm serve", ["m", "--max-num-seqs", "4096", "--max-num-batched-tokens", "2048"], "must be >= max_num_seqs"),
    (
        "vllm serve",
        ["m", "--max-model-len", "131072", "--max-num-batched-tokens", "8192", "--no-enable-chunked-prefill"],
        "without chunking",
    ),
    ("vllm serve", ["m", "--eplb-config", '{"num_redundant_experts":32}'], "EPLB is not enabled"),
    ("vllm serve", ["m", "--host", "0.0.0.0", "--lora-modules", "a=b"], "cannot check"),  # unresolved: refused
    ("vllm serve", ["m", "--headless", "--data-parallel-size", "16"], "> 0 in headless mode"),
    ("vllm serve", ["m", "--data-parallel-size", "16", "--data-parallel-start-rank", "8"], "hybrid load balancing"),
    (
        "vllm serve",
        ["m", "--headless", "-dp", "16", "--data-parallel-size-local", "8", "--data-parallel-start-rank", "12"],
        "exceed",
    ),
    ("vllm serve", ["m", "--data-parallel-local-size", "8"], "unrecognized arguments"),  # misspelt
    ("vllm serve", ["m", "--data-parallel-rpc-port", "rpc"], "is not int"),
    ("python3 -m dynamo.vllm", ["--model", "m", "--disaggregation-mode", "prefill"], "--kv-transfer-config"),
    ("python3 -m dynamo.vllm", ["--model", "m", "--port", "8000"], "unrecognized arguments"),  # engine group only
    ("python -m sglang.launch_server", ["--model-path", "m", "--kv-cache-dtype", "fp8"], "is not one of"),
    ("python -m sglang.launch_server", ["--model-path", "m", "--enable-two-batch-overlap"], "two batch overlap"),
    (
        "python -m sglang.launch_server",
        ["--model-path", "m", "--tp-size", "8", "--moe-a2a-backend", "deepep", "--ep-size", "4"],
        "DeepEP sets ep_size",
    ),
    ("python -m sglang.launch_server", ["--model-path", "m", "--nnodes", "2", "--node-rank", "2"], "not one of the 2"),
    ("python -m sglang.launch_server", ["--model-path", "m", "--tp-size", "16", "--nnodes", "2"], "is not host:port"),
    (
        "python -m sglang.launch_server",
        ["--model-path", "m", "--tp-size", "16", "--nnodes", "2", "--dist-init-addr", "10.0.0.1"],
        "is not host:port",
    ),
    (
        "python -m sglang.launch_server",
        ["--model-path", "m", "--tp-size", "4", "--pp-size", "3", "--nnodes", "2", "--dist-init-addr", "h:5000"],
        "does not start each of the pp 3 x tp 4 ranks",
    ),
    (
        "python -m sglang.launch_server",
        ["--model-path", "m", "--tp-size", "16", "--dp-size", "2", "--nnodes", "2", "--dist-init-addr", "h:5000"],
        "unless dp attention",
    ),
    ("python -m sglang.launch_server", ["--model-path", "m", "--node_rank", "1"], "unrecognized arguments"),
    ("python -m sglang_router.launch_router", ["--policy", "least_work"], "is not one of"),
    ("python3 -m dynamo.frontend", ["--router-mode", "least-work"], "is not one of"),
    ("python3 -m dynamo.frontend", ["--router-mode", "least_loaded"], "is not one of"),  # Dynamo spells it with -
    ("python3 -m dynamo.trtllm", ["--model", "m", "--max-num-seqs", "8"], "unrecognized arguments"),  # vLLM's name
    ("python3 -m dynamo.trtllm", ["--model", "m", "--disaggregation-strategy", "decode_first"], "unrecognized"),
    ("python3 -m dynamo.trtllm", ["--model", "m", "--disaggregation-mode", "context"], "is not one of"),
    ("python3 -m dynamo.trtllm", ["--model", "m", "--disaggregation-mode", "prefill"], "needs cache_transceiver"),
    ("python3 -m dynamo.trtllm", ["--model", "m", "--override-engine-args", '{"max_num_seqs":8}'], "not a field"),
    ("python3 -m dynamo.trtllm", ["--model", "m", "--override-engine-args", "[1]"], "must be a JSON object"),
    ("python3 -m dynamo.trtllm", ["--model", "m", "--enable-attention-dp", "true"], "unrecognized arguments"),
    (
        "python3 -m dynamo.trtllm",
        ["--model", "m", "--expert-parallel-size", "8", "--override-engine-args", TRTLLM_BAD_SLOTS],
        "must be divisible by ep_size",
    ),
    ("trtllm-serve", ["m", "--tp-size", "2"], "unrecognized arguments"),  # click names use underscores
    ("trtllm-serve", ["m", "--backend", "vllm"], "is not one of"),
    ("trtllm-serve disaggregated", [], "needs -c"),
]


@pytest.mark.parametrize(("program", "argv", "message"), WRONG, ids=range(len(WRONG)))
def test_a_wrong_flag_is_refused_as_the_engine_would(program: str, argv: list[str], message: str) -> None:
    with pytest.raises(EngineRefusal, match=message.replace("(", r"\(")):
        check(program, argv)


def test_a_wrong_flag_in_an_export_fails_the_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The whole path, export to check, catches a flag an export writes wrongly (here a misspelt one injected into
    every role's engine flags)."""
    import pdplan.report.export.vllm as vllm_target

    doc = read_plan_document(str(GOLDEN / "default.json"))
    _check_export(export(doc, 1, "vllm", "vllm"), "vllm", tmp_path / "good")
    real = vllm_target.role_engine_flags
    monkeypatch.setattr(vllm_target, "role_engine_flags", lambda *a: [*real(*a), ("--max-num-batched-token", "8192")])
    with pytest.raises(EngineRefusal, match="unrecognized arguments: --max-num-batched-token"):
        _check_export(export(doc, 1, "vllm", "vllm"), "vllm", tmp_path / "bad")


# ---- the snapshots themselves ---------------------------------------------------------------------------------


def test_snapshots_name_their_release_and_files() -> None:
    for stages in PROGRAMS.values():
        for groups in stages:
            for stem, group in groups:
                data = json.loads((ROOT / "pdplan/data/export/engine_args" / f"{stem}.json").read_text())
                assert stem.endswith(data["release"])
                if stem == "trtllm-unpinned":  # no TensorRT-LLM release is on PyPI: says what it was read from
                    assert "not the 1.3.0rc14 release" in data["source"]["artifact"]
                elif stem.startswith("srun-"):  # Slurm is not on PyPI: read at the release's tag
                    assert data["source"]["artifact"].startswith("SchedMD/slurm tag slurm-25-11-7-1 (commit ")
                else:
                    assert data["source"]["artifact"].endswith("(PyPI)")
                assert data["source"]["files_read"]
                assert records((stem, group))


def test_every_flag_in_engine_flags_yaml_is_in_the_snapshot() -> None:
    """The curated list (``pdplan/data/export/engine_flags.yaml``) names only flags the release defines."""
    from pdplan.io.export_data import engine_flags

    for program, entry in engine_flags().programs.items():
        assert program in PROGRAMS, f"no argument snapshot for {program}"
        names = {n for stages in PROGRAMS[program] for g in stages for r in records(g).values() for n in r["names"]}
        names |= {f"--no-{n[2:]}" for n in names if n.startswith("--")}
        assert set(entry.flags) <= names, (program, sorted(set(entry.flags) - names))


def test_parse_reads_values_as_the_engine_does() -> None:
    ns = parse(
        "vllm serve", ["m", "--max-num-batched-tokens", "8k", "--max-model-len", "auto", "--quantization", "None"]
    )
    assert (ns.max_num_batched_tokens, ns.max_model_len, ns.quantization) == (8000, -1, None)
    ns = parse("vllm serve", ["m", "--no-enable-chunked-prefill", "--eplb-config", '{"num_redundant_experts":2}'])
    assert ns.enable_chunked_prefill is False
    assert ns.eplb_config == {"num_redundant_experts": 2}


TRTLLM_WRONG = [
    ({"tensor_paralel_size": 2}, "not a field of BaseLlmArgs"),
    ({"max_num_tokens": "8k"}, "is not int"),
    ({"enable_chunked_prefill": 1}, "is not bool"),
    ({"kv_cache_config": {"free_gpu_memory_fraction": 1.5}}, "violates le 1"),
    ({"kv_cache_config": {"gpu_memory_utilization": 0.9}}, "not a field of KvCacheConfig"),
    ({"cache_transceiver_config": {"backend": "nixl"}}, "is not one of"),
    ({"enable_attention_dp": "true"}, "is not bool"),
    ({"moe_config": {"backend": "wideep"}}, "is not one of"),  # the Literal is upper case
    ({"moe_config": {"wide_ep": True}}, "not a field of MoeConfig"),
    ({"moe_config": {"load_balancer": {"slots": 288}}}, "not a field of MoeLoadBalancerConfig"),
]


@pytest.mark.parametrize(("options", "message"), TRTLLM_WRONG, ids=range(len(TRTLLM_WRONG)))
def test_a_wrong_llm_api_option_is_refused_as_tensorrt_llm_would(options: dict[str, object], message: str) -> None:
    assert any(message in p for p in llm_args_problems(options))


def test_load_balancer_slots_must_divide_over_the_ep_ranks() -> None:
    good = {"moe_expert_parallel_size": 8, "moe_config": {"backend": "WIDEEP", "load_balancer": {"num_slots": 288}}}
    assert llm_args_problems(good) == []
    assert moe_problems(good) == []
    bad = copy.deepcopy(good)
    bad["moe_config"]["load_balancer"]["num_slots"] = 260  # type: ignore[index]
    assert moe_problems(bad) == ["moe_config.load_balancer.num_slots (260) must be divisible by ep_size (8)"]


def test_a_wrong_disagg_config_is_refused() -> None:
    good = {
        "hostname": "0.0.0.0",
        "port": 8000,
        "context_servers": {"num_instances": 1, "router": {"type": "load_balancing"}, "urls": ["a:8001"]},
        "generation_servers": {"num_instances": 1, "urls": ["b:8101"], "cache_transceiver_config": {"backend": "NIXL"}},
    }
    assert disagg_config_problems(good) == []
    bad = copy.deepcopy(good)
    bad["context_servers"]["num_instances"] = 2
    bad["generation_servers"]["router"] = {"type": "least_work"}
    bad["listen"] = True
    problems = disagg_config_problems(bad)
    assert any("1 urls for num_instances 2" in p for p in problems)
    assert any("'least_work' is not one of" in p for p in problems)
    assert any("listen: not a disaggregated-server key" in p for p in problems)


def test_the_trtllm_export_writes_the_plan_numbers_tensorrt_llm_accepts(tmp_path: Path) -> None:
    doc = read_plan_document(str(GOLDEN / "default.json"))
    result = export(doc, 1, "trtllm")
    parsed = _check_export(result, "trtllm", tmp_path)
    by_port = {
        ns.port: yaml.safe_load(Path(ns.extra_llm_api_options).read_text()) for p, ns in parsed if p == "trtllm-serve"
    }
    plan = doc.plans[0]
    context, generation = by_port[8001], by_port[8101]
    assert (context["tensor_parallel_size"], generation["tensor_parallel_size"]) == (2, 4)
    assert context["max_seq_len"] == plan["priced"]["roles"]["prefill"]["max_model_len"]  # type: ignore[index]
    assert generation["max_batch_size"] == plan["max_num_seqs"]
    assert context["cache_transceiver_config"] == {"backend": "NIXL"}
    assert "free_gpu_memory_fraction" not in context.get("kv_cache_config", {})  # not convertible: warned instead
    assert any("free_gpu_memory_fraction is not written" in w for w in result.warnings)
    server = next(ns for p, ns in parsed if p == "trtllm-serve disaggregated")
    config = yaml.safe_load(Path(server.config_file).read_text())
    assert config["context_servers"]["num_instances"] == 10
    assert config["context_servers"]["router"] == {"type": "load_balancing"}  # priced least-work: the nearest


@pytest.mark.xdist_group("optimized")
def test_the_trtllm_wide_ep_export_parses_with_attention_dp_and_its_moe_config(
    optimized: Optimized, tmp_path: Path
) -> None:
    doc = document("wide-ep-request-no-tbo", optimized)
    parsed = _check_export(export(doc, 1, "trtllm"), "trtllm", tmp_path)
    options = [yaml.safe_load(Path(ns.extra_llm_api_options).read_text()) for p, ns in parsed if p == "trtllm-serve"]
    assert options
    for one in options:  # DP8 EP8 TP1 ranks, DeepSeek-V3's 256 routed experts + the example's 32 redundant
        assert (one["tensor_parallel_size"], one["enable_attention_dp"], one["moe_expert_parallel_size"]) == (
            8,
            True,
            8,
        )
        assert one["moe_config"] == {"backend": "WIDEEP", "load_balancer": {"num_slots": 288}}


def test_trtllm_refuses_what_it_cannot_run_in_one_line() -> None:
    wide_ep = read_plan_document(str(GOLDEN / "deepseek-v3-wide-ep.json"))  # priced with SGLang's two-batch overlap
    with pytest.raises(SpecError, match="two-batch overlap, for which pdplan knows no TensorRT-LLM") as err:
        export(wide_ep, 1, "trtllm")
    assert "\n" not in str(err.value)
    default = read_plan_document(str(GOLDEN / "default.json"))
    layer = default.model_copy(update={"plans": [{**p, "granularity": "layer"} for p in default.plans]})
    with pytest.raises(SpecError, match="TensorRT-LLM transfers KV per request") as err:
        export(layer, 1, "trtllm")
    assert "\n" not in str(err.value)
    prfaas = read_plan_document(str(GOLDEN / "prfaas-h200-h100.json"))
    with pytest.raises(SpecError, match="Prefill-as-a-Service"):
        export(prfaas, 1, "trtllm")
