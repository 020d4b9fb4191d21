"""pdplan.io.catalog: names, paths, user folders, the env var, and one-line errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from pdplan.errors import SpecError, UnknownNameError
from pdplan.io.catalog import (
    HARDWARE_DB_ENV,
    builtin_hardware_dir,
    builtin_models_dir,
    looks_like_path,
    open_catalog,
    user_dirs_from_env,
)


def user_gpu(root: Path, hardware_db: Path, file_stem: str, **changes: object) -> Path:
    data = yaml.safe_load((hardware_db / "gpus" / "h100-sxm.yaml").read_text())
    data.update(name=file_stem, **changes)
    folder = root / "gpus"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{file_stem}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_builtin_folders_exist() -> None:
    assert (builtin_hardware_dir() / "gpus" / "h100-sxm.yaml").is_file()
    assert (builtin_hardware_dir() / "links" / "ib-ndr.yaml").is_file()
    assert builtin_models_dir().is_dir()


@pytest.mark.parametrize(
    ("name", "is_path"),
    [
        ("h100-sxm", False),
        ("llama-3.1-8b", False),
        ("qwen2.5-72b", False),
        ("./gpu.yaml", True),
        ("gpu.yaml", True),
        ("GPU.YML", True),
        ("dir/config.json", True),
        ("/abs/file", True),
    ],
)
def test_looks_like_path(name: str, is_path: bool) -> None:
    assert looks_like_path(name) is is_path


def test_names_are_sorted_lowercase() -> None:
    catalog = open_catalog()
    gpus = catalog.names("gpu")
    assert gpus == sorted(gpus)
    assert "h100-sxm" in gpus
    assert "ib-ndr" in catalog.names("link")
    assert all(n == n.lower() for n in gpus)


def test_lookup_is_case_insensitive() -> None:
    catalog = open_catalog()
    assert catalog.gpu("H100-SXM").name == "h100-sxm"
    assert catalog.link(" Nvlink4 ").name == "nvlink4"
    assert catalog.path_of("gpu", "B200").name == "b200.yaml"


def test_unknown_name_error_suggests() -> None:
    catalog = open_catalog()
    with pytest.raises(UnknownNameError) as exc:
        catalog.gpu("h100-sx")
    assert exc.value.exit_code == 2
    assert "h100-sxm" in exc.value.suggestions
    assert "did you mean" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unknown_name_without_close_match_lists_valid_names() -> None:
    with pytest.raises(UnknownNameError, match=r"valid: .*h100-sxm"):
        open_catalog().gpu("zzzzzz")


def test_path_lookup_bypasses_names(tmp_path: Path, hardware_db: Path) -> None:
    path = user_gpu(tmp_path, hardware_db, "lab-gpu")
    assert open_catalog().gpu(str(path)).name == "lab-gpu"


def test_missing_path_is_spec_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SpecError, match="file not found") as exc:
        open_catalog().gpu(str(missing))
    assert str(missing) in str(exc.value)


def test_user_folder_adds_and_overrides(tmp_path: Path, hardware_db: Path) -> None:
    user_gpu(tmp_path, hardware_db, "my-gpu")
    user_gpu(tmp_path, hardware_db, "h100-sxm", tdp_w=123)
    catalog = open_catalog([tmp_path])
    assert "my-gpu" in catalog.names("gpu")
    assert catalog.gpu("MY-GPU").name == "my-gpu"
    assert catalog.gpu("h100-sxm").tdp_w == 123
    assert open_catalog().gpu("h100-sxm").tdp_w == 700


def test_later_folder_wins(tmp_path: Path, hardware_db: Path) -> None:
    user_gpu(tmp_path / "a", hardware_db, "h100-sxm", tdp_w=111)
    user_gpu(tmp_path / "b", hardware_db, "h100-sxm", tdp_w=222)
    assert open_catalog([tmp_path / "a", tmp_path / "b"]).gpu("h100-sxm").tdp_w == 222
    assert open_catalog([tmp_path / "b", tmp_path / "a"]).gpu("h100-sxm").tdp_w == 111


def test_env_var_folders(tmp_path: Path, hardware_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user_gpu(tmp_path / "env", hardware_db, "env-gpu")
    user_gpu(tmp_path / "env", hardware_db, "h100-sxm", tdp_w=111)
    user_gpu(tmp_path / "flag", hardware_db, "h100-sxm", tdp_w=222)
    monkeypatch.setenv(HARDWARE_DB_ENV, os.pathsep.join(["", str(tmp_path / "env"), " "]))
    assert user_dirs_from_env() == [tmp_path / "env"]
    assert open_catalog().gpu("env-gpu").name == "env-gpu"
    assert open_catalog().gpu("h100-sxm").tdp_w == 111
    assert open_catalog([tmp_path / "flag"]).gpu("h100-sxm").tdp_w == 222  # flag beats env


def test_missing_user_folder_is_spec_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        open_catalog([tmp_path / "nope"])
    monkeypatch.setenv(HARDWARE_DB_ENV, str(tmp_path / "gone"))
    with pytest.raises(SpecError, match="gone"):
        open_catalog()


def test_name_must_match_file_name(tmp_path: Path, hardware_db: Path) -> None:
    path = user_gpu(tmp_path, hardware_db, "my-gpu")
    path.rename(path.with_name("renamed.yaml"))
    with pytest.raises(SpecError) as exc:
        open_catalog([tmp_path]).gpu("renamed")
    message = str(exc.value)
    assert exc.value.field == "name"
    assert "renamed" in message
    assert "my-gpu" in message
    # the same file given by path is fine: a path is not a catalogue name
    assert open_catalog().gpu(str(path.with_name("renamed.yaml"))).name == "my-gpu"


def test_bad_user_file_names_file_and_field(tmp_path: Path, hardware_db: Path) -> None:
    user_gpu(tmp_path, hardware_db, "bad-gpu", memory_bytes="80 parsecs")
    with pytest.raises(SpecError) as exc:
        open_catalog([tmp_path]).gpu("bad-gpu")
    assert "bad-gpu.yaml" in str(exc.value)
    assert exc.value.field == "memory_bytes"


def test_models_catalogue(tmp_path: Path) -> None:
    catalog = open_catalog()
    assert "deepseek-v3" in catalog.names("model")
    assert catalog.model("DeepSeek-V3").kv_bytes_per_token(2) == 70272
    with pytest.raises(UnknownNameError, match=r"llama-3\.1-8b"):
        catalog.model("llama-3.1-8")
