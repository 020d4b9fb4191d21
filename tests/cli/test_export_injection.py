"""Nothing typed or read from a plan document can add a command to an exported script or a key to a manifest
(issue #26): model ids outside the id/path grammar are refused, node labels outside Kubernetes' label syntax are
refused, and free text from the plan (its label) reaches only comment lines, with control characters escaped. A
script must parse (``bash -n``) and a manifest must load as one YAML document whose top-level keys are the
DynamoGraphDeployment's own."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support.cli_result import CliResult

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "tests" / "golden" / "examples" / "default.json"
TARGETS = [("vllm",), ("sglang",), ("dynamo", "--backend", "vllm"), ("dynamo", "--backend", "sglang"), ("trtllm",)]
HOSTILE_IDS = ["foo\ntouch PWNED", "", "-rf", "a b", "x;touch PWNED", "$(touch PWNED)", "`id`", "x'y", 'x"y', "a\rb"]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: "-".join(t))
@pytest.mark.parametrize("model_id", HOSTILE_IDS, ids=range(len(HOSTILE_IDS)))
def test_hostile_model_id_is_refused(cli: Callable[..., CliResult], target: tuple[str, ...], model_id: str) -> None:
    result = cli("export", str(PLAN), "--to", *target, "--model-id", model_id)
    assert result.code == 2, result.err
    assert result.out == ""
    assert len(result.err_lines) == 1
    assert "--model-id" in result.err_lines[0]


def _hostile_plan(tmp_path: Path) -> Path:
    doc = json.loads(PLAN.read_text())
    for plan in doc["plans"]:
        plan["label"] = "x\ntouch PWNED\nkind: Evil"
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(doc))
    return path


def _check_script(text: str) -> None:
    bash = shutil.which("bash")
    if bash is not None:
        subprocess.run([bash, "-n"], input=text, text=True, check=True)
    for line in text.splitlines():
        assert "PWNED" not in line or line.lstrip().startswith("#"), line


def _check_manifest(text: str) -> None:
    docs = list(yaml.safe_load_all(text))
    assert len(docs) == 1
    assert set(docs[0]) == {"apiVersion", "kind", "metadata", "spec"}
    assert docs[0]["kind"] == "DynamoGraphDeployment"


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: "-".join(t))
def test_plan_text_reaches_only_comments(
    cli: Callable[..., CliResult], target: tuple[str, ...], tmp_path: Path
) -> None:
    model_id = "/models/org/model-1.0:rev@main"
    rank = "5" if "vllm" in target else "1"  # vLLM refuses the default report's layer-wise rank 1
    result = cli("export", str(_hostile_plan(tmp_path)), "--to", *target, "--rank", rank, "--model-id", model_id)
    assert result.code == 0, result.err
    assert "x\\ntouch PWNED" in result.out  # escaped, on the comment line
    if target[0] == "dynamo":
        _check_manifest(result.out)
    else:
        _check_script(result.out)


@pytest.mark.parametrize("label", ["h100-sxm=a=b\nc: d", "h100-sxm=a b=c", "h100-sxm=key=$(id)"])
def test_hostile_node_label_is_refused(cli: Callable[..., CliResult], label: str) -> None:
    result = cli("export", str(PLAN), "--to", "dynamo", "--node-label", label)
    assert result.code == 2, result.err
    assert "--node-label" in result.err_lines[0]


def test_a_hostile_model_name_inside_the_plan_is_refused(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    """The plan document's own model name (no --model-id) goes through the catalogue: a name with a newline is an
    unknown model, one line and exit 2, and nothing reaches stdout."""
    doc = json.loads(PLAN.read_text())
    doc["inputs"]["model"] = "llama-3.1-70b\ntouch PWNED"
    path = tmp_path / "evil-model.json"
    path.write_text(json.dumps(doc))
    for target in TARGETS:
        result = cli("export", str(path), "--to", *target)
        assert result.code == 2, result.err
        assert result.out == ""
        assert len(result.err_lines) == 1


def _cached_plan(tmp_path: Path, **cache: object) -> Path:
    """The default report with a ``cache`` setting (prefix caching, affinity, 1 TiB host DRAM per node) in every
    plan, changed by ``cache``."""
    doc = json.loads(PLAN.read_text())
    setting = {
        "prefix_caching": True,
        "routing": "affinity",
        "tier_sizes": [{"storage": "host-dram-pcie5", "capacity_bytes": 2**40}],
    }
    for plan in doc["plans"]:
        plan["cache"] = setting | cache
    path = tmp_path / "cached.json"
    path.write_text(json.dumps(doc))
    return path


HOSTILE_CACHE = [
    {"tier_sizes": [{"storage": "host-dram-pcie5\ntouch PWNED", "capacity_bytes": 2**40}]},
    {"tier_sizes": [{"storage": "$(touch PWNED)", "capacity_bytes": 2**40}]},
    {"tier_sizes": [{"storage": "host-dram-pcie5", "capacity_bytes": "1; touch PWNED"}]},
    {"tier_sizes": [{"storage": "host-dram-pcie5", "capacity_bytes": float("inf")}]},
    {"routing": "affinity\ntouch PWNED"},
    {"prefix_caching": "$(touch PWNED)"},
]


@pytest.mark.parametrize("cache", HOSTILE_CACHE, ids=range(len(HOSTILE_CACHE)))
def test_a_hostile_cache_setting_is_refused(
    cli: Callable[..., CliResult], cache: dict[str, object], tmp_path: Path
) -> None:
    """The cache fields that reach a command (the tier's storage, looked up in the catalogue; its size, a finite
    number; prefix caching and routing, one of their values) are validated: anything else is one line, exit 2."""
    path = _cached_plan(tmp_path, **cache)
    for target in TARGETS:
        result = cli("export", str(path), "--to", *target)
        assert result.code == 2, (target, result.err)
        assert result.out == ""
        assert len(result.err_lines) == 1


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: "-".join(t))
def test_cache_settings_are_written_quoted(
    cli: Callable[..., CliResult], target: tuple[str, ...], tmp_path: Path
) -> None:
    """A KV-aware plan's JSON flags (vLLM's MultiConnector config, Dynamo's KV-events config with its ``tcp://*``
    endpoint) stay one shell word or one YAML string."""
    result = cli("export", str(_cached_plan(tmp_path)), "--to", *target)
    assert result.code == 0, result.err
    if target[0] == "dynamo":
        _check_manifest(result.out)
        services = yaml.safe_load(result.out)["spec"]["services"]
        prefill = next(s for s in services.values() if s.get("subComponentType") == "prefill")
        args = prefill["extraPodSpec"]["mainContainer"]["args"]
        events = json.loads(args[args.index("--kv-events-config") + 1])
        assert events["endpoint"] == ("tcp://*:20080" if "vllm" in target else "tcp://*:5557")
        return
    _check_script(result.out)
    if target[0] == "vllm":
        assert '--kv-transfer-config \'{"kv_connector":"MultiConnector"' in result.out
    if target[0] == "sglang":
        assert "--hicache-size 137 \\" in result.out or "--hicache-size 137\n" in result.out


PRFAAS_PLAN = ROOT / "tests" / "golden" / "examples" / "prfaas-h200-h100.json"
HOSTILE_PRFAAS = [
    {"remote": {"gpu": "h200-sxm\ntouch PWNED", "tp": 4, "count": 2}},
    {"remote": {"gpu": "$(touch PWNED)", "tp": 4, "count": 2}},
    {"remote": {"gpu": "h200-sxm", "tp": "4; touch PWNED", "count": 2}},
    {"threshold_tokens": "29019; touch PWNED"},
    {"threshold_tokens": float("nan")},
]
PRFAAS_TARGETS = [("sglang",), ("dynamo", "--backend", "sglang")]
"""The targets that run the example PrfaaS plans (layer-wise KV transfer: not vLLM's connector, not TensorRT-LLM)."""


def _prfaas_plan(tmp_path: Path, **prfaas: object) -> Path:
    doc = json.loads(PRFAAS_PLAN.read_text())
    for plan in doc["plans"]:
        plan["prfaas"] |= prfaas
    path = tmp_path / "prfaas.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("prfaas", HOSTILE_PRFAAS, ids=range(len(HOSTILE_PRFAAS)))
def test_a_hostile_prfaas_record_is_refused(
    cli: Callable[..., CliResult], prfaas: dict[str, object], tmp_path: Path
) -> None:
    """The PrfaaS fields that reach a command (the remote GPU, looked up in the catalogue; its TP and count,
    integers; the threshold, a finite number) are validated: anything else is one line, exit 2."""
    path = _prfaas_plan(tmp_path, **prfaas)
    for target in PRFAAS_TARGETS:
        result = cli("export", str(path), "--to", *target)
        assert result.code == 2, (target, result.err)
        assert result.out == ""
        assert len(result.err_lines) == 1


@pytest.mark.parametrize("target", PRFAAS_TARGETS, ids=lambda t: "-".join(t))
def test_the_prfaas_link_name_reaches_only_a_comment(
    cli: Callable[..., CliResult], target: tuple[str, ...], tmp_path: Path
) -> None:
    result = cli("export", str(_prfaas_plan(tmp_path, link="dci\ntouch PWNED\nkind: Evil")), "--to", *target)
    assert result.code == 0, result.err
    assert "over dci\\ntouch PWNED" in result.out
    if target[0] == "dynamo":
        _check_manifest(result.out)
    else:
        _check_script(result.out)


COLOCATED_PLAN = ROOT / "tests" / "golden" / "examples" / "opt-13b-a100-distserve.json"
WIDE = [
    ("sglang", PLAN, {"prefill": {"tp": 16}}, "prefill", "--dist-init-addr", "{head}:5000"),
    ("vllm", COLOCATED_PLAN, {"colocated": {"count": 8}}, "colocated", "--data-parallel-address", "{head}"),
]
"""A launch over several nodes per target: an SGLang prefill instance of TP16 on 8-GPU nodes, and vLLM's colocated
front over eight TP2 instances (two nodes); the role, and the flag that carries ``HEAD_IP``."""


def _wide_plan(tmp_path: Path, source: Path, changes: dict[str, dict[str, int]]) -> Path:
    doc = json.loads(source.read_text())
    for role, fields in changes.items():
        doc["plans"][0][role] |= fields
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(("target", "source", "changes", "role", "flag", "value"), WIDE, ids=["sglang", "vllm"])
def test_run_time_values_of_a_launch_over_nodes_stay_data(
    cli: Callable[..., CliResult],
    tmp_path: Path,
    target: str,
    source: Path,
    changes: dict[str, dict[str, int]],
    role: str,
    flag: str,
    value: str,
) -> None:
    """What a script over several nodes reads when it runs (``HEAD_IP``, ``HOST_IP``, ``NODE``) cannot add a
    command: ``NODE`` must be a number in range (else exit 2), and the addresses reach the engine as one word each,
    unexpanded."""
    result = cli("export", str(_wide_plan(tmp_path, source, changes)), "--to", target)
    assert result.code == 0, result.err
    _check_script(result.out)
    script, stub = tmp_path / "launch.sh", tmp_path / "bin"
    script.write_text(result.out)
    stub.mkdir()
    for name in ("python", "vllm"):
        (stub / name).write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
        (stub / name).chmod(0o755)
    head = "$(touch PWNED); `touch PWNED`"
    env = {"PATH": f"{stub}:/usr/bin:/bin", "HEAD_IP": head, "HOST_IP": "10.0.0.2; touch PWNED"}
    for node in ("0; touch PWNED", "$(touch PWNED)", "2", "-1"):
        run = subprocess.run(["bash", str(script), role, node], env=env, cwd=tmp_path, capture_output=True, text=True)
        assert run.returncode == 2, (node, run.stdout)
        assert "NODE must be 0..1" in run.stderr
    run = subprocess.run(["bash", str(script), role, "1"], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    argv = run.stdout.splitlines()
    assert argv[argv.index(flag) + 1] == value.format(head=head)
    assert not (tmp_path / "PWNED").exists()
