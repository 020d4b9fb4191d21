"""A plan whose KV block size was searched exports it (docs/kv_data_plane.md §6): vLLM ``--block-size`` and SGLang
``--page-size`` where it differs from the engine's default, each parsed as the pinned release parses it; nothing where
the plan keeps the default or was not searched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.engine_args import check
from support.export_argv import manifest_argvs, script_argvs
from support.export_plans import GOLDEN, export

from pdplan.io.export_data import read_plan_document
from pdplan.report.export import ExportResult


def _document(tmp_path: Path, block: int | None) -> str:
    doc = json.loads((GOLDEN / "default.json").read_text(encoding="utf-8"))
    if block is not None:
        doc["plans"][0]["kv_block_tokens"] = block
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def _role_flags(result: ExportResult) -> list[dict[str, str | None]]:
    return [dict(c.flags) for c in result.commands if c.role in ("prefill", "decode")]


@pytest.mark.parametrize(
    ("target", "backend", "flag"),
    [("vllm", "vllm", "--block-size"), ("sglang", "vllm", "--page-size"), ("dynamo", "vllm", "--block-size")],
)
def test_a_searched_block_is_exported(tmp_path: Path, target: str, backend: str, flag: str) -> None:
    result = export(read_plan_document(_document(tmp_path, 64)), 1, target, backend)
    flags = _role_flags(result)
    assert flags
    assert all(f[flag] == "64" for f in flags)
    lines = manifest_argvs(result.text) if target == "dynamo" else script_argvs(result.text, tmp_path)
    for program, argv in lines:
        check(program, argv)  # parses as the pinned release parses it


@pytest.mark.parametrize("block", [None, 16])
def test_the_default_block_writes_no_flag(tmp_path: Path, block: int | None) -> None:
    flags = _role_flags(export(read_plan_document(_document(tmp_path, block)), 1, "vllm"))
    assert all("--block-size" not in f for f in flags)
