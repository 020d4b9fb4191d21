"""A scenario-level ``granularity`` its engine's KV connector does not run (issue #25 item 3: vLLM's NixlConnector
transfers a request's KV after its prefill, ``kv_connector.granularities: [request]``) is priced as set, with one
stderr line naming the engine, its connector and the granularity it runs; the result does not change."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from support.cli_result import CliResult

ROOT = Path(__file__).resolve().parents[2]
FAST = ("--isl", "512", "--osl", "64", "--rate", "1", "--format", "json")
SMALL = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1")
PHRASE = "granularity: layer is priced as set, but the vllm engine's NixlConnector runs request-wise KV transfer only"


def test_evaluate_warns_once_and_prices_as_set(cli: Callable[..., CliResult]) -> None:
    layer = cli("evaluate", *SMALL, *FAST, "--granularity", "layer")
    assert layer.code == 0, layer.err
    assert sum(PHRASE in line for line in layer.err_lines) == 1
    assert json.loads(layer.out)["granularity"] == "layer"  # priced as set: no result change
    request = cli("evaluate", *SMALL, *FAST, "--granularity", "request")
    assert request.code == 0, request.err
    assert "granularity:" not in request.err
    kernels = cli("evaluate", *SMALL, *FAST, "--granularity", "layer", "--engine", "kernels")
    assert kernels.code == 0, kernels.err
    assert "granularity:" not in kernels.err  # no connector: nothing to run it with, nothing to say


@pytest.mark.parametrize(("searched", "warned"), [((), True), (("--granularity", "request"), False)])
def test_optimize_warns_for_the_scenario_granularity_only(
    cli: Callable[..., CliResult], tmp_path: Path, searched: tuple[str, ...], warned: bool
) -> None:
    doc = yaml.safe_load((ROOT / "examples" / "default.yaml").read_text())
    doc["granularity"] = "layer"
    del doc["search"]["granularities"]  # the search keeps the scenario's own granularity
    doc["search"] |= {"tp": [4], "max_instances": 3, "max_num_seqs": [128]}
    path = tmp_path / "layer.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = cli("optimize", path, "--format", "json", "--top", "1", *searched)
    assert result.code == 0, result.err
    assert sum(PHRASE in line for line in result.err_lines) == int(warned)
