"""``-o FILE`` (atomic, nothing left behind on failure) and user catalogues (--hardware-db, env var)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

Cli = Callable[..., Any]


def leftovers(folder: Path) -> list[str]:
    """Temporary files a writer might leave in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") or p.suffix == ".tmp")


# --- -o FILE ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["table", "csv", "markdown", "json"])
def test_output_file_matches_stdout(cli: Cli, tmp_path: Path, fmt: str) -> None:
    target = tmp_path / f"gpus.{fmt}"
    result = cli("hardware", "list", "--format", fmt, "-o", target)
    assert result.code == 0, result.err
    assert result.out == ""
    assert str(target) in result.err
    text = target.read_text()
    assert "h100-sxm" in text
    if fmt != "table":  # the terminal table may differ in width from the file rendering
        assert text == cli("hardware", "list", "--format", fmt).out
    assert leftovers(tmp_path) == []


def test_output_overwrites_whole_file(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("x" * 100_000)
    assert cli("hardware", "show", "l4", "--format", "json", "--output", target).code == 0
    assert json.loads(target.read_text())["name"] == "l4"


def test_output_file_is_world_readable_like_any_report(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    old = os.umask(0o022)
    try:
        assert cli("hardware", "list", "--format", "csv", "-o", target).code == 0
    finally:
        os.umask(old)
    assert target.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize(
    "argv",
    [
        ("hardware", "show", "h1OO"),
        ("hardware", "show", "tests/bad_inputs/gpu_zero.yaml"),
        ("models", "show", "no-such-model"),
        ("hardware", "list", "--kind", "cables"),
        ("hardware", "list", "--format", "xml"),
    ],
)
def test_failing_command_leaves_no_file(
    cli: Cli, tmp_path: Path, repo_root: Path, argv: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo_root)
    target = tmp_path / "out.json"
    result = cli(*argv, "-o", target)
    assert result.code == 2
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_failing_command_keeps_existing_file(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("previous report\n")
    assert cli("hardware", "show", "h1OO", "-o", target).code == 2
    assert target.read_text() == "previous report\n"
    assert leftovers(tmp_path) == []


def test_output_into_missing_folder_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "dir" / "out.json"
    result = cli("hardware", "list", "--format", "json", "-o", target)
    assert result.code == 2
    assert len(result.err.splitlines()) == 1
    assert result.err.startswith("error:")
    assert "out.json" in result.err
    assert not (tmp_path / "no").exists()


def test_output_onto_a_folder_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    result = cli("hardware", "list", "-o", tmp_path)
    assert result.code == 2
    assert len(result.err.splitlines()) == 1


def test_validate_report_written_even_when_invalid(cli: Cli, tmp_path: Path, bad_inputs: Path) -> None:
    target = tmp_path / "report.json"
    result = cli("validate", bad_inputs / "gpu_empty.yaml", "--format", "json", "-o", target)
    assert result.code == 2
    doc = json.loads(target.read_text())
    assert doc["ok"] is False
    assert "gpu_empty.yaml" in doc["errors"][0]["message"]
    assert leftovers(tmp_path) == []


# --- user catalogues -------------------------------------------------------------------------------


def make_user_db(root: Path, hardware_db: Path, name: str, **changes: Any) -> Path:
    """A user catalogue with one GPU copied from h100-sxm.yaml under a new name / with changes."""
    data = yaml.safe_load((hardware_db / "gpus" / "h100-sxm.yaml").read_text())
    data.update(name=name, **changes)
    (root / "gpus").mkdir(parents=True, exist_ok=True)
    (root / "gpus" / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return root


def test_hardware_db_adds_a_gpu(cli: Cli, tmp_path: Path, hardware_db: Path) -> None:
    db = make_user_db(tmp_path / "db", hardware_db, "my-gpu", display_name="My GPU")
    doc = json.loads(cli("hardware", "list", "--format", "json", "--hardware-db", db).out)
    names = [g["name"] for g in doc]
    assert "my-gpu" in names
    assert "h100-sxm" in names
    shown = json.loads(cli("hardware", "show", "MY-GPU", "--hardware-db", db, "--format", "json").out)
    assert shown["display_name"] == "My GPU"
    # without the folder it is unknown
    assert cli("hardware", "show", "my-gpu").code == 2


def test_env_var_adds_a_gpu(cli: Cli, tmp_path: Path, hardware_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = make_user_db(tmp_path / "db", hardware_db, "my-gpu")
    other = tmp_path / "empty-db"
    other.mkdir()
    monkeypatch.setenv("PDPLAN_HARDWARE_DB", os.pathsep.join([str(other), str(db)]))
    result = cli("hardware", "show", "my-gpu", "--format", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["name"] == "my-gpu"


def test_hardware_db_overrides_a_builtin(cli: Cli, tmp_path: Path, hardware_db: Path) -> None:
    db = make_user_db(tmp_path / "db", hardware_db, "h100-sxm", memory_bytes_per_s="4 TB/s")
    doc = json.loads(cli("hardware", "show", "h100-sxm", "--hardware-db", db, "--format", "json").out)
    assert doc["memory_bytes_per_s"] == pytest.approx(4e12)
    builtin = json.loads(cli("hardware", "show", "h100-sxm", "--format", "json").out)
    assert builtin["memory_bytes_per_s"] == pytest.approx(3.35e12)


def test_flag_wins_over_env_var(cli: Cli, tmp_path: Path, hardware_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_db = make_user_db(tmp_path / "env", hardware_db, "h100-sxm", memory_bytes_per_s="4 TB/s")
    flag_db = make_user_db(tmp_path / "flag", hardware_db, "h100-sxm", memory_bytes_per_s="5 TB/s")
    monkeypatch.setenv("PDPLAN_HARDWARE_DB", str(env_db))
    env_only = json.loads(cli("hardware", "show", "h100-sxm", "--format", "json").out)
    assert env_only["memory_bytes_per_s"] == pytest.approx(4e12)
    both = cli("hardware", "show", "h100-sxm", "--format", "json", "--hardware-db", flag_db)
    assert json.loads(both.out)["memory_bytes_per_s"] == pytest.approx(5e12)


def test_user_file_name_mismatch_is_exit_2(cli: Cli, tmp_path: Path, hardware_db: Path) -> None:
    db = make_user_db(tmp_path / "db", hardware_db, "my-gpu")
    (db / "gpus" / "my-gpu.yaml").rename(db / "gpus" / "other-gpu.yaml")
    result = cli("hardware", "show", "other-gpu", "--hardware-db", db)
    assert result.code == 2
    lines = result.err.splitlines()
    assert len(lines) == 1
    assert "other-gpu.yaml" in lines[0]
    assert "name" in lines[0]


def test_bad_user_file_is_exit_2_naming_it(cli: Cli, tmp_path: Path, hardware_db: Path) -> None:
    db = make_user_db(tmp_path / "db", hardware_db, "my-gpu", tdp_w=-1)
    result = cli("hardware", "list", "--hardware-db", db)
    assert result.code == 2
    assert len(result.err.splitlines()) == 1
    assert "my-gpu.yaml" in result.err
    assert "tdp_w" in result.err


def test_missing_hardware_db_folder_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    result = cli("hardware", "list", "--hardware-db", tmp_path / "nope")
    assert result.code == 2
    assert "nope" in result.err
    assert len(result.err.splitlines()) == 1


def test_gpu_given_as_path_needs_no_catalogue(cli: Cli, tmp_path: Path, hardware_db: Path) -> None:
    db = make_user_db(tmp_path / "db", hardware_db, "lab-gpu")
    path = db / "gpus" / "lab-gpu.yaml"
    renamed = path.with_name("any-file-name.yaml")  # by path, the file name need not match
    path.rename(renamed)
    doc = json.loads(cli("hardware", "show", renamed, "--format", "json").out)
    assert doc["name"] == "lab-gpu"


def test_output_message_keeps_brackets_in_file_name(cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "[bold]report.json"
    result = cli("hardware", "show", "l4", "--format", "json", "-o", target)
    assert result.code == 0
    assert result.err.strip() == f"wrote {target}"
    assert target.is_file()


def test_warnings_go_to_stderr_verbatim(capsys: pytest.CaptureFixture[str]) -> None:
    from pdplan.cli.common import warn

    warn("clipped [input_tokens] to the [bold]context window " + "x" * 200)
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("warning: clipped [input_tokens] to the [bold]context window x")
