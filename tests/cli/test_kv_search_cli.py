"""``search.kv_block_tokens`` / ``search.kv_backends`` (issue #24): a value the engine cannot run is refused with one
line and exit 2; a searched plan records its choice in its label and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pdplan.cli import run

SEARCH = {
    "tp": [2, 4],
    "max_instances": 3,
    "granularities": ["request"],
    "max_num_seqs": [256],
    "gpus": 12,
}
BASE = {
    "schema_version": 1,
    "model": "llama-3.1-70b",
    "prefill": {"gpu": "h100-sxm", "tp": 4, "count": 2},
    "decode": {"gpu": "h100-sxm", "tp": 4, "count": 1},
    "granularity": "request",
    "workload": "chat",
}


def _scenario(tmp_path: Path, search: dict[str, object], **top: object) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({**BASE, **top, "search": {**SEARCH, **search}}), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("search", "top", "words"),
    [
        (
            {"kv_block_tokens": [16, 128]},
            {},
            "search.kv_block_tokens: vllm's NixlConnector takes block sizes 16, 32, 64, not 128",
        ),
        ({"kv_block_tokens": [1, 16]}, {"engine": "trtllm"}, "takes block sizes 32, not 1"),
        ({"kv_backends": ["engine", "rdma-magic"]}, {}, "unknown KV transfer backend 'rdma-magic'"),
        ({"kv_backends": ["engine"]}, {"engine": "kernels"}, "search.kv_backends: engine profile 'kernels' names no"),
    ],
)
def test_a_value_the_engine_cannot_run_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], search: dict[str, object], top: dict[str, object], words: str
) -> None:
    assert run(["optimize", _scenario(tmp_path, search, **top)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert words in err[0]


@pytest.mark.slow
def test_searched_plans_record_their_block_and_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario(tmp_path, {"kv_block_tokens": [16, 64], "kv_backends": ["engine", "tcp"]})
    assert run(["optimize", path, "--format", "json"]) == 0
    plans = [p for p in json.loads(capsys.readouterr().out)["plans"] if p["mode"] == "disaggregated"]
    assert plans
    for plan in plans:
        assert plan["kv_backend"] in ("engine", "tcp")
        assert plan["kv_block_tokens"] in (16, 64)
        assert plan["label"].endswith(f"{plan['kv_backend']} block {plan['kv_block_tokens']}")
