"""Kernel tables for GPUs of the user's own: from a --hardware-db folder's kernel_tables/, or borrowed."""

from __future__ import annotations

from pathlib import Path

import yaml

from pdplan.io.catalog import open_catalog

ROOT = Path(__file__).parents[2]


def _own_gpu(db: Path, name: str, source: str = "h100-sxm", bandwidth: str | None = None) -> None:
    data = yaml.safe_load((ROOT / "hardware_db" / "gpus" / f"{source}.yaml").read_text())
    data["name"] = name
    if bandwidth is not None:
        data["memory_bytes_per_s"] = bandwidth
    (db / "gpus").mkdir(parents=True, exist_ok=True)
    (db / "gpus" / f"{name}.yaml").write_text(yaml.safe_dump(data))


def test_an_uncatalogued_gpu_borrows_the_nearest_measured_table(tmp_path: Path) -> None:
    """``--hardware-db mydb --gpu h100-nvl`` used to fail with "unknown kernel table 'h100-nvl'"."""
    _own_gpu(tmp_path, "h100-nvl", bandwidth="3.9 TB/s")
    table = open_catalog([tmp_path]).kernel_table("h100-nvl")
    assert table.gpu == "h100-nvl"
    assert not table.calibrated
    assert table.derived_from == "h100-sxm"  # hopper, calibrated, 3.35 TB/s is nearer 3.9 than h200's 4.8
    assert "borrowed" in table.sources


def test_a_high_bandwidth_hopper_borrows_from_h200(tmp_path: Path) -> None:
    _own_gpu(tmp_path, "h200-nvl", bandwidth="4.8 TB/s")
    assert open_catalog([tmp_path]).kernel_table("h200-nvl").derived_from == "h200-sxm"


def test_a_hardware_db_folder_supplies_its_own_kernel_table(tmp_path: Path) -> None:
    _own_gpu(tmp_path, "h100-nvl")
    data = yaml.safe_load((ROOT / "pdplan" / "data" / "kernel_tables" / "h100-sxm.yaml").read_text())
    data["gpu"] = "h100-nvl"
    data["stack"] = "my own measurements"
    (tmp_path / "kernel_tables").mkdir()
    (tmp_path / "kernel_tables" / "h100-nvl.yaml").write_text(yaml.safe_dump(data))
    assert open_catalog([tmp_path]).kernel_table("h100-nvl").stack == "my own measurements"


def test_packaged_tables_are_unchanged() -> None:
    table = open_catalog().kernel_table("h100-sxm")
    assert table.calibrated
    assert table.derived_from is None


def test_the_nearest_bandwidth_to_flops_ratio_wins_not_bandwidth_alone(tmp_path: Path) -> None:
    """Issue 23 item 6: a Hopper part with H100's HBM and half its FLOPs sits, by its ridge point, nearer H200
    (ratio 6.8e-3 against H200's 4.9e-3 and H100's 3.4e-3); by bandwidth alone it would take H100's table."""
    _own_gpu(tmp_path, "h100-half", bandwidth="3.35 TB/s")
    path = tmp_path / "gpus" / "h100-half.yaml"
    data = yaml.safe_load(path.read_text())
    data["bf16_flops_per_s"] = "494.7 TFLOPS"
    path.write_text(yaml.safe_dump(data))
    table = open_catalog([tmp_path]).kernel_table("h100-half")
    assert table.derived_from == "h200-sxm"
    assert "memory-bandwidth/FLOPs ratio" in table.sources["borrowed"]


def test_without_a_table_of_its_architecture_the_nearest_ratio_of_any_is_borrowed(tmp_path: Path) -> None:
    import dataclasses

    _own_gpu(tmp_path, "h100-nvl", bandwidth="3.9 TB/s")
    catalog = open_catalog([tmp_path])
    others = {
        k: v
        for k, v in catalog.files["kernel table"].items()
        if k not in {"h100-sxm", "h200-sxm", "h20", "h800-sxm", "h100-pcie"}
    }
    no_hopper = dataclasses.replace(catalog, files={**catalog.files, "kernel table": others})
    table = no_hopper.kernel_table("h100-nvl")
    assert table.derived_from == "b200"  # 7.7 TB/s / 2.25 PF = 3.4e-3, the nearest to 3.9 / 989 = 3.9e-3
    assert "another architecture's part (blackwell)" in table.sources["borrowed"]


def test_a_gpu_of_your_own_needs_no_tdp_sm_count_or_price(tmp_path: Path) -> None:
    """Issue 23 item 6: only what pricing needs is required; each optional fact left out is one warning line, and the
    plan says whose kernel efficiencies it runs on and the cross-GPU validation's expected error."""
    from pdplan.evaluation import evaluate
    from pdplan.io.scenario import scenario_from_dict

    _own_gpu(tmp_path, "h100-nvl", bandwidth="3.9 TB/s")
    path = tmp_path / "gpus" / "h100-nvl.yaml"
    data = yaml.safe_load(path.read_text())
    for key in ("tdp_w", "sm_count", "price"):
        data.pop(key)
        data["sources"].pop(key)
    path.write_text(yaml.safe_dump(data))
    catalog = open_catalog([tmp_path])
    gpu = catalog.gpu("h100-nvl")
    assert (gpu.tdp_w, gpu.sm_count, gpu.price) == (None, None, None)
    assert [line.split(":")[0] for line in gpu.missing_fact_warnings()] == [
        "GPU h100-nvl gives no tdp_w",
        "GPU h100-nvl gives no sm_count",
        "GPU h100-nvl gives no price",
    ]
    scenario = {
        "model": "llama-3.1-8b",
        "mode": "colocated",
        "colocated": {"gpu": "h100-nvl", "tp": 1, "count": 1},
        "workload": {"input_tokens": {"dist": "fixed", "value": 512}, "output_tokens": {"dist": "fixed", "value": 64}},
        "engine": "trtllm",
    }
    doc = evaluate(scenario_from_dict(scenario, source="test", base_dir=tmp_path), catalog=catalog).to_document()
    said = " | ".join(doc["warnings"])
    assert "GPU h100-nvl gives no tdp_w" in said
    assert "GPU h100-nvl gives no sm_count" in said
    assert "no price in the catalogue" in said
    band = (
        "expected error on a GPU not measured (trtllm dense, H200 predicted from H100 alone, 72 rows): TPOT median 25 %"
    )
    assert "h100-nvl runs on h100-sxm's kernel efficiencies" in said
    assert band in said
    assert doc["goodput_rps"] > 0.0
