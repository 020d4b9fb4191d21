"""``pdplan export`` builders: what they write parses, carries the plan's numbers, uses only flags the engines
accept (``pdplan/data/export/engine_flags.yaml``), follows Dynamo's example manifests, and refuses what no engine runs.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pdplan.errors import SpecError
from pdplan.io.catalog import open_catalog
from pdplan.io.export_data import engine_flags, export_targets, node_labels, read_plan_document
from pdplan.report.export import ExportResult, export_plan, plan_gpus
from pdplan.report.export.context import export_context
from pdplan.report.export.engine_args import vllm_max_num_seqs
from pdplan.specs.base import validate_spec
from pdplan.specs.export import PlanDocument

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_JSON = ROOT / "tests" / "golden" / "examples" / "default.json"
COLOCATED_JSON = ROOT / "tests" / "golden" / "examples" / "opt-13b-a100-distserve.json"


def _plan(**overrides: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "mode": "disaggregated",
        "label": "3P1D h100-sxm TP2 / h100-sxm TP4 request",
        "prefill": {"gpu": "h100-sxm", "tp": 2, "pp": 1, "count": 3},
        "decode": {"gpu": "h100-sxm", "tp": 4, "pp": 1, "count": 1},
        "colocated": None,
        "granularity": "request",
        "routing": "round-robin",
        "scheduler": None,
        "max_num_seqs": 128,
        "num_gpus": 10,
        "goodput_rps": 12.5,
        "ttft_p90_s": 1.5,
        "tpot_p90_s": 0.04,
        "priced": {
            "engine": "vllm",
            "engine_version": "0.12.0",
            "routing": {"prefill": "round-robin", "decode": "random"},
            "roles": {
                "prefill": {"gpu_memory_utilization": 0.85, "max_num_batched_tokens": 4096, "max_model_len": 35089},
                "decode": {"gpu_memory_utilization": 0.85, "max_num_batched_tokens": 4096, "max_model_len": 131072},
            },
        },
    }
    plan.update(overrides)
    return plan


def _doc(*plans: dict[str, Any], dtype: str = "bf16", kv_dtype: str = "bf16") -> PlanDocument:
    data = {
        "plans": list(plans) or [_plan()],
        "inputs": {"model": {"name": "llama-3.1-70b"}, "dtype": dtype, "kv_dtype": kv_dtype},
        "assumptions": {"engine_defaults": {"gpu_memory_utilization": 0.85, "max_num_batched_tokens": 4096}},
    }
    return validate_spec(PlanDocument, data, "test")


def _export(doc: PlanDocument, target: str, rank: int = 1, backend: str = "vllm") -> ExportResult:
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, rank, "test"), source="test")
    return export_plan(doc, target=target, rank=rank, ctx=ctx, source="test", backend=backend)


def _flag(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def _assert_accepted(result: ExportResult) -> None:
    programs = engine_flags().programs
    for cmd in result.commands:
        assert cmd.program in programs, cmd.program
        accepted = set(programs[cmd.program].flags)
        for flag, _ in cmd.flags:
            assert flag in accepted, f"{cmd.program} does not accept {flag}"


# ---- Dynamo -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["vllm", "sglang"])
def test_dynamo_manifest_has_the_fields_of_dynamos_examples(backend: str) -> None:
    result = _export(_doc(), "dynamo", backend=backend)
    manifest = yaml.safe_load(result.text)
    assert manifest["apiVersion"] == "nvidia.com/v1alpha1"
    assert manifest["kind"] == "DynamoGraphDeployment"
    services = manifest["spec"]["services"]
    assert services["Frontend"]["componentType"] == "frontend"
    workers = {s["subComponentType"]: s for s in services.values() if s["componentType"] == "worker"}
    assert set(workers) == {"prefill", "decode"}
    for role, count, tp in (("prefill", 3, 2), ("decode", 1, 4)):
        worker = workers[role]
        assert worker["replicas"] == count
        assert worker["resources"]["limits"]["gpu"] == str(tp)
        assert worker["envFromSecret"] == "hf-token-secret"
        container = worker["extraPodSpec"]["mainContainer"]
        assert container["image"] == export_targets().dynamo.images[backend]  # type: ignore[index]
        assert container["command"] == ["python3", "-m", f"dynamo.{backend}"]
        args = container["args"]
        assert _flag(args, "--disaggregation-mode") == role
        assert _flag(args, "--model" if backend == "vllm" else "--model-path") == "meta-llama/Llama-3.1-70B-Instruct"
        assert _flag(args, "--tensor-parallel-size" if backend == "vllm" else "--tp-size") == str(tp)
        # every worker pinned to its GPU (GFD's label of an H100 SXM5 80GB: pdplan/data/export/node_labels.yaml)
        assert worker["extraPodSpec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert worker["sharedMemory"] == {"size": "80Gi"}  # Dynamo's Llama-3-70B disagg recipe (targets.yaml)
        assert _flag(args, "--served-model-name") == "meta-llama/Llama-3.1-70B-Instruct"
    frontend = services["Frontend"]
    assert frontend["extraPodSpec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert "sharedMemory" not in frontend  # the operator's 8Gi default: no GPU work there
    decode_args = workers["decode"]["extraPodSpec"]["mainContainer"]["args"]
    assert _flag(decode_args, "--max-num-seqs" if backend == "vllm" else "--max-running-requests") == "128"
    _assert_accepted(result)


def test_dynamo_colocated_plan_is_one_aggregated_worker() -> None:
    plan = _plan(
        mode="colocated",
        prefill=None,
        decode=None,
        colocated={"gpu": "h100-sxm", "tp": 4, "count": 3},
        granularity=None,
        scheduler="chunked",
    )
    result = _export(_doc(plan), "dynamo")
    services = yaml.safe_load(result.text)["spec"]["services"]
    workers = [s for s in services.values() if s["componentType"] == "worker"]
    assert len(workers) == 1
    assert "subComponentType" not in workers[0]
    assert workers[0]["replicas"] == 3
    args = workers[0]["extraPodSpec"]["mainContainer"]["args"]
    assert "--disaggregation-mode" not in args
    assert _flag(args, "--max-num-batched-tokens") == "2048"  # the serving-default chunk pdplan priced
    assert "--enable-chunked-prefill" in args
    _assert_accepted(result)


def test_mixed_gpu_plan_pins_each_role_to_its_gpu_type() -> None:
    plan = _plan(decode={"gpu": "l40s", "tp": 2, "count": 4})
    services = yaml.safe_load(_export(_doc(plan), "dynamo").text)["spec"]["services"]
    selectors = {
        s["subComponentType"]: s["extraPodSpec"]["nodeSelector"] for s in services.values() if "subComponentType" in s
    }
    assert selectors == {
        "prefill": {"nvidia.com/gpu.product": node_labels().labels["h100-sxm"].value},
        "decode": {"nvidia.com/gpu.product": "NVIDIA-L40S"},
    }


def test_instances_wider_than_a_node_are_multinode_workers() -> None:
    plan = _plan(prefill={"gpu": "h100-sxm", "tp": 8, "pp": 2, "count": 1})
    workers = yaml.safe_load(_export(_doc(plan), "dynamo").text)["spec"]["services"]
    prefill = workers["VllmPrefillWorker"]
    assert prefill["multinode"] == {"nodeCount": 2}
    assert prefill["resources"]["limits"]["gpu"] == "8"
    assert _flag(prefill["extraPodSpec"]["mainContainer"]["args"], "--pipeline-parallel-size") == "2"
    with pytest.raises(SpecError, match="use --to dynamo"):
        _export(_doc(plan), "vllm")


# ---- vLLM / SGLang ------------------------------------------------------------------------------------------


def _script_commands(text: str) -> list[list[str]]:
    """Each ``exec`` command of a script, joined over its continuation lines and split as a shell would."""
    joined = text.replace("\\\n", " ")
    lines = [line for line in joined.splitlines() if not line.strip().startswith("#")]
    return [shlex.split(line.split("exec ", 1)[1]) for line in lines if "exec " in line]


def test_vllm_commands_carry_the_nixl_connector_and_the_plan_numbers() -> None:
    result = _export(_doc(dtype="fp8", kv_dtype="fp8"), "vllm")
    prefill, decode, _ = _script_commands(result.text)
    for argv, role, tp in ((prefill, "kv_producer", "2"), (decode, "kv_consumer", "4")):
        assert argv[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct"]
        config = json.loads(_flag(argv, "--kv-transfer-config"))
        assert config == {"kv_connector": "NixlConnector", "kv_role": role, "kv_load_failure_policy": "fail"}
        assert _flag(argv, "--tensor-parallel-size") == tp
        assert _flag(argv, "--gpu-memory-utilization") == "0.85"
        assert _flag(argv, "--max-num-batched-tokens") == "4096"
        assert _flag(argv, "--quantization") == "fp8"
        assert _flag(argv, "--kv-cache-dtype") == "fp8"
    assert _flag(decode, "--max-num-seqs") == "128"
    assert "--max-num-seqs" not in prefill
    assert "p_ports+=($((8100 + k)))" in result.text  # one port per prefill instance, by its slot on the node
    _assert_accepted(result)


def test_sglang_commands_carry_disaggregation_mode_and_backend() -> None:
    result = _export(_doc(kv_dtype="fp8"), "sglang")
    prefill, decode, router = _script_commands(result.text)
    for argv, mode in ((prefill, "prefill"), (decode, "decode")):
        assert argv[:3] == ["python", "-m", "sglang.launch_server"]
        assert _flag(argv, "--disaggregation-mode") == mode
        assert _flag(argv, "--disaggregation-transfer-backend") == "nixl"
        assert _flag(argv, "--kv-cache-dtype") == "fp8_e4m3"
    # SGLang's own rule, not the vLLM-priced 0.85: an 80 GiB H100 (< 90 GiB tier) reserves 9.5 GiB + TP x PP / 2 GiB:
    # TP2 (80 - 10.5) / 80 = 0.869, TP4 (80 - 11.5) / 80 = 0.856 (rounded to 3 places, as SGLang does)
    assert _flag(prefill, "--mem-fraction-static") == "0.869"
    assert _flag(decode, "--mem-fraction-static") == "0.856"
    assert _flag(prefill, "--context-length") == "35089"
    assert _flag(decode, "--max-running-requests") == "128"
    assert router[:3] == ["python", "-m", "sglang_router.launch_router"]
    assert "--pd-disaggregation" in router
    assert 'urls+=(--prefill "http://$h:$((30000 + k))" $((8998 + k)))' in result.text  # its bootstrap port
    _assert_accepted(result)


def test_attention_data_and_expert_parallel_map_to_each_engine() -> None:
    plan = _plan(decode={"gpu": "h100-sxm", "tp": 1, "dp": 8, "ep": 8, "count": 1})
    vllm_decode = _script_commands(_export(_doc(plan), "vllm").text)[1]
    assert _flag(vllm_decode, "--tensor-parallel-size") == "1"
    assert _flag(vllm_decode, "--data-parallel-size") == "8"
    assert "--enable-expert-parallel" in vllm_decode
    sglang_decode = _script_commands(_export(_doc(plan), "sglang").text)[1]
    assert _flag(sglang_decode, "--tp-size") == "8"  # SGLang's tp-size is the instance's GPU count
    assert _flag(sglang_decode, "--dp-size") == "8"
    assert "--enable-dp-attention" in sglang_decode
    assert _flag(sglang_decode, "--ep-size") == "8"


def test_reports_record_what_each_plan_was_priced_with() -> None:
    default = json.loads(DEFAULT_JSON.read_text())["plans"][0]["priced"]
    # Llama-3.1-70B BF16, TP2 on an 80 GiB H100 at 0.9: usable 77,309,411,328 B a GPU − weights 70,553,706,496 −
    # workspace 8192 × (4 × 8192 + 2 × 28672 / 2) × 2 B = 1,006,632,960 leaves 5,749,071,872 B; × 2 GPUs / 327,680 B
    # a token (80 layers × 8 KV heads × 128 × K,V × 2 B) = 35,089.3 tokens
    assert default["roles"]["prefill"]["max_model_len"] == 35089
    assert default["roles"]["decode"]["max_model_len"] == 131072  # TP4 holds more: capped at the model's window
    assert default["routing"] == {"prefill": "least-loaded", "decode": "random"}  # the default since issue #25
    assert (default["engine"], default["engine_version"]) == ("vllm", "0.12.0")
    wide_ep = json.loads((DEFAULT_JSON.parent / "deepseek-v3-wide-ep.json").read_text())["plans"][0]["priced"]
    prefill = wide_ep["roles"]["prefill"]
    assert (prefill["moe_kernel"], prefill["two_batch_overlap"], prefill["redundant_experts"]) == (
        "deepgemm_wideep",
        True,
        32,
    )


def test_the_context_that_fits_one_instance_is_written() -> None:
    prefill, decode, _ = _script_commands(_export(_doc(), "vllm").text)
    assert _flag(prefill, "--max-model-len") == "35089"  # the priced KV capacity of a TP2 prefill instance
    assert _flag(decode, "--max-model-len") == "131072"  # capped at the model's window
    manifest = yaml.safe_load(_export(_doc(), "dynamo", backend="sglang").text)["spec"]["services"]
    assert _flag(manifest["prefill"]["extraPodSpec"]["mainContainer"]["args"], "--context-length") == "35089"
    unpriced = _plan()
    del unpriced["priced"]
    result = _export(_doc(unpriced), "vllm")
    assert all("--max-model-len" not in argv for argv in _script_commands(result.text))
    assert any("no priced record" in w for w in result.warnings)


def _wide_ep(**role: Any) -> dict[str, Any]:
    """A DeepSeek-style plan: DP8 EP8 roles priced with DeepEP, two-batch overlap and 32 redundant experts."""
    moe = {"moe_kernel": "deepgemm_wideep", "two_batch_overlap": True, "redundant_experts": 32} | role
    ep = {"gpu": "h200-sxm", "tp": 1, "dp": 8, "ep": 8, "count": 1}
    priced = {"routing": {"prefill": "least-work", "decode": "random"}, "roles": {"prefill": moe, "decode": moe}}
    return _plan(prefill=ep, decode=ep, routing="least-work", priced={"engine": "sglang", **priced})


def test_priced_moe_mechanisms_are_written_in_each_engines_terms() -> None:
    prefill, decode, _ = _script_commands(_export(_doc(_wide_ep()), "sglang").text)
    for argv, mode in ((prefill, "normal"), (decode, "low_latency")):
        assert _flag(argv, "--moe-a2a-backend") == "deepep"
        assert _flag(argv, "--deepep-mode") == mode
        assert "--enable-two-batch-overlap" in argv
        assert "--enable-eplb" in argv
        assert _flag(argv, "--ep-num-redundant-experts") == "32"
    prefill, decode, _ = _script_commands(_export(_doc(_wide_ep()), "vllm").text)
    assert _flag(prefill, "--all2all-backend") == "deepep_high_throughput"
    assert _flag(decode, "--all2all-backend") == "deepep_low_latency"
    assert "--enable-dbo" in decode
    assert json.loads(_flag(decode, "--eplb-config")) == {"num_redundant_experts": 32}
    plain = _script_commands(_export(_doc(_wide_ep(moe_kernel="fused", two_batch_overlap=False)), "sglang").text)[0]
    assert "--moe-a2a-backend" not in plain
    assert "--enable-two-batch-overlap" not in plain
    for target in ("sglang", "vllm"):
        _assert_accepted(_export(_doc(_wide_ep()), target))


def test_mechanisms_no_engine_runs_are_refused() -> None:
    gather = _wide_ep(expert_gather=True)
    for target in ("dynamo", "vllm", "sglang"):
        with pytest.raises(SpecError, match="ZeRO-Prefill expert gather"):
            _export(_doc(gather), target)
    for granularity in ("layer", "chunk"):
        overlapped = _doc(_plan(granularity=granularity))
        for target, backend in (("vllm", "vllm"), ("dynamo", "vllm")):
            with pytest.raises(SpecError, match=f"{granularity}-granularity KV transfer, but vllm transfers KV per"):
                _export(overlapped, target, backend=backend)
        _export(overlapped, "dynamo", backend="sglang")  # SGLang sends each chunk: exported, with a warning


def test_the_priced_routing_is_exported_or_warned() -> None:
    doc = _doc(_wide_ep())
    router = _script_commands(_export(doc, "sglang").text)[2]
    assert _flag(router, "--prefill-policy") == "power_of_two"  # no least-work policy: the nearest, warned
    assert _flag(router, "--decode-policy") == "random"
    assert _flag(router, "--host") == "0.0.0.0"
    assert any("no least-work policy" in w for w in _export(doc, "sglang").warnings)
    proxy = _script_commands(_export(doc, "vllm").text)[2]
    assert _flag(proxy, "--host") == "0.0.0.0"
    vllm = _export(doc, "vllm")
    assert any("toy proxy round-robins" in w for w in vllm.warnings)
    assert "# routing: priced with least-work prefill routing; vLLM's toy proxy round-robins" in vllm.text
    services = yaml.safe_load(_export(doc, "dynamo", backend="sglang").text)["spec"]["services"]
    frontend = services["Frontend"]["extraPodSpec"]["mainContainer"]["args"]
    assert _flag(frontend, "--router-mode") == "least-loaded"  # Dynamo 1.2.1's nearest to least-work, warned
    warned = _export(doc, "dynamo", backend="sglang").warnings
    assert any("--router-mode least-loaded is written" in w and "fewest active requests" in w for w in warned)
    round_robin = _doc()  # priced round-robin: each target says so, no warning
    assert _flag(_script_commands(_export(round_robin, "sglang").text)[2], "--prefill-policy") == "round_robin"
    assert not _export(round_robin, "vllm").warnings
    rr_frontend = yaml.safe_load(_export(round_robin, "dynamo").text)["spec"]["services"]["Frontend"]
    assert _flag(rr_frontend["extraPodSpec"]["mainContainer"]["args"], "--router-mode") == "round-robin"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("target", ["vllm", "sglang"])
def test_scripts_are_valid_bash_and_check_the_instance_count(target: str, tmp_path: Path) -> None:
    script = tmp_path / "launch.sh"
    script.write_text(_export(_doc(), target).text)
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    router = "proxy" if target == "vllm" else "router"
    env = {"PATH": "/usr/bin:/bin", "PREFILL_HOSTS": "a b", "DECODE_HOSTS": "c"}
    run = subprocess.run(["bash", str(script), router], env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 2
    assert "PREFILL_HOSTS needs 1 addresses" in run.stderr  # 3 TP2 instances fit one 8-GPU node


def _run_script(text: str, tmp_path: Path, *args: str, **env: str) -> list[str]:
    """Run a launch script with ``python`` and ``vllm`` replaced by a stub that prints its arguments, one a line."""
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    for name in ("python", "vllm"):
        (stub / name).write_text(
            '#!/bin/sh\nenv | grep -E "^(CUDA_VISIBLE_DEVICES|VLLM_NIXL_SIDE_CHANNEL_PORT)=" | sort\n'
            'for a in "$@"; do echo "$a"; done\n'
        )
        (stub / name).chmod(0o755)
    script = tmp_path / "launch.sh"
    script.write_text(text)
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    full_env = {"PATH": f"{stub}:/usr/bin:/bin", **env}
    run = subprocess.run(["bash", str(script), *args], env=full_env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_scripts_pack_instances_onto_nodes(tmp_path: Path) -> None:
    doc = _doc()  # 3 prefill TP2 and 1 decode TP4 on nodes of 4 GPUs: 2 prefill a node (2 nodes), 1 decode
    ctx = export_context(open_catalog(), doc, plan_gpus(doc, 1, "test"), source="test", gpus_per_node=4)
    vllm = export_plan(doc, target="vllm", rank=1, ctx=ctx, source="test").text
    slot1 = _run_script(vllm, tmp_path, "prefill", "1", HOST_IP="10.0.0.1")
    assert slot1[:2] == ["CUDA_VISIBLE_DEVICES=2,3", "VLLM_NIXL_SIDE_CHANNEL_PORT=5601"]
    assert _flag(slot1, "--port") == "8101"
    proxy = _run_script(vllm, tmp_path, "proxy", PREFILL_HOSTS="p0 p1", DECODE_HOSTS="d0")
    hosts = proxy[proxy.index("--prefiller-hosts") + 1 : proxy.index("--prefiller-ports")]
    ports = proxy[proxy.index("--prefiller-ports") + 1 : proxy.index("--decoder-hosts")]
    assert list(zip(hosts, ports, strict=True)) == [("p0", "8100"), ("p0", "8101"), ("p1", "8100")]
    assert _flag(proxy, "--host") == "0.0.0.0"
    sglang = export_plan(doc, target="sglang", rank=1, ctx=ctx, source="test").text
    server = _run_script(sglang, tmp_path, "prefill", "1", HOST_IP="10.0.0.1")
    assert (_flag(server, "--base-gpu-id"), _flag(server, "--port")) == ("2", "30001")
    assert _flag(server, "--disaggregation-bootstrap-port") == "8999"
    router = _run_script(sglang, tmp_path, "router", PREFILL_HOSTS="p0 p1", DECODE_HOSTS="d0")
    prefills = [router[i + 1 : i + 3] for i, word in enumerate(router) if word == "--prefill"]
    assert prefills == [["http://p0:30000", "8998"], ["http://p0:30001", "8999"], ["http://p1:30000", "8998"]]
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run(["bash", str(tmp_path / "launch.sh"), "prefill", "2"], check=True, capture_output=True)


def _two_node_dp(**prefill: Any) -> PlanDocument:
    """2 prefill instances of TP1 DP16 EP16 (16 GPUs: two 8-GPU H100 nodes each), 1 decode TP4."""
    role = {"gpu": "h100-sxm", "tp": 1, "pp": 1, "dp": 16, "ep": 16, "count": 2, **prefill}
    return _doc(_plan(prefill=role, num_gpus=36, label="2P1D h100-sxm TP1 DP16 EP16 / h100-sxm TP4 request"))


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_vllm_runs_data_parallel_ranks_over_nodes(tmp_path: Path) -> None:
    text = _export(_two_node_dp(), "vllm").text
    head = _run_script(text, tmp_path, "prefill", "0", HOST_IP="10.0.0.1", HEAD_IP="10.0.0.1")
    other = _run_script(text, tmp_path, "prefill", "1", HOST_IP="10.0.0.2", HEAD_IP="10.0.0.1")
    for node in (head, other):  # each node: its 8 ranks on GPUs 0..7, the side channel's base port
        assert node[:2] == ["CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", "VLLM_NIXL_SIDE_CHANNEL_PORT=5600"]
        assert (_flag(node, "--data-parallel-size"), _flag(node, "--data-parallel-size-local")) == ("16", "8")
        assert (_flag(node, "--data-parallel-address"), _flag(node, "--data-parallel-rpc-port")) == (
            "10.0.0.1",
            "29550",
        )
    assert _flag(head, "--port") == "8100"
    assert not {"--headless", "--data-parallel-start-rank"} & set(head)  # node 0 serves the API
    assert "--headless" in other
    assert "--port" not in other
    assert _flag(other, "--data-parallel-start-rank") == "8"
    proxy = _run_script(text, tmp_path, "proxy", PREFILL_HOSTS="p0 p1 p2 p3", DECODE_HOSTS="d0")
    hosts = proxy[proxy.index("--prefiller-hosts") + 1 : proxy.index("--prefiller-ports")]
    assert hosts == ["p0", "p2"]  # node 0 of each instance
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run(["bash", str(tmp_path / "launch.sh"), "prefill", "2"], check=True, capture_output=True)


@pytest.mark.parametrize(
    ("prefill", "target"),
    [
        ({"tp": 16, "dp": 1, "ep": 1}, "vllm"),  # one TP group over nodes: not data-parallel ranks
        ({"tp": 3, "dp": 7, "ep": 21}, "vllm"),  # 21 GPUs take 3 nodes, but 7 whole TP3 ranks need 4 (2 a node)
        ({"tp": 1, "dp": 8, "pp": 2, "ep": 8}, "vllm"),  # PP over nodes is not written
        ({"tp": 4, "dp": 1, "pp": 3, "ep": 1}, "sglang"),  # 3 PP stages over 2 nodes: SGLang never starts stage 2
    ],
)
def test_instances_the_engine_cannot_split_over_nodes_are_refused(prefill: dict[str, int], target: str) -> None:
    with pytest.raises(SpecError, match="more than one h100-sxm node") as err:
        _export(_two_node_dp(**prefill), target)
    assert "\n" not in str(err.value)
    assert ("data-parallel ranks" if target == "vllm" else "pipeline stages SGLang places") in str(err.value)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_colocated_sglang_plans_get_a_load_balancer(tmp_path: Path) -> None:
    colocated = _plan(
        mode="colocated",
        prefill=None,
        decode=None,
        granularity=None,
        scheduler="chunked",
        colocated={"gpu": "h100-sxm", "tp": 4, "count": 3},
    )
    colocated["priced"] = {"routing": {"colocated": "random"}, "roles": {}}
    router = _run_script(_export(_doc(colocated), "sglang").text, tmp_path, "router", COLOCATED_HOSTS="n0 n1")
    workers = router[router.index("--worker-urls") + 1 : router.index("--policy")]
    assert workers == ["http://n0:30000", "http://n0:30001", "http://n1:30000"]
    assert _flag(router, "--policy") == "random"
    assert _flag(router, "--host") == "0.0.0.0"


# ---- warnings and refusals ----------------------------------------------------------------------------------


def test_granularity_the_engine_does_not_implement_is_warned_in_output_and_result() -> None:
    layer = _doc(_plan(granularity="layer"))
    result = _export(layer, "sglang")
    assert any("layer-granularity" in w and "--granularity chunk" in w for w in result.warnings)
    assert "# WARNING: the plan priced layer-granularity" in result.text
    assert not _export(_doc(_plan(granularity="chunk")), "sglang").warnings  # SGLang sends per chunk
    assert not _export(_doc(_plan(granularity="request")), "vllm").warnings


def test_a_plan_pairing_two_vendors_is_refused() -> None:
    doc = _doc(_plan(decode={"gpu": "mi300x", "tp": 4, "count": 1}))
    for target in ("dynamo", "vllm", "sglang"):
        with pytest.raises(SpecError, match="two vendors"):
            _export(doc, target)


def test_a_vendor_the_target_does_not_run_on_is_refused() -> None:
    amd = _doc(_plan(prefill={"gpu": "mi300x", "tp": 2, "count": 1}, decode={"gpu": "mi300x", "tp": 2, "count": 1}))
    with pytest.raises(SpecError, match="Dynamo"):
        _export(amd, "dynamo")
    with pytest.raises(SpecError, match="sglang prefill/decode"):
        _export(amd, "sglang")
    _export(amd, "vllm")  # vLLM documents NIXL on ROCm (RIXL)


def test_rank_out_of_range_and_unknown_targets_are_bad_input() -> None:
    doc = _doc()
    with pytest.raises(SpecError, match=r"plans 1\.\.1"):
        _export(doc, "vllm", rank=2)
    with pytest.raises(SpecError, match="unknown export target"):
        _export(doc, "tgi")


def test_a_model_without_hf_id_needs_model_id() -> None:
    doc = validate_spec(PlanDocument, {"plans": [_plan()], "inputs": {"model": "opt-175b"}}, "test")
    with pytest.raises(SpecError, match="--model-id"):
        export_context(open_catalog(), doc, ["h100-sxm"])
    ctx = export_context(open_catalog(), doc, ["h100-sxm"], model_id="/models/opt-175b")
    assert ctx.model_id == "/models/opt-175b"


def _export_file(path: Path) -> ExportResult:
    return _export(read_plan_document(str(path)), "vllm")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty"),
        ("[1]", "no 'plans'"),
        ("{", "not JSON"),
        ('{"plans": [1]}', r"plans\.0: Input should be a valid dictionary"),
        ('{"plans": [{"mode": "prfaas"}]}', "mode"),
        (json.dumps({"plans": [_plan(prfaas={"threshold_tokens": 8192})]}), r"prfaas\.remote"),
        (
            json.dumps(
                {"plans": [_plan(prfaas={"threshold_tokens": 0, "remote": {"gpu": "h200-sxm", "tp": 4, "count": 1}})]}
            ),
            "threshold_tokens",
        ),
    ],
)
def test_not_a_plan_document_is_bad_input(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(SpecError, match=match):
        _export_file(path)


def test_every_number_comes_from_the_plan_of_a_real_report() -> None:
    doc = read_plan_document(str(DEFAULT_JSON))
    for rank, plan in enumerate(doc.plans, start=1):
        if plan["granularity"] != "request":  # vLLM transfers per request: refused, exported to SGLang workers
            with pytest.raises(SpecError, match="transfers KV per request"):
                _export(doc, "dynamo", rank=rank)
        result = _export(doc, "dynamo", rank=rank, backend="vllm" if plan["granularity"] == "request" else "sglang")
        workers = yaml.safe_load(result.text)["spec"]["services"]
        for role in ("prefill", "decode"):
            want: dict[str, Any] = plan[role]  # type: ignore[assignment]
            service = next(s for s in workers.values() if s.get("subComponentType") == role)
            assert service["replicas"] == want["count"]
            assert service["resources"]["limits"]["gpu"] == str(want["tp"] * want["pp"])
            args = service["extraPodSpec"]["mainContainer"]["args"]
            tp_flag = "--tensor-parallel-size" if plan["granularity"] == "request" else "--tp-size"
            assert _flag(args, tp_flag) == str(want["tp"] * want["dp"])


def test_model_presets_name_the_checkpoint_their_source_cites() -> None:
    catalog = open_catalog()
    for name in catalog.names("model"):
        model = catalog.model(name)
        if model.hf_id is not None:
            assert model.hf_id.removesuffix("-Instruct").lower() in model.source.lower(), name


def test_plan_documents_are_not_modified() -> None:
    doc = read_plan_document(str(COLOCATED_JSON))
    before = copy.deepcopy(doc.plans)
    _export(doc, "sglang")
    assert doc.plans == before


def test_a_plan_priced_for_another_engine_is_warned() -> None:
    data = {"plans": [_plan()], "inputs": {"model": "llama-3.1-70b"}, "engine": {"name": "sglang", "version": "x"}}
    doc = validate_spec(PlanDocument, data, "test")
    assert any("priced with the sglang engine profile" in w for w in _export(doc, "vllm").warnings)
    assert not any("but it is exported for" in w for w in _export(doc, "sglang").warnings)


def test_node_labels_can_be_given_for_gpus_without_one() -> None:
    doc = _doc(_plan(decode={"gpu": "mi300x", "tp": 4, "count": 1}, prefill={"gpu": "mi300x", "tp": 8, "count": 1}))
    given = export_context(open_catalog(), doc, ["mi300x"], node_labels_given=["MI300X=amd.com/gpu.product=X"])
    assert given.node_labels["mi300x"].key == "amd.com/gpu.product"
    with pytest.raises(SpecError, match="GPU=KEY=VALUE"):
        export_context(open_catalog(), doc, ["mi300x"], node_labels_given=["mi300x=amd.com/gpu.product"])


def test_a_one_gpu_plan_without_a_known_label_is_exported_unpinned_with_a_warning() -> None:
    doc = _doc()
    ctx = export_context(open_catalog(), doc, ["h100-sxm"])
    result = export_plan(doc, target="dynamo", rank=1, ctx=dataclasses.replace(ctx, node_labels={}), source="test")
    services = yaml.safe_load(result.text)["spec"]["services"].values()
    assert all("nodeSelector" not in s["extraPodSpec"] for s in services)
    assert any("no node label known for GPU 'h100-sxm'" in w for w in result.warnings)
    # a label given on the command line (checked against Kubernetes' label syntax) reaches every service as data
    given = export_context(open_catalog(), doc, ["h100-sxm"], node_labels_given=["h100-sxm=example.com/pool=p-1"])
    manifest = yaml.safe_load(export_plan(doc, target="dynamo", rank=1, ctx=given, source="test").text)
    assert all(
        s["extraPodSpec"]["nodeSelector"] == {"example.com/pool": "p-1"} for s in manifest["spec"]["services"].values()
    )


def test_a_mixed_gpu_plan_without_a_known_label_is_bad_input() -> None:
    plan = _plan(decode={"gpu": "l40s", "tp": 2, "count": 4})
    doc = _doc(plan)
    ctx = export_context(open_catalog(), doc, ["h100-sxm", "l40s"])
    ctx = dataclasses.replace(ctx, node_labels={"h100-sxm": ctx.node_labels["h100-sxm"]})
    with pytest.raises(SpecError, match="--node-label"):
        export_plan(doc, target="dynamo", rank=1, ctx=ctx, source="test")


# --- #12: the engine version a file targets against the one the plan was priced with -----------------------------


def _real_doc() -> PlanDocument:
    return read_plan_document(str(DEFAULT_JSON))


def test_a_real_report_names_the_engine_profile_it_was_priced_with() -> None:
    """``optimize --format json`` records the profile under ``assumptions.engine`` (vLLM 0.12.0 by default)."""
    doc = _real_doc()
    assert doc.engine_name == "vllm"
    assert doc.engine_version == "0.12.0"
    assert any("priced with the vllm engine profile" in w for w in _export(doc, "sglang").warnings)


@pytest.mark.parametrize(("target", "backend"), [("vllm", "vllm"), ("dynamo", "vllm"), ("sglang", "vllm")])
def test_export_states_both_engine_versions_and_warns_when_they_differ(target: str, backend: str) -> None:
    doc = _real_doc()
    engine = "sglang" if target == "sglang" else "vllm"
    rank = 1 if engine == "sglang" else 5  # the first request-wise plan: vLLM refuses layer-wise transfer
    result = _export(doc, target, rank=rank, backend=backend)
    targeted = export_targets().engines[engine].version
    assert "priced with the vllm 0.12.0 engine profile" in result.text
    assert f"targets {'SGLang' if engine == 'sglang' else 'vLLM'} {targeted}" in result.text
    if engine == "vllm":
        assert targeted != "0.12.0"
        assert any("0.12.0" in w and targeted in w for w in result.warnings)


def test_no_version_warning_when_the_plan_was_priced_with_the_targeted_version() -> None:
    version = export_targets().engines["vllm"].version
    data = {"plans": [_plan()], "inputs": {"model": "llama-3.1-70b"}, "engine": {"name": "vllm", "version": version}}
    doc = validate_spec(PlanDocument, data, "test")
    assert not any("0.12.0" in w or "version" in w for w in _export(doc, "vllm").warnings)


def test_flag_lists_were_read_at_the_versions_the_exports_target() -> None:
    """engine_flags.yaml says at which version each program's flags were read; it must be the version targeted."""
    targets, flags = export_targets(), engine_flags().programs
    assert flags["vllm serve"].version == f"vLLM {targets.engines['vllm'].version}"
    assert flags["python -m sglang.launch_server"].version == f"SGLang {targets.engines['sglang'].version}"
    for program in (
        "python3 -m dynamo.vllm",
        "python3 -m dynamo.sglang",
        "python3 -m dynamo.trtllm",
        "python3 -m dynamo.frontend",
    ):
        assert flags[program].version == f"Dynamo {targets.dynamo.release}"


# ---- batch caps and the KV connector (issue #25) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("max_num_seqs", "dp", "budget", "written"),
    [(4096, 1, 2048, 2048), (256, 16, 8192, 16), (100, 3, None, 34), (128, 1, 8192, 128)],
)
def test_vllm_batch_cap_is_per_dp_engine_and_within_the_budget(
    max_num_seqs: int, dp: int, budget: int | None, written: int
) -> None:
    assert vllm_max_num_seqs(max_num_seqs, dp, budget) == written


def test_vllm_export_writes_the_cap_per_dp_engine() -> None:
    plan = _plan(decode={"gpu": "h100-sxm", "tp": 2, "pp": 1, "dp": 4, "ep": 8, "count": 1}, max_num_seqs=256)
    doc = _doc(plan)
    doc = doc.model_copy(update={"inputs": {**doc.inputs, "model": {"name": "qwen3-30b-a3b"}}})
    ctx = export_context(open_catalog(), doc, ["h100-sxm"], model_id="Qwen/Qwen3-30B-A3B", source="test")
    result = export_plan(doc, target="vllm", rank=1, ctx=ctx, source="test", backend="vllm")
    decode = next(c for c in result.commands if c.role == "decode")
    assert _flag(decode.argv(), "--max-num-seqs") == "64"


def test_dynamo_vllm_workers_get_the_kv_transfer_config() -> None:
    result = _export(_doc(), "dynamo", backend="vllm")
    for cmd in result.commands:
        if cmd.role in ("prefill", "decode"):
            assert json.loads(_flag(cmd.argv(), "--kv-transfer-config")) == {
                "kv_connector": "NixlConnector",
                "kv_role": "kv_both",
            }


# ---- TensorRT-LLM (--to trtllm) --------------------------------------------------------------------------------


def _trtllm_options(text: str, role: str) -> dict[str, Any]:
    """The ``--extra_llm_api_options`` YAML a trtllm script's role case writes (its quoted heredoc)."""
    body = text.split(f"\n  {role})\n", 1)[1].split("<<'YAML'\n", 1)[1].split("\nYAML\n", 1)[0]
    options: dict[str, Any] = yaml.safe_load(body)
    return options


def test_trtllm_writes_fp8_kv_and_warns_about_fp8_weights() -> None:
    result = _export(_doc(dtype="fp8", kv_dtype="fp8"), "trtllm")
    assert _trtllm_options(result.text, "decode")["kv_cache_config"] == {"dtype": "fp8"}
    assert "dtype" not in _trtllm_options(result.text, "decode")  # FP8 weights come from the checkpoint
    assert any("FP8-quantized checkpoint" in w for w in result.warnings)
    _assert_accepted(result)


def test_trtllm_colocated_prefill_first_plan_turns_chunking_off() -> None:
    plan = _plan(
        mode="colocated",
        prefill=None,
        decode=None,
        colocated={"gpu": "h100-sxm", "tp": 4, "count": 2},
        granularity=None,
        scheduler="prefill-first",
    )
    result = _export(_doc(plan), "trtllm")
    options = _trtllm_options(result.text, "colocated")
    assert options["enable_chunked_prefill"] is False
    assert "cache_transceiver_config" not in options  # no KV transfer in a colocated server
    assert "server)" not in result.text  # no disaggregated server; the header says to add a load balancer
    assert "put the instances behind a load balancer" in result.text


@pytest.mark.parametrize(
    ("plan", "match"),
    [
        (
            _plan(prefill={"gpu": "mi300x", "tp": 2, "count": 1}, decode={"gpu": "mi300x", "tp": 2, "count": 1}),
            "NVIDIA",
        ),
        (_wide_ep(expert_gather=True), "ZeRO-Prefill expert gather"),
        (_plan(decode={"gpu": "h100-sxm", "tp": 2, "dp": 4, "ep": 8, "count": 1}), "TP > 1 per rank"),
        (_wide_ep(), "two-batch overlap"),
        (_wide_ep(two_batch_overlap=False), "expert count is unknown"),  # Llama: no experts to add slots to
        (_plan(granularity="layer"), "transfers KV per request"),
    ],
    ids=["amd", "expert-gather", "attention-dp-tp2", "two-batch-overlap", "slots-unknown", "layer-wise"],
)
def test_trtllm_refuses_in_one_line(plan: dict[str, Any], match: str) -> None:
    with pytest.raises(SpecError, match=match) as err:
        _export(_doc(plan), "trtllm")
    assert "\n" not in str(err.value)


def _deepseek(plan: dict[str, Any]) -> PlanDocument:
    doc = _doc(plan, dtype="fp8", kv_dtype="fp8")
    return doc.model_copy(update={"inputs": {**doc.inputs, "model": {"name": "deepseek-v3"}}})


def test_trtllm_writes_attention_dp_and_wide_ep() -> None:
    """DP8 EP8 TP1 ranks priced with the wide-EP kernels and 32 redundant experts: TensorRT-LLM's attention DP over
    8 ranks, WIDEEP MoE and 256 + 32 load-balancer slots (trtllm.yaml sources)."""
    result = _export(_deepseek(_wide_ep(two_batch_overlap=False)), "trtllm")
    for role in ("prefill", "decode"):
        options = _trtllm_options(result.text, role)
        assert options["tensor_parallel_size"] == 8  # the world size: attention DP over the 8 ranks
        assert options["enable_attention_dp"] is True
        assert options["moe_expert_parallel_size"] == 8
        assert options["moe_config"] == {"backend": "WIDEEP", "load_balancer": {"num_slots": 288}}
    assert any("WIDEEP" in w and "DeepGEMM" in w for w in result.warnings)  # priced with other kernels: said
    assert any("not in NVIDIA's LLM-API reference for 1.3.0rc26" in w for w in result.warnings)  # release: said
    _assert_accepted(result)
    with pytest.raises(SpecError, match="290 do not divide over EP8"):
        _export(_deepseek(_wide_ep(two_batch_overlap=False, redundant_experts=34)), "trtllm")


# --- the KV transfer backend the plan was priced with (priced.transfer_backend) ----------------------------------


def _with_backend(backend: str | None) -> PlanDocument:
    plan = _plan()
    plan["priced"] = {**plan["priced"], "transfer_backend": backend}
    return _doc(plan)


@pytest.mark.parametrize(
    ("backend", "word", "warned"),
    [("mooncake-te", "mooncake", False), ("nixl-ucx", "nixl", False), (None, "nixl", False), ("tcp", "nixl", True)],
)
def test_sglang_runs_the_transfer_backend_priced(backend: str | None, word: str, warned: bool) -> None:
    # targets.yaml engines.sglang.transfer_backends: mooncake-te -> mooncake, nixl-ucx -> nixl; else the default nixl
    result = _export(_with_backend(backend), "sglang")
    prefill, decode, _ = _script_commands(result.text)
    assert _flag(prefill, "--disaggregation-transfer-backend") == word
    assert _flag(decode, "--disaggregation-transfer-backend") == word
    manifest = yaml.safe_load(_export(_with_backend(backend), "dynamo", backend="sglang").text)
    args = manifest["spec"]["services"]["prefill"]["extraPodSpec"]["mainContainer"]["args"]
    assert _flag(args, "--disaggregation-transfer-backend") == word
    assert any("priced its KV transfer with the tcp backend" in w for w in result.warnings) == warned


def test_vllm_warns_for_a_backend_its_connector_does_not_run() -> None:
    mooncake = _export(_with_backend("mooncake-te"), "vllm")
    assert any("mooncake-te backend" in w and "NixlConnector is written" in w for w in mooncake.warnings)
    assert not any("priced its KV transfer" in w for w in _export(_with_backend("nixl-ucx"), "vllm").warnings)


def test_a_hostile_priced_backend_reaches_only_comments() -> None:
    result = _export(_with_backend("x\ntouch PWNED"), "sglang")
    assert _flag(_script_commands(result.text)[0], "--disaggregation-transfer-backend") == "nixl"
    assert all("PWNED" not in line or line.lstrip().startswith("#") for line in result.text.splitlines())
