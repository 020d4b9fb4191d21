"""``pdplan --version``, ``hardware list|show``, ``models list|show``, ``validate``, ``--format``, ``--help``."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from pdplan import __version__

# docs/architecture.md §3: identifiers users type (stable).
GPU_IDS = [
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "a100-pcie-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200-sxm",
    "h800-sxm",
    "h20",
    "l40s",
    "l40",
    "l4",
    "b200",
    "mi300x",
]
LINK_IDS = [
    "nvlink3",
    "nvlink4",
    "nvlink5",
    "pcie4",
    "pcie5",
    "pcie6",
    "ib-hdr",
    "ib-ndr",
    "ib-xdr",
    "roce-100g",
    "roce-200g",
    "roce-400g",
    "eth-10g",
    "eth-25g",
    "eth-100g",
    "dci-100g",
    "dci-400g",
]
MODEL_IDS = [
    "opt-13b",
    "opt-66b",
    "opt-175b",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.1-405b",
    "qwen2.5-32b",
    "qwen2.5-72b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "mixtral-8x7b",
    "deepseek-v3",
    "qwen3-next-80b-a3b",
    "qwen3.5-397b-a17b",
    "minimax-m2.5",
    "deepseek-r1",
    "kimi-k2",
    "gpt-oss-120b",
    "qwen3-30b-a3b",
]

Cli = Callable[..., Any]


def ok_json(result: Any) -> Any:
    assert result.code == 0, result.err
    return json.loads(result.out)


def test_version(cli: Cli) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.out.strip() == f"pdplan {__version__}"


def test_no_arguments_prints_help(cli: Cli) -> None:
    result = cli()
    assert result.code == 0
    assert "Usage:" in result.out


# --- hardware list ---------------------------------------------------------------------------------


def test_hardware_list_json_has_every_gpu(cli: Cli) -> None:
    doc = ok_json(cli("hardware", "list", "--format", "json"))
    assert isinstance(doc, list)
    assert all(isinstance(item, dict) and "name" in item for item in doc)
    names = [item["name"] for item in doc]
    assert set(GPU_IDS) <= set(names)
    assert names == sorted(names)


def test_hardware_list_links_json_has_every_link(cli: Cli) -> None:
    doc = ok_json(cli("hardware", "list", "--kind", "links", "--format", "json"))
    assert {item["name"] for item in doc} >= set(LINK_IDS)
    assert all("line_rate_bytes_per_s" in item for item in doc)


def test_hardware_list_csv(cli: Cli) -> None:
    result = cli("hardware", "list", "--format", "csv")
    assert result.code == 0
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert [r["name"] for r in rows] == sorted(GPU_IDS)
    h100 = next(r for r in rows if r["name"] == "h100-sxm")
    assert float(h100["bf16_tflops"]) == pytest.approx(989.4)
    assert float(h100["memory_gib"]) == pytest.approx(80.0)


def test_hardware_list_links_csv(cli: Cli) -> None:
    result = cli("hardware", "list", "--kind", "links", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(result.out)))
    ndr = next(r for r in rows if r["name"] == "ib-ndr")
    assert float(ndr["line_rate_gbit_per_s"]) == pytest.approx(400.0)


def test_hardware_list_markdown(cli: Cli) -> None:
    result = cli("hardware", "list", "--format", "markdown")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].startswith("| name |")
    assert set(lines[1]) <= {"|", "-", ":"}
    assert len(lines) == 2 + len(GPU_IDS)
    assert all(line.count("|") == lines[0].count("|") for line in lines)


def test_hardware_list_table(cli: Cli) -> None:
    result = cli("hardware", "list")
    assert result.code == 0
    for gpu in ("h100-sxm", "mi300x", "l4"):
        assert gpu in result.out
    assert result.err == ""


def test_hardware_list_bad_kind(cli: Cli) -> None:
    result = cli("hardware", "list", "--kind", "cables")
    assert result.code == 2
    assert result.err_lines == [result.err.strip()]
    assert "--kind" in result.err


# --- hardware show ---------------------------------------------------------------------------------


def test_hardware_show_json(cli: Cli) -> None:
    doc = ok_json(cli("hardware", "show", "h100-sxm", "--format", "json"))
    assert doc["name"] == "h100-sxm"
    assert doc["bf16_flops_per_s"] == pytest.approx(989.4e12)
    assert doc["memory_bytes"] == 80 * 2**30
    assert doc["memory_bytes_per_s"] == pytest.approx(3.35e12)
    assert doc["sources"]["memory_bytes_per_s"]


@pytest.mark.parametrize("spelling", ["H100-SXM", "h100-SXM", " h100-sxm "])
def test_names_are_case_insensitive(cli: Cli, spelling: str) -> None:
    assert ok_json(cli("hardware", "show", spelling, "--format", "json"))["name"] == "h100-sxm"


def test_link_show_by_name_case_insensitive(cli: Cli) -> None:
    doc = ok_json(cli("hardware", "show", "IB-NDR", "--format", "json"))
    assert doc["name"] == "ib-ndr"
    assert doc["line_rate_bytes_per_s"] == pytest.approx(50e9)


@pytest.mark.parametrize(
    ("typo", "suggestion"), [("h100-sx", "h100-sxm"), ("H100SXM", "h100-sxm"), ("ib-nd", "ib-ndr")]
)
def test_unknown_name_suggests_close_names(cli: Cli, typo: str, suggestion: str) -> None:
    result = cli("hardware", "show", typo)
    assert result.code == 2
    assert len(result.err.splitlines()) == 1
    assert "did you mean" in result.err
    assert suggestion in result.err


def test_gpu_and_link_given_as_paths(cli: Cli, hardware_db: Path) -> None:
    gpu = ok_json(cli("hardware", "show", hardware_db / "gpus" / "h200-sxm.yaml", "--format", "json"))
    assert gpu["name"] == "h200-sxm"
    link = ok_json(cli("hardware", "show", hardware_db / "links" / "nvlink4.yaml", "--format", "json"))
    assert link["name"] == "nvlink4"


def test_hardware_show_table_lists_sources(cli: Cli) -> None:
    result = cli("hardware", "show", "h100-sxm", "--format", "csv")
    rows = {r["field"]: r for r in csv.DictReader(io.StringIO(result.out))}
    assert rows["memory_bytes_per_s"]["source"]
    assert "sources" not in rows


# --- models ----------------------------------------------------------------------------------------


def test_models_list_json(cli: Cli) -> None:
    doc = ok_json(cli("models", "list", "--format", "json"))
    assert all("name" in item and "kv_bytes_per_token" in item for item in doc)
    assert set(MODEL_IDS) <= {item["name"] for item in doc}
    assert all(isinstance(item["kv_bytes_per_token"], int | float) for item in doc)
    assert all(item["kv_bytes_per_token"] > 0 for item in doc)


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_models_list_other_formats(cli: Cli, fmt: str) -> None:
    result = cli("models", "list", "--format", fmt)
    assert result.code == 0, result.err
    assert "deepseek-v3" in result.out


def test_models_show_deepseek_v3(cli: Cli) -> None:
    doc = ok_json(cli("models", "show", "deepseek-v3", "--format", "json"))
    assert doc["name"] == "deepseek-v3"
    assert doc["kv_bytes_per_token"] == 70272  # MLA: 61 x (512 + 64) x 2 bytes


def test_models_show_case_insensitive_and_unknown(cli: Cli) -> None:
    assert ok_json(cli("models", "show", "DeepSeek-V3", "--format", "json"))["name"] == "deepseek-v3"
    result = cli("models", "show", "llama-3.1-8")
    assert result.code == 2
    assert len(result.err.splitlines()) == 1
    assert "llama-3.1-8b" in result.err


# --- validate --------------------------------------------------------------------------------------


def test_validate_builtin_catalogue_is_ok(cli: Cli, hardware_db: Path) -> None:
    files = sorted((hardware_db / "gpus").glob("*.yaml")) + sorted((hardware_db / "links").glob("*.yaml"))
    doc = ok_json(cli("validate", *files, "--format", "json"))
    assert doc["ok"] is True
    assert doc["errors"] == []
    assert len(doc["files"]) == len(GPU_IDS) + len(LINK_IDS)
    assert result_kinds(doc) == {"gpu", "link"}


def result_kinds(doc: dict[str, Any]) -> set[str]:
    return {f["kind"] for f in doc["files"]}


def test_validate_bad_file_json(cli: Cli, bad_inputs: Path) -> None:
    bad = bad_inputs / "gpu_negative.yaml"
    result = cli("validate", bad, "--format", "json")
    assert result.code == 2
    doc = json.loads(result.out)
    assert doc["ok"] is False
    assert len(doc["errors"]) == 1
    assert doc["errors"][0]["file"] == str(bad)
    assert "gpu_negative.yaml" in doc["errors"][0]["message"]
    assert "memory_bytes" in doc["errors"][0]["message"]


def test_validate_without_files_is_usage_error(cli: Cli) -> None:
    result = cli("validate")
    assert result.code == 2
    assert result.err.startswith("error:")
    assert len(result.err.splitlines()) == 1


# --- --format / --help -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [("hardware", "list"), ("hardware", "show", "h100-sxm"), ("models", "list"), ("validate", "x")]
)
def test_unknown_format_is_exit_2_one_line(cli: Cli, argv: tuple[str, ...]) -> None:
    result = cli(*argv, "--format", "xml")
    assert result.code == 2
    lines = result.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error:")
    assert "--format" in lines[0]
    assert "xml" in lines[0]
    assert result.out == ""


def test_format_is_case_insensitive(cli: Cli) -> None:
    assert isinstance(ok_json(cli("hardware", "list", "--format", "JSON")), list)


def test_unknown_option_is_exit_2(cli: Cli) -> None:
    result = cli("hardware", "list", "--colour")
    assert result.code == 2
    assert result.err.startswith("error:")
    assert len(result.err.splitlines()) == 1


def _command_paths() -> Iterator[tuple[str, ...]]:
    from pdplan.cli import app

    def walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        yield path
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, (*path, name))

    yield from walk(typer.main.get_command(app), ())


@pytest.mark.parametrize("path", list(_command_paths()), ids=lambda p: " ".join(p) or "pdplan")
def test_every_command_has_help_with_an_example(cli: Cli, path: tuple[str, ...]) -> None:
    result = cli(*path, "--help")
    assert result.code == 0
    assert "Usage:" in result.out
    assert "Example:" in result.out, f"'pdplan {' '.join(path)} --help' has no 'Example:' line"


def test_catalogue_commands_exist() -> None:
    paths = set(_command_paths())
    for expected in [("hardware", "list"), ("hardware", "show"), ("models", "list"), ("models", "show"), ("validate",)]:
        assert expected in paths


def test_model_given_as_path(cli: Cli, repo_root: Path) -> None:
    path = repo_root / "pdplan" / "data" / "models" / "deepseek-v3.yaml"
    assert ok_json(cli("models", "show", path, "--format", "json"))["kv_bytes_per_token"] == 70272


def test_bad_model_path_is_exit_2_one_line(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text("- not\n- a mapping\n")
    result = cli("models", "show", path)
    assert result.code == 2
    assert result.err_lines == [result.err.strip()]
    assert result.err.startswith("error: ")
    assert "model.yaml" in result.err
