"""Sweep grid files (pdplan.specs.sweep, pdplan.sweep.job): expansion order, point ids, and bad grids as one line."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pdplan.errors import SpecError
from pdplan.specs.sweep import MAX_SWEEP_POINTS, SweepGrid, SweepPoint, SweepSpec
from pdplan.sweep.job import load_job

ROOT = Path(__file__).resolve().parents[2]
TIERS = {"chat": {"ttft": "2s", "tpot": "100ms"}, "tight": {"ttft": 0.5, "tpot": "50ms", "percentile": 99}}


def test_the_grid_is_the_cartesian_product_with_the_last_dimension_fastest() -> None:
    grid = SweepGrid.model_validate({"rate": [5, 10], "model": ["a", "b"], "gpu": [["h100-sxm"], "h200-sxm"]})
    points = grid.expand()
    assert grid.size() == len(points) == 8
    assert [(p.model, p.gpu, p.rate) for p in points[:3]] == [
        ("a", ("h100-sxm",), 5.0),
        ("a", ("h100-sxm",), 10.0),
        ("a", ("h200-sxm",), 5.0),
    ]
    assert points[-1] == SweepPoint(model="b", gpu=("h200-sxm",), rate=10.0)


def test_point_ids_hash_the_overrides_not_their_order_or_position() -> None:
    a = SweepPoint.model_validate({"rate": 10, "model": "llama-3.1-8b", "gpu": ["h100-sxm", "l40s"]})
    b = SweepPoint.model_validate({"gpu": ["h100-sxm", "l40s"], "model": "llama-3.1-8b", "rate": 10.0})
    assert a.point_id() == b.point_id()
    # pinned to its definition (docs/sweep.md §3): a rerun after an upgrade must find the rows it wrote
    canonical = b'{"gpu":["h100-sxm","l40s"],"model":"llama-3.1-8b","rate":10.0}'
    assert a.point_id() == hashlib.sha256(canonical).hexdigest()[:12] == "dcbaa755a946"
    assert SweepPoint(model="llama-3.1-8b", rate=10.0, gpu=("l40s", "h100-sxm")).point_id() != a.point_id()
    assert len({p.point_id() for p in SweepGrid(rate=[1, 2, 3], model=["x", "y"]).expand()}) == 6


def test_a_list_keeps_its_order_and_refuses_a_repeated_point() -> None:
    spec = SweepSpec.model_validate({"list": [{"rate": 2}, {"rate": 1, "model": "x"}]})
    assert [p.rate for p in spec.expand()] == [2.0, 1.0]
    twice = SweepSpec.model_validate({"list": [{"rate": 2}, {"model": "x"}, {"rate": 2.0}]})
    with pytest.raises(ValueError, match="list item 2 repeats item 0"):
        twice.expand()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"grid": {"rate": [1]}, "list": [{"rate": 1}]}, "either grid"),
        ({}, "either grid"),
        ({"grid": {"rate": [1], "gpus": [8]}}, "rate .* or gpus"),
        ({"list": [{"rate": 1, "gpus": 8}]}, "rate .* or gpus"),
        ({"grid": {"slo": ["gold"]}, "slo_tiers": TIERS}, "'gold' is not in slo_tiers"),
        ({"grid": {"rate": [1, 1.0]}}, "listed twice"),
        ({"grid": {"rate": [0]}}, "greater than 0"),
        ({"grid": {"rate": [float("nan")]}}, "finite"),
        ({"grid": {"model": []}}, "at least 1"),
        ({"grid": {}}, "at least one dimension"),
        ({"grid": {"modle": ["x"]}}, "Extra inputs"),
        ({"grid": {"rate": [1]}, "top": 51}, "less than or equal to 50"),
        ({"grid": {"rate": [1]}, "slo_tiers": {"x": {"ttft": "2 parsecs", "tpot": 1}}}, "2 parsecs"),
        ({"grid": {"rate": [1]}, "slo_tiers": {"x": {"ttft": "-1s", "tpot": 1}}}, "finite time > 0"),
    ],
)
def test_bad_grids_are_refused(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SweepSpec.model_validate(data)


def test_the_point_ceiling_is_checked_before_expanding() -> None:
    side = list(range(1, 1_001))
    with pytest.raises(ValueError, match=f"at most {MAX_SWEEP_POINTS:,} per sweep"):
        SweepSpec.model_validate({"grid": {"rate": side, "gpus": None, "model": [str(i) for i in side]}})


def _grid(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    return path


def test_a_job_reads_its_base_and_tiers_relative_to_the_grid_file(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text((ROOT / "examples/default.yaml").read_text())
    path = _grid(tmp_path, "base: base.yaml\nslo_tiers: {chat: {ttft: 2s, tpot: 100ms}}\ngrid: {slo: [chat]}\n")
    job = load_job(path, "optimize")
    assert job.base.model == "llama-3.1-70b"
    assert job.local_path("w.yaml") == str(tmp_path.resolve() / "w.yaml")
    assert job.local_path("chat") == "chat"
    assert len(job.sweep_id) == 12
    assert load_job(path, "evaluate").sweep_id != job.sweep_id  # another question: rows are not reused


@pytest.mark.parametrize(
    ("text", "command", "message"),
    [
        ("grid: {rate: [1]}\nbase: nowhere.yaml\n", "optimize", "nowhere.yaml"),
        ("grid: {rate: [1]}\nbase: {model: x}\n", "optimize", r"grid\.yaml: base: workload: required"),
        ("grid: {rate: [1]}\nlist: [{rate: 1}]\n", "optimize", r"grid\.yaml: give either grid"),
        ("grid: {rate: [1]}\n", "simulate", "--command: 'simulate' is not one of optimize, evaluate"),
        ("grid: {gpus: [8]}\n", "evaluate", r"grid\.yaml: grid\.gpus: a GPU budget applies to --command optimize"),
        ("list: [{gpu: [h100-sxm, l40s]}]\n", "evaluate", r"list\.gpu: --command evaluate prices one deployment"),
        ("list: [{rate: 1}, {rate: 1}]\n", "optimize", r"grid\.yaml: list: list item 1 repeats item 0"),
        ("grid: {rate: [1]}\ngrid: {rate: [2]}\n", "optimize", "duplicate key 'grid'"),
    ],
)
def test_a_bad_grid_file_is_one_line_naming_file_and_field(
    tmp_path: Path, text: str, command: str, message: str
) -> None:
    with pytest.raises(SpecError, match=message) as err:
        load_job(_grid(tmp_path, text), command)
    assert "\n" not in str(err.value)
